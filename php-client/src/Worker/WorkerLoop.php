<?php

namespace Drover\Worker;

use Drover\Protocol\Channel;
use Drover\Protocol\ChannelClosed;

/**
 * A plain-PHP worker: says hello with its prefetch, takes jobs pushed by the master, runs a handler
 * on each and reports started / done / release / fail. Stops when the master says `stop`, on
 * SIGTERM/SIGINT (after the running job), or at once when the master is gone.
 *
 * The handler gets a Job; returning means done, throwing ReleaseJob puts the job back after a delay,
 * any other Throwable releases it (attempts left) or fails it (none left).
 */
final class WorkerLoop
{
    /** @var callable(Job): void */
    private $handler;

    /** @var list<Job> jobs pushed by the master and not yet started */
    private array $prefetched = [];

    private bool $paused = false;

    private bool $stopping = false;

    public function __construct(
        private readonly Channel $channel,
        callable $handler,
        private readonly int $prefetch = 1,
        /** The master's PID: if our parent changes, the master died and we must not go on. */
        private readonly ?int $masterPid = null,
    ) {
        if ($prefetch < 1) {
            throw new \InvalidArgumentException("drover worker: prefetch must be at least 1, got $prefetch");
        }
        $this->handler = $handler;
    }

    /** Runs until told to stop; returns the process exit code. */
    public function run(): int
    {
        if (function_exists('pcntl_async_signals')) {
            pcntl_async_signals(true);
            $stop = function (): void {
                $this->stopping = true;
            };
            pcntl_signal(SIGTERM, $stop);
            pcntl_signal(SIGINT, $stop);
        }
        try {
            $this->channel->send(['t' => 'hello', 'v' => Channel::VERSION, 'pid' => getmypid(), 'prefetch' => $this->prefetch]);
            while (true) {
                // Wait for work when there is none to do; otherwise only take what already arrived.
                $idle = $this->prefetched === [] || $this->paused;
                $frame = $this->channel->receive($idle ? 1.0 : 0.0);
                while ($frame !== null) {
                    $this->onFrame($frame);
                    $frame = $this->channel->receive(0.0);
                }
                if ($this->stopping) {
                    return 0; // unstarted prefetched jobs are returned by the master, uncharged
                }
                if (!$this->masterAlive()) {
                    fwrite(STDERR, "drover worker: the master (pid {$this->masterPid}) is gone; exiting\n");
                    return 1;
                }
                if ($this->paused || $this->prefetched === []) {
                    continue;
                }
                $this->runJob(array_shift($this->prefetched));
            }
        } catch (ChannelClosed $e) {
            fwrite(STDERR, $e->getMessage() . "; exiting\n");
            return 1;
        }
    }

    /** @param array<string, mixed> $frame */
    private function onFrame(array $frame): void
    {
        switch ($frame['t']) {
            case 'job':
                $this->prefetched[] = Job::fromFrame($frame);
                break;
            case 'stop':
                $this->stopping = true;
                break;
            case 'pause':
                $this->paused = true;
                break;
            case 'resume':
                $this->paused = false;
                break;
            default:
                fwrite(STDERR, "drover worker: ignoring unknown frame type {$frame['t']}\n");
        }
    }

    private function runJob(Job $job): void
    {
        $lease = ['job' => $job->id, 'token' => $job->token];
        $this->channel->send(['t' => 'started'] + $lease);
        try {
            ($this->handler)($job);
            $this->channel->send(['t' => 'done'] + $lease);
        } catch (ReleaseJob $r) {
            $this->channel->send(['t' => 'release', 'delay_ms' => Channel::delayMs($r->delaySeconds)] + $lease);
        } catch (ChannelClosed $e) {
            throw $e;
        } catch (\Throwable $e) {
            if ($job->hasAttemptsLeft()) {
                $this->channel->send(['t' => 'release', 'delay_ms' => 0] + $lease);
            } else {
                $error = get_class($e) . ': ' . $e->getMessage() . "\n" . $e->getTraceAsString();
                $this->channel->send(['t' => 'fail', 'error' => substr($error, 0, Channel::MAX_ERROR_BYTES)] + $lease);
            }
        }
    }

    private function masterAlive(): bool
    {
        return $this->masterPid === null || posix_getppid() === $this->masterPid;
    }
}
