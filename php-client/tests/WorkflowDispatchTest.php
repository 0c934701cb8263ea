<?php

namespace Drover\Tests;

use Drover\Contracts\CompletesInTransaction;
use Drover\Dashboard\Repositories\BulkActionRepository;
use Drover\Dashboard\Search\State;
use Drover\Drover;
use Drover\Jobs\ReportsProgress;
use Drover\Middleware\LimitConcurrency;
use Drover\Protocol\Channel;
use Drover\Worker\Feeder;
use Drover\Worker\LaravelWorker;
use Drover\Workflow\Condition;
use Drover\Workflow\Graph;
use Drover\Workflow\GraphNode;
use Drover\Workflow\InteractsWithWorkflow;
use Drover\Workflow\InvalidWorkflow;
use Drover\Workflow\Workflows;
use Drover\Workflow\WorkflowAlreadyRunning;
use Illuminate\Bus\Queueable;
use Illuminate\Container\Container;
use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Contracts\Queue\ShouldBeUnique;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Application;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\WorkerOptions;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Facade;
use PHPUnit\Framework\TestCase;

/**
 * Workflows from the application's side (issue 60), on the test PostgreSQL with drover's schema
 * (migration 0016): Drover::workflow(...)->dispatch() through the real `drover` queue connection
 * of a Laravel application built in this process (DashboardApp), what it writes, what it
 * refuses; and steps run by drover's Laravel worker (LaravelWorker, Laravel's own runNextJob), the
 * test playing the master — leasing a released step's row, handing it to the worker on its
 * channel, and acking it (deleting the row, whose trigger moves the graph) once it said `done`.
 */
final class WorkflowDispatchTest extends TestCase
{
    private static ?Application $app = null;

    private static ?\PDO $pdoOnce = null;

    private \PDO $pdo;

    /** @var resource the master's end of the worker's channel */
    private $master;

    private LaravelWorker $worker;

    public static function setUpBeforeClass(): void
    {
        self::$app = DashboardApp::boot()->app;
    }

    protected function setUp(): void
    {
        $app = self::$app;
        Container::setInstance($app);
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
        // One connection for the class: PHPUnit keeps every test object to the end of the run.
        $this->pdo = self::$pdoOnce ??= PostgresServer::get()->pdo();
        $this->pdo->exec('CREATE TABLE IF NOT EXISTS public.workflow_effects (id bigserial PRIMARY KEY, note text NOT NULL)');
        $this->pdo->exec('TRUNCATE drover.jobs, drover.workflows, drover.workflow_nodes, drover.workflow_steps, drover.workflow_signals,
            drover.workflow_events, drover.step_failures, drover.job_progress, drover.completions, public.workflow_effects');
        putenv('DROVER_PROTOCOL=4');
        Step::$seen = [];
        [$master, $worker] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        $this->master = $master;
        $this->worker = (new LaravelWorker($app['queue'], $app['events'], $app[ExceptionHandler::class], fn () => false))
            ->setFeeder(new Feeder(new Channel($worker)));
    }

    protected function tearDown(): void
    {
        putenv('DROVER_PROTOCOL');
        self::$app['db']->connection('pgsql')->rollBack(0);
    }

    public function testADiamondIsWrittenWithItsNodesAndStepsAndOnlyItsFirstStepQueued(): void
    {
        $wf = Drover::workflow('import-1')
            ->add('fetch', new Step('fetch'))
            ->add('parse', (new Step('parse'))->onQueue('high'), after: 'fetch')
            ->addMany('resize', [new Step('r0'), new Step('r1'), new Step('r2')], after: 'fetch')
            ->add('report', new Step('report'), after: ['parse', 'resize'], onFailure: 'continue')
            ->dispatch();
        $this->assertSame('import-1', $wf->name);
        $this->assertSame(
            ['name' => 'import-1', 'state' => 'running', 'unique_name' => false, 'nodes' => 4, 'nodes_left' => 4, 'steps' => 6, 'parent' => null],
            $this->row("SELECT name, state, unique_name, nodes, nodes_left, steps, parent FROM drover.workflows WHERE id = {$wf->id}"),
        );
        $this->assertSame([
            ['name' => 'fetch', 'position' => 1, 'deps' => '{}', 'on_failure' => 'cancel', 'members' => 1, 'state' => 'running'],
            ['name' => 'parse', 'position' => 2, 'deps' => '{fetch}', 'on_failure' => 'cancel', 'members' => 1, 'state' => 'pending'],
            ['name' => 'resize', 'position' => 3, 'deps' => '{fetch}', 'on_failure' => 'cancel', 'members' => 3, 'state' => 'pending'],
            ['name' => 'report', 'position' => 4, 'deps' => '{parse,resize}', 'on_failure' => 'continue', 'members' => 1, 'state' => 'pending'],
        ], $this->rows("SELECT name, position, deps::text, on_failure, members, state FROM drover.workflow_nodes WHERE wf = {$wf->id} ORDER BY position"));
        $this->assertSame([
            ['node' => 'fetch', 'member' => 0, 'queue' => 'default', 'state' => 'queued'],
            ['node' => 'parse', 'member' => 0, 'queue' => 'high', 'state' => 'pending'],
            ['node' => 'resize', 'member' => 0, 'queue' => 'default', 'state' => 'pending'],
            ['node' => 'resize', 'member' => 1, 'queue' => 'default', 'state' => 'pending'],
            ['node' => 'resize', 'member' => 2, 'queue' => 'default', 'state' => 'pending'],
            ['node' => 'report', 'member' => 0, 'queue' => 'default', 'state' => 'pending'],
        ], $this->rows("SELECT node, member, queue, state FROM drover.workflow_steps WHERE wf = {$wf->id} ORDER BY id"));
        // Only fetch's step is a job yet, with Laravel's own payload.
        $jobs = $this->rows('SELECT id, queue, wf, payload FROM drover.jobs ORDER BY id');
        $this->assertCount(1, $jobs);
        $this->assertSame($wf->id, $jobs[0]['wf']);
        $payload = json_decode($jobs[0]['payload'], true);
        $this->assertSame([Step::class, 'Illuminate\Queue\CallQueuedHandler@call', Step::class], [$payload['displayName'], $payload['job'], $payload['data']['commandName']]);
        $this->assertSame('fetch', unserialize($payload['data']['command'])->label);

        // The master acks fetch: parse and resize's three are released, report waits for both.
        $this->ack($jobs[0]['id']);
        $this->assertSame(['high' => 1, 'default' => 3], array_column($this->rows('SELECT queue, count(*) AS n FROM drover.jobs GROUP BY queue ORDER BY queue DESC'), 'n', 'queue'));
        foreach ($this->rows("SELECT id FROM drover.jobs WHERE wf = {$wf->id} ORDER BY id") as $job) {
            $this->ack($job['id']);
        }
        $this->assertSame(['report'], array_column($this->rows('SELECT s.node FROM drover.jobs j JOIN drover.workflow_steps s ON s.id = j.id'), 'node'), 'the fan-in runs once both ended');
        $this->ack((int) $this->pdo->query('SELECT id FROM drover.jobs')->fetchColumn());
        $this->assertSame('completed', $this->pdo->query("SELECT state FROM drover.workflows WHERE id = {$wf->id}")->fetchColumn());
    }

    public function testTheDispatchCommitsAndRollsBackWithTheApplicationsTransaction(): void
    {
        try {
            DB::transaction(function () {
                DB::table('workflow_effects')->insert(['note' => 'order 7']);
                Drover::workflow('order-7')->add('charge', new Step('charge'))->dispatch();
                throw new \RuntimeException('the order failed');
            });
        } catch (\RuntimeException $e) {
            $this->assertSame('the order failed', $e->getMessage());
        }
        $this->assertSame(0, $this->countRows('drover.workflows'));
        $this->assertSame(0, $this->countRows('drover.jobs'));

        DB::transaction(function () {
            DB::table('workflow_effects')->insert(['note' => 'order 8']);
            Drover::workflow('order-8')->add('charge', new Step('charge'))->dispatch();
            $this->assertSame(0, $this->countRows('drover.jobs'), 'not visible before the commit');
        });
        $this->assertSame(1, $this->countRows('drover.jobs'));
        $this->assertSame(1, $this->countRows('public.workflow_effects'));
    }

    public function testAUniqueNameIsRefusedWhileOneRunsAndTheApplicationsTransactionGoesOn(): void
    {
        $first = Drover::workflow('nightly')->unique()->add('a', new Step('a'))->dispatch();
        DB::transaction(function () {
            DB::table('workflow_effects')->insert(['note' => 'before']);
            try {
                Drover::workflow('nightly')->unique()->add('a', new Step('a'))->dispatch();
                $this->fail('expected WorkflowAlreadyRunning');
            } catch (WorkflowAlreadyRunning $e) {
                $this->assertSame('drover: workflow "nightly" is already running and its name is unique (->unique()); dispatch it again once it has ended, or cancel the running one', $e->getMessage());
                $this->assertSame('nightly', $e->workflow);
            }
            DB::table('workflow_effects')->insert(['note' => 'after']);
        });
        $this->assertSame(2, $this->countRows('public.workflow_effects'), 'only the dispatch\'s savepoint rolled back');
        $this->assertSame(1, $this->countRows('drover.workflows'));
        $this->assertNotSame($first->id, Drover::workflow('nightly')->add('a', new Step('a'))->dispatch()->id, 'a workflow not unique is not refused');
        $this->ack((int) $this->pdo->query("SELECT id FROM drover.jobs WHERE wf = {$first->id}")->fetchColumn());
        Drover::workflow('nightly')->unique()->add('a', new Step('a'))->dispatch();
        $this->assertSame(3, $this->countRows('drover.workflows'), 'once the first ended, a unique one is dispatched again');
    }

    public function testAGraphThatCannotRunIsRefusedBeforeAnythingIsWritten(): void
    {
        $refusals = [
            'drover: workflow "loop" has a cycle: "a" and "b" each run after the other; remove one of the two after: so that one can run first'
                => Drover::workflow('loop')->add('a', new Step('a'), after: 'b')->add('b', new Step('b'), after: 'a'),
            'drover: workflow "typo": step "parse" runs after "fecth", which the workflow does not have (its steps: fetch, parse); add a step "fecth" or fix the name in after:'
                => Drover::workflow('typo')->add('fetch', new Step('a'))->add('parse', new Step('b'), after: 'fecth'),
            'drover: workflow "outer" has two steps named "x"; give each step its own name (addMany() puts many jobs under one)'
                => Drover::workflow('outer')->add('ok', new Step('ok'))->addWorkflow('sub', Drover::workflow('inner')->add('y', new Step('y')))->add('x', new Step('x'))->add('x', new Step('x')),
            'drover: workflow "inner" has a cycle: "y" and "z" each run after the other; remove one of the two after: so that one can run first'
                => Drover::workflow('outer')->add('ok', new Step('ok'))->addWorkflow('sub', Drover::workflow('inner')->add('y', new Step('y'), after: 'z')->add('z', new Step('z'), after: 'y')),
        ];
        foreach ($refusals as $message => $pending) {
            try {
                $pending->dispatch();
                $this->fail("expected InvalidWorkflow: $message");
            } catch (InvalidWorkflow $e) {
                $this->assertSame($message, $e->getMessage());
            }
        }
        try {
            Drover::workflow('elsewhere')->onConnection('sync')->add('a', new Step('a'))->dispatch();
            $this->fail('expected LogicException');
        } catch (\LogicException $e) {
            $this->assertSame("drover: queue connection 'sync' is not a drover connection (its driver is 'sync'); a workflow's steps are drover jobs: name a connection whose driver is drover", $e->getMessage());
        }
        $this->assertSame(0, $this->countRows('drover.workflows'));

        // The database refuses what gets past (22023), in its own words.
        try {
            (new Workflows(DB::connection('pgsql')))->create(new Graph('raw', [new GraphNode('a', ['nowhere'])]), false);
            $this->fail('expected InvalidWorkflow');
        } catch (InvalidWorkflow $e) {
            $this->assertSame('drover: the database refused workflow "raw": drover: workflow "raw" has a step after "nowhere", which it does not have', $e->getMessage());
        }
    }

    public function testAJobAStepCannotBeIsRefusedNamingWhyAndWhatToDo(): void
    {
        // A second drover connection, whose queue `tenants` is fair.
        self::$app['config']->set('drover.fair', ['fair:tenants']);
        self::$app['config']->set('queue.connections.fair', ['driver' => 'drover', 'connection' => 'pgsql', 'queue' => 'default']);
        $limited = (new Step('limited'))->through([new LimitConcurrency('api', 2)]);
        $grouped = new Step('grouped');
        $grouped->messageGroup = 'customer-1';
        $fair = new Step('fair');
        $fair->fairKey = 'tenant-1';
        $step = 'drover: workflow "w": step "s" (' . Step::class . ')';
        $refusals = [
            "$step is in message group 'customer-1' (onGroup / messageGroup); a workflow's steps cannot be grouped in this release: drop the group, and order the steps with after:" => $grouped,
            "$step has a deduplication id (withDeduplicator / deduplicationId()); a workflow's steps are not deduplicated in this release: drop it, and declare the workflow ->unique() to refuse a second one while it runs" => new DeduplicatedStep('d'),
            "$step has limits (its WithoutOverlapping, RateLimited, LimitConcurrency or LimitRate middleware); a workflow's steps cannot wait for limits in this release: drop that middleware for this job, or dispatch it on its own" => $limited,
            "$step names a fair key or weight (fairKey / fairWeight); a workflow's steps take no fair share in this release: drop them for this job" => $fair,
            "$step goes to queue 'tenants', which is fair (drover.fair in config/drover.php); a workflow's steps take no fair share in this release and would wait behind every job there: put the step on a queue that is not fair (onQueue())" => (new Step('q'))->onQueue('tenants'),
            "$step has a delay (delay()); a step waits with its node's wait: instead (->add('name', \$job, after: '...', wait: '10 minutes')): drop the delay" => (new Step('later'))->delay(60),
            "$step is on queue connection 'sync' (onConnection()), but the workflow's steps all go through 'drover': drop onConnection() for this job, or dispatch the workflow ->onConnection('sync')" => (new Step('elsewhere'))->onConnection('sync'),
        ];
        foreach ($refusals as $message => $job) {
            try {
                Drover::workflow('w')->onConnection(str_contains($message, 'fair') ? 'fair' : null)->add('ok', new Step('ok'))->add('s', $job, after: 'ok')->dispatch();
                $this->fail("expected InvalidWorkflow: $message");
            } catch (InvalidWorkflow $e) {
                $this->assertSame(str_replace(Step::class, get_class($job), $message), $e->getMessage());
            }
        }
        try {
            Drover::workflow('w')->add('s', new UniqueStep('u'))->dispatch();
            $this->fail('expected InvalidWorkflow');
        } catch (InvalidWorkflow $e) {
            $this->assertSame('drover: workflow "w": step "s" (' . UniqueStep::class . ') is ShouldBeUnique, whose lock Laravel\'s dispatcher takes and a workflow\'s step does not go through; drop ShouldBeUnique for this job, and declare the workflow ->unique() instead', $e->getMessage());
        }
        $this->assertSame(0, $this->countRows('drover.workflows'));
    }

    public function testWaitsAndConditionsAreWrittenAsTheDatabaseTakesThem(): void
    {
        $wf = Drover::workflow('w')
            ->add('a', new Step('a'))
            ->add('later', new Step('later'), after: 'a', wait: '2 days')
            ->add('soon', new Step('soon'), after: 'a', wait: 90)
            ->add('interval', new Step('i'), after: 'a', wait: new \DateInterval('PT1H30M'))
            ->add('maybe', new Step('m'), after: 'a', when: ['a', 'stats.rows', '>', 1000], signal: 'approved')
            ->dispatch();
        $this->assertSame([
            ['name' => 'a', 'wait_secs' => null, 'wait_signal' => null, 'condition' => null],
            ['name' => 'later', 'wait_secs' => '172800', 'wait_signal' => null, 'condition' => null],
            ['name' => 'soon', 'wait_secs' => '90', 'wait_signal' => null, 'condition' => null],
            ['name' => 'interval', 'wait_secs' => '5400', 'wait_signal' => null, 'condition' => null],
            ['name' => 'maybe', 'wait_secs' => null, 'wait_signal' => 'approved', 'condition' => '{"op": ">", "node": "a", "path": ["stats", "rows"], "value": 1000}'],
        ], $this->rows("SELECT name, wait_secs, wait_signal, condition::text FROM drover.workflow_nodes WHERE wf = {$wf->id} ORDER BY position"));
        try {
            Drover::workflow('w')->addWorkflow('sub', Drover::workflow('inner')->add('a', new Step('a')), wait: 60);
            $this->fail('expected InvalidWorkflow');
        } catch (InvalidWorkflow $e) {
            $this->assertSame('drover: workflow "w": step "sub" is a sub-workflow with a wait:, which a sub-workflow cannot have in this release (it starts as soon as its step is released); put the wait on its first step instead', $e->getMessage());
        }
        foreach (["'-2 days'" => '-2 days', "'soonish'" => 'soonish', '-1 seconds' => -1] as $said => $wait) {
            try {
                Drover::workflow('w')->add('a', new Step('a'), wait: $wait);
                $this->fail("expected InvalidWorkflow for $said");
            } catch (InvalidWorkflow $e) {
                $this->assertStringStartsWith("drover: workflow \"w\": step \"a\" waits $said, ", $e->getMessage());
            }
        }
    }

    public function testAClosureIsAStepAsLaravelQueuesOne(): void
    {
        $wf = Drover::workflow('closure')->add('c', function () {
            Step::$seen['closure'] = true;
        })->dispatch();
        $payload = json_decode((string) $this->pdo->query("SELECT payload FROM drover.jobs WHERE wf = {$wf->id}")->fetchColumn(), true);
        $this->assertSame('Illuminate\Queue\CallQueuedClosure', $payload['data']['commandName']);
        $this->assertSame(['done'], $this->runStep($this->queued('c')));
        $this->assertTrue(Step::$seen['closure']);
    }

    public function testAStepWaitingForATimeIsQueuedAvailableThen(): void
    {
        $wf = Drover::workflow('w')->add('a', new Step('a'))->add('later', new Step('later'), after: 'a', wait: 3600)->dispatch();
        $this->ack((int) $this->pdo->query('SELECT id FROM drover.jobs')->fetchColumn());
        $wait = (float) $this->pdo->query("SELECT extract(epoch FROM available_at - clock_timestamp()) FROM drover.jobs WHERE wf = {$wf->id}")->fetchColumn();
        $this->assertEqualsWithDelta(3600, $wait, 5, 'in drover.jobs, due in an hour');
    }

    public function testASubWorkflowStartsWhenItsStepIsReleasedAndItsEndEndsTheStep(): void
    {
        $wf = Drover::workflow('import')
            ->add('fetch', new Step('fetch'))
            ->addWorkflow('thumbs', Drover::workflow('thumbs')->add('small', new Step('small'))->add('large', new Step('large'), after: 'small'), after: 'fetch')
            ->add('report', new Step('report'), after: 'thumbs')
            ->dispatch();
        $child = $this->row("SELECT id, name, state, parent, parent_node FROM drover.workflows WHERE parent = {$wf->id}");
        $this->assertSame(['name' => 'thumbs', 'state' => 'pending', 'parent' => $wf->id, 'parent_node' => 'thumbs'], array_diff_key($child, ['id' => 0]));
        $this->assertSame($child['id'], (int) $this->pdo->query("SELECT sub_wf FROM drover.workflow_nodes WHERE wf = {$wf->id} AND name = 'thumbs'")->fetchColumn());
        $this->assertSame(0, (int) $this->pdo->query("SELECT count(*) FROM drover.workflow_steps WHERE wf = {$wf->id} AND node = 'thumbs'")->fetchColumn(), 'the node stands for its sub-workflow: no steps of its own');

        $this->ack($this->queued('fetch'));
        $this->assertSame('running', $this->pdo->query("SELECT state FROM drover.workflows WHERE id = {$child['id']}")->fetchColumn());
        $this->ack($this->queued('small'));
        $this->ack($this->queued('large'));
        $this->assertSame('completed', $this->pdo->query("SELECT state FROM drover.workflows WHERE id = {$child['id']}")->fetchColumn());
        $this->assertSame('completed', $this->pdo->query("SELECT state FROM drover.workflow_nodes WHERE wf = {$wf->id} AND name = 'thumbs'")->fetchColumn());
        $this->assertNotNull($this->queued('report'), 'the step after the sub-workflow runs');
    }

    public function testManyStepsAreAddedInCallsOfAThousand(): void
    {
        $jobs = [];
        for ($i = 0; $i < 2500; $i++) {
            $jobs[] = new Step("r$i");
        }
        $queries = [];
        DB::listen(function ($query) use (&$queries) {
            if (str_contains($query->sql, 'workflow_add_steps')) {
                $queries[] = $query->sql;
            }
        });
        $wf = Drover::workflow('big')->addMany('resize', $jobs)->dispatch();
        $this->assertCount(3, $queries, '1000 + 1000 + 500');
        $this->assertSame(['n' => 2500, 'first' => 0, 'last' => 2499], $this->row("SELECT count(*) AS n, min(member) AS first, max(member) AS last FROM drover.workflow_steps WHERE wf = {$wf->id}"));
        $this->assertSame(2500, $this->countRows('drover.jobs'));
        $last = json_decode((string) $this->pdo->query("SELECT j.payload FROM drover.jobs j JOIN drover.workflow_steps s ON s.id = j.id WHERE s.member = 2499")->fetchColumn(), true);
        $this->assertSame('r2499', unserialize($last['data']['command'])->label, 'in order');
    }

    public function testAStepRecordsItsResultAndTheStepsAfterItReadThem(): void
    {
        $wf = Drover::workflow('import-9')
            ->add('fetch', new Step('fetch', 'record'))
            ->addMany('many', [new Step('m0', 'record'), new Step('m1', 'record')], after: 'fetch')
            ->add('report', new Step('report', 'read'), after: ['fetch', 'many'])
            ->dispatch();
        $this->assertSame(['done'], $this->runStep($this->queued('fetch')));
        $this->assertSame(['{"label":"fetch","rows":42}'], $this->results($wf->id, 'fetch'));
        foreach ($this->rows("SELECT id FROM drover.jobs WHERE wf = {$wf->id} ORDER BY id DESC") as $job) {
            $this->assertSame(['done'], $this->runStep($job['id']));
        }
        Drover::signal('import-9', 'approved', ['by' => 'ana']);
        $this->assertSame(['done'], $this->runStep($this->queued('report')));
        $this->assertSame([
            'id' => $wf->id, 'name' => 'import-9', 'node' => 'report', 'member' => 0,
            'fetch' => ['label' => 'fetch', 'rows' => 42],
            'many' => [['label' => 'm0', 'rows' => 42], ['label' => 'm1', 'rows' => 42]],
            'first of many' => ['label' => 'm0', 'rows' => 42],
            'nothing' => null, 'none recorded' => [],
            'approved' => ['by' => 'ana'], 'never sent' => null,
        ], Step::$seen['report']);
        $this->assertSame('completed', $this->pdo->query("SELECT state FROM drover.workflows WHERE id = {$wf->id}")->fetchColumn());
    }

    public function testAResultRecordedInTheJobsTransactionCommitsAndRollsBackWithIt(): void
    {
        $wf = Drover::workflow('tx')->add('ok', new TransactionalStep('kept'))->add('boom', new TransactionalStep('lost', throws: true))->dispatch();
        $this->assertSame(['done'], $this->runStep($this->queued('ok'), ack: false));
        $this->assertSame(['"kept"'], $this->results($wf->id, 'ok'), 'committed with the job\'s completion…');
        $this->assertSame(0, $this->countRows('drover.jobs WHERE id = ' . $this->stepId($wf->id, 'ok')), '…which deleted its row, in the same transaction');
        $this->assertSame(['kept'], array_column($this->rows('SELECT note FROM public.workflow_effects'), 'note'));
        $this->assertSame(['release'], $this->runStep($this->queued('boom'), ack: false));
        $this->assertSame([], $this->results($wf->id, 'boom'), 'rolled back with the job\'s writes');
        $this->assertSame([50, 'half'], Step::$seen['progress seen from outside'], 'its progress was visible before its transaction ended');
    }

    public function testProgressIsWrittenAtMostOnceASecondAndAlwaysAt100(): void
    {
        Drover::workflow('p')->add('a', new Step('a', 'progress'))->dispatch();
        $id = $this->queued('a');
        $this->assertSame(['done'], $this->runStep($id, ack: false));
        $this->assertSame([true, false, true, 'reported 250 %' => 'drover: ' . Step::class . " reported progress of 250 %; give a percentage from 0 to 100 (progress(40, 'parsed 4,000 rows'))"], Step::$seen['progress']);
        $this->assertSame(['percent' => 100, 'note' => 'done'], $this->row("SELECT percent, note FROM drover.job_progress WHERE job_id = $id"));

        // A job in no workflow reports progress too; a lease taken back writes nothing.
        $plain = (int) self::$app['queue']->connection('drover')->push(new Step('plain', 'progress'));
        $this->assertSame(['done'], $this->runStep($plain, ack: false));
        $this->assertSame(100, (int) $this->pdo->query("SELECT percent FROM drover.job_progress WHERE job_id = $plain")->fetchColumn());
        $stale = (int) self::$app['queue']->connection('drover')->push(new Step('stale', 'progress'));
        $this->assertSame(['done'], $this->runStep($stale, ack: false, token: 1, leasedAs: 2));
        $this->assertSame([false, false, false], array_slice(Step::$seen['progress'], 0, 3), 'fenced by the lease');
    }

    public function testOutsideADroverWorkerAStepHasNoWorkflowAndProgressWritesNothing(): void
    {
        self::$app['queue']->connection('sync')->push(new Step('sync', 'outside'));
        $this->assertSame([
            'workflow' => null,
            'progress' => false,
            'recordResult' => 'drover: ' . Step::class . ' called recordResult() but is not running as a step of a workflow (it is not run by a drover worker); dispatch it with Drover::workflow(...)->add(...), or check $this->workflow() !== null first',
        ], Step::$seen['outside']);
        $this->assertSame(0, $this->countRows('drover.job_progress'));

        // Run by drover, but no workflow's step.
        $plain = (int) self::$app['queue']->connection('drover')->push(new Step('plain', 'outside'));
        $this->assertSame(['done'], $this->runStep($plain, ack: false));
        $this->assertNull(Step::$seen['outside']['workflow']);
        $this->assertSame('drover: ' . Step::class . " called recordResult() but is not running as a step of a workflow (drover job $plain is none's); dispatch it with Drover::workflow(...)->add(...), or check \$this->workflow() !== null first", Step::$seen['outside']['recordResult']);
    }

    public function testASignalReleasesTheStepWaitingForItInEveryWorkflowOfThatName(): void
    {
        $a = Drover::workflow('publish-3')->add('write', new Step('write'))->add('publish', new Step('publish'), after: 'write', signal: 'approved')->dispatch();
        $this->ack($this->queued('write'));
        $this->assertSame('waiting', $this->pdo->query("SELECT state FROM drover.workflow_nodes WHERE wf = {$a->id} AND name = 'publish'")->fetchColumn());
        $this->assertSame(0, $this->countRows('drover.jobs'), 'waiting holds no job');
        // Sent early to a second one: kept until its step is reached.
        $b = Drover::workflow('publish-3')->add('write', new Step('write'))->add('publish', new Step('publish'), after: 'write', signal: 'approved')->dispatch();
        $this->assertSame(2, Drover::signal('publish-3', 'approved', ['by' => 'ana']));
        $this->assertSame(1, $this->countRows("drover.jobs WHERE wf = {$a->id}"), 'the first\'s step runs now');
        $this->ack((int) $this->pdo->query("SELECT id FROM drover.jobs WHERE wf = {$b->id}")->fetchColumn());
        $this->assertSame(1, $this->countRows("drover.jobs WHERE wf = {$b->id}"), 'the second\'s ran when reached');
        $this->assertSame('{"by":"ana"}', $this->pdo->query("SELECT data FROM drover.workflow_signals WHERE wf = {$b->id} AND name = 'approved'")->fetchColumn());
        $this->assertSame(0, Drover::signal('nobody', 'approved'));
        $this->assertSame(1, Drover::signal($a->id, 'other'), 'by id');
        try {
            Drover::signal('publish-3', '');
            $this->fail('expected InvalidArgumentException');
        } catch (\InvalidArgumentException $e) {
            $this->assertSame('drover: a signal\'s name must be 1 to 200 characters of UTF-8, got an empty or unreadable one', $e->getMessage());
        }
    }

    public function testClearingAQueueDeletesItsStepsAsDeletedNotCompleted(): void
    {
        $wf = Drover::workflow('w')->add('a', new Step('a'))->add('b', new Step('b'), after: 'a')->dispatch();
        $other = (int) self::$app['queue']->connection('drover')->push(new Step('plain'));
        $this->assertSame(2, self::$app['queue']->connection('drover')->clear('default'));
        $this->assertSame(0, $this->countRows('drover.jobs'));
        $this->assertSame(['' => 'failed', 'a' => 'failed', 'b' => 'cancelled'], $this->states($wf->id));
        $this->assertSame(['state' => 'cancelled', 'error' => 'deleted with the jobs of queue default (queue:clear)'], $this->row("SELECT state, error FROM drover.workflow_steps WHERE wf = {$wf->id} AND node = 'a'"));
        $this->assertSame(0, $this->countRows('drover.step_failures'), 'every mark was read by the delete');
        $this->assertGreaterThan(0, $other);
    }

    public function testTheConsolesDeleteDeletesStepsAsDeletedNotCompleted(): void
    {
        $wf = Drover::workflow('w')->add('a', new Step('a'))->add('b', new Step('b'), after: 'a', onFailure: 'continue')->add('c', new Step('c'), after: 'b')->dispatch();
        $this->ack($this->queued('a'));
        $b = $this->queued('b');
        $plain = (int) self::$app['queue']->connection('drover')->push(new Step('plain'));
        $horizon = (string) $this->pdo->query('SELECT txid_snapshot_xmin(txid_current_snapshot())')->fetchColumn();
        $deleted = (new BulkActionRepository(DB::connection('pgsql')))->deleteWaiting([(string) $b, (string) $plain], State::Pending, $horizon);
        $this->assertEqualsCanonicalizing([(string) $b, (string) $plain], $deleted);
        $this->assertSame(['' => 'running', 'a' => 'completed', 'b' => 'failed', 'c' => 'running'], $this->states($wf->id), 'b failed under continue: c runs');
        $this->assertSame('deleted from the console', $this->pdo->query("SELECT error FROM drover.workflow_steps WHERE id = $b")->fetchColumn());
    }

    /** Condition (PHP) and drover.wf_condition_holds (the database) agree, case by case. */
    public function testConditionsHoldInPhpAsInTheDatabase(): void
    {
        $cases = [
            [['a', 'rows', '>', 1000], '{"rows": 1001}'], [['a', 'rows', '>', 1000], '{"rows": 1000}'],
            [['a', 'rows', '>=', 1000], '{"rows": 1000.0}'], [['a', 'rows', '<', 1000], '{"rows": "999"}'],
            [['a', 'name', '>', 'b'], '{"name": "c"}'], [['a', 'rows', '=', 1], '{"rows": 1.0}'],
            [['a', 'rows', '=', 1], null], [['a', 'rows', '!=', 1], null], [['a', 'rows', '!=', 1], '{"other": 1}'],
            [['a', 'rows', '!=', 1], '{"rows": 1}'], [['a', 'rows', 'exists'], '{"rows": 0}'],
            [['a', 'rows', 'exists'], '{"rows": null}'], [['a', 'rows', 'exists'], '{}'], [['a', 'rows', '=', null], '{"rows": null}'],
            [['a', 'meta', '=', ['y' => 2, 'x' => [1, 'two']]], '{"meta": {"x": [1, "two"], "y": 2}}'],
            [['a', 'meta', '=', [1, 2]], '{"meta": [2, 1]}'], [['a', 'items.-1.id', '=', 'last'], '{"items": [{"id": "first"}, {"id": "last"}]}'],
            [['a', 'items.1', 'exists'], '{"items": [1]}'], [['a', '', '=', 'whole'], '"whole"'], [['a', ['dotted.key'], '=', 1], '{"dotted.key": 1}'],
            [['a', 'rows', '!=', 1], 'not json'], [['a', 'rows', '>', 1], '{"rows": true}'], [['a', '', '=', null], 'null'],
            [['a', 'n', '<=', 2.5], '{"n": 2.50}'], [['a', 'list', '=', []], '{"list": []}'], [['a', 'obj', '=', []], '{"obj": {}}'],
        ];
        $workflows = new Workflows(DB::connection('pgsql'));
        foreach ($cases as $i => [$when, $result]) {
            $condition = Condition::declared($when, 'w', 'b');
            $id = $workflows->create(new Graph("c$i", [new GraphNode('a'), new GraphNode('b', ['a'], condition: $condition)]), false);
            [$step] = $workflows->addSteps($id, "c$i", [['node' => 'a', 'queue' => 'default', 'payload' => '{}']]);
            $this->pdo->prepare('UPDATE drover.workflow_steps SET result = ? WHERE id = ?')->execute([$result, $step]);
            $db = (bool) $this->pdo->query("SELECT drover.wf_condition_holds(n) FROM drover.workflow_nodes AS n WHERE wf = $id AND name = 'b'")->fetchColumn();
            $this->assertSame($db, $condition->holds($result), "case $i: " . json_encode($when) . ' of ' . var_export($result, true) . ' (the database says ' . var_export($db, true) . ')');
        }
    }

    /**
     * Leases job $id (as a master does, token $leasedAs), hands it to the worker under $token
     * (the same unless a test makes the lease stale), runs it, and acks it when it said `done`
     * (unless !$ack): the kinds of frame the worker sent after `started`.
     *
     * @return list<string>
     */
    private function runStep(int $id, bool $ack = true, ?int $token = null, ?int $leasedAs = null): array
    {
        $token ??= random_int(1, 1 << 40);
        $this->pdo->prepare("UPDATE drover.jobs SET lease_token = ?, lease_owner = 1, lease_expires_at = now() + interval '1 minute', attempts = 1 WHERE id = ?")
            ->execute([$leasedAs ?? $token, $id]);
        $row = $this->row("SELECT queue, payload FROM drover.jobs WHERE id = $id");
        fwrite($this->master, json_encode(['t' => 'job', 'job' => $id, 'token' => $token, 'queue' => $row['queue'], 'attempts' => 1, 'max_attempts' => null, 'payload' => $row['payload']]) . "\n");
        $this->worker->runNextJob('drover', $row['queue'], new WorkerOptions('drover:test', 0, 512, 60, 0, 3));
        $kinds = array_map(fn (array $f) => $f['t'], $this->sent());
        $this->assertSame('started', array_shift($kinds));
        $this->assertSame(0, DB::connection('pgsql')->transactionLevel(), 'no transaction left open');
        if ($ack && $kinds === ['done']) {
            $this->ack($id);
        }
        return $kinds;
    }

    /** The master's ack of job $id: its row deleted (ack.sql), whose trigger moves its workflow. */
    private function ack(int $id): void
    {
        $this->assertSame(1, $this->pdo->exec("DELETE FROM drover.jobs WHERE id = $id"), "job $id is in drover.jobs");
    }

    /** The id of the one job of node $node in drover.jobs. */
    private function queued(string $node): int
    {
        $id = $this->pdo->query("SELECT j.id FROM drover.jobs j JOIN drover.workflow_steps s ON s.id = j.id WHERE s.node = '$node'")->fetchColumn();
        $this->assertNotFalse($id, "a step of $node is in drover.jobs");
        return (int) $id;
    }

    private function stepId(int $wf, string $node): int
    {
        return (int) $this->pdo->query("SELECT id FROM drover.workflow_steps WHERE wf = $wf AND node = '$node'")->fetchColumn();
    }

    /** @return list<string> */
    private function results(int $wf, string $node): array
    {
        return array_column($this->rows("SELECT result FROM drover.workflow_steps WHERE wf = $wf AND node = '$node' AND result IS NOT NULL ORDER BY member"), 'result');
    }

    /** @return array<string, string> the workflow's state under '' and each node's */
    private function states(int $wf): array
    {
        return ['' => $this->pdo->query("SELECT state FROM drover.workflows WHERE id = $wf")->fetchColumn()]
            + array_column($this->rows("SELECT name, state FROM drover.workflow_nodes WHERE wf = $wf ORDER BY position"), 'state', 'name');
    }

    /** @return list<array<string, mixed>> */
    private function rows(string $sql): array
    {
        return $this->pdo->query($sql)->fetchAll(\PDO::FETCH_ASSOC);
    }

    /** @return array<string, mixed> */
    private function row(string $sql): array
    {
        return $this->pdo->query($sql)->fetch(\PDO::FETCH_ASSOC);
    }

    private function countRows(string $from): int
    {
        return (int) $this->pdo->query("SELECT count(*) FROM $from")->fetchColumn();
    }

    /** @return list<array<string, mixed>> the frames the worker has sent */
    private function sent(): array
    {
        $frames = [];
        $read = [$this->master];
        $w = $e = null;
        while (stream_select($read, $w, $e, 0) > 0) {
            $frames[] = json_decode((string) fgets($this->master), true);
            $read = [$this->master];
        }
        return $frames;
    }
}

/** A workflow's step: does nothing, records a result, reads what the steps before it recorded, or reports progress. */
class Step implements ShouldQueue
{
    use InteractsWithQueue, Queueable, InteractsWithWorkflow, ReportsProgress;

    /** @var array<string, mixed> what the steps saw, by label or by what they looked at */
    public static array $seen = [];

    /** A message group (onGroup() on Laravel 12, whose Queueable declares it the same). */
    public $messageGroup;

    public ?string $fairKey = null;

    public function __construct(public string $label, public string $do = 'nothing')
    {
    }

    public function handle(): void
    {
        match ($this->do) {
            'record' => $this->recordResult(['label' => $this->label, 'rows' => 42]),
            'read' => self::$seen[$this->label] = [
                'id' => $this->workflow()->id(), 'name' => $this->workflow()->name(), 'node' => $this->workflow()->node(), 'member' => $this->workflow()->member(),
                'fetch' => $this->workflow()->result('fetch'),
                'many' => $this->workflow()->results('many'),
                'first of many' => $this->workflow()->result('many'),
                'nothing' => $this->workflow()->result('report'), 'none recorded' => $this->workflow()->results('report'),
                'approved' => $this->workflow()->signal('approved'), 'never sent' => $this->workflow()->signal('never'),
            ],
            'progress' => self::$seen['progress'] = $this->reportSome(),
            'outside' => self::$seen['outside'] = [
                'workflow' => $this->workflow(),
                'progress' => $this->progress(10, 'nowhere'),
                'recordResult' => (function () {
                    try {
                        $this->recordResult(1);
                        return 'recorded';
                    } catch (\LogicException $e) {
                        return $e->getMessage();
                    }
                })(),
            ],
            default => null,
        };
    }

    /** @return array<int|string, bool|string> */
    private function reportSome(): array
    {
        $said = [$this->progress(10, 'started'), $this->progress(20, 'throttled'), $this->progress(100, 'done')];
        try {
            $this->progress(250);
        } catch (\InvalidArgumentException $e) {
            $said['reported 250 %'] = $e->getMessage();
        }
        return $said;
    }
}

/** A step with a deduplication id. */
final class DeduplicatedStep extends Step
{
    public function deduplicationId(string $payload, string $queue): string
    {
        return 'once';
    }
}

/** A step that is ShouldBeUnique. */
final class UniqueStep extends Step implements ShouldBeUnique
{
}

/** A step completed in the worker's transaction: its result commits with its writes, or rolls back with them. */
final class TransactionalStep implements ShouldQueue, CompletesInTransaction
{
    use InteractsWithQueue, Queueable, InteractsWithWorkflow, ReportsProgress;

    public function __construct(public string $note, public bool $throws = false)
    {
    }

    public function handle(): void
    {
        DB::table('workflow_effects')->insert(['note' => $this->note]);
        $this->recordResult($this->note);
        $this->progress(50, 'half');
        $outside = PostgresServer::get()->pdo()->query('SELECT percent, note FROM drover.job_progress WHERE job_id = ' . (int) $this->job->getJobId())->fetch(\PDO::FETCH_NUM);
        Step::$seen['progress seen from outside'] = $outside === false ? null : [(int) $outside[0], $outside[1]];
        if ($this->throws) {
            throw new \RuntimeException('boom');
        }
    }
}
