<?php

namespace Drover\Workflow;

/**
 * What happens to a workflow, as the state machine (Graph::next) takes it: it starts; a step of a
 * node ends (its job left drover.jobs completed, failed or deleted — for a sub-workflow node, the
 * sub-workflow ended); a signal is sent; a failed step is retried; the workflow is cancelled.
 * The database's functions each stand for one (broker/migrations/0016_workflows.sql).
 */
final class GraphEvent
{
    public const START = 'start';
    public const STEP_ENDED = 'stepEnded';
    public const SIGNAL = 'signal';
    public const RETRY = 'retry';
    public const CANCEL = 'cancel';

    /** The outcomes of a step's end (drover.wf_apply). */
    public const OUTCOMES = ['completed', 'failed', 'deleted'];

    private function __construct(
        public readonly string $kind,
        /** The node (stepEnded, retry). */
        public readonly ?string $node = null,
        /** completed, failed or deleted (stepEnded). */
        public readonly ?string $outcome = null,
        /** The step's index in its node (stepEnded). */
        public readonly int $member = 0,
        /** The JSON the step recorded (recordResult), null for none (stepEnded). */
        public readonly ?string $result = null,
        /** The signal's name (signal). */
        public readonly ?string $signal = null,
    ) {
    }

    /** The workflow starts (drover.workflow_start): its nodes without dependencies are released. */
    public static function start(): self
    {
        return new self(self::START);
    }

    /**
     * A step of $node ended with $outcome (the trigger on drover.jobs: drover.wf_apply), having
     * recorded $result (JSON text) or nothing.
     */
    public static function stepEnded(string $node, string $outcome, int $member = 0, ?string $result = null): self
    {
        if (!in_array($outcome, self::OUTCOMES, true)) {
            throw new \InvalidArgumentException("drover: a step ends completed, failed or deleted, not '$outcome'");
        }
        return new self(self::STEP_ENDED, node: $node, outcome: $outcome, member: $member, result: $result);
    }

    /** Signal $name is sent to the workflow (drover.workflow_signal). */
    public static function signal(string $name): self
    {
        return new self(self::SIGNAL, signal: $name);
    }

    /** A failed step of $node is retried (drover.workflow_retry_step). */
    public static function retry(string $node): self
    {
        return new self(self::RETRY, node: $node);
    }

    /** The workflow is cancelled (drover.workflow_cancel). */
    public static function cancel(): self
    {
        return new self(self::CANCEL);
    }
}
