<?php

namespace Drover\Workflow;

/**
 * Where a workflow is, as the pure state machine (Graph::next) keeps it — what drover.workflows,
 * drover.workflow_nodes, drover.workflow_signals and the steps' results hold in the database: the
 * workflow's state; each node's state (pending, waiting, running, completed, failed, cancelled,
 * skipped), why it was cancelled or skipped, its steps not yet ended and its failed ones; the
 * signals sent; the results recorded. A value: next() returns a new one.
 */
final class GraphState
{
    /** A node's states that are its end. */
    public const ENDED = ['completed', 'failed', 'cancelled', 'skipped'];

    /**
     * @param string $workflow pending, running, completed, failed or cancelled
     * @param array<string, array{state: string, cause: ?string, left: int, failed: int}> $nodes by name, in declaration order
     * @param list<string> $signals the signals sent, in order
     * @param array<string, array<int, string>> $results by node, the JSON each member recorded
     */
    public function __construct(
        public readonly string $workflow,
        public readonly array $nodes,
        public readonly array $signals = [],
        public readonly array $results = [],
    ) {
    }

    /** Node $name's state. */
    public function state(string $name): string
    {
        return $this->node($name)['state'];
    }

    /** Why node $name was cancelled (the node whose failure did it, or `cancelled`) or skipped (`condition`). */
    public function cause(string $name): ?string
    {
        return $this->node($name)['cause'];
    }

    /** Node $name's steps that have not ended yet. */
    public function left(string $name): int
    {
        return $this->node($name)['left'];
    }

    /**
     * Every node's state by name, and the workflow's under `''`: what the tests compare.
     *
     * @return array<string, string>
     */
    public function states(): array
    {
        return ['' => $this->workflow] + array_map(fn (array $n) => $n['state'], $this->nodes);
    }

    /** @return array{state: string, cause: ?string, left: int, failed: int} */
    private function node(string $name): array
    {
        if (!isset($this->nodes[$name])) {
            throw new \InvalidArgumentException("drover: the workflow has no node \"$name\" (its nodes: " . implode(', ', array_keys($this->nodes)) . ')');
        }
        return $this->nodes[$name];
    }
}
