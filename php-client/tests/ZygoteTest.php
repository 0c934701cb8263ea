<?php

namespace Drover\Tests;

use Drover\Protocol\Channel;
use PHPUnit\Framework\TestCase;

/**
 * The zygote's PHP half, with this test as its master: a control channel on the zygote's fd 3,
 * fork requests answered by workers that connect to the master's Unix socket with a one-time
 * token.
 */
final class ZygoteTest extends TestCase
{
    private Channel $control;

    /** @var resource */
    private $process;

    /** @var resource the master's listening socket */
    private $listener;

    private string $socketPath;

    private int $zygotePid;

    protected function setUp(): void
    {
        if (!function_exists('pcntl_fork')) {
            $this->markTestSkipped('needs ext-pcntl');
        }
        [$ours, $theirs] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        $this->control = new Channel($ours);
        $this->socketPath = sys_get_temp_dir() . '/drover-zygote-test-' . getmypid() . '.sock';
        @unlink($this->socketPath);
        $this->listener = stream_socket_server('unix://' . $this->socketPath, $errno, $error);
        $this->assertNotFalse($this->listener, $error);
        $this->process = proc_open(
            [PHP_BINARY, __DIR__ . '/fixtures/zygote-main.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => STDOUT, 2 => STDERR, 3 => $theirs],
            $pipes,
            null,
            // The master says it takes one-offs: the zygote, which has a runner, speaks version 2.
            getenv() + ['DROVER_ZYGOTE_ONE_OFFS' => '1'],
        );
        fclose($theirs);
        $hello = $this->control->receive(10.0);
        $this->assertSame(['t' => 'zygote', 'v' => 2], array_intersect_key($hello, ['t' => 1, 'v' => 1]));
        $this->zygotePid = $hello['pid'];
    }

    protected function tearDown(): void
    {
        $this->control->send(['t' => 'stop']);
        $this->assertSame(0, $this->exitCode(), 'the zygote exits 0 when told to stop');
        fclose($this->listener);
        @unlink($this->socketPath);
    }

    private function exitCode(): int
    {
        for ($i = 0; $i < 100; $i++) {
            $status = proc_get_status($this->process);
            if (!$status['running']) {
                return $status['exitcode'];
            }
            usleep(50000);
        }
        proc_terminate($this->process, 9);
        return -1;
    }

    /** Asks for worker $id; returns its channel (after its attach frame) and its hello. */
    private function fork(int $id): array
    {
        $token = bin2hex(random_bytes(16));
        $t = hrtime(true);
        $this->control->send(['t' => 'fork', 'worker' => $id, 'connect' => $this->socketPath, 'token' => $token, 'env' => ['DROVER_WORKER_ID' => (string) $id, 'bad key' => 'x']]);
        $forked = $this->control->receive(10.0);
        $this->assertSame(['t' => 'forked', 'worker' => $id], array_intersect_key($forked, ['t' => 1, 'worker' => 1]));
        $connection = stream_socket_accept($this->listener, 10);
        $this->assertNotFalse($connection, 'the worker connected');
        $channel = new Channel($connection);
        $this->assertSame(['t' => 'attach', 'worker' => $id, 'token' => $token], $channel->receive(10.0));
        $hello = $channel->receive(10.0);
        $hello['ready_ms'] = (hrtime(true) - $t) / 1e6;
        $this->assertSame($forked['pid'], $hello['pid'], 'the PID the zygote reported is the worker that connected');
        $this->assertSame(['t' => 'via_fd3'], $channel->receive(10.0), 'what the worker writes to its fd 3 reaches the master on its connection');
        return [$channel, $hello];
    }

    public function testWorkersAreForkedWithTheirOwnChannelSeedAndEnvironmentAndAreNotTheZygotesChildren(): void
    {
        [$a, $helloA] = $this->fork(7);
        [$b, $helloB] = $this->fork(8);
        $this->assertSame('7', $helloA['worker_id']);
        $this->assertSame('8', $helloB['worker_id']);
        $this->assertTrue($helloA['reset'], 'afterFork ran in the worker');
        $this->assertSame($helloA['pid'], $helloA['pgid'], 'each worker leads its own process group');
        $this->assertFalse($helloA['zygote_env'], 'DROVER_ZYGOTE is not passed on to the worker');
        $this->assertNotSame($helloA['pid'], $helloB['pid']);
        $this->assertNotSame($this->zygotePid, $helloA['pid']);
        $this->assertNotSame($this->zygotePid, $helloA['ppid'], 'the worker is not the zygote\'s child (double fork)');
        mt_srand(42);
        $zygoteDraw = mt_rand();
        $this->assertNotSame($zygoteDraw, $helloA['random'], 'the worker reseeded');
        $this->assertNotSame($helloA['random'], $helloB['random']);
        $this->assertLessThan(1000, $helloA['ready_ms'], 'a forked worker says hello without booting anything');
        foreach ([$a, $b] as $channel) {
            $channel->send(['t' => 'stop']);
        }
    }

    public function testAOneOffRunsWhatItWasAskedInAForkOfItsOwnSaysSoOnItsConnectionAndExits(): void
    {
        $token = bin2hex(random_bytes(16));
        $this->control->send(['t' => 'fork', 'worker' => 9, 'connect' => $this->socketPath, 'token' => $token, 'env' => [], 'run' => ['kind' => 'test', 'exit' => '0']]);
        $forked = $this->control->receive(10.0);
        $this->assertSame(['t' => 'forked', 'worker' => 9], array_intersect_key($forked, ['t' => 1, 'worker' => 1]));
        $connection = stream_socket_accept($this->listener, 10);
        $this->assertNotFalse($connection, 'the one-off connected');
        $channel = new Channel($connection);
        $this->assertSame(['t' => 'attach', 'worker' => 9, 'token' => $token], $channel->receive(10.0));
        $this->assertNull($channel->receive(0.3), 'nothing runs before the master says go');
        $channel->send(['t' => 'go']);
        $ran = $channel->receive(10.0);
        $this->assertSame('ran', $ran['t'], 'the one-off ran the one-off runner, not the worker');
        $this->assertSame(['kind' => 'test', 'exit' => '0'], $ran['run']);
        $this->assertSame($forked['pid'], $ran['pid']);
        $this->assertSame($ran['pid'], $ran['pgid'], 'it leads its own process group');
        $this->assertTrue($ran['reset'], 'afterFork ran before it');
        $this->assertSame('', (string) fread($connection, 100), 'then it exits: its connection closes');
        $this->assertTrue(feof($connection));
        $this->control->send(['t' => 'fork', 'worker' => 10, 'connect' => $this->socketPath, 'token' => $token, 'env' => [], 'run' => ['a list']]);
        $refused = $this->control->receive(10.0);
        $this->assertSame(['t' => 'fork_failed', 'worker' => 10], array_intersect_key($refused, ['t' => 1, 'worker' => 1]));
        $this->assertStringContainsString('run must be an object of strings', $refused['error']);
    }

    public function testBadRequestsAreRefusedByNameAndTheZygoteServesOn(): void
    {
        $this->control->send(['t' => 'fork', 'worker' => 3, 'connect' => $this->socketPath, 'token' => 'not hex']);
        $refused = $this->control->receive(10.0);
        $this->assertSame(['t' => 'fork_failed', 'worker' => 3], array_intersect_key($refused, ['t' => 1, 'worker' => 1]));
        $this->assertStringContainsString('token', $refused['error']);
        $this->control->send(['t' => 'dance']);
        $this->assertStringContainsString('"t":"fork"', $this->control->receive(10.0)['error']);
        [$channel] = $this->fork(4);
        $channel->send(['t' => 'stop']);
    }
}
