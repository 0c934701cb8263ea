<?php

namespace Drover\Worker;

use Drover\Protocol\Channel;
use Drover\Protocol\ChannelClosed;

/**
 * A zygote (docs/decisions/0001-fork-workers-from-a-zygote.md): a PHP process that has booted the
 * application once and forks workers on the master's request, so they share its booted state
 * copy-on-write and start in a millisecond instead of booting. The master starts it with the pool's
 * worker command and `DROVER_ZYGOTE=1`; `drover:work` and `drover-worker` then become this.
 *
 * Its control channel is fd 3, newline-delimited JSON like a worker's (docs/protocol.md, "Zygotes"):
 * - zygote → master, once booted: `{"t":"zygote","v":V,"pid":P}`; or, if it cannot serve,
 *   `{"t":"failed","error":"..."}` and it exits;
 * - master → zygote: `{"t":"fork","worker":N,"connect":PATH,"token":HEX,"env":{...}}`, and from
 *   version 2 the same with `"run":{...}`: a one-off (a scheduled task) instead of a worker;
 * - zygote → master: `{"t":"forked","worker":N,"pid":P}`, or `{"t":"fork_failed","worker":N,
 *   "error":"..."}`;
 * - master → zygote: `{"t":"stop"}` (or closing the channel): the zygote exits 0.
 *
 * The new worker reaches the master by connecting to the Unix socket PATH (the master's, in its
 * state directory) and presenting the one-time TOKEN in its first frame, `{"t":"attach",
 * "worker":N,"token":HEX}`; from then on that connection is its channel — on fd 3, exactly as for
 * a worker the master started itself. (Passing the channel as SCM_RIGHTS was the first choice:
 * PHP 8.2's ext-sockets hands a received descriptor over as a stream that cannot be written to —
 * errno 9 — so the issue's other scheme, a connection authenticated by a one-time token, is used.)
 *
 * It forks twice: the middle process reports the worker's PID and kills itself at once (no PHP
 * shutdown code runs in it), so the worker is re-parented to the nearest subreaper — the master —
 * and is never the zygote's child. In the worker, before anything else: its own process group
 * (the master kills a worker with its group), the control channel closed (both PHP's dup and the
 * original fd 3, through Libc), `DROVER_ZYGOTE` removed and the environment given set, the
 * parent-death signal tied to the master (Libc), the
 * random seed reset, `$afterFork` run (the Laravel layer resets what must not be shared), and
 * `$worker` run with the channel. serve() returns in the worker too, with the worker's exit code,
 * so the process ends the way a worker the master started does (Laravel's kernel terminates).
 *
 * Before it says it is ready, the zygote warns on stderr (the master's log) of what would not
 * survive the fork: loaded extensions known to break after one, and sockets its boot left open,
 * which every worker would share (ForkSafety, docs/forking.md). It serves all the same. Without
 * FFI (or with ffi.enable off) it refuses, naming the fix and `spawn: exec` (ForkSafety::ffiProblem).
 */
final class Zygote
{
    /**
     * The zygote protocol this speaks at most. 2 adds one-offs (`run` in a fork request): spoken
     * only when the master says it takes it (DROVER_ZYGOTE_ONE_OFFS=1: an older master refuses
     * anything but 1) and this zygote was given a one-off runner.
     */
    public const VERSION = 2;

    /** How long a new worker may take to connect to the master. */
    private const CONNECT_TIMEOUT = 5.0;

    /** How long a one-off waits for the master's go after it attached. */
    private const ONE_OFF_GO_TIMEOUT = 30.0;

    /**
     * Seconds without a fork request after which the zygote pages out the file pages only it
     * maps (Libc::pageOutUnsharedFilePages): by then its workers have touched what they use.
     */
    private const TRIM_AFTER = 2.0;

    /**
     * And again every so often while idle: pages another PHP process (a producer, an artisan
     * command) shared at the last trim are the zygote's alone once that process has exited.
     */
    private const TRIM_EVERY = 10.0;

    /**
     * @param \Closure(Channel, array<string, string>): int $worker
     * @param \Closure(): void|null $afterFork
     * @param Libc|null $libc ties each worker to the master and hands it fd 3 (null: tests only)
     * @param int|null $masterPid the master's PID (DROVER_MASTER_PID)
     */
    public function __construct(
        private Channel $control,
        private \Closure $worker,
        private ?\Closure $afterFork = null,
        private ?Libc $libc = null,
        private ?int $masterPid = null,
        /** The descriptor the master gave the zygote (its control channel's original, before PHP's dup). */
        private ?int $inheritedFd = null,
        /**
         * Runs a one-off in the forked process, given its channel to the master and the request's
         * `run`: writes what it has to say on the channel and returns the exit code. Null: this
         * zygote forks workers only (it says version 1).
         *
         * @var (\Closure(Channel, array<string, string>): int)|null
         */
        private ?\Closure $oneOff = null,
    ) {
    }

    /**
     * The zygote of a process the master started: fd 3, DROVER_MASTER_PID, FFI for the
     * parent-death signal. Returns the reason instead when it cannot serve, having told the master.
     *
     * @param \Closure(Channel, array<string, string>): int $worker
     * @param (\Closure(Channel, array<string, string>): int)|null $oneOff runs a one-off (version 2)
     */
    public static function fromInheritedFd(\Closure $worker, ?\Closure $afterFork = null, int $fd = 3, ?\Closure $oneOff = null): self|string
    {
        $control = Channel::fromInheritedFd($fd);
        $problem = self::unsupported();
        $libc = $problem ?? Libc::prepare();
        if (is_string($libc)) {
            $why = $problem ?? ForkSafety::ffiProblem(extension_loaded('ffi'), ini_get('ffi.enable'), $libc);
            self::refuse($control, $why);
            return $why;
        }
        $master = getenv('DROVER_MASTER_PID');
        return new self($control, $worker, $afterFork, $libc, $master !== false ? (int) $master : null, $fd, $oneOff);
    }

    /** What this PHP lacks for forking, or null. */
    private static function unsupported(): ?string
    {
        foreach (['pcntl_fork', 'posix_setpgid', 'posix_getppid'] as $function) {
            if (!function_exists($function)) {
                return "$function() is not available (forking workers needs the pcntl and posix extensions)";
            }
        }
        return null;
    }

    /** This zygote cannot serve after all (its warm-up failed): the master is told why. */
    public function cannotServe(string $why): void
    {
        self::refuse($this->control, $why);
    }

    /** Tells the master this zygote cannot serve: it starts the pool's workers by exec instead. */
    public static function refuse(Channel $control, string $why): void
    {
        fwrite(STDERR, "drover zygote: cannot fork workers: $why\n");
        try {
            $control->send(['t' => 'failed', 'error' => substr($why, 0, Channel::MAX_ERROR_BYTES)]);
        } catch (ChannelClosed) {
        }
    }

    /**
     * Serves fork requests until told to stop or the master closes the channel: returns 0 then.
     * In a forked worker it returns the worker's exit code.
     */
    public function serve(): int
    {
        // `ps` tells the zygote from its workers, which take the command line back.
        $commandLine = self::commandLine();
        self::setTitle($commandLine, ' (drover zygote)');
        $this->warnOfWhatForksBadly();
        $this->control->send(['t' => 'zygote', 'v' => $this->version(), 'pid' => getmypid()]);
        $forkedSinceTrim = false;
        while (true) {
            try {
                // Once forks have settled, and then while idle, the zygote gives back the file
                // pages no other process maps (Libc::pageOutUnsharedFilePages).
                $idle = $this->libc === null ? null : ($forkedSinceTrim ? self::TRIM_AFTER : self::TRIM_EVERY);
                $frame = $this->control->receive($idle);
            } catch (ChannelClosed) {
                return 0;
            }
            if ($frame === null) {
                $this->libc?->pageOutUnsharedFilePages();
                $forkedSinceTrim = false;
                continue;
            }
            if (($frame['t'] ?? null) === 'stop') {
                return 0;
            }
            $problem = $this->problem($frame);
            $worker = is_int($frame['worker'] ?? null) ? $frame['worker'] : 0;
            if ($problem !== null) {
                $this->control->send(['t' => 'fork_failed', 'worker' => $worker, 'error' => $problem]);
                continue;
            }
            $env = [];
            foreach ((array) ($frame['env'] ?? []) as $key => $value) {
                if (is_string($key) && preg_match('/^[A-Z_][A-Z0-9_]*$/', $key) && is_scalar($value)) {
                    $env[$key] = (string) $value;
                }
            }
            $run = isset($frame['run']) ? array_map('strval', $frame['run']) : null;
            $exit = $this->fork($worker, $frame['connect'], $frame['token'], $env, $commandLine, $run);
            if ($exit !== null) {
                return $exit; // in the worker
            }
            $forkedSinceTrim = true;
        }
    }

    /**
     * Booted and about to fork: names, on stderr (the master's log), each loaded extension known
     * to break after a fork and each socket the boot left open, which every worker would share
     * (ForkSafety, docs/forking.md). Warnings only: the zygote serves whatever they say. Only in
     * a zygote the master started (its channel is the inherited fd, which is not counted).
     */
    private function warnOfWhatForksBadly(): void
    {
        $setting = getenv('DROVER_FORK_SAFETY');
        if ($this->inheritedFd === null || ($setting !== false && $setting !== '' && !ForkSafety::truthy($setting))) {
            return; // DROVER_FORK_SAFETY=0 turns the check off
        }
        try {
            $started = hrtime(true);
            $warnings = ForkSafety::check([$this->inheritedFd], ForkSafety::unixPeerResolver());
            $took = (hrtime(true) - $started) / 1e6;
            foreach ($warnings as $warning) {
                fwrite(STDERR, ForkSafety::PREFIX . $warning . "\n");
            }
            if (ForkSafety::truthy(getenv('DROVER_FORK_SAFETY_TIMING'))) {
                fwrite(STDERR, ForkSafety::PREFIX . sprintf("checked in %.2f ms, %d warning(s)\n", $took, count($warnings)));
            }
        } catch (\Throwable $e) {
            fwrite(STDERR, ForkSafety::PREFIX . 'the check failed (' . get_class($e) . ': ' . $e->getMessage() . "); forking anyway\n");
        }
    }

    /** What `ps` shows for this process: $commandLine and $suffix (nothing if either is unknown). */
    private static function setTitle(?string $commandLine, string $suffix): void
    {
        if ($commandLine !== null && function_exists('cli_set_process_title')) {
            @cli_set_process_title($commandLine . $suffix);
        }
    }

    /** This process's command line as it was started, or null if /proc does not say. */
    private static function commandLine(): ?string
    {
        $raw = @file_get_contents('/proc/self/cmdline');
        if ($raw === false || $raw === '') {
            return null;
        }
        return implode(' ', explode("\0", rtrim($raw, "\0")));
    }

    /** The protocol version this zygote speaks: 2 (one-offs) when the master takes it and it can. */
    public function version(): int
    {
        return $this->oneOff !== null && getenv('DROVER_ZYGOTE_ONE_OFFS') === '1' ? self::VERSION : 1;
    }

    /** @param array<string, mixed> $frame what is wrong with a fork request, or null */
    private function problem(array $frame): ?string
    {
        if (($frame['t'] ?? null) !== 'fork' || !is_int($frame['worker'] ?? null)) {
            return 'a request is {"t":"fork","worker":N,"connect":PATH,"token":HEX,"env":{...}} or {"t":"stop"}';
        }
        if (!is_string($frame['connect'] ?? null) || $frame['connect'] === '' || strlen($frame['connect']) > 107) {
            return 'connect must be the path of the master\'s Unix socket (at most 107 bytes)';
        }
        if (!is_string($frame['token'] ?? null) || !preg_match('/^[0-9a-f]{32,128}$/', $frame['token'])) {
            return 'token must be 32 to 128 lowercase hex digits';
        }
        if (array_key_exists('run', $frame)) {
            if ($this->version() < 2) {
                return 'this zygote forks workers only (zygote protocol version 1): a request with "run" is not for it';
            }
            if (!is_array($frame['run']) || $frame['run'] === [] || array_is_list($frame['run'])) {
                return 'run must be an object of strings, e.g. {"kind":"schedule",...}';
            }
            foreach ($frame['run'] as $value) {
                if (!is_scalar($value)) {
                    return 'run must be an object of strings, e.g. {"kind":"schedule",...}';
                }
            }
        }
        return null;
    }

    /**
     * @param array<string, string> $env
     * @param array<string, string>|null $run a one-off's request instead of a worker
     * @return int|null the worker's exit code in the worker, null in the zygote
     */
    private function fork(int $worker, string $connect, string $token, array $env, ?string $commandLine, ?array $run = null): ?int
    {
        $intermediate = pcntl_fork();
        if ($intermediate === -1) {
            $this->control->send(['t' => 'fork_failed', 'worker' => $worker, 'error' => 'fork failed: ' . pcntl_strerror(pcntl_get_last_error())]);
            return null;
        }
        if ($intermediate === 0) {
            $pid = pcntl_fork();
            if ($pid === 0) {
                self::setTitle($commandLine, $run === null ? '' : ' (drover one-off: ' . ($run['kind'] ?? '?') . ')');
                return $this->becomeWorker($worker, $connect, $token, $env, $run);
            }
            try {
                $this->control->send($pid === -1
                    ? ['t' => 'fork_failed', 'worker' => $worker, 'error' => 'fork failed: ' . pcntl_strerror(pcntl_get_last_error())]
                    : ['t' => 'forked', 'worker' => $worker, 'pid' => $pid]);
            } finally {
                // No PHP shutdown code in the middle process, whatever happened: it shares
                // everything the zygote holds.
                posix_kill(posix_getpid(), SIGKILL);
            }
        }
        // Interrupted by a signal: wait again (the middle process is gone within microseconds).
        while (pcntl_waitpid($intermediate, $status) === -1 && pcntl_get_last_error() === PCNTL_EINTR) {
        }
        return null;
    }

    /**
     * @param array<string, string> $env
     * @param array<string, string>|null $run a one-off's request: it runs that instead of a worker
     */
    private function becomeWorker(int $worker, string $connect, string $token, array $env, ?array $run): int
    {
        // Its own group first: the master kills a worker with its process group, and must not
        // reach the zygote's.
        if (!posix_setpgid(0, 0)) {
            fwrite(STDERR, "drover worker $worker (forked): setpgid failed: " . posix_strerror(posix_get_last_error()) . "; exiting\n");
            return 1;
        }
        $this->control->close();
        if ($this->libc !== null && $this->inheritedFd !== null) {
            $this->libc->close($this->inheritedFd);
        }
        putenv('DROVER_ZYGOTE');
        unset($_ENV['DROVER_ZYGOTE'], $_SERVER['DROVER_ZYGOTE']);
        foreach ($env as $key => $value) {
            putenv("$key=$value");
            $_ENV[$key] = $_SERVER[$key] = $value;
        }
        if ($this->libc !== null && $this->masterPid !== null) {
            $problem = $this->libc->dieWithParent($this->masterPid);
            if ($problem !== null) {
                fwrite(STDERR, "drover worker $worker (forked): $problem; exiting\n");
                return 1;
            }
        }
        // The zygote's seed would be every worker's otherwise (mt_rand, rand, shuffle, array_rand).
        mt_srand();
        if ($this->afterFork !== null) {
            ($this->afterFork)();
        }
        // With fd 3 (the control channel) just closed and 0-2 open, the connection is fd 3: the
        // worker's channel is on fd 3 as for a worker the master started.
        $stream = @stream_socket_client("unix://$connect", $errno, $error, self::CONNECT_TIMEOUT);
        if ($stream === false) {
            fwrite(STDERR, "drover worker $worker (forked): cannot connect to the master at $connect: $error\n");
            return 2;
        }
        $channel = new Channel($stream);
        $channel->send(['t' => 'attach', 'worker' => $worker, 'token' => $token]);
        if ($run !== null && $this->oneOff !== null) {
            // Only once the master took this process for the one-off it asked for: one it gave
            // up meanwhile (and runs another way) must not run it too.
            try {
                $go = $channel->receive(self::ONE_OFF_GO_TIMEOUT);
            } catch (ChannelClosed) {
                $go = null;
            }
            if (($go['t'] ?? null) !== 'go') {
                fwrite(STDERR, "drover one-off $worker (forked): the master did not say go; not run\n");
                return 3;
            }
            return ($this->oneOff)($channel, $run);
        }
        return ($this->worker)($channel, $env);
    }
}
