<?php

namespace Drover\Tests;

use Drover\Protocol\Channel;
use Drover\Worker\ForkSafety;
use PHPUnit\Framework\TestCase;

/**
 * The fork-safety check on this machine's real /proc: sockets this process opens are found in
 * /proc/self/fd and named from /proc/self/net; a zygote prints its warnings on stderr (which the
 * master's log shows) and serves on; a zygote without FFI refuses, naming the fix.
 */
final class ForkSafetyProcTest extends TestCase
{
    protected function setUp(): void
    {
        if (!is_dir('/proc/self/fd') || !is_readable('/proc/self/net/tcp')) {
            $this->markTestSkipped('needs Linux /proc');
        }
    }

    /** The descriptor number of $stream: the /proc/self/fd entry whose socket is its inode. */
    private static function fdOf($stream): int
    {
        $inode = fstat($stream)['ino'];
        foreach (ForkSafety::readSockets() as $fd => $socket) {
            if ($socket === $inode) {
                return $fd;
            }
        }
        self::fail("no fd for inode $inode");
    }

    /** @return list<string> the warnings that name fd $fd */
    private static function about(array $warnings, int $fd): array
    {
        return array_values(array_filter($warnings, static fn (string $w): bool => str_starts_with($w, "fd $fd is ")));
    }

    public function testTheSocketsThisProcessHoldsAreFoundAndNamedByAddressAndPath(): void
    {
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
        $this->assertNotFalse($server, $error);
        $address = stream_socket_get_name($server, false);
        $client = stream_socket_client("tcp://$address", $errno, $error, 5.0);
        $this->assertNotFalse($client, $error);
        $accepted = stream_socket_accept($server, 5.0);
        $path = sys_get_temp_dir() . '/drover-fork-safety-' . getmypid() . '.sock';
        @unlink($path);
        $unixServer = stream_socket_server("unix://$path", $errno, $error);
        $this->assertNotFalse($unixServer, $error);
        $unixClient = stream_socket_client("unix://$path", $errno, $error, 5.0);
        $this->assertNotFalse($unixClient, $error);
        [$ours, $theirs] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        try {
            $own = self::fdOf($ours);
            $warnings = ForkSafety::check([$own], ForkSafety::unixPeerResolver());
            $local = stream_socket_get_name($client, false);

            $listening = self::about($warnings, self::fdOf($server));
            $this->assertCount(1, $listening, implode("\n", $warnings));
            $this->assertStringStartsWith("fd " . self::fdOf($server) . " is a TCP socket listening on $address, open in the zygote before its first fork: every worker would accept connections on it too", $listening[0]);
            $connection = self::about($warnings, self::fdOf($client));
            $this->assertCount(1, $connection, implode("\n", $warnings));
            $this->assertStringStartsWith("fd " . self::fdOf($client) . " is a TCP connection to $address from $local, open in the zygote", $connection[0]);
            $this->assertStringStartsWith("fd " . self::fdOf($accepted) . " is a TCP connection to $local from $address", self::about($warnings, self::fdOf($accepted))[0] ?? '');
            $this->assertStringStartsWith("fd " . self::fdOf($unixServer) . " is a Unix socket listening at $path", self::about($warnings, self::fdOf($unixServer))[0] ?? '');
            if (extension_loaded('ffi')) {
                $this->assertStringStartsWith("fd " . self::fdOf($unixClient) . " is a Unix stream socket connected to $path,", self::about($warnings, self::fdOf($unixClient))[0] ?? '');
            }
            $this->assertSame([], self::about($warnings, $own), 'the channel to the master is not counted');
            $this->assertNotSame([], self::about($warnings, self::fdOf($theirs)), 'its other end is');
            foreach ([0, 1, 2] as $stdio) {
                $this->assertSame([], self::about($warnings, $stdio));
            }
        } finally {
            foreach ([$client, $accepted, $server, $unixClient, $unixServer, $ours, $theirs] as $stream) {
                is_resource($stream) && fclose($stream);
            }
            @unlink($path);
        }
    }

    /** Starts `php $args` with $channel's other end as fd 3 and stderr on a pipe. */
    private static function start(array $args, array $env, &$control, &$stderr)
    {
        [$ours, $theirs] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        $control = new Channel($ours);
        $process = proc_open(
            [PHP_BINARY, ...$args],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['pipe', 'w'], 3 => $theirs],
            $pipes,
            null,
            $env + getenv(),
        );
        fclose($theirs);
        $stderr = $pipes[2];
        return $process;
    }

    private static function exitCode($process): int
    {
        for ($i = 0; $i < 100; $i++) {
            $status = proc_get_status($process);
            if (!$status['running']) {
                return $status['exitcode'];
            }
            usleep(50000);
        }
        proc_terminate($process, 9);
        return -1;
    }

    public function testAZygoteNamesOnItsStderrTheConnectionItsBootLeftOpenAndServesOn(): void
    {
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
        $this->assertNotFalse($server, $error);
        $address = stream_socket_get_name($server, false);
        $process = self::start(
            [__DIR__ . '/fixtures/zygote-boot-socket.php'],
            ['FIXTURE_CONNECT' => $address, 'DROVER_FORK_SAFETY_TIMING' => '1', 'DROVER_MASTER_PID' => (string) getmypid()],
            $control,
            $stderr,
        );
        $hello = $control->receive(10.0);
        $this->assertSame('zygote', $hello['t'] ?? null, 'it serves whatever it warned of');
        $control->send(['t' => 'stop']);
        $this->assertSame(0, self::exitCode($process));
        $lines = array_values(array_filter(explode("\n", stream_get_contents($stderr))));
        fclose($server);
        $text = implode("\n", $lines);
        // (What this test process leaks into the child through proc_open is named too: PHP's
        // sockets are not close-on-exec. The master's children inherit only fds 0-3.)
        $this->assertCount(1, preg_grep(
            '/^drover zygote: fork safety: fd \d+ is a TCP connection to ' . preg_quote($address) . ' from 127\.0\.0\.1:\d+, open in the zygote before its first fork: every worker would share it/',
            $lines,
        ), $text);
        $this->assertSame([], preg_grep('/fork safety: fd 3 is/', $lines), 'the channel to the master is not counted');
        $this->assertCount(1, $timing = preg_grep('/^drover zygote: fork safety: checked in \d+\.\d\d ms, \d+ warning\(s\)$/', $lines), $text);
        $this->assertSame($lines, array_values(preg_grep('/^drover zygote: fork safety: /', $lines)), 'nothing else on stderr');
    }

    public function testAZygoteOfAPhpWithoutFfiRefusesNamingTheFixAndSpawnExec(): void
    {
        // No php.ini, so no FFI; posix loaded by hand (pcntl is built into Debian's CLI).
        $process = self::start(
            ['-n', '-d', 'extension=posix', __DIR__ . '/fixtures/zygote-main.php'],
            ['DROVER_MASTER_PID' => (string) getmypid()],
            $control,
            $stderr,
        );
        $frame = $control->receive(10.0);
        $this->assertSame(1, self::exitCode($process));
        if (str_contains($frame['error'] ?? '', 'not available (forking workers needs the pcntl and posix')) {
            $this->markTestSkipped('this PHP has no pcntl or posix without its php.ini: ' . $frame['error']);
        }
        $this->assertSame('failed', $frame['t'] ?? null);
        $this->assertStringContainsString("forking workers needs PHP's FFI extension, which this PHP", $frame['error']);
        $this->assertStringContainsString('ffi.enable=preload', $frame['error']);
        $this->assertStringContainsString("set the pool's spawn to exec", $frame['error']);
        $this->assertStringContainsString('drover zygote: cannot fork workers: ' . $frame['error'], stream_get_contents($stderr));
    }
}
