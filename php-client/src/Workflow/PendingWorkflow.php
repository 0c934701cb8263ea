<?php

namespace Drover\Workflow;

/**
 * A workflow being declared (`Drover::workflow('import-42')`), dispatched by dispatch(): a graph of
 * ordinary Laravel jobs under step names, each running once the steps it runs after have ended
 * satisfied (docs/workflows.md):
 *
 *     Drover::workflow('import-'.$id)->unique()
 *         ->add('fetch', new Fetch($id))
 *         ->add('parse', new Parse, after: 'fetch')
 *         ->addMany('resize', $jobs, after: 'parse')
 *         ->add('publish', new Publish, after: 'parse', signal: 'approved')
 *         ->add('remind', new Remind, after: 'parse', wait: '2 days')
 *         ->add('notify', new Notify, after: 'parse', when: ['parse', 'rows', '>', 1000])
 *         ->add('report', new Report, after: 'resize', onFailure: 'continue')
 *         ->addWorkflow('thumbs', Drover::workflow('thumbs')->add(...), after: 'fetch')
 *         ->dispatch();
 *
 * What each step may say, besides its name and job(s):
 * - `after`: the step(s) it runs after (a name or a list);
 * - `onFailure`: what its failure does to the steps after it: 'cancel' (the default: they are
 *   cancelled, transitively) or 'continue' (they run as if it had completed; the workflow still
 *   ends failed);
 * - `wait`: how long after the steps before it ended it runs — seconds (int or float), a
 *   DateInterval, or a duration as strtotime reads it relative to now ('2 days', '90 minutes');
 * - `signal`: the signal (Drover::signal()) it waits for once the steps before it ended (one sent
 *   earlier counts);
 * - `when`: a condition on the result a step it runs after recorded — [step, 'dotted.path',
 *   operator, value] or [step, 'dotted.path', 'exists'] (Condition); false, the step is skipped,
 *   which the steps after it take as satisfied.
 *
 * Declaration checks what it can at once (a condition, a wait); dispatch() checks the graph
 * (Graph::validate: names, `after:`, cycles) and each job (StepPayloads) before writing anything.
 */
final class PendingWorkflow
{
    private bool $unique = false;

    private ?string $connection = null;

    /**
     * The steps declared, in order: each node, its jobs, or its sub-workflow.
     *
     * @var list<array{node: GraphNode, jobs: list<object>, workflow: ?self}>
     */
    private array $steps = [];

    public function __construct(public readonly string $name)
    {
    }

    /**
     * Refuses (WorkflowAlreadyRunning) to dispatch this workflow while one of its name has not
     * ended — Oban Pro's `unique`.
     */
    public function unique(bool $unique = true): self
    {
        $this->unique = $unique;
        return $this;
    }

    /**
     * Dispatches through queue connection $connection (one whose driver is drover) instead of the
     * default (DroverConnection): the workflow is written on its database connection.
     */
    public function onConnection(?string $connection): self
    {
        $this->connection = $connection;
        return $this;
    }

    /**
     * Step $name: one job.
     *
     * @param string|list<string> $after
     * @param array<int, mixed>|null $when
     */
    public function add(string $name, object $job, string|array $after = [], string $onFailure = GraphNode::CANCEL, string|int|float|\DateInterval|null $wait = null, ?string $signal = null, ?array $when = null): self
    {
        $this->steps[] = ['node' => $this->node($name, $after, $onFailure, $wait, $signal, $when, false, 1), 'jobs' => [$job], 'workflow' => null];
        return $this;
    }

    /**
     * Step $name: many jobs under one name (a fan-out). It ends when all of them ended — failed
     * when one failed — and a step after it reads their results with results($name), in order.
     *
     * @param iterable<object> $jobs
     * @param string|list<string> $after
     * @param array<int, mixed>|null $when
     */
    public function addMany(string $name, iterable $jobs, string|array $after = [], string $onFailure = GraphNode::CANCEL, string|int|float|\DateInterval|null $wait = null, ?string $signal = null, ?array $when = null): self
    {
        $list = [];
        foreach ($jobs as $job) {
            if (!is_object($job)) {
                throw new InvalidWorkflow("drover: workflow \"{$this->name}\": step \"$name\" (addMany) was given a " . get_debug_type($job) . ' among its jobs; give job objects');
            }
            $list[] = $job;
        }
        $this->steps[] = ['node' => $this->node($name, $after, $onFailure, $wait, $signal, $when, false, count($list)), 'jobs' => $list, 'workflow' => null];
        return $this;
    }

    /**
     * Step $name: a whole workflow (a sub-workflow), started when this step is released; the step
     * ends when it ends, failed when it failed. Dispatched with this one, on its connection. It
     * may wait for a signal and have a condition; not (yet) a time: the database starts a
     * sub-workflow as soon as its step is released (drover.wf_release), so a `wait:` is refused
     * rather than ignored — wait in the sub-workflow's first step instead.
     *
     * @param string|list<string> $after
     * @param array<int, mixed>|null $when
     */
    public function addWorkflow(string $name, self $workflow, string|array $after = [], string $onFailure = GraphNode::CANCEL, string|int|float|\DateInterval|null $wait = null, ?string $signal = null, ?array $when = null): self
    {
        if ($wait !== null) {
            throw new InvalidWorkflow("drover: workflow \"{$this->name}\": step \"$name\" is a sub-workflow with a wait:, which a sub-workflow cannot have in this release (it starts as soon as its step is released); put the wait on its first step instead");
        }
        $this->steps[] = ['node' => $this->node($name, $after, $onFailure, $wait, $signal, $when, true, 1), 'jobs' => [], 'workflow' => $workflow];
        return $this;
    }

    /** The graph declared so far (not validated: dispatch() validates it). */
    public function graph(): Graph
    {
        return new Graph($this->name, array_map(fn (array $s) => $s['node'], $this->steps));
    }

    /**
     * Writes the workflow — its nodes, its steps (in calls of at most 1000), its sub-workflows —
     * and starts it, in one transaction on the drover queue connection's database connection:
     * inside the application's transaction open there, a savepoint, so that it commits with the
     * application's writes (its first steps are visible to the workers then) and a refusal
     * undoes only the dispatch.
     *
     * @throws InvalidWorkflow before anything is written (a graph that cannot run, a job a step cannot be), or when the database refuses the graph
     * @throws WorkflowAlreadyRunning when it is ->unique() and one of its name has not ended
     */
    public function dispatch(): DispatchedWorkflow
    {
        [$connection, $queue] = DroverConnection::resolve($this->connection);
        $plan = $this->plan(new StepPayloads($queue, $connection), $connection, []);
        $workflows = new Workflows($queue->getDatabase());
        $id = $workflows->connection()->transaction(function () use ($workflows, $plan): int {
            $id = self::write($workflows, $plan, null, null);
            $workflows->start($id, $this->name);
            return $id;
        });
        return new DispatchedWorkflow((int) $id, $this->name);
    }

    /**
     * Everything dispatch() writes, checked and made before the first statement: the graph
     * (validated), the steps' queues and payloads, and each sub-workflow's the same.
     *
     * @param list<self> $within the workflows this one is a sub-workflow of
     * @return array{graph: Graph, unique: bool, steps: list<array{node: string, queue: string, payload: string}>, children: list<array{0: string, 1: array<string, mixed>}>}
     */
    private function plan(StepPayloads $payloads, string $connection, array $within): array
    {
        if (in_array($this, $within, true)) {
            throw new InvalidWorkflow("drover: workflow \"{$this->name}\" is its own sub-workflow (addWorkflow); a workflow cannot contain itself");
        }
        if ($this->connection !== null && $this->connection !== $connection) {
            throw new InvalidWorkflow("drover: workflow \"{$this->name}\" is a sub-workflow on queue connection '{$this->connection}', but the workflow it is part of goes through '$connection'; a sub-workflow is dispatched with its parent: drop its onConnection()");
        }
        $graph = $this->graph();
        $graph->validate();
        $steps = [];
        $children = [];
        foreach ($this->steps as $s) {
            $node = $s['node']->name;
            if ($s['workflow'] !== null) {
                $children[] = [$node, $s['workflow']->plan($payloads, $connection, [...$within, $this])];
                continue;
            }
            foreach ($s['jobs'] as $job) {
                $steps[] = ['node' => $node] + $payloads->of($job, $this->name, $node);
            }
        }
        return ['graph' => $graph, 'unique' => $this->unique, 'steps' => $steps, 'children' => $children];
    }

    /**
     * Writes $plan's workflow (a sub-workflow of $parent's node $parentNode when given), its steps
     * and its sub-workflows: its id.
     *
     * @param array{graph: Graph, unique: bool, steps: list<array{node: string, queue: string, payload: string}>, children: list<array{0: string, 1: array<string, mixed>}>} $plan
     */
    private static function write(Workflows $workflows, array $plan, ?int $parent, ?string $parentNode): int
    {
        $name = $plan['graph']->name;
        $id = $workflows->create($plan['graph'], $plan['unique'], $parent, $parentNode);
        $workflows->addSteps($id, $name, $plan['steps']);
        foreach ($plan['children'] as [$node, $child]) {
            self::write($workflows, $child, $id, $node);
        }
        return $id;
    }

    /**
     * Node $name as declared, its wait and condition read (refused at once when they cannot be).
     *
     * @param string|list<string> $after
     * @param array<int, mixed>|null $when
     */
    private function node(string $name, string|array $after, string $onFailure, string|int|float|\DateInterval|null $wait, ?string $signal, ?array $when, bool $subWorkflow, int $members): GraphNode
    {
        $deps = [];
        foreach ((array) $after as $dep) {
            if (!is_string($dep)) {
                throw new InvalidWorkflow("drover: workflow \"{$this->name}\": step \"$name\" runs after a " . get_debug_type($dep) . "; give after: a step's name or a list of names");
            }
            if (!in_array($dep, $deps, true)) {
                $deps[] = $dep;
            }
        }
        return new GraphNode(
            $name,
            $deps,
            $onFailure,
            $this->seconds($wait, $name),
            $signal,
            $when === null ? null : Condition::declared($when, $this->name, $name),
            $subWorkflow,
            $members,
        );
    }

    /**
     * A step's wait in seconds: a number of them, a DateInterval, or a duration as strtotime
     * reads it ('2 days', '90 minutes'), relative to now; null for none.
     *
     * @throws InvalidWorkflow for a wait that cannot be read, or is negative
     */
    private function seconds(string|int|float|\DateInterval|null $wait, string $step): ?float
    {
        if ($wait === null) {
            return null;
        }
        $where = "drover: workflow \"{$this->name}\": step \"$step\" waits";
        $given = $wait instanceof \DateInterval ? 'a DateInterval' : (is_string($wait) ? "'$wait'" : "$wait seconds");
        if (is_string($wait) && is_numeric(trim($wait))) {
            $wait = (float) trim($wait);
        }
        if (is_int($wait) || is_float($wait)) {
            $seconds = (float) $wait;
        } else {
            $now = new \DateTimeImmutable('now', new \DateTimeZone('UTC'));
            try {
                $then = $wait instanceof \DateInterval ? $now->add($wait) : (trim($wait) === '' ? false : @$now->modify($wait));
            } catch (\Throwable $e) {
                $then = false;
            }
            if ($then === false) {
                throw new InvalidWorkflow("$where $given, which is not a duration; give seconds, a DateInterval, or a duration such as '2 days' or '90 minutes'");
            }
            $seconds = (float) $then->format('U.u') - (float) $now->format('U.u');
        }
        if (!is_finite($seconds) || $seconds < 0) {
            throw new InvalidWorkflow("$where $given, " . (is_finite($seconds) ? 'a negative wait' : 'which is not a number of seconds') . '; give a wait of 0 or more');
        }
        return round($seconds, 6);
    }
}
