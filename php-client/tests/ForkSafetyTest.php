<?php

namespace Drover\Tests;

use Drover\Worker\ForkSafety;
use PHPUnit\Framework\TestCase;

/**
 * The zygote's fork-safety rules, pure: which extension is unsafe and what makes it safe, how a
 * /proc/net line reads, which sockets are not counted, and the words of each warning.
 * (ForkSafetyProcTest reads this process's real /proc.)
 */
final class ForkSafetyTest extends TestCase
{
    public function testEachExtensionKnownToBreakAfterAForkIsNamedWithWhyAndTheFix(): void
    {
        $loaded = ['Core', 'PDO', 'Zend OPcache', 'grpc', 'newrelic', 'ddtrace', 'blackfire', 'swoole', 'openswoole', 'parallel', 'redis'];
        $warnings = ForkSafety::extensionWarnings($loaded, []);
        $this->assertCount(7, $warnings, implode("\n", $warnings));
        foreach (['grpc', 'newrelic', 'ddtrace', 'blackfire', 'swoole', 'openswoole', 'parallel'] as $i => $name) {
            $this->assertStringStartsWith("extension $name is loaded: ", $warnings[$i]);
            $this->assertStringContainsString('. Fix: ', $warnings[$i]);
            $this->assertStringContainsString('(docs/forking.md)', $warnings[$i]);
        }
        $this->assertStringContainsString('grpc.enable_fork_support=1', $warnings[0]);
        $this->assertStringContainsString('GRPC_ENABLE_FORK_SUPPORT=1', $warnings[0]);
        $this->assertStringContainsString('newrelic.enabled=0', $warnings[1]);
        $this->assertStringContainsString("spawn to exec", $warnings[1]);
        $this->assertSame([], ForkSafety::extensionWarnings(['Core', 'pdo_pgsql', 'redis', 'FFI', 'pcntl', 'Zend OPcache'], []));
        $this->assertCount(1, ForkSafety::extensionWarnings(['Swoole'], []), 'names are matched whatever their case');
    }

    public function testAnExtensionsOwnSettingForForkingOrForBeingOffSilencesIt(): void
    {
        $warned = static fn (string $extension, array $settings): bool => ForkSafety::extensionWarnings([$extension], $settings) !== [];
        // gRPC with its fork support on, by ini or by environment.
        $this->assertFalse($warned('grpc', ['grpc.enable_fork_support' => '1']));
        $this->assertFalse($warned('grpc', ['GRPC_ENABLE_FORK_SUPPORT' => 'true']));
        $this->assertFalse($warned('grpc', ['grpc.enable_fork_support' => '0', 'GRPC_ENABLE_FORK_SUPPORT' => '1']));
        $this->assertTrue($warned('grpc', ['grpc.enable_fork_support' => '0', 'GRPC_ENABLE_FORK_SUPPORT' => false]));
        $this->assertTrue($warned('grpc', ['grpc.enable_fork_support' => '', 'GRPC_ENABLE_FORK_SUPPORT' => '0']));
        // New Relic turned off; unset means on (the agent's default).
        $this->assertFalse($warned('newrelic', ['newrelic.enabled' => '0']));
        $this->assertFalse($warned('newrelic', ['newrelic.enabled' => '']));
        $this->assertTrue($warned('newrelic', ['newrelic.enabled' => '1']));
        $this->assertTrue($warned('newrelic', ['newrelic.enabled' => false]));
        // ddtrace disabled, by ini or by DD_TRACE_ENABLED=false.
        $this->assertFalse($warned('ddtrace', ['ddtrace.disable' => '1']));
        $this->assertFalse($warned('ddtrace', ['DD_TRACE_ENABLED' => 'false']));
        $this->assertTrue($warned('ddtrace', ['ddtrace.disable' => '0', 'DD_TRACE_ENABLED' => 'true']));
        $this->assertTrue($warned('ddtrace', ['ddtrace.disable' => '0', 'DD_TRACE_ENABLED' => false]));
        // Nothing makes the others safe to fork once loaded.
        foreach (['blackfire', 'swoole', 'openswoole', 'parallel'] as $name) {
            $this->assertTrue($warned($name, ['grpc.enable_fork_support' => '1', 'newrelic.enabled' => '0', 'ddtrace.disable' => '1']));
        }
        $this->assertTrue(ForkSafety::truthy(' On '));
        $this->assertFalse(ForkSafety::truthy('off'));
        $this->assertFalse(ForkSafety::truthy(false));
    }

    public function testAFdLinkIsASocketOnlyAsSocketInode(): void
    {
        $this->assertSame(123456, ForkSafety::socketInode('socket:[123456]'));
        $this->assertNull(ForkSafety::socketInode('pipe:[123456]'));
        $this->assertNull(ForkSafety::socketInode('anon_inode:[eventfd]'));
        $this->assertNull(ForkSafety::socketInode('/var/www/app/storage/logs/laravel.log'));
        $this->assertNull(ForkSafety::socketInode('socket:[12x]'));
    }

    /** The kernel prints each 32-bit word of an address as a number in this machine's byte order. */
    private static function littleEndian(): void
    {
        if (pack('L', 1) !== "\x01\x00\x00\x00") {
            self::markTestSkipped('the /proc/net samples below are of a little-endian machine');
        }
    }

    public function testProcNetTcpLinesGiveEachInodesAddressesAndState(): void
    {
        self::littleEndian();
        $tcp = <<<'TXT'
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 41234 1 0000000000000000 100 0 0 10 0
               1: 0F02000A:D2F0 0A01A8C0:1538 01 00000000:00000000 02:000A7E2F 00000000  1000        0 41235 2 0000000000000000 20 4 30 10 -1
               2: 0100007F:9C40 0100007F:18EB 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
            TXT;
        $this->assertSame([
            41234 => ['local' => '127.0.0.1:8080', 'remote' => '0.0.0.0:0', 'state' => '0A'],
            41235 => ['local' => '10.0.2.15:54000', 'remote' => '192.168.1.10:5432', 'state' => '01'],
            0 => ['local' => '127.0.0.1:40000', 'remote' => '127.0.0.1:6379', 'state' => '06'],
        ], ForkSafety::parseInet($tcp));
        $tcp6 = <<<'TXT'
              sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5001 1 0000000000000000 100 0 0 10 0
               1: 0000000000000000FFFF00000100007F:A000 0000000000000000FFFF00000100007F:18EB 01 00000000:00000000 00:00000000 00000000     0        0 5002 1 0000000000000000 20 4 0 10 -1
            TXT;
        $this->assertSame([
            5001 => ['local' => '[::1]:80', 'remote' => '[::]:0', 'state' => '0A'],
            5002 => ['local' => '[::ffff:127.0.0.1]:40960', 'remote' => '[::ffff:127.0.0.1]:6379', 'state' => '01'],
        ], ForkSafety::parseInet($tcp6));
        $this->assertSame([], ForkSafety::parseInet(''));
        $this->assertSame([], ForkSafety::parseInet("   0: garbage 00000000:0000 0A 0 0 0 0 0 77\n"));
        $this->assertNull(ForkSafety::inetAddress('0100007F'));
        $this->assertNull(ForkSafety::inetAddress('0100007:1F90'));
        $this->assertSame('127.0.0.1:8080', ForkSafety::inetAddress('0100007f:1f90'));
    }

    public function testProcNetUnixLinesGiveEachInodesPathAndWhetherItListensOrIsConnected(): void
    {
        $unix = <<<'TXT'
            Num       RefCount Protocol Flags    Type St Inode Path
            0000000000000000: 00000002 00000000 00010000 0001 01 17001 /run/postgresql/.s.PGSQL.5432
            0000000000000000: 00000003 00000000 00000000 0001 03 17002
            0000000000000000: 00000002 00000000 00000000 0002 01 17003 @newrelic
            0000000000000000: 00000003 00000000 00000000 0005 03 17004 /tmp/a path with spaces.sock
            TXT;
        $this->assertSame([
            17001 => ['listening' => true, 'connected' => false, 'type' => 'stream', 'path' => '/run/postgresql/.s.PGSQL.5432'],
            17002 => ['listening' => false, 'connected' => true, 'type' => 'stream', 'path' => null],
            17003 => ['listening' => false, 'connected' => false, 'type' => 'datagram', 'path' => '@newrelic'],
            17004 => ['listening' => false, 'connected' => true, 'type' => 'seqpacket', 'path' => '/tmp/a path with spaces.sock'],
        ], ForkSafety::parseUnix($unix));
    }

    /** @return array{0: array, 1: array, 2: array} tcp, udp and unix tables of a zygote */
    private static function tables(): array
    {
        return [
            [
                100 => ['local' => '10.0.2.15:53999', 'remote' => '10.0.0.5:6379', 'state' => '01'],
                101 => ['local' => '127.0.0.1:9000', 'remote' => '0.0.0.0:0', 'state' => '0A'],
                102 => ['local' => '10.0.2.15:40000', 'remote' => '10.0.0.6:5432', 'state' => '08'],
                103 => ['local' => '10.0.2.15:40001', 'remote' => '[2001:db8::1]:443', 'state' => '01'],
            ],
            [
                200 => ['local' => '0.0.0.0:41000', 'remote' => '10.0.0.7:8125', 'state' => '01'],
                201 => ['local' => '0.0.0.0:41001', 'remote' => '0.0.0.0:0', 'state' => '07'],
            ],
            [
                300 => ['listening' => false, 'connected' => true, 'type' => 'stream', 'path' => null],
                301 => ['listening' => true, 'connected' => false, 'type' => 'stream', 'path' => '/run/app.sock'],
                302 => ['listening' => false, 'connected' => true, 'type' => 'stream', 'path' => null],
                303 => ['listening' => false, 'connected' => true, 'type' => 'stream', 'path' => null],
            ],
        ];
    }

    public function testEachSocketIsNamedByWhatItReachesAndTheServiceOfItsPort(): void
    {
        [$tcp, $udp, $unix] = self::tables();
        $what = static fn (int $inode, ?string $peer = null): ?string => ForkSafety::describe($inode, $tcp, $udp, $unix, $peer)['what'] ?? null;
        $this->assertSame("a TCP connection to 10.0.0.5:6379 (Redis's port) from 10.0.2.15:53999", $what(100));
        $this->assertSame('a TCP socket listening on 127.0.0.1:9000', $what(101));
        $this->assertSame("a TCP connection to 10.0.0.6:5432 (PostgreSQL's port) from 10.0.2.15:40000 (close-wait)", $what(102));
        $this->assertSame("a TCP connection to [2001:db8::1]:443 (HTTPS's port) from 10.0.2.15:40001", $what(103));
        $this->assertSame("a UDP socket sending to 10.0.0.7:8125 (StatsD's port) from 0.0.0.0:41000", $what(200));
        $this->assertSame('a UDP socket bound to 0.0.0.0:41001', $what(201));
        $this->assertSame('a Unix stream socket connected to /run/postgresql/.s.PGSQL.5432 (PostgreSQL)', $what(300, '/run/postgresql/.s.PGSQL.5432'));
        $this->assertSame('a Unix stream socket connected to @newrelic (the New Relic daemon)', $what(300, '@newrelic'));
        $this->assertSame('a Unix stream socket connected to /var/run/datadog/apm.socket (the Datadog agent)', $what(300, '/var/run/datadog/apm.socket'));
        $this->assertStringStartsWith('a connected Unix stream socket whose peer has no path', $what(300));
        $this->assertSame('a Unix socket listening at /run/app.sock', $what(301));
        $this->assertNull($what(999), 'in no table');
    }

    public function testTheZygotesOwnChannelStdioAndDupsAreNotCountedAndIgnoredTargetsAreSilenced(): void
    {
        [$tcp, $udp, $unix] = self::tables();
        $sockets = [
            0 => 303, 1 => 303, 2 => 303, // stdio on a socket (journald under systemd): every worker's, as under exec
            3 => 302, 4 => 302,           // the channel to the master and PHP's dup of it
            7 => 100, 9 => 100,           // a Redis connection and a dup of it: named once, by its first fd
            8 => 301,
            11 => 300,
            12 => 999,
            10 => 200,
        ];
        $warnings = ForkSafety::socketWarnings($sockets, [302], $tcp, $udp, $unix, [11 => '/run/postgresql/.s.PGSQL.5432']);
        $this->assertCount(5, $warnings, implode("\n", $warnings));
        [$redis, $listening, $statsd, $postgres, $unknown] = $warnings;
        $this->assertSame(
            "fd 7 is a TCP connection to 10.0.0.5:6379 (Redis's port) from 10.0.2.15:53999, open in the zygote before its first fork: every worker would share it, and what they send and read would interleave on one connection. Fix: open it on first use rather than at boot (or close it once boot is done), or set the pool's spawn to exec (docs/forking.md).",
            $redis,
        );
        $this->assertStringStartsWith('fd 8 is a Unix socket listening at /run/app.sock, open in the zygote before its first fork: every worker would accept connections on it too', $listening);
        $this->assertStringStartsWith("fd 10 is a UDP socket sending to 10.0.0.7:8125 (StatsD's port)", $statsd);
        $this->assertStringStartsWith('fd 11 is a Unix stream socket connected to /run/postgresql/.s.PGSQL.5432 (PostgreSQL)', $postgres);
        $this->assertStringStartsWith('fd 12 is a socket that is neither TCP, UDP nor Unix (inode 999', $unknown);

        $ignored = ForkSafety::ignored(' 10.0.0.5:6379, /run/postgresql/.s.PGSQL.5432 ,,');
        $this->assertSame(['10.0.0.5:6379', '/run/postgresql/.s.PGSQL.5432'], $ignored);
        $this->assertSame([], ForkSafety::ignored(false));
        $left = ForkSafety::socketWarnings($sockets, [302], $tcp, $udp, $unix, [11 => '/run/postgresql/.s.PGSQL.5432'], $ignored);
        $this->assertSame([$listening, $statsd, $unknown], $left);
        $this->assertSame([], ForkSafety::socketWarnings([0 => 300, 1 => 300, 2 => 300, 3 => 302], [302], $tcp, $udp, $unix));
    }

    public function testAMissingOrForbiddenFfiIsRefusedNamingTheFixAndSpawnExec(): void
    {
        $missing = ForkSafety::ffiProblem(false, false, 'the PHP FFI extension is not loaded');
        $this->assertStringContainsString("needs PHP's FFI extension, which this PHP (" . PHP_VERSION, $missing);
        $this->assertStringContainsString('php-ffi', $missing);
        $this->assertStringContainsString('ffi.enable=preload', $missing);
        $this->assertStringContainsString("set the pool's spawn to exec", $missing);
        $forbidden = ForkSafety::ffiProblem(true, '0', 'FFI API is restricted by "ffi.enable" configuration directive');
        $this->assertStringContainsString("ffi.enable='0' forbids: set ffi.enable=preload (the default) or true", $forbidden);
        $this->assertStringContainsString("set the pool's spawn to exec", $forbidden);
        $other = ForkSafety::ffiProblem(true, 'preload', 'FFI cannot be used here (Failed resolving C function)');
        $this->assertStringContainsString('which failed here: FFI cannot be used here (Failed resolving C function)', $other);
        $this->assertStringContainsString("set the pool's spawn to exec", $other);
    }
}
