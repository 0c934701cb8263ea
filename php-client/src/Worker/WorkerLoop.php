<?php

namespace Drover\Worker;

use Drover\Protocol\Channel;
use Drover\Protocol\ChannelClosed;

/**
 * A plain-PHP worker: takes jobs from the master through a Feeder, runs a handler on each and
 * reports the outcome. Stops when the master says `stop`, on SIGTERM/SIGINT (after the running
 * job), or at once when the master is gone.
 *
 * The handler gets a Job; returning means done, throwing ReleaseJob puts the job back after a delay,
 * any other Throwable releases it (attempts left) or fails it (none left).
 */
final class WorkerLoop
{
    /** @var callable(Job): void */
    private $handler;

    private Feeder $feeder;

    public function __construct(
        Channel $channel,
        callable $handler,
        int $prefetch = 1,
        private readonly ?int $masterPid = null,
    ) {
        $this->feeder = new Feeder($channel, $prefetch, $masterPid);
        $this->handler = $handler;
    }

    /** Runs until told to stop; returns the process exit code. */
    public function run(): int
    {
        if (function_exists('pcntl_async_signals')) {
            pcntl_async_signals(true);
            $stop = fn () => $this->feeder->stop();
            pcntl_signal(SIGTERM, $stop);
            pcntl_signal(SIGINT, $stop);
        }
        try {
            $this->feeder->hello();
            while (true) {
                $frame = $this->feeder->next(1.0);
                if ($this->feeder->stopping()) {
                    return 0; // unstarted prefetched jobs are returned by the master, uncharged
                }
                if (!$this->feeder->masterAlive()) {
                    fwrite(STDERR, "drover worker: the master (pid {$this->masterPid}) is gone; exiting\n");
                    return 1;
                }
                if ($frame !== null) {
                    $this->runJob($frame);
                }
            }
        } catch (ChannelClosed $e) {
            fwrite(STDERR, $e->getMessage() . "; exiting\n");
            return 1;
        }
    }

    /** @param array<string, mixed> $frame */
    private function runJob(array $frame): void
    {
        if (!$this->feeder->start($frame)) {
            return; // its queue was paused meanwhile, or this worker told to pause or stop
        }
        $job = Job::fromFrame($frame);
        try {
            ($this->handler)($job);
            $this->feeder->done();
        } catch (ReleaseJob $r) {
            $this->feeder->release($r->delaySeconds);
        } catch (ChannelClosed $e) {
            throw $e;
        } catch (\Throwable $e) {
            if ($job->hasAttemptsLeft()) {
                $this->feeder->release(0);
            } else {
                $this->feeder->fail(get_class($e) . ': ' . $e->getMessage() . "\n" . $e->getTraceAsString());
            }
        }
    }
}
