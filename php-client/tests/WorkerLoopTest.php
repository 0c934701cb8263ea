<?php

namespace Drover\Tests;

use Drover\Protocol\Channel;
use Drover\Worker\Feeder;
use Drover\Worker\Job;
use Drover\Worker\ReleaseJob;
use Drover\Worker\WorkerLoop;
use PHPUnit\Framework\TestCase;

/** The worker loop in a forked child, with the test playing the master on the other end. */
final class WorkerLoopTest extends TestCase
{
    /** @var resource */
    private $master;

    private int $pid;

    private function startWorker(int $prefetch): void
    {
        [$master, $worker] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        $pid = pcntl_fork();
        if ($pid === 0) {
            fclose($master);
            $handler = static function (Job $job): void {
                match ($job->payload) {
                    'ok' => null,
                    'later' => throw new ReleaseJob(2.5),
                    'boom' => throw new \LogicException('boom'),
                    'slow' => usleep(300000),
                };
            };
            putenv('DROVER_PROTOCOL=2');
            $code = (new WorkerLoop(new Channel($worker), $handler, $prefetch, posix_getppid()))->run();
            posix_kill(posix_getpid(), $code === 0 ? SIGUSR1 : SIGUSR2) ?: exit($code);
            exit($code);
        }
        fclose($worker);
        $this->master = $master;
        $this->pid = $pid;
    }

    /** @return array<string, mixed> */
    private function read(): array
    {
        $read = [$this->master];
        $w = $e = null;
        $this->assertSame(1, stream_select($read, $w, $e, 5), 'the worker answers within 5s');
        return json_decode((string) fgets($this->master), true);
    }

    private function job(int $id, string $payload, int $attempts = 1, ?int $max = null, ?int $leaseMs = null, string $queue = 'default'): void
    {
        $frame = ['t' => 'job', 'job' => $id, 'token' => $id * 10, 'queue' => $queue, 'attempts' => $attempts, 'max_attempts' => $max, 'payload' => $payload];
        if ($leaseMs !== null) {
            $frame['lease_until_ms'] = self::nowMs() + $leaseMs;
        }
        fwrite($this->master, json_encode($frame) . "\n");
    }

    private static function nowMs(): int
    {
        return intdiv(hrtime(true), 1_000_000);
    }

    private function exitSignal(): int
    {
        pcntl_waitpid($this->pid, $status);
        return pcntl_wifsignaled($status) ? pcntl_wtermsig($status) : -1;
    }

    public function testAWorkerSpeaksTheOlderOfItsProtocolAndTheMastersAndVersion1ToAMasterThatSaysNone(): void
    {
        $this->assertSame(4, Feeder::protocolFor('4'));
        $this->assertSame(3, Feeder::protocolFor('3'), 'an older master: it knows no `within` on `done`');
        $this->assertSame(2, Feeder::protocolFor('2'), 'a master of 0.2: it knows no queue_restart');
        $this->assertSame(4, Feeder::protocolFor('5'), 'a newer master speaks ours too');
        $this->assertSame(1, Feeder::protocolFor('1'));
        $this->assertSame(1, Feeder::protocolFor(false), 'drover 0.1 sets no DROVER_PROTOCOL');
        $this->assertSame(1, Feeder::protocolFor('two'));
        $this->assertSame(1, Feeder::protocolFor('0'));
    }

    public function testRunsJobsAndReportsEveryOutcome(): void
    {
        $this->startWorker(4);
        $this->assertSame(['t' => 'hello', 'v' => 2, 'pid' => $this->pid, 'prefetch' => 4], $this->read());
        $this->job(1, 'ok');
        $this->job(2, 'later');
        $this->job(3, 'boom', 1, 3);
        $this->job(4, 'boom', 3, 3);
        $frames = [];
        for ($i = 0; $i < 8; $i++) {
            $frames[] = $this->read();
        }
        $this->assertSame(['t' => 'started', 'job' => 1, 'token' => 10], $frames[0]);
        $this->assertSame(['t' => 'done', 'job' => 1, 'token' => 10], $frames[1]);
        $this->assertSame(['t' => 'release', 'delay_ms' => 2500, 'job' => 2, 'token' => 20], $frames[3]);
        $this->assertSame(['t' => 'release', 'delay_ms' => 0, 'job' => 3, 'token' => 30], $frames[5], 'attempts left: released');
        $this->assertSame('fail', $frames[7]['t'], 'last attempt: failed');
        $this->assertStringStartsWith('LogicException: boom', $frames[7]['error']);
        fwrite($this->master, "{\"t\":\"stop\"}\n");
        $this->assertSame(SIGUSR1, $this->exitSignal(), 'exit code 0 after stop');
    }

    public function testStopFinishesTheRunningJobAndStartsNoOther(): void
    {
        $this->startWorker(3);
        $this->read();
        $this->job(1, 'slow');
        $this->job(2, 'ok');
        $this->job(3, 'ok');
        $this->assertSame('started', $this->read()['t']);
        fwrite($this->master, "{\"t\":\"stop\"}\n");
        $this->assertSame(['t' => 'done', 'job' => 1, 'token' => 10], $this->read());
        $this->assertSame(SIGUSR1, $this->exitSignal());
        $this->assertSame(
            "{\"t\":\"return\",\"job\":2,\"token\":20}\n{\"t\":\"return\",\"job\":3,\"token\":30}\n",
            (string) stream_get_contents($this->master),
            'jobs 2 and 3 never started: they go back to the master'
        );
    }

    public function testPauseHoldsJobsUntilResume(): void
    {
        $this->startWorker(2);
        $this->read();
        fwrite($this->master, "{\"t\":\"pause\"}\n");
        usleep(100000);
        $this->job(1, 'ok');
        $this->assertSame(['t' => 'return', 'job' => 1, 'token' => 10], $this->read(), 'a job pushed while paused goes back unstarted');
        $read = [$this->master];
        $w = $e = null;
        $this->assertSame(0, stream_select($read, $w, $e, 0, 300000), 'nothing starts while paused');
        fwrite($this->master, "{\"t\":\"resume\"}\n");
        $this->job(1, 'ok');
        $this->assertSame('started', $this->read()['t']);
        $this->assertSame('done', $this->read()['t']);
        fclose($this->master);
        $this->assertSame(SIGUSR2, $this->exitSignal(), 'a vanished master ends the worker with an error code');
    }

    public function testWithdrawGivesBackThePausedQueuesPrefetchedJobsBeforeTheNextStart(): void
    {
        $this->startWorker(4);
        $this->read();
        $this->job(1, 'slow');
        $this->job(2, 'ok', queue: 'paused');
        $this->job(3, 'ok');
        $this->job(4, 'ok', queue: 'paused');
        $this->assertSame(['t' => 'started', 'job' => 1, 'token' => 10], $this->read());
        // Written while job 1 runs: read before the worker starts anything else.
        fwrite($this->master, "{\"t\":\"withdraw\",\"queue\":\"paused\"}\n");
        $this->assertSame(['t' => 'done', 'job' => 1, 'token' => 10], $this->read());
        $this->assertSame(['t' => 'return', 'job' => 2, 'token' => 20], $this->read(), 'the paused queue\'s jobs go back unstarted');
        $this->assertSame(['t' => 'return', 'job' => 4, 'token' => 40], $this->read());
        $this->assertSame(['t' => 'started', 'job' => 3, 'token' => 30], $this->read(), 'another queue\'s job runs');
        $this->assertSame(['t' => 'done', 'job' => 3, 'token' => 30], $this->read());
        fwrite($this->master, "{\"t\":\"stop\"}\n");
        $this->assertSame(SIGUSR1, $this->exitSignal());
        $this->assertSame('', (string) stream_get_contents($this->master), 'nothing more: jobs 2 and 4 never started');
    }

    public function testAWithdrawArrivingAfterAJobWasTakenAndBeforeItStartsGivesItBack(): void
    {
        [$master, $worker] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        $feeder = new \Drover\Worker\Feeder(new Channel($worker), 2);
        $frame = ['t' => 'job', 'job' => 5, 'token' => 50, 'queue' => 'paused', 'attempts' => 1, 'max_attempts' => null, 'payload' => 'ok'];
        fwrite($master, json_encode($frame) . "\n");
        $taken = $feeder->next(1.0);
        $this->assertSame(5, $taken['job']);
        // The master writes the withdraw after next() took the job, before the worker says started.
        fwrite($master, "{\"t\":\"withdraw\",\"queue\":\"paused\"}\n");
        $this->assertFalse($feeder->start($taken), 'not started');
        $this->assertSame(['t' => 'return', 'job' => 5, 'token' => 50], json_decode((string) fgets($master), true));
        // Another queue's job taken at the next turn starts.
        fwrite($master, json_encode(['queue' => 'other', 'job' => 6, 'token' => 60] + $frame) . "\n");
        $taken = $feeder->next(1.0);
        $this->assertTrue($feeder->start($taken));
        $this->assertSame(['t' => 'started', 'job' => 6, 'token' => 60], json_decode((string) fgets($master), true));
        // Withdrawn, then resumed (a job of it follows): that job starts.
        fwrite($master, "{\"t\":\"withdraw\",\"queue\":\"paused\"}\n" . json_encode(['job' => 7, 'token' => 70] + $frame) . "\n");
        $taken = $feeder->next(1.0);
        $this->assertSame(7, $taken['job']);
        $this->assertTrue($feeder->start($taken));
    }

    public function testAJobWhoseLeaseIsAboutToEndIsGivenBackUnstarted(): void
    {
        $this->startWorker(2);
        $this->read();
        $this->job(1, 'ok', leaseMs: 500);
        $this->job(2, 'ok', leaseMs: 30000);
        $this->assertSame(['t' => 'return', 'job' => 1, 'token' => 10], $this->read(), 'job 1 has less lease left than the guard needs');
        $this->assertSame(['t' => 'started', 'job' => 2, 'token' => 20], $this->read());
        $this->assertSame('done', $this->read()['t']);
        fwrite($this->master, "{\"t\":\"stop\"}\n");
        $this->assertSame(SIGUSR1, $this->exitSignal());
    }

    public function testALeaseFrameMovesAPrefetchedJobsDeadlineSoItStarts(): void
    {
        $this->startWorker(2);
        $this->read();
        // Job 2 waits behind a 300 ms job with 1.2 s of lease: by its turn it would have less
        // than START_MIN_MS left and go back; the renewal that arrives meanwhile keeps it.
        $this->job(1, 'slow', leaseMs: 30000);
        $this->job(2, 'ok', leaseMs: 1200);
        $this->assertSame(['t' => 'started', 'job' => 1, 'token' => 10], $this->read());
        fwrite($this->master, json_encode(['t' => 'lease', 'until_ms' => self::nowMs() + 30000]) . "\n");
        $this->assertSame('done', $this->read()['t']);
        $this->assertSame(['t' => 'started', 'job' => 2, 'token' => 20], $this->read(), 'renewed, so started');
        $this->assertSame('done', $this->read()['t']);

        // Without a renewal the same wait sends it back unstarted.
        $this->job(3, 'slow', leaseMs: 30000);
        $this->job(4, 'ok', leaseMs: 1200);
        $this->assertSame(['t' => 'started', 'job' => 3, 'token' => 30], $this->read());
        $this->assertSame('done', $this->read()['t']);
        $this->assertSame(['t' => 'return', 'job' => 4, 'token' => 40], $this->read(), 'not renewed, so given back');
        fwrite($this->master, "{\"t\":\"stop\"}\n");
        $this->assertSame(SIGUSR1, $this->exitSignal());
    }
}
