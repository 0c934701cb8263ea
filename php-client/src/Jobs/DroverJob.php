<?php

namespace Drover\Jobs;

use Drover\Worker\Feeder;
use Illuminate\Container\Container;
use Illuminate\Contracts\Queue\Job as JobContract;
use Illuminate\Queue\Jobs\Job;

/**
 * A Laravel job pushed by the drover master. delete(), release() and fail() report to the master
 * instead of writing to a table; the master settles the lease.
 */
class DroverJob extends Job implements JobContract
{
    /**
     * @param array<string, mixed> $frame the master's `job` frame
     */
    public function __construct(
        Container $container,
        protected Feeder $feeder,
        protected array $frame,
        string $connectionName,
    ) {
        $this->container = $container;
        $this->connectionName = $connectionName;
        $this->queue = $frame['queue'];
    }

    public function getJobId()
    {
        return (string) $this->frame['job'];
    }

    public function getRawBody()
    {
        return $this->frame['payload'];
    }

    /**
     * The payload, decoded once. Laravel's Job decodes the raw body on every call, and a job's
     * way through the worker calls it several times (its name, tries, timeout, backoff, events,
     * the handler). The body of a drover job never changes, and an array is handed out as a copy.
     */
    public function payload()
    {
        if (!$this->payloadDecoded) {
            $this->decodedPayload = json_decode($this->getRawBody(), true);
            $this->payloadDecoded = true;
        }
        return $this->decodedPayload;
    }

    /** What payload() decoded (whatever json_decode gave, null included). */
    private mixed $decodedPayload = null;

    /** payload() has decoded the body. */
    private bool $payloadDecoded = false;

    public function attempts()
    {
        return (int) $this->frame['attempts'];
    }

    /** Set while Laravel's failure path runs, so its delete() is not reported as done. */
    protected bool $failing = false;

    public function fail($e = null)
    {
        $this->failing = true;
        parent::fail($e);
    }

    /** Completed (or failed: then the failure is reported once the failer has logged it). */
    public function delete()
    {
        parent::delete();
        if (!$this->failing && !$this->hasFailed()) {
            $this->feeder->done();
        }
    }

    public function release($delay = 0)
    {
        parent::release($delay);
        $this->feeder->release((float) $this->secondsUntil($delay));
    }

    /** Called after Laravel's failer logged the failure: the master deletes the job. */
    public function reportFailure(\Throwable $e): void
    {
        $this->feeder->fail(get_class($e) . ': ' . $e->getMessage(), logged: true);
    }

    public function getFeeder(): Feeder
    {
        return $this->feeder;
    }

    /**
     * How the worker running this job's previous attempt died (`was killed by SIGSEGV`), if that
     * is how the attempt ended: named when Laravel's tries fail the job now.
     */
    public function previousDeath(): ?string
    {
        $died = $this->frame['died'] ?? null;
        return is_string($died) ? $died : null;
    }

    /** Why the master wants this job failed without running it (`timeout`, `max_attempts`), if so. */
    public function failureRequested(): ?string
    {
        return $this->frame['fail'] ?? null;
    }
}
