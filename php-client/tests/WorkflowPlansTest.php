<?php

namespace Drover\Tests;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Repositories\WorkflowRepository;
use Drover\Dashboard\Workflows\WorkflowFilter;
use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Connection;
use PHPUnit\Framework\TestCase;

/**
 * The console's workflow pages read through the indexes migration 0016 made for them, never a
 * sequential scan: checked with EXPLAIN on 100,000 workflows of skewed names, states and ages
 * (ANALYZEd), for every search of the list — each filter alone and together, with and without a
 * page's cursor, both ways a name's prefix is read — and for every statement a workflow's page
 * runs: its steps counted per node through workflow_steps_node, its failed steps listed through
 * it, its running steps found among the running jobs (jobs_leased).
 */
final class WorkflowPlansTest extends TestCase
{
    private static bool $seeded = false;

    private static int $busy = 0;

    private \PDO $pdo;

    private Connection $db;

    protected function setUp(): void
    {
        $server = PostgresServer::get();
        $this->pdo = $server->pdo();
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $this->db = $capsule->getConnection();
        if (self::$seeded) {
            return;
        }
        $this->pdo->exec('TRUNCATE drover.jobs, drover.workflows, drover.workflow_nodes, drover.workflow_steps, drover.workflow_signals, drover.job_progress');
        // 60% import-<n> (each its own name), 30% report-<n mod 1000>, 10% thumbs-<n>; mostly
        // completed, 1% failed, 1% cancelled, 0.1% pending, 2% and the newest running; one every
        // 30 s over the last five weeks.
        $this->pdo->exec("INSERT INTO drover.workflows (name, state, nodes, nodes_left, steps, created_at, started_at, finished_at)
            SELECT CASE WHEN g % 10 < 6 THEN 'import-' || g WHEN g % 10 < 9 THEN 'report-' || (g % 1000) ELSE 'thumbs-' || g END,
                   CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 100 = 1 THEN 'cancelled' WHEN g % 1000 = 2 THEN 'pending'
                        WHEN g > 99900 OR g % 50 = 3 THEN 'running' ELSE 'completed' END,
                   2, 0, 200, now() - make_interval(secs => (100000 - g) * 30), now() - make_interval(secs => (100000 - g) * 30),
                   now() - make_interval(secs => (100000 - g) * 30 - 20)
            FROM generate_series(1, 100000) g");
        $this->pdo->exec("INSERT INTO drover.workflow_nodes (wf, name, position, deps, members, members_left, failed_members, state)
            SELECT w.id, n.name, n.position, n.deps, 100, 0, 0, 'completed'
            FROM drover.workflows w, (VALUES ('fetch', 1, '{}'::text[]), ('resize', 2, '{fetch}'::text[])) AS n(name, position, deps)");
        // The steps of the newest 400 workflows (200 each), and one of 20,000 (the workflow
        // page's bound is per node, its aggregate a range of the index).
        self::$busy = (int) $this->pdo->query('SELECT max(id) FROM drover.workflows')->fetchColumn();
        $this->pdo->exec("INSERT INTO drover.workflow_steps (id, wf, node, member, queue, payload, state, result, error)
            SELECT nextval('drover.jobs_id_seq'), w.id, CASE WHEN m = 0 THEN 'fetch' ELSE 'resize' END, CASE WHEN m = 0 THEN 0 ELSE m - 1 END, 'q',
                   '{\"uuid\":\"' || md5(w.id || '-' || m)::uuid || '\"}',
                   CASE WHEN m % 50 = 7 THEN 'failed' WHEN m % 3 = 0 THEN 'queued' ELSE 'completed' END,
                   CASE WHEN m % 2 = 0 THEN '{\"n\":1}' END, CASE WHEN m % 50 = 7 THEN 'boom' END
            FROM (SELECT id FROM drover.workflows ORDER BY id DESC LIMIT 400) w,
                 generate_series(0, CASE WHEN w.id = " . self::$busy . " THEN 20000 ELSE 199 END) m");
        // Jobs: 30,000 plain ones, and the queued steps; 40 of them running, with progress.
        $this->pdo->exec("INSERT INTO drover.jobs (queue, payload) SELECT 'q' || (g % 5), '{}' FROM generate_series(1, 30000) g");
        $this->pdo->exec("INSERT INTO drover.jobs (id, queue, payload, wf) SELECT id, queue, payload, wf FROM drover.workflow_steps WHERE state = 'queued'");
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = nextval('drover.lease_tokens'), lease_owner = 1, lease_expires_at = now() + interval '1 min'
            WHERE id IN (SELECT id FROM drover.workflow_steps WHERE wf = " . self::$busy . " AND node = 'resize' AND state = 'queued' ORDER BY member LIMIT 40)");
        // Progress reported by the running steps, and by 30,000 jobs in the last hour.
        $this->pdo->exec("INSERT INTO drover.job_progress (job_id, percent, note) SELECT id, 50, 'half' FROM drover.jobs WHERE lease_token IS NOT NULL");
        $this->pdo->exec("INSERT INTO drover.job_progress (job_id, percent, note) SELECT g, 100, 'done' FROM generate_series(-30000, -1) g");
        $this->pdo->exec("INSERT INTO drover.workflow_signals (wf, name, data) SELECT id, 'approved', '{}' FROM drover.workflows WHERE state = 'running'");
        foreach (['drover.workflows', 'drover.workflow_nodes', 'drover.workflow_steps', 'drover.jobs', 'drover.job_progress', 'drover.workflow_signals'] as $t) {
            $this->pdo->exec("VACUUM ANALYZE $t");
        }
        self::$seeded = true;
    }

    public static function tearDownAfterClass(): void
    {
        PostgresServer::get()->pdo()->exec('TRUNCATE drover.jobs, drover.workflows, drover.workflow_nodes, drover.workflow_steps, drover.workflow_signals, drover.job_progress');
        self::$seeded = false;
    }

    private function plan(string $sql, array $bindings): string
    {
        $st = $this->pdo->prepare("EXPLAIN $sql");
        foreach (array_values($bindings) as $i => $value) {
            $st->bindValue($i + 1, $value, is_int($value) ? \PDO::PARAM_INT : \PDO::PARAM_STR);
        }
        $st->execute();
        return implode("\n", $st->fetchAll(\PDO::FETCH_COLUMN));
    }

    /** @return list<WorkflowFilter> every shape of search the list takes */
    private static function searches(): array
    {
        $searches = [];
        foreach ([null, 'import-', 'import-12', 'report-7', 'thumbs-99999', 'nothing-'] as $name) {
            foreach ([null, 'failed', 'running', 'completed', 'pending'] as $state) {
                foreach ([null, '1h', '7d'] as $within) {
                    [$filter, $problems] = WorkflowFilter::fromQuery(['name' => $name, 'state' => $state, 'within' => $within]);
                    self::assertSame([], $problems);
                    $searches[] = $filter;
                }
            }
        }
        return $searches;
    }

    public function testEverySearchOfTheListWalksAnIndexNeverTheTable(): void
    {
        $cursor = WorkflowRepository::cursor(
            (string) $this->pdo->query("SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') || '_' || id FROM drover.workflows WHERE id = 95000")->fetchColumn()
        );
        $this->assertNotNull($cursor);
        $repo = new WorkflowRepository($this->db);
        $seen = ['walk' => 0, 'by-name' => 0, 'newest' => 0];
        foreach (self::searches() as $filter) {
            foreach ([null, $cursor] as $after) {
                // Each way the page may read it (page()): walking; by name where the prefix's
                // count is within the cap, or after the walk and the newest, for a state rare
                // among the prefix's newest; the newest by name where the prefix is common.
                $statements = ['walk' => WorkflowRepository::listStatement($filter, $after, WorkflowRepository::WALK, Limits::PAGE + 1)];
                if ($filter->name !== null) {
                    $few = $repo->fewNamed($filter);
                    if ($few || in_array($filter->state, ['failed', 'pending', 'running'], true)) {
                        $statements['by-name'] = WorkflowRepository::listStatement($filter, $after, WorkflowRepository::BY_NAME, Limits::PAGE + 1);
                    }
                    if (!$few) {
                        $statements['newest time'] = WorkflowRepository::newestStatement($filter, $after, Limits::PAGE + 1);
                        $since = $this->db->selectOne(...$statements['newest time'])->since;
                        $this->assertNotNull($since);
                        $statements['newest'] = WorkflowRepository::listStatement($filter, $after, WorkflowRepository::BY_NAME, Limits::PAGE + 1, $since);
                    }
                }
                foreach ($statements as $way => [$sql, $bindings]) {
                    $plan = $this->plan($sql, $bindings);
                    $what = json_encode($filter->query()) . ($after ? ' after a cursor' : '') . " $way:\n$plan";
                    $seen[$way] = ($seen[$way] ?? 0) + 1;
                    $this->assertStringNotContainsString('Seq Scan', $plan, $what);
                    $this->assertMatchesRegularExpression(match ($way) {
                        'walk' => '/(using|on) workflows_(age|state_age)\b/',
                        // The page's oldest time from the prefix's range of workflows_name alone.
                        'newest time' => '/Index Only Scan using workflows_name on workflows x\b/',
                        default => '/(using|on) workflows_(name|state_age|age)\b/',
                    }, $plan, $what);
                    if ($way === 'walk' && $filter->state === null) {
                        // The walk: newest first in the index's own order, stopped after a page.
                        $this->assertStringNotContainsString('Sort', $plan, $what);
                    }
                }
            }
            if ($filter->name !== null) {
                [$sql, $bindings] = WorkflowRepository::nameCountStatement($filter);
                $plan = $this->plan($sql, $bindings);
                $what = json_encode($filter->query()) . " count:\n$plan";
                if ($filter->within === null) {
                    $this->assertMatchesRegularExpression('/using workflows_name\b/', $plan, $what);
                    $this->assertMatchesRegularExpression('/Index Cond: \(\(name ~>=~ /', $plan, "a range of the prefix: $what");
                } else {
                    $this->assertMatchesRegularExpression('/using workflows_(name|age|state_age)\b/', $plan, $what);
                }
                $this->assertStringNotContainsString('Seq Scan', $plan, $what);
            }
        }
        $this->assertGreaterThan(50, $seen['by-name']);
        $this->assertGreaterThanOrEqual(20, $seen['newest']);
    }

    public function testAPrefixFewHaveIsSortedAndOneManyHaveIsWalkedAndBothPageAlike(): void
    {
        $repo = new WorkflowRepository($this->db);
        $this->db->enableQueryLog();
        $ran = function (array $query) use ($repo): array {
            $this->db->flushQueryLog();
            [$filter] = WorkflowFilter::fromQuery($query);
            [$rows, $next] = $repo->page($filter, null);
            $statements = array_column($this->db->getQueryLog(), 'query');
            return [array_map(fn ($r) => (string) $r->name, $rows), $next, implode("\n", $statements)];
        };
        // 60,000 import-… workflows: more than the cap, walked (left(name, n) = prefix), a page at once.
        [$rows, $next, $sql] = $ran(['name' => 'import-']);
        $this->assertStringContainsString('left(w.name, ?::integer) = ?', $sql);
        $this->assertCount(Limits::PAGE, $rows);
        $this->assertSame('import-100000', $rows[0]);
        $this->assertNotNull($next);
        // import-9999…: six (g = 99990 to 99995): read by name, newest first.
        [$rows, $next, $sql] = $ran(['name' => 'import-9999']);
        $this->assertStringContainsString('w.name LIKE ?', $sql);
        $this->assertSame(['import-99995', 'import-99994', 'import-99993', 'import-99992', 'import-99991', 'import-99990'], $rows);
        $this->assertNull($next);
        // Every way gives the same rows in the same order, from the start and after a cursor
        // (one at a time two workflows share: the id breaks the tie).
        $this->pdo->exec("UPDATE drover.workflows SET created_at = (SELECT created_at FROM drover.workflows WHERE name = 'import-99980') WHERE name = 'import-99981'");
        $cursor = WorkflowRepository::cursor((string) $this->pdo->query("SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') || '_' || id FROM drover.workflows WHERE name = 'import-99981'")->fetchColumn());
        foreach ([['name' => 'import-'], ['name' => 'import-1'], ['name' => 'import-', 'state' => 'completed'], ['name' => 'report-7', 'within' => '30d'], ['name' => 'import-99'], ['name' => 'import-', 'state' => 'failed']] as $query) {
            [$filter] = WorkflowFilter::fromQuery($query);
            foreach ([null, $cursor] as $after) {
                $found = [];
                foreach ([WorkflowRepository::WALK, WorkflowRepository::BY_NAME] as $way) {
                    $found[$way] = array_map(fn ($r) => (int) $r->id, $this->db->select(...WorkflowRepository::listStatement($filter, $after, $way, Limits::PAGE + 1)));
                }
                $since = $this->db->selectOne(...WorkflowRepository::newestStatement($filter, $after, Limits::PAGE + 1))->since;
                $found['newest'] = array_map(fn ($r) => (int) $r->id, $this->db->select(...WorkflowRepository::listStatement($filter, $after, WorkflowRepository::BY_NAME, Limits::PAGE + 1, $since)));
                $what = json_encode($query) . ($after ? ' after a cursor' : '');
                $this->assertCount(Limits::PAGE + 1, $found[WorkflowRepository::WALK], $what);
                $this->assertSame($found[WorkflowRepository::WALK], $found[WorkflowRepository::BY_NAME], $what);
                if ($filter->state !== 'failed') {
                    $this->assertSame($found[WorkflowRepository::WALK], $found['newest'], $what);
                } else {
                    // A state rarer than 1 in 20 of the prefix's newest: short (page() then reads by name).
                    $this->assertLessThan(Limits::PAGE + 1, count($found['newest']), $what);
                }
            }
        }
    }

    public function testTheNewestByNameGoesOnWithinAGroupOfWorkflowsDispatchedAtTheSameInstant(): void
    {
        // Five dispatched in one transaction (one time), older than any other of their prefix.
        $this->pdo->exec("INSERT INTO drover.workflows (name, created_at) SELECT 'tie-' || g, '2001-02-03 04:05:06.789012+00' FROM generate_series(1, 5) g");
        $ids = array_map('intval', $this->pdo->query("SELECT id FROM drover.workflows WHERE name LIKE 'tie-%' ORDER BY id DESC")->fetchAll(\PDO::FETCH_COLUMN));
        $repo = new WorkflowRepository($this->db);
        [$filter] = WorkflowFilter::fromQuery(['name' => 'tie-']);
        $first = $repo->newestByName($filter, null);
        $this->assertSame($ids, array_map(fn ($r) => (int) $r->id, $first));
        // After the third: the two left at that instant.
        $after = $repo->newestByName($filter, WorkflowRepository::cursor((string) $first[2]->cursor));
        $this->assertSame(array_slice($ids, 3), array_map(fn ($r) => (int) $r->id, $after));
        $this->assertSame([], $repo->newestByName($filter, WorkflowRepository::cursor((string) $first[4]->cursor)));
        $this->pdo->exec("DELETE FROM drover.workflows WHERE name LIKE 'tie-%'");
    }

    public function testAWorkflowsPageCountsItsStepsThroughItsRangeOfTheIndexAndListsFromTheRunningJobs(): void
    {
        $repo = new WorkflowRepository($this->db);
        $this->db->enableQueryLog();
        $this->db->flushQueryLog();
        $busy = self::$busy;
        $this->assertNotNull($repo->find($busy));
        $this->assertCount(2, $repo->nodes($busy, Limits::WORKFLOW_NODES));
        $counts = $repo->stepCounts($busy);
        $this->assertSame(20001, (int) $counts['fetch']->total + (int) $counts['resize']->total);
        $failed = $repo->failedSteps($busy, ['resize'], Limits::WORKFLOW_STEPS_LISTED);
        $this->assertCount(Limits::WORKFLOW_STEPS_LISTED, $failed['resize']);
        $running = $repo->runningSteps($busy, Limits::WORKFLOW_STEPS_LISTED);
        $this->assertSame(40, (int) $running['resize'][0]->running);
        $this->assertSame(50, (int) $running['resize'][0]->percent);
        $repo->signals($busy);
        $repo->summaries([$busy, $busy - 1]);
        $repo->stepOf((int) $running['resize'][0]->id);
        $repo->step($busy, (int) $running['resize'][0]->id);
        $expected = [
            'GROUP BY node' => 'workflow_steps_node',
            "state = 'failed' ORDER BY member" => 'workflow_steps_node',
            'lease_token IS NOT NULL AND j.wf' => 'jobs_leased',
            'FROM drover.workflow_nodes WHERE wf = ? ORDER BY position' => 'workflow_nodes_pkey',
            'FROM drover.workflow_nodes WHERE wf = ANY' => 'workflow_nodes_pkey',
        ];
        $seen = [];
        foreach ($this->db->getQueryLog() as $query) {
            $plan = $this->plan($query['query'], $query['bindings']);
            $this->assertStringNotContainsString('Seq Scan', $plan, "{$query['query']}\n$plan");
            foreach ($expected as $needle => $index) {
                if (str_contains($query['query'], $needle)) {
                    $this->assertMatchesRegularExpression("/(using|on) $index\\b/", $plan, "{$query['query']}\n$plan");
                    $seen[] = $needle;
                }
            }
        }
        $this->assertEqualsCanonicalizing(array_keys($expected), array_unique($seen), 'each statement was run');
    }
}
