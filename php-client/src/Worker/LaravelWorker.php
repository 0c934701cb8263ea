<?php

namespace Drover\Worker;

use Drover\DroverQueue;
use Drover\Jobs\Completions;
use Drover\Jobs\DroverJob;
use Drover\Jobs\LeaseTakenBack;
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

    /** Watches the loaded code (queue:listen on a drover connection): null, no watch. */
    protected ?CodeWatch $codeWatch = null;

    public function setCodeWatch(?CodeWatch $watch): static
    {
        $this->codeWatch = $watch;
        return $this;
    }

    public function setPauseSleep(int $seconds): static
    {
        $this->pauseSleep = max(1, $seconds);
        return $this;
    }

    /**
     * How long one read of queue:restart's timestamp is used. Laravel reads it from the cache
     * after every job: a file read with the file store, a round trip with Redis or the database.
     * Read at most once a second, a worker still exits after the job it is running once the
     * restart is at least a second old, which an idle queue:work (3 s between polls) never beats.
     */
    private const RESTART_READ_EVERY_NS = 1_000_000_000;

    /** When the timestamp was last read (hrtime, ns); null before the first read. */
    private ?int $restartReadAt = null;

    /** What that read gave (Laravel's timestamp, or null when no restart was ever asked for). */
    private mixed $restartSeen = null;

    protected function getTimestampOfLastQueueRestart()
    {
        $now = hrtime(true);
        if ($this->restartReadAt === null || $now - $this->restartReadAt >= self::RESTART_READ_EVERY_NS) {
            $this->restartSeen = parent::getTimestampOfLastQueueRestart();
            $this->restartReadAt = $now;
        }
        return $this->restartSeen;
    }

    /**
     * Laravel's `queue:restart` (its cache key changed since this worker started): under a master
     * that reloads on it, the worker tells the master and goes on — the master starts a new zygote
     * from the release the application's path points to now and replaces every worker one by one,
     * so the new release's code runs after a symlinked deploy (a worker that exited would be
     * forked again from the old zygote, which booted the old release). Under an older master it
     * exits, as Laravel's worker does.
     */
    protected function queueShouldRestart($lastRestart)
    {
        $now = $this->getTimestampOfLastQueueRestart();
        if ($now == $lastRestart) {
            return false;
        }
        if (!$this->feeder->reloadsOnQueueRestart()) {
            return true;
        }
        $this->feeder->queueRestart(is_numeric($now) ? (int) $now : 0);
        return false;
    }

    public function daemon($connectionName, $queue, WorkerOptions $options)
    {
        $this->options = $options;
        return parent::daemon($connectionName, $queue, $options);
    }

    /**
     * Why a job's raw payload cannot be run — not JSON PHP reads (nested past json_decode's
     * depth, a lone UTF-16 surrogate, truncated), or JSON but not an object — or null when it
     * can (an object without Laravel's fields fails as Laravel fails it).
     */
    public static function unreadablePayload(string $raw): ?string
    {
        $decoded = json_decode($raw, true);
        if (json_last_error() !== JSON_ERROR_NONE) {
            return 'its payload is not JSON this worker can read (' . json_last_error_msg() . '), so it was failed without running; the payload is kept in drover.failed_jobs';
        }
        if (!is_array($decoded) || array_is_list($decoded)) {
            return 'its payload is JSON but not an object, as a Laravel job\'s is, so it was failed without running; the payload is kept in drover.failed_jobs';
        }
        return null;
    }

    protected function getNextJob($connection, $queue)
    {
        $this->settleLeftover();
        if (method_exists($this, 'raiseBeforeJobPopEvent')) {
            // Laravel 12 passes the queue too; older versions ignore the extra argument.
            $this->raiseBeforeJobPopEvent($connection->getConnectionName(), $queue);
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
        if ($this->codeWatch !== null && ($changed = $this->codeWatch->changed()) !== null) {
            // Edited since this worker booted: a fresh worker runs the job with the new code.
            fwrite(STDERR, "drover worker: $changed changed since this worker started; handing job {$frame['job']} to a fresh worker\n");
            $this->feeder->giveBackAndStop($frame);
            $this->shouldQuit = true;
            return null;
        }
        if (!$this->feeder->start($frame)) {
            return null; // its queue was paused meanwhile, or this worker told to pause or stop
        }
        $job = new DroverJob($this->manager->getContainer(), $this->feeder, $frame, $connection->getConnectionName(), $this->completions($connection));
        $payload = $job->payload(); // decoded once, for the whole way through the worker
        if ((!is_array($payload) || array_is_list($payload)) && ($unreadable = self::unreadablePayload($job->getRawBody())) !== null) {
            // Nothing of Laravel's can run it, name it, or log it in its failer (each reads the
            // payload): the master keeps it, raw, in drover.failed_jobs.
            fwrite(STDERR, "drover worker: job {$frame['job']}: $unreadable\n");
            $this->feeder->fail("drover: $unreadable");
            return null;
        }
        $this->currentJob = $job;
        if (method_exists($this, 'raiseAfterJobPopEvent')) {
            $this->raiseAfterJobPopEvent($connection->getConnectionName(), $job);
        }
        if (($requested = $job->failureRequested()) !== null) {
            try {
                $stopped = JobStopped::fromRequest($requested, $job);
                $stopped === null ? $this->handleTimedOut($job) : $this->handleStopped($job, $stopped);
            } catch (\Throwable $e) {
                $this->exceptions->report($e);
            }
            return null;
        }
        // The overlap locks its previous attempt left when its worker died (StaleLocks).
        foreach (StaleLocks::releaseAfterDeath($job, $this->manager->getContainer()) as $key) {
            fwrite(STDERR, "drover worker: job {$frame['job']}'s previous attempt died holding the WithoutOverlapping lock $key; forced it free\n");
        }
        return $job;
    }

    /** The completions of this worker's jobs (completions()), resolved once. */
    private ?Completions $completions = null;

    /**
     * Exactly once for what a job writes (Jobs\Completions): on the database connection drover's
     * jobs live in, the drover queue connection's, resolved once per worker.
     */
    protected function completions(mixed $connection): ?Completions
    {
        if ($this->completions === null && $connection instanceof DroverQueue) {
            $this->completions = new Completions($connection->getDatabase());
        }
        return $this->completions;
    }

    /**
     * Laravel's handling of a job that threw, but for two cases where the job is not the
     * worker's to retry or fail:
     * - its lease was taken back (LeaseTakenBack: the database refused its completion, and
     *   everything it wrote in that transaction rolled back): no failure path (no failed_jobs row,
     *   no failed(), no JobExceptionOccurred), the job is reported released at once (the master's
     *   settle matches nothing: the job is held elsewhere now), and it is logged;
     * - its completion committed before it threw (completeWithin() in a transaction that
     *   committed): it is complete; reported `done`, the exception only reported.
     * Either way the exception goes on to the application's exception handler (Worker::runJob).
     */
    protected function handleJobException($connectionName, $job, WorkerOptions $options, \Throwable $e)
    {
        if ($job instanceof DroverJob) {
            $taken = LeaseTakenBack::from($e, $job);
            if ($taken !== null) {
                fwrite(STDERR, 'drover worker: ' . $taken->getMessage() . "\n");
                $job->release(0);
                throw $taken;
            }
            if ($job->completedWithin()) {
                fwrite(STDERR, "drover worker: job {$job->getJobId()} ({$job->resolveName()}) threw after its completion committed; it is complete: " . get_class($e) . ': ' . $e->getMessage() . "\n");
                if (!$job->isDeleted()) {
                    $job->delete();
                }
                $job->getFeeder()->done(within: true); // nothing if delete() said it
                throw $e;
            }
        }
        return parent::handleJobException($connectionName, $job, $options, $e);
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
        // The order of Laravel's alarm handler: the failure rules, then JobTimedOut (10+).
        $this->markJobAsFailedIfWillExceedMaxAttempts($job->getConnectionName(), $job, (int) $options->maxTries, $e);
        $this->markJobAsFailedIfWillExceedMaxExceptions($job->getConnectionName(), $job, $e);
        $this->markJobAsFailedIfItShouldFailOnTimeout($job->getConnectionName(), $job, $e);
        $timedOut = 'Illuminate\Queue\Events\JobTimedOut';
        if (class_exists($timedOut)) {
            $this->events->dispatch(new $timedOut($job->getConnectionName(), $job));
        }
        if (!$job->hasFailed()) {
            $job->release($this->calculateBackoff($job, $options));
        }
    }

    /**
     * A job an operator stopped while it ran (the console's Stop, `drover:stop-job`): its worker
     * was killed, and this one settles it as they asked — failed through the application's own
     * path (failed() called, JobFailed, Laravel's failer), whatever attempts it has left; or
     * released to run again at once (the stopped attempt counted, as a timeout's is).
     */
    protected function handleStopped(DroverJob $job, JobStopped $stopped): void
    {
        if ($stopped->release) {
            $job->release(0);
            return;
        }
        $this->failJob($job, $stopped);
    }

    protected function timeoutException(DroverJob $job): \Throwable
    {
        if (method_exists($this, 'timeoutExceededException')) {
            return $this->timeoutExceededException($job); // Laravel 11+
        }
        $class = 'Illuminate\Queue\TimeoutExceededException';
        if (class_exists($class)) {
            return method_exists($class, 'forJob') ? $class::forJob($job) : new $class($job->resolveName() . ' has timed out.');
        }
        // Laravel 8 records a timeout as this.
        return new MaxAttemptsExceededException(
            $job->resolveName() . ' has been attempted too many times or run too long. The job may have previously timed out.'
        );
    }

    /**
     * Laravel's "attempted too many times", naming how the previous attempt ended when its worker
     * died running it (a crash, the OOM killer): the failer, `queue:failed` and `JobFailed` then
     * say why, instead of only that the tries ran out.
     */
    protected function maxAttemptsExceededException($job)
    {
        $e = parent::maxAttemptsExceededException($job);
        if (!$job instanceof DroverJob || ($died = $job->previousDeath()) === null) {
            return $e;
        }
        $named = new MaxAttemptsExceededException(rtrim($e->getMessage(), '.') . ". Its last attempt ended when the worker running it $died.");
        if (property_exists($e, 'job')) {
            $named->job = $job; // Laravel 11+ keeps the job on the exception
        }
        return $named;
    }

    /** The master enforces timeouts; no alarm in the worker. */
    protected function registerTimeoutHandler($job, $options)
    {
    }

    protected function resetTimeoutHandler()
    {
    }

    /**
     * Paused (maintenance mode, SIGUSR2): keep reading stop / pause / resume from the master.
     *
     * Laravel 8 passes ($options, $lastRestart); Laravel 12 adds the daemon's progress
     * ($startTime, $jobsProcessed, $lastJobProcessedAt) so max_time and max_jobs still stop a paused
     * worker. The variadic accepts both, and the progress goes on to whichever stopIfNecessary this
     * Laravel has, by parameter name.
     */
    protected function pauseWorker(WorkerOptions $options, $lastRestart, ...$progress)
    {
        // A job that ended without an outcome is settled now, not after the pause: it would
        // otherwise stay held (and renewed) for as long as maintenance mode lasts.
        $this->settleLeftover();
        $this->feeder->poll();
        if ($this->feeder->stopping()) {
            $this->shouldQuit = true;
        } else {
            parent::sleep($this->pauseSleep);
        }
        return $this->stopIfNecessary(...$this->knownArguments('stopIfNecessary', [
            'options' => $options,
            'lastRestart' => $lastRestart,
            'startTime' => $progress[0] ?? 0,
            'jobsProcessed' => $progress[1] ?? 0,
            'job' => null,
            'lastJobProcessedAt' => $progress[2] ?? null,
        ]));
    }

    /**
     * The named arguments that this Laravel's Worker::$method declares, in its order.
     *
     * @param array<string, mixed> $arguments
     * @return array<string, mixed>
     */
    private function knownArguments(string $method, array $arguments): array
    {
        static $names = [];
        $names[$method] ??= array_map(
            fn (\ReflectionParameter $p) => $p->getName(),
            (new \ReflectionMethod(Worker::class, $method))->getParameters(),
        );
        return array_intersect_key($arguments, array_flip($names[$method]));
    }

    public function sleep($seconds)
    {
        // Waiting for work happens in getNextJob (blocked on the socket); only real pauses sleep.
        if ($seconds > 0) {
            parent::sleep($seconds);
        }
    }
}
