<?php

namespace Drover\Worker;

use Drover\Protocol\Channel;
use Drover\Protocol\ChannelClosed;

/**
 * A zygote (issue 12, docs/decisions/0001-fork-workers-from-a-zygote.md): a PHP process that has
 * booted once and forks workers on the master's request, so they share its booted state
 * copy-on-write and start in a millisecond instead of booting.
 *
 * Its control channel is fd 3, newline-delimited JSON like a worker's:
 * - zygote → master, once booted: `{"t":"zygote","v":1,"pid":P}`;
 * - master → zygote: `{"t":"fork","worker":N,"connect":PATH,"token":HEX,"env":{...}}`;
 * - zygote → master: `{"t":"forked","worker":N,"pid":P}`, or `{"t":"fork_failed","worker":N,
 *   "error":"..."}`;
 * - master → zygote: `{"t":"stop"}` (or closing the channel): the zygote exits 0.
 *
 * The new worker reaches the master by connecting to the Unix socket PATH (the master's, in its
 * state directory) and presenting the one-time TOKEN in its first frame, `{"t":"attach",
 * "worker":N,"token":HEX}`; from then on that connection is its channel, exactly as fd 3 is for a
 * worker the master started itself. (Passing the channel as SCM_RIGHTS was the first choice: PHP
 * 8.2's ext-sockets hands a received descriptor over as a stream that cannot be written to —
 * errno 9 — so the issue's other scheme, a connection authenticated by a one-time token, is used.)
 *
 * It forks twice: the intermediate process reports the worker's PID and kills itself at once (no
 * PHP shutdown code runs in it), so the worker is re-parented to the nearest subreaper — the master
 * — and is never the zygote's child. In the worker: the control channel is closed, the environment
 * given is set, `$afterFork` resets what must not be shared (connections, log streams; the Laravel
 * layer supplies it; the random seed is reset here), and `$worker` runs with the channel; its
 * return value is the worker's exit code.
 *
 * Not yet started by the master: this is the PHP half, tested on its own
 * (php-client/tests/ZygoteTest.php).
 */
final class Zygote
{
    public const VERSION = 1;

    /** How long a new worker may take to connect to the master. */
    private const CONNECT_TIMEOUT = 5.0;

    /**
     * @param \Closure(Channel, array<string, string>): int $worker
     * @param \Closure(): void|null $afterFork
     */
    public function __construct(
        private Channel $control,
        private \Closure $worker,
        private ?\Closure $afterFork = null,
    ) {
    }

    /** @param \Closure(Channel, array<string, string>): int $worker */
    public static function fromInheritedFd(\Closure $worker, ?\Closure $afterFork = null, int $fd = 3): self
    {
        return new self(Channel::fromInheritedFd($fd), $worker, $afterFork);
    }

    /** Serves fork requests until told to stop or the master closes the channel; returns the exit code. */
    public function serve(): int
    {
        $this->control->send(['t' => 'zygote', 'v' => self::VERSION, 'pid' => getmypid()]);
        while (true) {
            try {
                $frame = $this->control->receive();
            } catch (ChannelClosed) {
                return 0;
            }
            if ($frame === null) {
                continue;
            }
            if (($frame['t'] ?? null) === 'stop') {
                return 0;
            }
            $problem = self::problem($frame);
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
            $this->fork($worker, $frame['connect'], $frame['token'], $env);
        }
    }

    /** @param array<string, mixed> $frame what is wrong with a fork request, or null */
    private static function problem(array $frame): ?string
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
        return null;
    }

    /** @param array<string, string> $env */
    private function fork(int $worker, string $connect, string $token, array $env): void
    {
        $intermediate = pcntl_fork();
        if ($intermediate === -1) {
            $this->control->send(['t' => 'fork_failed', 'worker' => $worker, 'error' => 'fork failed: ' . pcntl_strerror(pcntl_get_last_error())]);
            return;
        }
        if ($intermediate === 0) {
            $pid = pcntl_fork();
            if ($pid === 0) {
                $this->becomeWorker($worker, $connect, $token, $env);
            }
            $this->control->send($pid === -1
                ? ['t' => 'fork_failed', 'worker' => $worker, 'error' => 'fork failed: ' . pcntl_strerror(pcntl_get_last_error())]
                : ['t' => 'forked', 'worker' => $worker, 'pid' => $pid]);
            // No PHP shutdown code in the intermediate: it shares everything the zygote holds.
            posix_kill(posix_getpid(), SIGKILL);
        }
        pcntl_waitpid($intermediate, $status);
    }

    /** @param array<string, string> $env */
    private function becomeWorker(int $worker, string $connect, string $token, array $env): never
    {
        $this->control->close();
        foreach ($env as $key => $value) {
            putenv("$key=$value");
            $_ENV[$key] = $_SERVER[$key] = $value;
        }
        // The zygote's seed would be every worker's otherwise.
        mt_srand();
        if ($this->afterFork !== null) {
            ($this->afterFork)();
        }
        $stream = @stream_socket_client("unix://$connect", $errno, $error, self::CONNECT_TIMEOUT);
        if ($stream === false) {
            fwrite(STDERR, "drover worker $worker (forked): cannot connect to the master at $connect: $error\n");
            exit(2);
        }
        $channel = new Channel($stream);
        $channel->send(['t' => 'attach', 'worker' => $worker, 'token' => $token]);
        exit(($this->worker)($channel, $env));
    }
}
