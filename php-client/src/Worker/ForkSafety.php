<?php

namespace Drover\Worker;

/**
 * What in a booted zygote would not survive being forked (docs/forking.md): the zygote runs
 * check() once, after the application booted and before its first fork, and prints each finding
 * as a warning on its stderr, which the master's log shows. It never stops the zygote: a warning
 * names the extension or the socket and the fix, and the pool forks as before.
 *
 * - Extensions known to break or misbehave in a process forked without exec (EXTENSIONS: name →
 *   why → fix), unless their own setting says they are ready for it (grpc with fork support on,
 *   New Relic or ddtrace turned off).
 * - Sockets open in the zygote (/proc/self/fd → `socket:[inode]`), named by what /proc/self/net
 *   says of each inode (tcp, tcp6, udp, udp6, unix): every forked worker would share them, so
 *   two workers' requests interleave on one connection and the replies go to whichever reads
 *   first. The zygote's own channel to the master and stdin, stdout and stderr are not counted.
 *
 * The rules (which extension is unsafe, how a /proc/net line reads, what is ignored, the words of
 * a warning) are pure functions, tested without a zygote; readSockets() and check() read /proc.
 * `DROVER_FORK_SAFETY_IGNORE` (comma-separated extension names, `host:port` or Unix paths) silences
 * findings a team has looked at; `DROVER_FORK_SAFETY=0` turns the check off (Zygote).
 */
final class ForkSafety
{
    /** The prefix of every line, so the master's log can be searched for it. */
    public const PREFIX = 'drover zygote: fork safety: ';

    /**
     * Extensions that break or misbehave after a fork without exec: name => [why, fix].
     *
     * @var array<string, array{0: string, 1: string}>
     */
    public const EXTENSIONS = [
        'grpc' => [
            'gRPC\'s core runs threads and holds its channels\' connections; without its fork support a forked worker can hang in its first call or share the zygote\'s connections',
            'set grpc.enable_fork_support=1 and grpc.poll_strategy=epoll1 in the CLI\'s php.ini (or the environment GRPC_ENABLE_FORK_SUPPORT=1 and GRPC_POLL_STRATEGY=epoll1), and create gRPC clients in jobs rather than at boot',
        ],
        'newrelic' => [
            'the New Relic agent does not support processes forked without exec: every worker inherits the zygote\'s transaction and its state for the daemon connection',
            'turn the agent off for the zygote (newrelic.enabled=0 in the CLI\'s php.ini), or set the pool\'s spawn to exec',
        ],
        'ddtrace' => [
            'the Datadog tracer sends traces from a background sender (a thread, or the sidecar in 1.x) that a fork does not copy; it restarts it in a child it sees forked, and releases before that stopped tracing in forked children',
            'use a current ddtrace and check that traces from the workers arrive; else set ddtrace.disable=1 (DD_TRACE_ENABLED=0) for the zygote, or set the pool\'s spawn to exec',
        ],
        'blackfire' => [
            'the Blackfire probe profiles one process: a profile begun in the zygote (blackfire run, BLACKFIRE_QUERY, the SDK at boot) would be carried into every worker',
            'profile a worker started with spawn: exec, or start the profile inside the job with the Blackfire SDK',
        ],
        'swoole' => [
            'Swoole\'s event loop, timers, coroutines and shared memory are not fork-safe: a worker forked after they started shares the zygote\'s (and pcntl_fork() refuses inside a coroutine)',
            'start nothing of Swoole at boot (no Swoole\\Runtime::enableCoroutine, timers or servers in a provider), or set the pool\'s spawn to exec',
        ],
        'openswoole' => [
            'OpenSwoole\'s event loop, timers, coroutines and shared memory are not fork-safe: a worker forked after they started shares the zygote\'s (and pcntl_fork() refuses inside a coroutine)',
            'start nothing of OpenSwoole at boot (no coroutine hooks, timers or servers in a provider), or set the pool\'s spawn to exec',
        ],
        'parallel' => [
            'a parallel\\Runtime is a thread, and a fork copies only the thread that forks: a runtime created at boot is gone in every worker, and its futures never resolve',
            'create parallel\\Runtime objects in jobs, not at boot, or set the pool\'s spawn to exec',
        ],
    ];

    /** Ports a warning names the service of. */
    private const PORTS = [
        5432 => 'PostgreSQL', 6432 => 'PgBouncer', 3306 => 'MySQL', 6379 => 'Redis', 11211 => 'Memcached',
        27017 => 'MongoDB', 5672 => 'RabbitMQ', 9200 => 'Elasticsearch', 8126 => 'the Datadog agent',
        8125 => 'StatsD', 4317 => 'OTLP', 4318 => 'OTLP', 443 => 'HTTPS', 80 => 'HTTP',
    ];

    /** /proc/net/tcp's `st` column. */
    private const TCP_STATES = [
        '01' => 'established', '02' => 'syn-sent', '03' => 'syn-received', '04' => 'fin-wait-1',
        '05' => 'fin-wait-2', '06' => 'time-wait', '07' => 'closed', '08' => 'close-wait',
        '09' => 'last-ack', '0A' => 'listening', '0B' => 'closing',
    ];

    /**
     * The warning for each loaded extension in EXTENSIONS that its settings do not make safe.
     *
     * @param list<string> $loaded the loaded extensions' names (get_loaded_extensions())
     * @param array<string, string|false> $settings ini settings and environment variables by name
     *     (grpc.enable_fork_support, GRPC_ENABLE_FORK_SUPPORT, newrelic.enabled, ddtrace.disable,
     *     DD_TRACE_ENABLED), false or absent when unset
     * @return list<string>
     */
    public static function extensionWarnings(array $loaded, array $settings): array
    {
        $loaded = array_map('strtolower', $loaded);
        $warnings = [];
        foreach (self::EXTENSIONS as $name => [$why, $fix]) {
            if (!in_array($name, $loaded, true) || self::madeSafe($name, $settings)) {
                continue;
            }
            $warnings[] = "extension $name is loaded: $why. Fix: $fix (docs/forking.md).";
        }
        return $warnings;
    }

    /** @param array<string, string|false> $settings */
    private static function madeSafe(string $extension, array $settings): bool
    {
        $on = static fn (string $key): bool => self::truthy($settings[$key] ?? false);
        $off = static fn (string $key): bool => ($settings[$key] ?? false) !== false && !self::truthy($settings[$key]);
        return match ($extension) {
            'grpc' => $on('grpc.enable_fork_support') || $on('GRPC_ENABLE_FORK_SUPPORT'),
            'newrelic' => $off('newrelic.enabled'),
            'ddtrace' => $on('ddtrace.disable') || $off('DD_TRACE_ENABLED'),
            default => false,
        };
    }

    /** How PHP's ini and gRPC's and Datadog's environment read a boolean. */
    public static function truthy(string|false|null $value): bool
    {
        return $value !== false && $value !== null
            && in_array(strtolower(trim($value)), ['1', 'true', 'yes', 'on'], true);
    }

    /** The settings extensionWarnings() reads, from this process. @return array<string, string|false> */
    public static function currentSettings(): array
    {
        $settings = [];
        foreach (['grpc.enable_fork_support', 'newrelic.enabled', 'ddtrace.disable'] as $ini) {
            $settings[$ini] = ini_get($ini);
        }
        foreach (['GRPC_ENABLE_FORK_SUPPORT', 'DD_TRACE_ENABLED'] as $env) {
            $settings[$env] = getenv($env);
        }
        return $settings;
    }

    /** The inode of a `/proc/<pid>/fd/N` link's target if it is a socket (`socket:[123]`), else null. */
    public static function socketInode(string $target): ?int
    {
        return preg_match('/^socket:\[(\d+)\]$/', $target, $m) ? (int) $m[1] : null;
    }

    /**
     * The sockets of /proc/net/tcp, tcp6, udp or udp6, by inode.
     *
     * @return array<int, array{local: string, remote: string, state: string}>
     */
    public static function parseInet(string $text): array
    {
        $sockets = [];
        foreach (explode("\n", $text) as $line) {
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
            $f = preg_split('/\s+/', trim($line));
            if (count($f) < 10 || !str_ends_with($f[0], ':') || !ctype_digit($f[9])) {
                continue; // the header, or not a socket line
            }
            $local = self::inetAddress($f[1]);
            $remote = self::inetAddress($f[2]);
            if ($local === null || $remote === null) {
                continue;
            }
            $sockets[(int) $f[9]] = ['local' => $local, 'remote' => $remote, 'state' => strtoupper($f[3])];
        }
        return $sockets;
    }

    /**
     * `0100007F:1F90` → `127.0.0.1:8080`, `…:0050` (32 hex digits) → `[::1]:80`; null if it is
     * neither. The kernel prints each 32-bit word of the address as a number in this machine's
     * byte order, and the port in host order.
     */
    public static function inetAddress(string $hex): ?string
    {
        if (!preg_match('/^([0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})$/', $hex, $m)) {
            return null;
        }
        $bytes = '';
        foreach (str_split($m[1], 8) as $word) {
            $bytes .= pack('L', hexdec($word));
        }
        $ip = inet_ntop($bytes);
        if ($ip === false) {
            return null;
        }
        $port = hexdec($m[2]);
        return strlen($bytes) === 16 ? "[$ip]:$port" : "$ip:$port";
    }

    /**
     * The sockets of /proc/net/unix, by inode: listening or not, connected or not, and the path
     * the socket itself is bound to (a connected client's is usually none; `@name` is abstract).
     *
     * @return array<int, array{listening: bool, connected: bool, type: string, path: ?string}>
     */
    public static function parseUnix(string $text): array
    {
        $sockets = [];
        foreach (explode("\n", $text) as $line) {
            // Num RefCount Protocol Flags Type St Inode [Path]
            $f = preg_split('/\s+/', trim($line), 8);
            if (count($f) < 7 || !str_ends_with($f[0], ':') || !ctype_digit($f[6])) {
                continue;
            }
            $sockets[(int) $f[6]] = [
                'listening' => (hexdec($f[3]) & 0x10000) !== 0, // __SO_ACCEPTCON
                'connected' => strtoupper($f[5]) === '03', // SS_CONNECTED
                'type' => match ($f[4]) {
                    '0001' => 'stream',
                    '0002' => 'datagram',
                    '0005' => 'seqpacket',
                    default => 'socket',
                },
                'path' => isset($f[7]) && $f[7] !== '' ? $f[7] : null,
            ];
        }
        return $sockets;
    }

    /**
     * What a socket is, in words, from the /proc/net tables (null: in none of them).
     *
     * @param array<int, array{local: string, remote: string, state: string}> $tcp tcp and tcp6
     * @param array<int, array{local: string, remote: string, state: string}> $udp udp and udp6
     * @param array<int, array{listening: bool, connected: bool, type: string, path: ?string}> $unix
     * @param string|null $unixPeer the path a connected Unix socket's peer is bound to, if known
     * @return array{what: string, target: string, listening: bool}|null target: what
     *     DROVER_FORK_SAFETY_IGNORE matches
     */
    public static function describe(int $inode, array $tcp, array $udp, array $unix, ?string $unixPeer = null): ?array
    {
        if (isset($tcp[$inode])) {
            ['local' => $local, 'remote' => $remote, 'state' => $state] = $tcp[$inode];
            if ($state === '0A') {
                return ['what' => "a TCP socket listening on $local" . self::service($local), 'target' => $local, 'listening' => true];
            }
            $words = $state === '01' ? '' : ' (' . (self::TCP_STATES[$state] ?? "state $state") . ')';
            return ['what' => "a TCP connection to $remote" . self::service($remote) . " from $local$words", 'target' => $remote, 'listening' => false];
        }
        if (isset($udp[$inode])) {
            ['local' => $local, 'remote' => $remote] = $udp[$inode];
            if (!self::unspecified($remote)) {
                return ['what' => "a UDP socket sending to $remote" . self::service($remote) . " from $local", 'target' => $remote, 'listening' => false];
            }
            return ['what' => "a UDP socket bound to $local" . self::service($local), 'target' => $local, 'listening' => false];
        }
        if (isset($unix[$inode])) {
            ['listening' => $listening, 'connected' => $connected, 'type' => $type, 'path' => $path] = $unix[$inode];
            if ($listening) {
                return ['what' => "a Unix socket listening at " . ($path ?? '(no path)'), 'target' => $path ?? '', 'listening' => true];
            }
            if ($connected && $unixPeer !== null && $unixPeer !== '') {
                return ['what' => "a Unix $type socket connected to $unixPeer" . self::unixService($unixPeer), 'target' => $unixPeer, 'listening' => false];
            }
            if ($path !== null) {
                return ['what' => "a Unix $type socket at $path" . self::unixService($path), 'target' => $path, 'listening' => false];
            }
            return [
                'what' => $connected ? "a connected Unix $type socket whose peer has no path (`ss -xp` shows the process at its other end)" : "an unconnected Unix $type socket",
                'target' => '',
                'listening' => false,
            ];
        }
        return null;
    }

    private static function unspecified(string $address): bool
    {
        return in_array($address, ['0.0.0.0:0', '[::]:0'], true);
    }

    private static function service(string $address): string
    {
        $port = (int) substr($address, strrpos($address, ':') + 1);
        return isset(self::PORTS[$port]) ? ' (' . self::PORTS[$port] . '\'s port)' : '';
    }

    private static function unixService(string $path): string
    {
        $name = strtolower(basename($path));
        return match (true) {
            str_starts_with($name, '.s.pgsql.') => ' (PostgreSQL)',
            str_contains($name, 'mysql') => ' (MySQL)',
            str_contains($name, 'redis') => ' (Redis)',
            str_contains($name, 'newrelic') => ' (the New Relic daemon)',
            str_contains(strtolower($path), 'datadog') => ' (the Datadog agent)',
            default => '',
        };
    }

    /**
     * The warning for each socket the zygote holds, in fd order.
     *
     * @param array<int, int> $sockets fd => inode (readSockets())
     * @param list<int> $ignoredInodes the zygote's own channel to the master
     * @param array<int, array{local: string, remote: string, state: string}> $tcp
     * @param array<int, array{local: string, remote: string, state: string}> $udp
     * @param array<int, array{listening: bool, connected: bool, type: string, path: ?string}> $unix
     * @param array<int, string> $unixPeers fd => the path its peer is bound to, where known
     * @param list<string> $ignored DROVER_FORK_SAFETY_IGNORE's entries
     * @return list<string>
     */
    public static function socketWarnings(array $sockets, array $ignoredInodes, array $tcp, array $udp, array $unix, array $unixPeers = [], array $ignored = []): array
    {
        ksort($sockets);
        $warnings = [];
        $seen = [];
        foreach ($sockets as $fd => $inode) {
            if ($fd <= 2 || in_array($inode, $ignoredInodes, true)) {
                continue;
            }
            $described = self::describe($inode, $tcp, $udp, $unix, $unixPeers[$fd] ?? null)
                ?? ['what' => "a socket that is neither TCP, UDP nor Unix (inode $inode: netlink, raw, …)", 'target' => '', 'listening' => false];
            if ($described['target'] !== '' && in_array($described['target'], $ignored, true)) {
                continue;
            }
            if (isset($seen[$inode])) {
                continue; // a dup of one already named
            }
            $seen[$inode] = true;
            $harm = $described['listening']
                ? 'every worker would accept connections on it too, and it stays open while any of them lives'
                : 'every worker would share it, and what they send and read would interleave on one connection';
            $warnings[] = "fd $fd is {$described['what']}, open in the zygote before its first fork: $harm. Fix: open it on first use rather than at boot (or close it once boot is done), or set the pool's spawn to exec (docs/forking.md).";
        }
        return $warnings;
    }

    /** DROVER_FORK_SAFETY_IGNORE's entries. @return list<string> */
    public static function ignored(string|false $value): array
    {
        if ($value === false) {
            return [];
        }
        return array_values(array_filter(array_map('trim', explode(',', $value)), static fn (string $s): bool => $s !== ''));
    }

    /**
     * This process's open sockets: fd => inode, from /proc/self/fd ([] where there is no /proc).
     *
     * @return array<int, int>
     */
    public static function readSockets(string $fdDirectory = '/proc/self/fd'): array
    {
        $entries = @scandir($fdDirectory);
        if ($entries === false) {
            return [];
        }
        $sockets = [];
        foreach ($entries as $entry) {
            if (!ctype_digit($entry)) {
                continue;
            }
            $target = @readlink("$fdDirectory/$entry");
            $inode = $target === false ? null : self::socketInode($target);
            if ($inode !== null) {
                $sockets[(int) $entry] = $inode;
            }
        }
        return $sockets;
    }

    /**
     * Every warning for this process: its extensions, then its sockets (only then is
     * /proc/self/net read, so a zygote holding no socket pays for one directory listing).
     *
     * @param list<int> $ownFds the zygote's own channel to the master (its inherited fd)
     * @param (\Closure(int): ?string)|null $unixPeer the path a connected Unix socket's peer is
     *     bound to (unixPeerResolver())
     * @return list<string>
     */
    public static function check(array $ownFds = [], ?\Closure $unixPeer = null): array
    {
        $ignored = self::ignored(getenv('DROVER_FORK_SAFETY_IGNORE'));
        $extensions = array_values(array_diff(array_map('strtolower', get_loaded_extensions()), $ignored));
        $warnings = self::extensionWarnings($extensions, self::currentSettings());

        $sockets = self::readSockets();
        $own = [];
        foreach ($ownFds as $fd) {
            if (isset($sockets[$fd])) {
                $own[] = $sockets[$fd];
            }
        }
        $others = array_filter($sockets, static fn (int $inode, int $fd): bool => $fd > 2 && !in_array($inode, $own, true), ARRAY_FILTER_USE_BOTH);
        if ($others === []) {
            return $warnings;
        }
        // Cheapest first, and only while a socket is left unnamed: reading /proc/self/net/tcp
        // walks the kernel's whole TCP hash table (about 6 ms each for tcp and tcp6 even when
        // nearly empty), unix and udp take a tenth of a millisecond.
        $tables = ['unix' => [], 'udp' => [], 'udp6' => [], 'tcp' => [], 'tcp6' => []];
        $unnamed = array_flip($others);
        foreach (array_keys($tables) as $table) {
            if ($unnamed === []) {
                break;
            }
            $text = (string) @file_get_contents("/proc/self/net/$table");
            $tables[$table] = $table === 'unix' ? self::parseUnix($text) : self::parseInet($text);
            $unnamed = array_diff_key($unnamed, $tables[$table]);
        }
        $tcp = $tables['tcp'] + $tables['tcp6'];
        $udp = $tables['udp'] + $tables['udp6'];
        $unix = $tables['unix'];
        $peers = [];
        if ($unixPeer !== null) {
            foreach ($others as $fd => $inode) {
                if (($unix[$inode]['connected'] ?? false) && !($unix[$inode]['listening'] ?? false)) {
                    $peer = $unixPeer($fd);
                    if ($peer !== null) {
                        $peers[$fd] = $peer;
                    }
                }
            }
        }
        return [...$warnings, ...self::socketWarnings($others, $own, $tcp, $udp, $unix, $peers, $ignored)];
    }

    /**
     * getpeername(2) of a Unix socket through FFI: the path (or `@abstract` name) its peer is
     * bound to, null if it has none or FFI cannot be used. /proc/net/unix names a socket's own
     * path only, and a connected client's is none. FFI is bound at the first call (0.6 ms), so a
     * zygote with no such socket never pays for it.
     *
     * @return \Closure(int): ?string
     */
    public static function unixPeerResolver(): \Closure
    {
        $ffi = null;
        return static function (int $fd) use (&$ffi): ?string {
            if ($ffi === null) {
                try {
                    $ffi = extension_loaded('ffi')
                        ? \FFI::cdef('struct drover_sockaddr_un { unsigned short sun_family; char sun_path[108]; }; int getpeername(int fd, struct drover_sockaddr_un *addr, unsigned int *len);')
                        : false;
                } catch (\Throwable) {
                    $ffi = false;
                }
            }
            if ($ffi === false) {
                return null;
            }
            $address = $ffi->new('struct drover_sockaddr_un');
            $length = $ffi->new('unsigned int');
            $length->cdata = \FFI::sizeof($address);
            if ($ffi->getpeername($fd, \FFI::addr($address), \FFI::addr($length)) !== 0 || $address->sun_family !== 1) {
                return null;
            }
            $bytes = min($length->cdata - 2, 108); // after sun_family
            if ($bytes <= 0) {
                return null;
            }
            $path = \FFI::string($address->sun_path, $bytes);
            if ($path[0] === "\0") {
                return '@' . substr($path, 1);
            }
            $end = strpos($path, "\0");
            return $end === false ? $path : substr($path, 0, $end);
        };
    }

    /**
     * Why a zygote cannot fork for want of FFI, and the fix, from what Libc::prepare() said
     * ($detail), whether the extension is loaded and ffi.enable. Fork mode needs FFI (a forked
     * worker's parent-death signal, Libc); exec mode does not, so Composer only suggests ext-ffi.
     */
    public static function ffiProblem(bool $loaded, string|false $ffiEnable, string $detail): string
    {
        $exec = 'or set the pool\'s spawn to exec (config/drover.php), which needs no FFI and costs a boot and the memory of a booted application per worker (docs/forking.md)';
        if (!$loaded) {
            return 'forking workers needs PHP\'s FFI extension, which this PHP (' . PHP_VERSION . ', ' . PHP_BINARY . ') does not load: '
                . 'a forked worker sets its parent-death signal through it. Fix: install and enable it for the CLI '
                . '(the php-ffi or php' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION . '-ffi package, or docker-php-ext-install ffi; extension=ffi in the CLI\'s php.ini, see php --ini) '
                . "with ffi.enable=preload (the default) or true; $exec";
        }
        $enable = $ffiEnable === false ? 'unset' : "'$ffiEnable'";
        if (!in_array(strtolower((string) $ffiEnable), ['preload', '1', 'true', 'on', 'yes'], true)) {
            return "forking workers needs PHP's FFI, which ffi.enable=$enable forbids: set ffi.enable=preload (the default) or true in the CLI's php.ini (php --ini shows which), $exec";
        }
        return "forking workers needs PHP's FFI, which failed here: $detail; $exec";
    }
}
