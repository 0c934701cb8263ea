<?php

namespace Drover\Workflow;

use Drover\Jobs\DroverJob;

/**
 * A job's view of the workflow it is a step of (docs/workflows.md), for a job class that uses
 * Laravel's InteractsWithQueue (`$this->job` is then the DroverJob the drover worker runs):
 *
 *     public function handle(): void
 *     {
 *         $rows = $this->workflow()->result('parse')['rows'];
 *         $this->recordResult(['sent' => $this->send($rows)]);
 *     }
 *
 * Outside a drover worker (the sync driver, another queue connection, a test calling handle()),
 * or run by one but not as a workflow's step, workflow() is null and recordResult() throws,
 * saying so.
 */
trait InteractsWithWorkflow
{
    /** The workflow this job is a step of, or null when it is none's (looked up once per attempt). */
    public function workflow(): ?WorkflowContext
    {
        $job = $this->job ?? null;
        return $job instanceof DroverJob ? WorkflowContext::of($job) : null;
    }

    /**
     * Records $value (JSON-encoded) as this step's result, for the steps after it
     * (WorkflowContext::result()) and their conditions (`when:`): fenced by the job's lease, and on
     * the connection drover's jobs live in — inside a CompletesInTransaction job's transaction, or
     * the one it calls completeWithin() in, it commits or rolls back with it. A second call
     * replaces the first. Whether it was recorded (false: the job's lease was taken back).
     *
     * @throws \LogicException when the job is not running as a workflow's step
     * @throws \InvalidArgumentException for a value that cannot be JSON, or is over 1 MiB of it
     */
    public function recordResult(mixed $value): bool
    {
        $workflow = $this->workflow();
        if ($workflow === null) {
            $job = $this->job ?? null;
            throw new \LogicException('drover: ' . static::class . ' called recordResult() but is not running as a step of a workflow ('
                . ($job instanceof DroverJob ? "drover job {$job->getJobId()} is none's" : 'it is not run by a drover worker') . '); dispatch it with Drover::workflow(...)->add(...), or check $this->workflow() !== null first');
        }
        return $workflow->recordResult($value);
    }
}
