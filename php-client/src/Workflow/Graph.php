<?php

namespace Drover\Workflow;

/**
 * A workflow's graph and its rules, as a pure state machine: no database, no clock, no I/O.
 *
 * The database moves every workflow (broker/migrations/0016_workflows.sql); this class holds the
 * same rules so that they can be read in one place and unit tested scenario by scenario
 * (tests/WorkflowGraphTest.php), and the package uses it at dispatch to refuse a graph that could
 * never run (validate()) and to write the nodes drover.workflow_create takes (toArray()). The
 * rules, as the migration states them:
 *
 * - a node is satisfied when it completed, was skipped (its condition was false), or failed under
 *   `continue`;
 * - a pending node whose dependencies are all satisfied is released: skipped when its condition on
 *   a dependency's result is false, `waiting` when it waits for a signal not yet sent, else its
 *   steps run (after its wait, if it has one) or its sub-workflow starts;
 * - a node ends when all its steps (or its sub-workflow) ended: failed when one failed (or was
 *   deleted), else completed;
 * - a node that failed under `cancel` (the default), or was cancelled, cancels every node that
 *   depends on it, transitively, naming it as the cause;
 * - a workflow ends when all its nodes ended: failed when one failed or was cancelled, else
 *   completed;
 * - retrying a failed step reopens its node and the nodes it cancelled; cancelling a workflow
 *   cancels what has not run; running steps finish and release nothing.
 *
 * next() applies one event and says what it did (GraphAction), in the order the database's
 * functions do it (GraphTransition mirrors them one by one).
 */
final class Graph
{
    /** The longest name of a workflow, a node or a signal (the tables' checks). */
    public const MAX_NAME = 200;

    /** @var array<string, GraphNode> by name, in declaration order (the first of a name, until validate() refuses the second) */
    private array $byName = [];

    /**
     * @param list<GraphNode> $nodes in declaration order
     */
    public function __construct(public readonly string $name, public readonly array $nodes)
    {
        foreach ($nodes as $node) {
            $this->byName[$node->name] ??= $node;
        }
    }

    /**
     * Refuses a graph that could not run as declared, naming the workflow, the step and the fix:
     * no step at all; a name that is empty or too long; two steps of one name; an `after:` naming
     * a step the workflow does not have, or the step itself; a condition on a step it does not
     * run after; a negative wait; a cycle (Kahn's algorithm: every step must be reachable by
     * ending the ones before it).
     *
     * @throws InvalidWorkflow
     */
    public function validate(): void
    {
        $workflow = $this->name;
        self::checkName($workflow, 'drover: a workflow\'s name', 'name it with 1 to ' . self::MAX_NAME . ' characters');
        $in = "drover: workflow \"$workflow\"";
        if ($this->nodes === []) {
            throw new InvalidWorkflow("$in has no steps; add one with ->add('name', new SomeJob)");
        }
        $seen = [];
        foreach ($this->nodes as $node) {
            self::checkName($node->name, "$in has a step whose name", 'name each step with 1 to ' . self::MAX_NAME . ' characters');
            if (isset($seen[$node->name])) {
                throw new InvalidWorkflow("$in has two steps named \"{$node->name}\"; give each step its own name (addMany() puts many jobs under one)");
            }
            $seen[$node->name] = true;
        }
        foreach ($this->nodes as $node) {
            $step = "$in: step \"{$node->name}\"";
            foreach ($node->deps as $dep) {
                if ($dep === $node->name) {
                    throw new InvalidWorkflow("$step runs after itself; remove \"{$node->name}\" from its after:");
                }
                if (!isset($this->byName[$dep])) {
                    throw new InvalidWorkflow("$step runs after \"$dep\", which the workflow does not have (its steps: " . implode(', ', array_keys($this->byName)) . "); add a step \"$dep\" or fix the name in after:");
                }
            }
            if (!in_array($node->onFailure, [GraphNode::CANCEL, GraphNode::CONTINUE], true)) {
                throw new InvalidWorkflow("$step has onFailure: '{$node->onFailure}'; give 'cancel' (the default: the steps after it are cancelled) or 'continue' (they run as if it had completed)");
            }
            if ($node->waitSecs !== null && (!is_finite($node->waitSecs) || $node->waitSecs < 0)) {
                throw new InvalidWorkflow("$step waits {$node->waitSecs} seconds; give a wait of 0 or more");
            }
            if ($node->signal !== null) {
                self::checkName($node->signal, "$step waits for a signal whose name", 'name it with 1 to ' . self::MAX_NAME . ' characters');
            }
            if ($node->condition !== null && !in_array($node->condition->node, $node->deps, true)) {
                throw new InvalidWorkflow("$step has a condition on the result of \"{$node->condition->node}\", which it does not run after"
                    . ($node->deps === [] ? ' (it runs after no step)' : ' (it runs after ' . implode(', ', $node->deps) . ')')
                    . "; add \"{$node->condition->node}\" to its after: or put the condition on one of those");
            }
            if ($node->members < 0 || ($node->subWorkflow && $node->members !== 1)) {
                throw new \LogicException("$step has {$node->members} members" . ($node->subWorkflow ? ' as a sub-workflow (one is its sub-workflow)' : ''));
            }
        }
        $cycle = $this->cycle();
        if ($cycle !== null) {
            throw new InvalidWorkflow(count($cycle) === 2
                ? "$in has a cycle: \"{$cycle[0]}\" and \"{$cycle[1]}\" each run after the other; remove one of the two after: so that one can run first"
                : "$in has a cycle among its steps: " . implode(' → ', array_map(fn ($n) => "\"$n\"", [...$cycle, $cycle[0]]))
                    . ' (each runs after the one before it), so none of them can ever run; remove one of these after:');
        }
    }

    /**
     * The nodes as drover.workflow_create takes them, in declaration order.
     *
     * @return list<array<string, mixed>>
     */
    public function toArray(): array
    {
        return array_map(fn (GraphNode $n) => $n->toArray(), $this->nodes);
    }

    /** Node $name. */
    public function node(string $name): GraphNode
    {
        return $this->byName[$name] ?? throw new \InvalidArgumentException("drover: workflow \"{$this->name}\" has no step \"$name\" (its steps: " . implode(', ', array_keys($this->byName)) . ')');
    }

    /** The workflow as dispatched, before it starts: every node pending, none of its steps ended. */
    public function initial(): GraphState
    {
        $nodes = [];
        foreach ($this->nodes as $node) {
            $nodes[$node->name] = ['state' => 'pending', 'cause' => null, 'left' => $node->members, 'failed' => 0];
        }
        return new GraphState('pending', $nodes);
    }

    /**
     * Applies $event to $state: the state after it and what it did, in order.
     *
     * @return array{0: GraphState, 1: list<GraphAction>}
     */
    public function next(GraphState $state, GraphEvent $event): array
    {
        $transition = new GraphTransition($this, $state);
        match ($event->kind) {
            GraphEvent::START => $transition->start(),
            GraphEvent::STEP_ENDED => $transition->stepEnded((string) $event->node, (string) $event->outcome, $event->member, $event->result),
            GraphEvent::SIGNAL => $transition->signal((string) $event->signal),
            GraphEvent::RETRY => $transition->retry((string) $event->node),
            GraphEvent::CANCEL => $transition->cancel(),
        };
        return [$transition->state(), $transition->actions()];
    }

    /**
     * A cycle among the nodes, by Kahn's algorithm (the nodes left once every node whose
     * dependencies are all reachable has been reached), as the names along it in the order they
     * would run; null when there is none.
     *
     * @return list<string>|null
     */
    private function cycle(): ?array
    {
        $waiting = [];
        $dependants = [];
        foreach ($this->nodes as $node) {
            $waiting[$node->name] = count(array_unique($node->deps));
            foreach (array_unique($node->deps) as $dep) {
                $dependants[$dep][] = $node->name;
            }
        }
        $ready = array_keys(array_filter($waiting, fn (int $n) => $n === 0));
        $reached = [];
        while ($ready !== []) {
            $name = array_shift($ready);
            $reached[$name] = true;
            foreach ($dependants[$name] ?? [] as $dependant) {
                if (--$waiting[$dependant] === 0) {
                    $ready[] = $dependant;
                }
            }
        }
        if (count($reached) === count($this->nodes)) {
            return null;
        }
        // Every node not reached waits for another node not reached: walking its dependencies
        // from the first one declared comes back to a node already walked.
        $walk = [];
        $name = null;
        foreach ($this->nodes as $node) {
            if (!isset($reached[$node->name])) {
                $name = $node->name;
                break;
            }
        }
        while (!in_array($name, $walk, true)) {
            $walk[] = $name;
            foreach ($this->byName[$name]->deps as $dep) {
                if (!isset($reached[$dep])) {
                    $name = $dep;
                    break;
                }
            }
        }
        $cycle = array_reverse(array_slice($walk, (int) array_search($name, $walk, true)));
        // Said from its step declared first.
        $positions = array_flip(array_keys($this->byName));
        $first = 0;
        foreach ($cycle as $i => $step) {
            if ($positions[$step] < $positions[$cycle[$first]]) {
                $first = $i;
            }
        }
        return [...array_slice($cycle, $first), ...array_slice($cycle, 0, $first)];
    }

    /** @throws InvalidWorkflow when $name is not 1 to MAX_NAME characters of UTF-8 */
    private static function checkName(string $name, string $what, string $fix): void
    {
        if (preg_match('//u', $name) !== 1) {
            throw new InvalidWorkflow("$what is not UTF-8 text; $fix");
        }
        $length = mb_strlen($name, 'UTF-8');
        if ($length === 0 || $length > self::MAX_NAME) {
            throw new InvalidWorkflow("$what is " . ($length === 0 ? 'empty' : "$length characters long") . "; $fix");
        }
    }
}
