<?php

namespace Drover\Workflow;

/**
 * One node of a workflow's graph, as drover.workflow_nodes holds it: its name, the nodes it runs
 * after, what its failure does to the nodes after it, what it waits for once they ended (a time, a
 * signal), its condition, and how many steps it has — one job (`add`), many (`addMany`), or one
 * sub-workflow (`addWorkflow`, which counts as one step: the sub-workflow's end is its end).
 */
final class GraphNode
{
    /** Its failure cancels every node that depends on it, transitively (the default). */
    public const CANCEL = 'cancel';

    /** Its failure satisfies the nodes after it, which run as if it had completed. */
    public const CONTINUE = 'continue';

    /**
     * @param list<string> $deps the nodes it runs after
     * @param float|null $waitSecs seconds after its dependencies ended before its steps run
     * @param string|null $signal the signal it waits for once its dependencies ended
     * @param bool $subWorkflow whether it stands for a sub-workflow (then $members is 1)
     * @param int $members its steps (jobs); a node of none completes as soon as it is released
     */
    public function __construct(
        public readonly string $name,
        public readonly array $deps = [],
        public readonly string $onFailure = self::CANCEL,
        public readonly ?float $waitSecs = null,
        public readonly ?string $signal = null,
        public readonly ?Condition $condition = null,
        public readonly bool $subWorkflow = false,
        public readonly int $members = 1,
    ) {
    }

    /**
     * As drover.workflow_create takes one node: {name, deps, on_failure, wait_secs, wait_signal,
     * condition}.
     *
     * @return array<string, mixed>
     */
    public function toArray(): array
    {
        return [
            'name' => $this->name,
            'deps' => $this->deps,
            'on_failure' => $this->onFailure,
            'wait_secs' => $this->waitSecs,
            'wait_signal' => $this->signal,
            'condition' => $this->condition?->toArray(),
        ];
    }
}
