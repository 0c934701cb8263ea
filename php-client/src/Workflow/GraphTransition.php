<?php

namespace Drover\Workflow;

/**
 * One event being applied to a workflow's state (Graph::next), step by step as the database's
 * functions apply it: each method here stands for the function of broker/migrations/0016_workflows.sql
 * it names, with the same checks in the same order, so that a reader can hold the two side by
 * side. Mutable while the event is applied; state() hands out the result as a GraphState.
 *
 * @internal
 */
final class GraphTransition
{
    private string $workflow;

    /** @var array<string, array{state: string, cause: ?string, left: int, failed: int}> */
    private array $nodes;

    /** @var list<string> */
    private array $signals;

    /** @var array<string, array<int, string>> */
    private array $results;

    /** @var list<GraphAction> */
    private array $actions = [];

    public function __construct(private readonly Graph $graph, GraphState $state)
    {
        $this->workflow = $state->workflow;
        $this->nodes = $state->nodes;
        $this->signals = $state->signals;
        $this->results = $state->results;
    }

    public function state(): GraphState
    {
        return new GraphState($this->workflow, $this->nodes, $this->signals, $this->results);
    }

    /** @return list<GraphAction> */
    public function actions(): array
    {
        return $this->actions;
    }

    /** drover.wf_start: a pending workflow runs; its nodes without dependencies are released. */
    public function start(): void
    {
        if ($this->workflow !== 'pending') {
            return;
        }
        $this->workflow = 'running';
        foreach ($this->graph->nodes as $node) {
            if ($node->deps === [] && $this->nodes[$node->name]['state'] === 'pending') {
                $this->release($node->name);
            }
        }
        $this->finishIfDone();
    }

    /**
     * drover.wf_apply: a step of $node ended. Its result (if it recorded one) is kept whatever the
     * outcome. In a workflow that is not running (cancelled) nothing moves; nor for a node that
     * is not running, or has no step left (an end already applied).
     */
    public function stepEnded(string $node, string $outcome, int $member, ?string $result): void
    {
        $this->graph->node($node);
        if ($result !== null) {
            $this->results[$node][$member] ??= $result;
            ksort($this->results[$node]);
        }
        $n = &$this->nodes[$node];
        if ($this->workflow !== 'running' || $n['state'] !== 'running' || $n['left'] <= 0) {
            return;
        }
        $n['left']--;
        $n['failed'] += $outcome === 'completed' ? 0 : 1;
        if ($n['left'] > 0) {
            return;
        }
        $n['state'] = $n['failed'] > 0 ? 'failed' : 'completed';
        unset($n);
        $this->nodeEnded($node);
    }

    /**
     * drover.workflow_signal: kept (the first of a name), and every node waiting for it released,
     * in declaration order. A workflow that ended takes no signal.
     */
    public function signal(string $name): void
    {
        if (!in_array($this->workflow, ['pending', 'running'], true)) {
            return;
        }
        if (!in_array($name, $this->signals, true)) {
            $this->signals[] = $name;
        }
        foreach ($this->graph->nodes as $node) {
            if ($this->nodes[$node->name]['state'] === 'waiting' && $node->signal === $name) {
                $this->release($node->name);
            }
        }
    }

    /**
     * drover.workflow_retry_step: a failed step of $node runs again. A node that failed runs again,
     * with the nodes its failure cancelled pending again; a workflow that failed runs again. Only
     * while the workflow is running or failed, and $node has a failed step.
     */
    public function retry(string $node): void
    {
        $this->graph->node($node);
        $n = $this->nodes[$node];
        if (!in_array($this->workflow, ['running', 'failed'], true) || $n['failed'] <= 0) {
            return;
        }
        $this->workflow = 'running';
        if ($n['state'] === 'failed') {
            $reopened = [];
            foreach ($this->nodes as $name => $other) {
                if ($other['state'] === 'cancelled' && $other['cause'] === $node) {
                    $this->nodes[$name]['state'] = 'pending';
                    $this->nodes[$name]['cause'] = null;
                    $this->nodes[$name]['left'] = $this->graph->node($name)->members;
                    $this->nodes[$name]['failed'] = 0;
                    $reopened[] = $name;
                }
            }
            if ($reopened !== []) {
                $this->act(GraphAction::reopened($reopened));
            }
            $this->nodes[$node]['state'] = 'running';
        }
        $this->nodes[$node]['left']++;
        $this->nodes[$node]['failed'] = max($this->nodes[$node]['failed'] - 1, 0);
        $this->act(GraphAction::release($node));
    }

    /**
     * drover.workflow_cancel: a workflow not ended is cancelled, with every node not yet running;
     * running steps finish and release nothing.
     */
    public function cancel(): void
    {
        if (!in_array($this->workflow, ['pending', 'running'], true)) {
            return;
        }
        $this->workflow = 'cancelled';
        $cancelled = [];
        foreach ($this->nodes as $name => $n) {
            if (in_array($n['state'], ['pending', 'waiting'], true)) {
                $this->nodes[$name]['state'] = 'cancelled';
                $this->nodes[$name]['cause'] = 'cancelled';
                $cancelled[] = $name;
            }
        }
        if ($cancelled !== []) {
            $this->act(GraphAction::cancelled($cancelled, 'cancelled'));
        }
        $this->act(GraphAction::finished('cancelled'));
    }

    /**
     * drover.wf_release: $node's dependencies are all satisfied. Skipped when its condition is
     * false; waiting when its signal was not sent; else running — its steps go to drover.jobs (or
     * its sub-workflow starts), and a node of no step completes at once.
     */
    private function release(string $name): void
    {
        $node = $this->graph->node($name);
        if (!in_array($this->nodes[$name]['state'], ['pending', 'waiting'], true) || $this->workflow !== 'running') {
            return;
        }
        if ($node->condition !== null && !$node->condition->holds($this->firstResult($node->condition->node))) {
            $this->nodes[$name]['state'] = 'skipped';
            $this->nodes[$name]['cause'] = 'condition';
            $this->act(GraphAction::skip($name));
            $this->nodeEnded($name);
            return;
        }
        if ($node->signal !== null && !in_array($node->signal, $this->signals, true)) {
            $this->nodes[$name]['state'] = 'waiting';
            $this->act(GraphAction::release($name, wait: true));
            return;
        }
        $this->nodes[$name]['state'] = 'running';
        $this->act(GraphAction::release($name));
        if (!$node->subWorkflow && $node->members === 0) {
            $this->nodes[$name]['state'] = 'completed';
            $this->nodeEnded($name);
        }
    }

    /**
     * drover.wf_node_ended: $name ended. Each node that depends on it and is still pending (in
     * declaration order, each looked at again, as an earlier one's cascade may have ended it) is
     * cancelled when one of its dependencies is cancelled or failed under `cancel` — the first
     * such, by declaration order, names the cause (a cancelled one passes its own cause on) — or
     * released when all its dependencies are satisfied. Then the workflow may end.
     */
    private function nodeEnded(string $name): void
    {
        $dependants = [];
        foreach ($this->graph->nodes as $node) {
            if (in_array($name, $node->deps, true) && $this->nodes[$node->name]['state'] === 'pending') {
                $dependants[] = $node;
            }
        }
        foreach ($dependants as $d) {
            if ($this->nodes[$d->name]['state'] !== 'pending') {
                continue;
            }
            $blocker = null;
            $satisfied = true;
            foreach ($this->graph->nodes as $x) {
                if (!in_array($x->name, $d->deps, true)) {
                    continue;
                }
                $state = $this->nodes[$x->name]['state'];
                if ($blocker === null && ($state === 'cancelled' || ($state === 'failed' && $x->onFailure === GraphNode::CANCEL))) {
                    $blocker = $x->name;
                }
                $satisfied = $satisfied && (in_array($state, ['completed', 'skipped'], true) || ($state === 'failed' && $x->onFailure === GraphNode::CONTINUE));
            }
            if ($blocker !== null) {
                $cause = $this->nodes[$blocker]['state'] === 'cancelled' ? ($this->nodes[$blocker]['cause'] ?? $blocker) : $blocker;
                $this->cancelFrom($d->name, $cause);
            } elseif ($satisfied) {
                $this->release($d->name);
            }
        }
        $this->finishIfDone();
    }

    /**
     * drover.wf_cancel_from: $name (not yet running) is cancelled because of $cause, and through
     * its own end every node that depends on it.
     */
    private function cancelFrom(string $name, string $cause): void
    {
        if (!in_array($this->nodes[$name]['state'], ['pending', 'waiting'], true)) {
            return;
        }
        $this->nodes[$name]['state'] = 'cancelled';
        $this->nodes[$name]['cause'] = $cause;
        $this->act(GraphAction::cancelled([$name], $cause));
        $this->nodeEnded($name);
    }

    /** drover.wf_finish_if_done: a running workflow whose nodes all ended ends, failed when one failed or was cancelled. */
    private function finishIfDone(): void
    {
        if ($this->workflow !== 'running') {
            return;
        }
        $failed = false;
        foreach ($this->nodes as $n) {
            if (!in_array($n['state'], GraphState::ENDED, true)) {
                return;
            }
            $failed = $failed || in_array($n['state'], ['failed', 'cancelled'], true);
        }
        $this->workflow = $failed ? 'failed' : 'completed';
        $this->act(GraphAction::finished($this->workflow));
    }

    /** The result node $name's first step (by member) that recorded one recorded, or null (drover.wf_condition_holds). */
    private function firstResult(string $name): ?string
    {
        $results = $this->results[$name] ?? [];
        return $results === [] ? null : $results[array_key_first($results)];
    }

    /** Records $action, as one with the action before it when both cancel for the same cause. */
    private function act(GraphAction $action): void
    {
        $last = array_key_last($this->actions);
        $merged = $last === null ? null : $this->actions[$last]->merged($action);
        if ($merged !== null) {
            $this->actions[$last] = $merged;
            return;
        }
        $this->actions[] = $action;
    }
}
