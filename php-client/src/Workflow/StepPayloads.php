<?php

namespace Drover\Workflow;

use Drover\DroverQueue;
use Drover\Queue\GroupOptions;
use Drover\Queue\JobLimits;
use Illuminate\Contracts\Queue\ShouldBeUnique;
use Illuminate\Queue\CallQueuedClosure;

/**
 * A job as a workflow's step: its queue and the payload drover.workflow_add_steps stores — the
 * payload the drover queue connection's push() makes (DroverQueue::payloadFor: Laravel's own,
 * with the job's tags and trace context), so that `drover:work` runs the step unchanged once its
 * node is released, with Laravel's tries, backoff, timeout, middleware and failed().
 *
 * What a step cannot have in this release is refused here, before anything is written, naming the
 * workflow, the step, the job and what to do instead. Each is read the way DroverQueue reads it
 * at a push:
 *
 * - a message group (onGroup(), `$messageGroup`, messageGroup()): a step reaches drover.jobs
 *   without passing drover.enqueue, so no group would order it;
 * - a deduplication id (withDeduplicator(), deduplicationId()): nothing would check it;
 * - limits (WithoutOverlapping that releases, RateLimited, LimitConcurrency, LimitRate): nothing
 *   would admit it under them;
 * - a fair key or weight (fairKey, fairWeight), or a queue declared fair (drover.fair): its
 *   turn would not be taken fairly, and untagged it would wait behind every tagged job;
 * - ShouldBeUnique: its lock is taken by Laravel's dispatcher, which a step does not go through
 *   (a unique workflow is ->unique());
 * - a delay (delay()): a step waits with the node's `wait:`;
 * - another queue connection (onConnection()): every step is on the workflow's.
 */
final class StepPayloads
{
    public function __construct(private readonly DroverQueue $queue, private readonly string $connection)
    {
    }

    /**
     * Step $step of workflow $workflow: its queue — the job's own ($job->queue, onQueue()) or the
     * connection's default — and its payload. A closure is queued as Laravel's dispatcher queues
     * one (CallQueuedClosure).
     *
     * @return array{queue: string, payload: string}
     * @throws InvalidWorkflow naming what the step cannot have, and the fix
     */
    public function of(object $job, string $workflow, string $step): array
    {
        if ($job instanceof \Closure) {
            $job = CallQueuedClosure::create($job);
        }
        $queue = $this->queue->getQueue(self::text($job->queue ?? null));
        $this->refuseWhatAStepCannotHave($job, $queue, "drover: workflow \"$workflow\": step \"$step\" (" . get_class($job) . ')');
        return ['queue' => $queue, 'payload' => $this->queue->payloadFor($job, $queue)];
    }

    private function refuseWhatAStepCannotHave(object $job, string $queue, string $step): void
    {
        $group = GroupOptions::ofJob($job, $queue, [])->group;
        if ($group !== null) {
            throw new InvalidWorkflow("$step is in message group '$group' (onGroup / messageGroup); a workflow's steps cannot be grouped in this release: drop the group, and order the steps with after:");
        }
        if (GroupOptions::hasDeduplicator($job)) {
            throw new InvalidWorkflow("$step has a deduplication id (withDeduplicator / deduplicationId()); a workflow's steps are not deduplicated in this release: drop it, and declare the workflow ->unique() to refuse a second one while it runs");
        }
        if (JobLimits::ofJob($job) !== null) {
            throw new InvalidWorkflow("$step has limits (its WithoutOverlapping, RateLimited, LimitConcurrency or LimitRate middleware); a workflow's steps cannot wait for limits in this release: drop that middleware for this job, or dispatch it on its own");
        }
        if (($job->fairKey ?? null) !== null || method_exists($job, 'fairKey') || ($job->fairWeight ?? null) !== null || method_exists($job, 'fairWeight')) {
            throw new InvalidWorkflow("$step names a fair key or weight (fairKey / fairWeight); a workflow's steps take no fair share in this release: drop them for this job");
        }
        if ($this->queue->queueIsFair($queue)) {
            throw new InvalidWorkflow("$step goes to queue '$queue', which is fair (drover.fair in config/drover.php); a workflow's steps take no fair share in this release and would wait behind every job there: put the step on a queue that is not fair (onQueue())");
        }
        if ($job instanceof ShouldBeUnique) {
            throw new InvalidWorkflow("$step is ShouldBeUnique, whose lock Laravel's dispatcher takes and a workflow's step does not go through; drop ShouldBeUnique for this job, and declare the workflow ->unique() instead");
        }
        if (($job->delay ?? null) !== null) {
            throw new InvalidWorkflow("$step has a delay (delay()); a step waits with its node's wait: instead (->add('name', \$job, after: '...', wait: '10 minutes')): drop the delay");
        }
        $connection = self::text($job->connection ?? null);
        if ($connection !== null && $connection !== $this->connection) {
            throw new InvalidWorkflow("$step is on queue connection '$connection' (onConnection()), but the workflow's steps all go through '{$this->connection}': drop onConnection() for this job, or dispatch the workflow ->onConnection('$connection')");
        }
    }

    /** A queue or connection name as Laravel may hold it (a backed enum on Laravel 11+). */
    private static function text(mixed $name): ?string
    {
        if ($name instanceof \BackedEnum) {
            $name = $name->value;
        }
        return $name === null || $name === '' ? null : (string) $name;
    }
}
