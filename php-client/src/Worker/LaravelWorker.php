<?php

namespace Drover\Worker;

use Drover\Jobs\DroverJob;
use Illuminate\Queue\MaxAttemptsExceededException;
use Illuminate\Queue\Worker;

/**
 * Laravel's own worker — events, tries, backoff, maxExceptions, retryUntil, maintenance mode,
 * queue:restart, memory / max_jobs / max_time limits — fed by the drover master instead of
 * polling a queue. Timeouts are enforced by the master, which kills the worker and settles the
 * job at once, so Laravel's in-process alarm is not armed.
 */
class LaravelWorker extends Worker
{
    protected Feeder $feeder;

    public function setFeeder(Feeder $feeder): static
    {
        $this->feeder = $feeder;
        return $this;
    }

    protected function getNextJob($connection, $queue)
    {
        // A job that ended without delete/release/fail (it should not happen): put it back.
        if ($this->feeder->current() !== null) {
            $this->feeder->release(0);
        }
        $frame = $this->feeder->next(1.0);
        if ($this->feeder->stopping()) {
            $this->shouldQuit = true;
            return null;
        }
        if (!$this->feeder->masterAlive()) {
            fwrite(STDERR, "drover worker: the master is gone; exiting\n");
            $this->kill(static::EXIT_ERROR);
        }
        if ($frame === null) {
            return null;
        }
        $job = new DroverJob($this->manager->getContainer(), $this->feeder, $frame, $connection->getConnectionName());
        $this->feeder->started($frame);
        if (($reason = $job->failureRequested()) !== null) {
            // The master killed this job's previous worker on a timeout and Laravel's rules say it
            // fails: run the failure path (failed() hook, JobFailed, the failer), not the job.
            $this->failJob($job, $this->failureFor($job, $reason));
            return null;
        }
        return $job;
    }

    private function failureFor(DroverJob $job, string $reason): \Throwable
    {
        $timeoutClass = 'Illuminate\Queue\TimeoutExceededException';
        if ($reason === 'timeout' && class_exists($timeoutClass) && method_exists($timeoutClass, 'forJob')) {
            return $timeoutClass::forJob($job);
        }
        return new MaxAttemptsExceededException(
            $job->resolveName() . ' has been attempted too many times or run too long. The job may have previously timed out.'
        );
    }

    /** The master enforces timeouts; no alarm in the worker. */
    protected function registerTimeoutHandler($job, $options)
    {
    }

    protected function resetTimeoutHandler()
    {
    }

    public function sleep($seconds)
    {
        // Waiting for work happens in getNextJob (blocked on the socket); only real pauses sleep.
        if ($seconds > 0) {
            parent::sleep($seconds);
        }
    }
}
