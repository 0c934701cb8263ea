<?php

namespace Drover\Worker;

use Drover\Jobs\DroverJob;
use Illuminate\Queue\MaxAttemptsExceededException;
use Illuminate\Queue\Worker;
use Illuminate\Queue\WorkerOptions;

/**
 * Laravel's own worker — events, tries, backoff, maxExceptions, retryUntil, maintenance mode,
 * queue:restart, memory / max_jobs / max_time limits — fed by the drover master instead of
 * polling a queue. Timeouts are enforced by the master: it kills the worker, and the next worker
 * gets the job with `fail: "timeout"` and applies Laravel's timeout rules to it (what Laravel's
 * alarm handler does) instead of running it.
 */
class LaravelWorker extends Worker
{
    protected Feeder $feeder;

    /** The options of the running daemon (the timeout rules need tries and backoff). */
    protected ?WorkerOptions $options = null;

    /** The job handed to Laravel last, to check it got an outcome. */
    protected ?DroverJob $currentJob = null;

    /** Seconds to sleep per round while paused (maintenance mode, SIGUSR2). */
    protected int $pauseSleep = 1;

    public function setFeeder(Feeder $feeder): static
    {
        $this->feeder = $feeder;
        return $this;
    }

    public function setPauseSleep(int $seconds): static
    {
        $this->pauseSleep = max(1, $seconds);
        return $this;
    }

    public function daemon($connectionName, $queue, WorkerOptions $options)
    {
        $this->options = $options;
        return parent::daemon($connectionName, $queue, $options);
    }

    protected function getNextJob($connection, $queue)
    {
        $this->settleLeftover();
        if (method_exists($this, 'raiseBeforeJobPopEvent')) {
            $this->raiseBeforeJobPopEvent($connection->getConnectionName());
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
        $this->currentJob = $job;
        if (method_exists($this, 'raiseAfterJobPopEvent')) {
            $this->raiseAfterJobPopEvent($connection->getConnectionName(), $job);
        }
        if ($job->failureRequested() !== null) {
            try {
                $this->handleTimedOut($job);
            } catch (\Throwable $e) {
                $this->exceptions->report($e);
            }
            return null;
        }
        return $job;
    }

    /**
     * A job that ended without delete/release/fail reaching the master: a failed job whose failure
     * was not logged (a JobFailed listener threw) is reported failed; anything else goes back with
     * its backoff. Never a tight retry loop.
     */
    protected function settleLeftover(): void
    {
        if ($this->feeder->current() === null || $this->currentJob === null) {
            return;
        }
        if ($this->currentJob->hasFailed()) {
            $this->feeder->fail('drover: the job failed but its failure was not logged (a JobFailed listener or failed() threw; see the application log)');
        } else {
            $this->feeder->release((float) $this->calculateBackoff($this->currentJob, $this->options ?? new WorkerOptions()));
        }
        $this->currentJob = null;
    }

    /** Laravel's timeout handler, run for a job whose previous worker the master killed on a timeout. */
    protected function handleTimedOut(DroverJob $job): void
    {
        $options = $this->options ?? new WorkerOptions();
        $e = $this->timeoutException($job);
        $timedOut = 'Illuminate\Queue\Events\JobTimedOut';
        if (class_exists($timedOut)) {
            $this->events->dispatch(new $timedOut($job->getConnectionName(), $job));
        }
        $this->markJobAsFailedIfWillExceedMaxAttempts($job->getConnectionName(), $job, (int) $options->maxTries, $e);
        $this->markJobAsFailedIfWillExceedMaxExceptions($job->getConnectionName(), $job, $e);
        $this->markJobAsFailedIfItShouldFailOnTimeout($job->getConnectionName(), $job, $e);
        if (!$job->hasFailed()) {
            $job->release($this->calculateBackoff($job, $options));
        }
    }

    protected function timeoutException(DroverJob $job): \Throwable
    {
        $class = 'Illuminate\Queue\TimeoutExceededException';
        if (class_exists($class)) {
            return method_exists($class, 'forJob') ? $class::forJob($job) : new $class($job->resolveName() . ' has timed out.');
        }
        // Laravel 8 records a timeout as this.
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

    /** Paused (maintenance mode, SIGUSR2): keep reading stop / pause / resume from the master. */
    protected function pauseWorker(WorkerOptions $options, $lastRestart)
    {
        $this->feeder->poll();
        if ($this->feeder->stopping()) {
            $this->shouldQuit = true;
        } else {
            parent::sleep($this->pauseSleep);
        }
        return $this->stopIfNecessary($options, $lastRestart);
    }

    public function sleep($seconds)
    {
        // Waiting for work happens in getNextJob (blocked on the socket); only real pauses sleep.
        if ($seconds > 0) {
            parent::sleep($seconds);
        }
    }
}
