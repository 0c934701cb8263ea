<?php

namespace Drover\Workflow;

use Drover\Jobs\DroverJob;

/**
 * The workflow a running job is a step of (InteractsWithWorkflow::workflow()): which workflow,
 * which step (node) and which of its jobs (member); the results the steps before it recorded; the
 * signals sent to it. Looked up once per attempt (drover.workflow_of, on the first call), on the
 * connection drover's jobs live in; results and signals are read when asked for.
 *
 * Results and signal data are JSON as recorded, decoded to arrays (a recorded object comes back as
 * an associative array), strings, numbers, booleans or null.
 */
final class WorkflowContext
{
    /**
     * The context of each DroverJob looked up so far (false: it is no workflow's step), for as
     * long as the job object lives (one attempt).
     *
     * @var \WeakMap<DroverJob, self|false>|null
     */
    private static ?\WeakMap $byJob = null;

    /**
     * Not the DroverJob itself: a WeakMap value that refers to its own key keeps both alive for
     * good before PHP 8.3, which in a worker would keep every job it ran.
     */
    private function __construct(
        private readonly Workflows $workflows,
        private readonly int $jobId,
        private readonly int $token,
        private readonly string $jobName,
        private readonly int $id,
        private readonly string $name,
        private readonly string $node,
        private readonly int $member,
    ) {
    }

    /** The workflow $job is a step of, or null (it is none's, or was made without the worker's connection). */
    public static function of(DroverJob $job): ?self
    {
        self::$byJob ??= new \WeakMap();
        if (!isset(self::$byJob[$job])) {
            $db = $job->database();
            $workflows = $db === null ? null : new Workflows($db);
            $row = $workflows?->of((int) $job->getJobId());
            self::$byJob[$job] = $row === null ? false : new self(
                $workflows, (int) $job->getJobId(), $job->leaseToken(), (string) $job->resolveName(),
                (int) $row->wf, (string) $row->name, (string) $row->node, (int) $row->member,
            );
        }
        return self::$byJob[$job] ?: null;
    }

    /** The workflow's id (drover.workflows; the console's `/drover/workflows/{id}`). */
    public function id(): int
    {
        return $this->id;
    }

    /** The workflow's name, as dispatched (`Drover::workflow($name)`). */
    public function name(): string
    {
        return $this->name;
    }

    /** This job's step: the name it was added under. */
    public function node(): string
    {
        return $this->node;
    }

    /** This job's index among its step's jobs (addMany), from 0; 0 for a step of one job. */
    public function member(): int
    {
        return $this->member;
    }

    /**
     * The result step $node recorded — its first job's that recorded one, for a step of many —
     * decoded; null when none did.
     */
    public function result(string $node): mixed
    {
        $results = $this->workflows->results($this->id, $node);
        return $results === [] ? null : self::decoded($results[0], "step \"$node\"'s result");
    }

    /**
     * The results step $node's jobs recorded, decoded, in their order (addMany's; a
     * sub-workflow's steps' for a sub-workflow step); a job that recorded none has no entry.
     *
     * @return list<mixed>
     */
    public function results(string $node): array
    {
        return array_map(fn (string $json) => self::decoded($json, "step \"$node\"'s results"), $this->workflows->results($this->id, $node));
    }

    /** The data signal $name was sent to this workflow with, decoded; null when it was not sent (or with none). */
    public function signal(string $name): mixed
    {
        $data = $this->workflows->signalData($this->id, $name);
        return $data === null ? null : self::decoded($data, "signal '$name'");
    }

    /**
     * Records $value, JSON-encoded, as this job's result, fenced by its lease: on the connection
     * drover's jobs live in, so inside the job's open transaction there (a CompletesInTransaction
     * job's, or completeWithin()'s) it commits or rolls back with it. A second call replaces the
     * first. Whether it was recorded: false when the job's lease was taken back (it runs
     * elsewhere now, and what this attempt records does not count).
     *
     * @throws \InvalidArgumentException for a value that cannot be JSON, or is over 1 MiB of it
     */
    public function recordResult(mixed $value): bool
    {
        $where = "drover: job {$this->jobId} ({$this->jobName}), step \"{$this->node}\" of workflow \"{$this->name}\"";
        try {
            $json = json_encode($value, JSON_THROW_ON_ERROR | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_PRESERVE_ZERO_FRACTION);
        } catch (\JsonException $e) {
            throw new \InvalidArgumentException("$where: recordResult() was given a value that cannot be JSON ({$e->getMessage()}); record arrays, strings, numbers, booleans or null", 0, $e);
        }
        if (strlen($json) > Workflows::MAX_DATA) {
            throw new \InvalidArgumentException("$where: recordResult() was given " . strlen($json) . ' bytes of JSON; a result is at most 1 MiB: record a key to where the data is instead');
        }
        return $this->workflows->recordResult($this->jobId, $this->token, $json);
    }

    private static function decoded(string $json, string $what): mixed
    {
        try {
            return json_decode($json, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
        } catch (\JsonException $e) {
            throw new \UnexpectedValueException("drover: $what in drover.workflow_steps is not JSON ({$e->getMessage()})", 0, $e);
        }
    }
}
