<?php

namespace Drover\Tests;

use Drover\Dashboard\Redaction;
use Drover\Schema\BrokerQuery;
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/DashboardApp.php';

/**
 * The console's workflow pages (issue 60, docs/dashboard.md) as Laravel's HTTP kernel renders
 * them, over a real PostgreSQL: workflows made by the SQL functions an application calls
 * (drover.workflow_create, workflow_add_steps, workflow_start) and moved as a master moves them —
 * a step's job deleted (completed), or noted in drover.step_failures and deleted (failed), a job
 * leased (running), a progress reported under its lease.
 *
 * - the list shows workflows in every state, searches by a name's prefix, state and age, and
 *   pages newest first without a gap or a repeat;
 * - a workflow's page draws every node of its graph and says of each its state, why it was
 *   cancelled or skipped, what it waits for (a signal, its time, its dependencies), its steps,
 *   results, running steps with their progress and failed steps with their errors (redacted),
 *   a node of 2,000 steps listing only the first 50 failed and running ones;
 * - an operator retries a failed step (the failer forgets it, the rest of the workflow goes on
 *   to its end), sends a signal (its nodes released) and cancels a workflow; a viewer sees no
 *   button and each action answers 403; each action is in the audit trail;
 * - a job's page shows its progress, and the workflow it is a step of.
 */
final class WorkflowPagesTest extends TestCase
{
    private static ?DashboardApp $dashboard = null;

    private \PDO $pdo;

    public static function setUpBeforeClass(): void
    {
        self::$dashboard ??= DashboardApp::boot();
    }

    protected function setUp(): void
    {
        $this->pdo = PostgresServer::get()->pdo();
        $this->pdo->exec('CREATE TABLE IF NOT EXISTS public.failed_jobs (id bigserial PRIMARY KEY, uuid varchar(255) UNIQUE, connection text NOT NULL,
            queue text NOT NULL, payload text NOT NULL, exception text NOT NULL, failed_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)');
        $this->pdo->exec('TRUNCATE drover.jobs, drover.failed_jobs, drover.console_actions, drover.workflows, drover.workflow_nodes,
            drover.workflow_steps, drover.workflow_signals, drover.workflow_events, drover.step_failures, drover.job_progress, public.failed_jobs CASCADE');
        DashboardApp::$operator = false;
    }

    private function app(): DashboardApp
    {
        return self::$dashboard;
    }

    // ------------------------------------------------------------------ as an application and a master

    private static function uuid(): string
    {
        $hex = bin2hex(random_bytes(16));
        return substr($hex, 0, 8) . '-' . substr($hex, 8, 4) . '-4' . substr($hex, 13, 3) . '-a' . substr($hex, 17, 3) . '-' . substr($hex, 20, 12);
    }

    /**
     * A workflow as an application dispatches one: created, its steps added (node => how many),
     * started unless $start is false (or it is a sub-workflow, started by its parent).
     *
     * @param list<array<string, mixed>> $nodes
     * @param array<string, int> $steps
     */
    private function workflow(string $name, array $nodes, array $steps, bool $start = true, ?int $parent = null, ?string $parentNode = null): int
    {
        $st = $this->pdo->prepare('SELECT drover.workflow_create(?, false, ?::jsonb, ?::bigint, ?)');
        $st->execute([$name, json_encode($nodes), $parent, $parentNode]);
        $id = (int) $st->fetchColumn();
        $names = $queues = $payloads = [];
        foreach ($steps as $node => $count) {
            for ($i = 0; $i < $count; $i++) {
                $names[] = $node;
                $queues[] = 'wf';
                $payloads[] = (string) json_encode(['uuid' => self::uuid(), 'displayName' => 'App\\Jobs\\' . ucfirst($node), 'job' => 'Illuminate\\Queue\\CallQueuedHandler@call', 'data' => ['member' => $i]]);
            }
        }
        foreach (array_chunk(array_keys($names), 1000) as $batch) {
            $pick = fn (array $list) => BrokerQuery::textArray(array_map(fn (int $i) => $list[$i], $batch));
            $this->pdo->prepare('SELECT drover.workflow_add_steps(?, ?::text[], ?::text[], ?::text[], NULL, NULL)')
                ->execute([$id, $pick($names), $pick($queues), $pick($payloads)]);
        }
        if ($start && $parent === null) {
            $this->pdo->prepare('SELECT drover.workflow_start(?)')->execute([$id]);
        }
        return $id;
    }

    /** @return list<int> the job ids of node $node's steps, by member */
    private function steps(int $wf, string $node): array
    {
        $st = $this->pdo->prepare('SELECT id FROM drover.workflow_steps WHERE wf = ? AND node = ? ORDER BY member');
        $st->execute([$wf, $node]);
        return array_map('intval', $st->fetchAll(\PDO::FETCH_COLUMN));
    }

    private function one(string $sql, array $bindings = []): mixed
    {
        $st = $this->pdo->prepare($sql);
        $st->execute($bindings);
        return $st->fetchColumn();
    }

    /** Steps completed, as an ack does: their jobs deleted. */
    private function complete(int ...$jobs): void
    {
        $this->pdo->prepare('DELETE FROM drover.jobs WHERE id = ANY(?::bigint[])')->execute([BrokerQuery::textArray(array_map('strval', $jobs))]);
    }

    /** Steps failed for good, as fail.sql and ack_failed.sql do: noted, then deleted in one statement. */
    private function failSteps(string $error, int ...$jobs): void
    {
        $ids = BrokerQuery::textArray(array_map('strval', $jobs));
        $this->pdo->prepare("WITH noted AS (INSERT INTO drover.step_failures (job, outcome, error) SELECT unnest(?::bigint[]), 'failed', ?)
            DELETE FROM drover.jobs WHERE id = ANY(?::bigint[])")->execute([$ids, $error, $ids]);
    }

    /** A step failed as a worker fails a job: its payload in Laravel's failer, then the master's ack_failed. */
    private function failThroughTheFailer(int $job, \Throwable $exception): string
    {
        $payload = (string) $this->one('SELECT payload FROM drover.jobs WHERE id = ?', [$job]);
        app('queue.failer')->log('drover', 'wf', $payload, $exception);
        $this->failSteps('failed (see failed_jobs)', $job);
        return (string) json_decode($payload, true)['uuid'];
    }

    /** Steps a worker runs now: leased. */
    private function lease(int ...$jobs): void
    {
        $this->pdo->prepare("UPDATE drover.jobs SET lease_token = nextval('drover.lease_tokens'), lease_owner = 1,
            lease_expires_at = now() + interval '5 min', attempts = attempts + 1 WHERE id = ANY(?::bigint[])")
            ->execute([BrokerQuery::textArray(array_map('strval', $jobs))]);
    }

    /** What a running job reports, under its lease, as `$this->progress()` does. */
    private function progress(int $job, int $percent, ?string $note): void
    {
        $this->assertTrue((bool) $this->one('SELECT drover.job_progress(id, lease_token, ?, ?) FROM drover.jobs WHERE id = ?', [$percent, $note, $job]));
    }

    /** A step's result, under its lease, as `$this->recordResult()` does. */
    private function result(int $job, string $json): void
    {
        $this->assertTrue((bool) $this->one('SELECT drover.workflow_record_result(id, lease_token, ?) FROM drover.jobs WHERE id = ?', [$json, $job]));
    }

    private function state(int $wf, ?string $node = null): string
    {
        return $node === null
            ? (string) $this->one('SELECT state FROM drover.workflows WHERE id = ?', [$wf])
            : (string) $this->one('SELECT state FROM drover.workflow_nodes WHERE wf = ? AND name = ?', [$wf, $node]);
    }

    /**
     * The state a workflow's page shows of a node: its row's — except that in a cancelled
     * workflow a node still `running` with nothing of it left to run (no step in drover.jobs; a
     * sub-workflow's node: its child ended) is shown cancelled, as nothing will end it.
     */
    private function shown(int $wf, string $node): string
    {
        $row = $this->pdo->prepare("SELECT n.state, w.state AS wf_state, n.sub_wf,
                (SELECT count(*) FROM drover.workflow_steps s WHERE s.wf = n.wf AND s.node = n.name AND s.state = 'queued') AS queued,
                (SELECT state FROM drover.workflows c WHERE c.id = n.sub_wf) AS child
            FROM drover.workflow_nodes n JOIN drover.workflows w ON w.id = n.wf WHERE n.wf = ? AND n.name = ?");
        $row->execute([$wf, $node]);
        $n = $row->fetch(\PDO::FETCH_ASSOC);
        $over = $n['sub_wf'] === null ? (int) $n['queued'] === 0 : !in_array($n['child'], ['pending', 'running'], true);
        return $n['wf_state'] === 'cancelled' && $n['state'] === 'running' && $over ? 'cancelled' : (string) $n['state'];
    }

    /**
     * A workflow in the middle of everything: a step done, a result recorded, a node skipped
     * by its condition, one waiting for a signal, one for its time, a sub-workflow running, a
     * node of three steps with one running (40 %), one failed through the failer (its exception
     * carrying secrets) and one queued, and a node waiting for its dependencies.
     *
     * @return array{wf: int, child: int, running: int, failed: int, failedUuid: string, queued: int}
     */
    private function importWorkflow(): array
    {
        $wf = $this->workflow('import-42', [
            ['name' => 'fetch', 'deps' => []],
            ['name' => 'parse', 'deps' => ['fetch']],
            ['name' => 'resize', 'deps' => ['parse']],
            ['name' => 'approve', 'deps' => ['parse'], 'wait_signal' => 'approved'],
            ['name' => 'later', 'deps' => ['parse'], 'wait_secs' => 7200],
            ['name' => 'maybe', 'deps' => ['parse'], 'condition' => ['node' => 'parse', 'path' => ['rows'], 'op' => '>', 'value' => 1000]],
            ['name' => 'thumbs', 'deps' => ['fetch']],
            ['name' => 'report', 'deps' => ['resize', 'approve'], 'on_failure' => 'continue'],
        ], ['fetch' => 1, 'parse' => 1, 'resize' => 3, 'approve' => 1, 'later' => 1, 'maybe' => 1, 'report' => 1], false);
        $child = $this->workflow('thumbs-42', [['name' => 'small', 'deps' => []], ['name' => 'large', 'deps' => ['small']]], ['small' => 1, 'large' => 1], true, $wf, 'thumbs');
        $this->pdo->prepare('SELECT drover.workflow_start(?)')->execute([$wf]);
        $this->complete(...$this->steps($wf, 'fetch'));
        [$parse] = $this->steps($wf, 'parse');
        $this->lease($parse);
        $this->result($parse, '{"rows":10}');
        $this->complete($parse);
        [$running, $failed, $queued] = $this->steps($wf, 'resize');
        $this->lease($running, $failed);
        $this->progress($running, 40, 'parsed 4,000 rows');
        $uuid = $this->failThroughTheFailer($failed, new \RuntimeException("cURL error 7: for https://ops:s3cr3tpass@api.example.com/v1?access_token=qtokXYZ987\nAuthorization: Bearer bearerabc.def42"));
        return ['wf' => $wf, 'child' => $child, 'running' => $running, 'failed' => $failed, 'failedUuid' => $uuid, 'queued' => $queued];
    }

    /** @return array<string, int> a workflow in each state but running, by state */
    private function workflowsInEveryOtherState(): array
    {
        $pending = $this->workflow('pending-1', [['name' => 'only', 'deps' => []]], ['only' => 1], false);
        $completed = $this->workflow('done-1', [['name' => 'only', 'deps' => []]], ['only' => 2]);
        $this->complete(...$this->steps($completed, 'only'));
        $failed = $this->workflow('broken-1', [['name' => 'a', 'deps' => []], ['name' => 'b', 'deps' => ['a']]], ['a' => 1, 'b' => 1]);
        $this->failSteps('RuntimeException: boom, password=hunter2 in the DSN', ...$this->steps($failed, 'a'));
        $cancelled = $this->workflow('gone-1', [['name' => 'x', 'deps' => []]], ['x' => 2]);
        $this->assertTrue((bool) $this->one('SELECT drover.workflow_cancel(?)', [$cancelled]));
        return ['pending' => $pending, 'completed' => $completed, 'failed' => $failed, 'cancelled' => $cancelled];
    }

    // ------------------------------------------------------------------ the tests

    public function testTheListShowsWorkflowsInEveryStateAndSearchesByNameStateAndAge(): void
    {
        $import = $this->importWorkflow();
        $others = $this->workflowsInEveryOtherState();
        $this->assertSame(['pending', 'completed', 'failed', 'cancelled'], array_map(fn (int $id) => $this->state($id), array_values($others)));
        $this->assertSame('running', $this->state($import['wf']));
        $app = $this->app();

        $page = $app->page('/drover/workflows');
        $this->assertStringContainsString('>Workflows</a>', $page, 'the nav names it');
        $this->assertStringContainsString('href="http://localhost/drover/workflows" class="on"', $page);
        $rows = self::rows($page);
        // Newest first: the last dispatched first; the sub-workflow is a workflow of its own.
        $this->assertSame([$others['cancelled'], $others['failed'], $others['completed'], $others['pending'], $import['child'], $import['wf']], array_keys($rows));
        $this->assertSame(['cancelled', 'failed', 'completed', 'pending', 'running', 'running'], array_values($rows));
        $this->assertMatchesRegularExpression('/data-id="' . $import['wf'] . '".*?import-42.*?class="n steps">2 \/ 9 <span class="badge bad">1 failed</s', $page);
        $this->assertMatchesRegularExpression('/data-id="' . $others['completed'] . '".*?class="n steps">2 \/ 2</s', $page);
        $this->assertMatchesRegularExpression('/data-id="' . $import['child'] . '".*?sub-workflow of <a[^>]*>#' . $import['wf'] . '<\/a> \(thumbs\)/s', $page);

        $this->assertSame([$others['failed']], array_keys(self::rows($app->page('/drover/workflows?state=failed'))));
        $this->assertSame([$import['wf']], array_keys(self::rows($app->page('/drover/workflows?name=import-'))));
        $this->assertSame([$import['child'], $import['wf']], array_keys(self::rows($app->page('/drover/workflows?state=running&within=1h'))));
        // A prefix is the name's start, its wildcards its own characters.
        $this->assertSame([], self::rows($app->page('/drover/workflows?name=%25-42')));
        $this->assertSame([], self::rows($app->page('/drover/workflows?name=import_42')));
        $this->pdo->exec("UPDATE drover.workflows SET created_at = now() - interval '2 days' WHERE name = 'done-1'");
        $this->assertNotContains($others['completed'], array_keys(self::rows($app->page('/drover/workflows?within=24h'))));
        $this->assertContains($others['completed'], array_keys(self::rows($app->page('/drover/workflows?within=7d'))));

        $refused = $app->page('/drover/workflows?state=done&within=2weeks');
        $this->assertStringContainsString('state must be one of pending, running, completed, failed, cancelled, not “done”', $refused);
        $this->assertStringContainsString('within must be a number and a unit', $refused);
        $this->assertSame(400, $app->request('GET', '/drover/workflows?name[]=x')->getStatusCode(), 'a list where one value is meant');
    }

    public function testTheListPagesNewestFirstWithoutAGapOrARepeat(): void
    {
        $made = [];
        for ($i = 0; $i < 120; $i++) {
            $made[] = $this->workflow(sprintf('page-%03d', $i), [['name' => 'only', 'deps' => []]], [], false);
        }
        // Two of them created at the same instant: the id breaks the tie.
        $this->pdo->exec("UPDATE drover.workflows SET created_at = (SELECT created_at FROM drover.workflows WHERE name = 'page-070') WHERE name = 'page-069'");
        $app = $this->app();
        $seen = [];
        $uri = '/drover/workflows';
        $pages = 0;
        while ($uri !== null) {
            $page = $app->page($uri);
            $rows = self::rows($page);
            $this->assertLessThanOrEqual(50, count($rows));
            $seen = array_merge($seen, array_keys($rows));
            $uri = preg_match('/id="next" href="([^"]+)"/', $page, $m) === 1 ? html_entity_decode($m[1]) : null;
            $pages++;
        }
        $this->assertSame(3, $pages);
        $expected = array_reverse($made);
        // page-069 and page-070 share a time: the higher id first.
        $this->assertSame($expected, $seen);
        // A rare prefix is read through workflows_name and sorted: the same order.
        $this->assertSame(array_reverse(array_slice($made, 100, 20)), array_keys(self::rows($app->page('/drover/workflows?name=page-1'))));
        // A cursor that is not one: the first page.
        $this->assertSame(array_slice($expected, 0, 50), array_keys(self::rows($app->page('/drover/workflows?after=nonsense'))));
    }

    public function testAWorkflowsPageDrawsItsGraphAndSaysWhatEachNodeDoesAndWaitsFor(): void
    {
        $import = $this->importWorkflow();
        $app = $this->app();
        $wf = $import['wf'];
        foreach ([false, true] as $operator) {
            $page = $app->page("/drover/workflows/$wf", $operator);
            // The graph: every node a box coloured by its state, every dependency a line.
            $this->assertSame(1, preg_match('/<svg class="wf-graph".*?<\/svg>/s', $page, $svg));
            foreach (['fetch' => 'completed', 'parse' => 'completed', 'resize' => 'running', 'approve' => 'waiting', 'later' => 'running', 'maybe' => 'skipped', 'thumbs' => 'running', 'report' => 'pending'] as $node => $state) {
                $this->assertStringContainsString("<g class=\"wf-node wf-$state\" data-node=\"$node\">", $svg[0], "$node, $state");
                $this->assertMatchesRegularExpression("/<tr id=\"node-\\d+\" class=\"wf-node-row\" data-node=\"$node\" data-state=\"$state\">/", $page);
            }
            $this->assertSame(8, substr_count($svg[0], 'class="wf-edge"'));
            $this->assertStringContainsString('data-from="resize" data-to="report"', $svg[0]);
            $xml = new \DOMDocument();
            $this->assertTrue($xml->loadXML($svg[0]), 'the graph is well-formed');
            // Each node's words.
            $row = fn (string $node) => preg_match('/data-node="' . $node . '" data-state=.*?<\/tr>/s', $page, $m) === 1 ? $m[0] : '';
            $this->assertStringContainsString('its condition was false', $row('maybe'));
            $this->assertStringContainsString('when parse.rows &gt; 1000', $row('maybe'));
            $this->assertStringContainsString('signal “approved”', $row('approve'));
            $this->assertMatchesRegularExpression('/its time: due <time[^>]*>in (1 h|2 h)<\/time>/', $row('later'));
            $this->assertStringContainsString('waits 2 h after its dependencies', $row('later'));
            $this->assertStringContainsString('“resize”, “approve”', $row('report'));
            $this->assertStringContainsString('its failure lets the rest go on', $row('report'));
            $this->assertStringContainsString('href="http://localhost/drover/workflows/' . $import['child'] . '"', $row('thumbs'));
            $this->assertStringContainsString('sub-workflow #' . $import['child'] . ' thumbs-42 (running)', $row('thumbs'));
            $this->assertStringContainsString('0 / 2', $row('thumbs'), 'a sub-workflow node counts its child\'s steps');
            $this->assertStringContainsString('1 · 11 B', $row('parse'), 'one result of 11 bytes');
            $this->assertMatchesRegularExpression('/0 \/ 3\s*<br><span class="badge bad">1 failed<\/span>/', $row('resize'));
            $this->assertStringContainsString('1 running', $row('resize'));
            $this->assertStringContainsString('id="workflow-steps">2 of 9 done, 1 failed, 1 running</td>', $page);
            // Its running step with its progress, its failed one with its error, redacted.
            $this->assertMatchesRegularExpression('/class="running-step" data-job="' . $import['running'] . '">.*?style="width: 40%".*?40% — parsed 4,000 rows/s', $page);
            $this->assertMatchesRegularExpression('/class="failed-step" data-job="' . $import['failed'] . '">.*?cURL error 7: for https:\/\/\[redacted\]@api\.example\.com\/v1\?access_token=\[redacted\]/s', $page);
            $this->assertStringContainsString('href="http://localhost/drover/failed/' . $import['failedUuid'] . '">its failed job</a>', $page);
            foreach (['s3cr3tpass', 'qtokXYZ987', 'bearerabc'] as $secret) {
                $this->assertStringNotContainsString($secret, $page);
            }
            // Buttons for an operator only.
            foreach (['class="retry-step"', 'class="danger cancel-workflow"', 'class="send-signal"', 'class="send-waited-signal"'] as $button) {
                $operator ? $this->assertStringContainsString($button, $page) : $this->assertStringNotContainsString($button, $page);
            }
        }
        // The sub-workflow's page links back.
        $this->assertStringContainsString('Sub-workflow of</th><td><a href="http://localhost/drover/workflows/' . $wf . '">#' . $wf . ' import-42</a>, its node “thumbs”', $app->page('/drover/workflows/' . $import['child']));
        $this->assertSame(404, $app->request('GET', '/drover/workflows/999999999')->getStatusCode());
    }

    public function testEveryStatesPageRenders(): void
    {
        $others = $this->workflowsInEveryOtherState();
        $app = $this->app();
        foreach ($others as $state => $wf) {
            $page = $app->page("/drover/workflows/$wf", true);
            $this->assertStringContainsString("id=\"workflow-state\">$state</span>", $page);
            $live = in_array($state, ['pending', 'running'], true);
            $live ? $this->assertStringContainsString('cancel-workflow', $page) : $this->assertStringNotContainsString('cancel-workflow', $page);
        }
        $failed = $app->page('/drover/workflows/' . $others['failed']);
        $this->assertStringContainsString('data-node="b" data-state="cancelled"', $failed);
        $this->assertStringContainsString('“a” failed', $failed);
        $this->assertStringContainsString('RuntimeException: boom, password=[redacted]', $failed);
        $this->assertStringNotContainsString('hunter2', $failed);
        $this->assertStringContainsString('data-node="x" data-state="' . $this->shown($others['cancelled'], 'x') . '"', $app->page('/drover/workflows/' . $others['cancelled']));
        $this->assertStringContainsString('its workflow to start', $app->page('/drover/workflows/' . $others['pending']));
    }

    public function testAnOperatorRetriesAFailedStepAndTheRestOfTheWorkflowGoesOnToItsEnd(): void
    {
        $others = $this->workflowsInEveryOtherState();
        $wf = $others['failed'];
        [$a] = $this->steps($wf, 'a');
        [$b] = $this->steps($wf, 'b');
        $app = $this->app();
        // A viewer may not.
        $this->assertSame(403, $app->request('POST', "/drover/workflows/$wf/steps/$a/retry")->getStatusCode());
        $this->assertSame('failed', $this->state($wf));

        $done = $app->request('POST', "/drover/workflows/$wf/steps/$a/retry", [], true);
        $this->assertSame(302, $done->getStatusCode(), DashboardApp::why($done));
        $this->assertSame('running', $this->state($wf));
        $this->assertSame('running', $this->state($wf, 'a'));
        $this->assertSame('pending', $this->state($wf, 'b'), 'what its failure cancelled waits for it again');
        $this->assertSame(1, (int) $this->one('SELECT count(*) FROM drover.jobs WHERE id = ?', [$a]), 'back on its queue');
        $this->complete($a);
        $this->assertSame('running', $this->state($wf, 'b'));
        $this->complete($b);
        $this->assertSame('completed', $this->state($wf));
        $this->assertStringContainsString('id="workflow-state">completed</span>', $app->page("/drover/workflows/$wf"));
        // Again: it is not failed any more.
        $again = $app->request('POST', "/drover/workflows/$wf/steps/$a/retry", [], true);
        $this->assertSame(302, $again->getStatusCode());
        $this->assertSame('completed', $this->state($wf));
        $audit = $this->pdo->query("SELECT state, outcome FROM drover.console_actions WHERE verb = 'retry-step' ORDER BY id")->fetchAll(\PDO::FETCH_ASSOC);
        $this->assertSame(['done', 'failed'], array_column($audit, 'state'));
        $this->assertStringContainsString("step $a (node “a”) of workflow $wf “broken-1” pushed back onto its queue", $audit[0]['outcome']);
        $this->assertStringContainsString('was not retried: it is not failed (completed)', $audit[1]['outcome']);
        $this->assertStringContainsString("step $a (node “a”) of workflow $wf “broken-1”", $app->page('/drover/actions'));
        // A job of another workflow is not this one's step.
        $this->assertSame(404, $app->request('POST', '/drover/workflows/' . $others['completed'] . "/steps/$a/retry", [], true)->getStatusCode());
    }

    public function testRetryingAStepTheFailerKeptForgetsItThereAsQueueRetryDoes(): void
    {
        $import = $this->importWorkflow();
        $wf = $import['wf'];
        $this->assertSame(1, (int) $this->one('SELECT count(*) FROM public.failed_jobs WHERE uuid = ?', [$import['failedUuid']]));
        $done = $this->app()->request('POST', "/drover/workflows/$wf/steps/{$import['failed']}/retry", [], true);
        $this->assertSame(302, $done->getStatusCode(), DashboardApp::why($done));
        $this->assertSame(0, (int) $this->one('SELECT count(*) FROM public.failed_jobs WHERE uuid = ?', [$import['failedUuid']]), 'forgotten by the failer');
        $this->assertSame('queued', (string) $this->one('SELECT state FROM drover.workflow_steps WHERE id = ?', [$import['failed']]));
        $this->assertStringNotContainsString('class="failed-step"', $this->app()->page("/drover/workflows/$wf"));
    }

    public function testAnOperatorSendsASignalAndCancelsAWorkflowAndAViewerMayDoNeither(): void
    {
        $import = $this->importWorkflow();
        $wf = $import['wf'];
        $app = $this->app();
        foreach ([['GET', "/drover/workflows/$wf/signal"], ['POST', "/drover/workflows/$wf/signal"], ['POST', "/drover/workflows/$wf/cancel"]] as [$method, $uri]) {
            $this->assertSame(403, $app->request($method, $uri, ['name' => 'approved'])->getStatusCode(), "$method $uri as a viewer");
        }
        $this->assertSame('waiting', $this->state($wf, 'approve'));
        $this->assertSame('running', $this->state($wf));

        $form = $app->page("/drover/workflows/$wf/signal?name=approved", true);
        $this->assertStringContainsString('name="name" value="approved"', $form);
        $bad = $app->request('POST', "/drover/workflows/$wf/signal", ['name' => 'approved', 'data' => '{by: ana}'], true);
        $this->assertSame(422, $bad->getStatusCode());
        $this->assertStringContainsString('`data` must be JSON', (string) $bad->getContent());
        $this->assertSame('waiting', $this->state($wf, 'approve'));
        $this->assertSame(422, $app->request('POST', "/drover/workflows/$wf/signal", ['name' => '', 'data' => ''], true)->getStatusCode());

        $sent = $app->request('POST', "/drover/workflows/$wf/signal", ['name' => 'approved', 'data' => '{"by": "ana", "password": "pw-777"}'], true);
        $this->assertSame(302, $sent->getStatusCode(), DashboardApp::why($sent));
        $this->assertSame('running', $this->state($wf, 'approve'), 'released by the signal');
        $this->assertSame('{"by": "ana", "password": "pw-777"}', $this->one('SELECT data FROM drover.workflow_signals WHERE wf = ? AND name = ?', [$wf, 'approved']));
        $page = $app->page("/drover/workflows/$wf");
        $this->assertStringContainsString('data-signal="approved"', $page);
        $this->assertStringContainsString('&quot;password&quot;: &quot;' . Redaction::MARK . '&quot;', $page);
        $this->assertStringNotContainsString('pw-777', $page);
        $target = (string) $this->one("SELECT target::text FROM drover.console_actions WHERE verb = 'signal-workflow'");
        $this->assertStringNotContainsString('pw-777', $target, 'the audit trail keeps the data\'s size, not the data');
        $this->assertStringContainsString('"bytes": 35', $target);

        // A sub-workflow is cancelled with its parent, never alone (its parent's node would run on).
        $child = $app->request('POST', '/drover/workflows/' . $import['child'] . '/cancel', [], true);
        $this->assertSame(422, $child->getStatusCode());
        $this->assertStringContainsString("is a sub-workflow of workflow $wf: cancel workflow $wf", DashboardApp::why($child));
        $this->assertSame('running', $this->state($import['child']));
        $this->assertStringNotContainsString('cancel-workflow', $app->page('/drover/workflows/' . $import['child'], true));

        $cancelled = $app->request('POST', "/drover/workflows/$wf/cancel", [], true);
        $this->assertSame(302, $cancelled->getStatusCode(), DashboardApp::why($cancelled));
        $this->assertSame('cancelled', $this->state($wf));
        $this->assertSame('cancelled', $this->state($import['child']), 'with its sub-workflow');
        $this->assertSame('cancelled', $this->state($wf, 'report'));
        $this->assertSame(1, (int) $this->one('SELECT count(*) FROM drover.jobs WHERE id = ?', [$import['running']]), 'a running step finishes');
        $this->assertSame(0, (int) $this->one('SELECT count(*) FROM drover.jobs WHERE id = ?', [$import['queued']]), 'one waiting is deleted');
        $page = $app->page("/drover/workflows/$wf", true);
        $this->assertStringContainsString('id="workflow-state">cancelled</span>', $page);
        $this->assertStringNotContainsString('cancel-workflow', $page);
        // Its nodes that were running: one whose step still runs, running; the others as their
        // rows say (shown()); the sub-workflow's, whose child was cancelled with it, cancelled.
        foreach (['later', 'approve', 'thumbs', 'resize', 'report'] as $node) {
            $this->assertStringContainsString("data-node=\"$node\" data-state=\"{$this->shown($wf, $node)}\"", $page, $node);
        }
        $this->assertStringContainsString('data-node="resize" data-state="running"', $page);
        $this->assertStringContainsString('data-node="thumbs" data-state="cancelled"', $page);
        $this->assertStringNotContainsString('class="retry-step"', $page, 'a cancelled workflow\'s steps are not retried');
        $again = $app->request('POST', "/drover/workflows/$wf/signal", ['name' => 'late', 'data' => ''], true);
        $this->assertSame(302, $again->getStatusCode());
        $this->assertSame(0, (int) $this->one('SELECT count(*) FROM drover.workflow_signals WHERE wf = ? AND name = ?', [$wf, 'late']), 'an ended workflow takes no signal');
        $verbs = $this->pdo->query('SELECT verb, state FROM drover.console_actions ORDER BY id')->fetchAll(\PDO::FETCH_NUM);
        $this->assertSame([['signal-workflow', 'done'], ['cancel-workflow', 'done'], ['signal-workflow', 'failed']], $verbs);
    }

    public function testASignalByIdIsRefusedWhileAnotherRunningWorkflowIsNamedThatId(): void
    {
        $wf = $this->workflow('waits', [['name' => 'w', 'deps' => [], 'wait_signal' => 'go']], ['w' => 1]);
        $other = $this->workflow((string) $wf, [['name' => 'w', 'deps' => [], 'wait_signal' => 'go']], ['w' => 1]);
        $refused = $this->app()->request('POST', "/drover/workflows/$wf/signal", ['name' => 'go'], true);
        $this->assertSame(422, $refused->getStatusCode());
        $this->assertStringContainsString("another running workflow is named “{$wf}”", (string) $refused->getContent());
        $this->assertSame('waiting', $this->state($other, 'w'));
        $this->assertSame('waiting', $this->state($wf, 'w'));
    }

    public function testANodeOfManyStepsIsCountedWholeAndListsOnlyItsFirstFailedAndRunningSteps(): void
    {
        $wf = $this->workflow('many', [['name' => 'fan', 'deps' => []], ['name' => 'in', 'deps' => ['fan']]], ['fan' => 2000, 'in' => 1]);
        $steps = $this->steps($wf, 'fan');
        $this->failSteps('boom', ...array_slice($steps, 0, 120));
        $this->lease(...array_slice($steps, 120, 60));
        $this->complete(...array_slice($steps, 1000, 1000));
        $page = $this->app()->page("/drover/workflows/$wf", true);
        $this->assertMatchesRegularExpression('/data-node="fan" data-state="running">.*?1,000 \/ 2,000\s*<br><span class="badge bad">120 failed<\/span>/s', $page);
        $this->assertStringContainsString('Failed (120, the first 50 listed)', $page);
        $this->assertStringContainsString('Running (60, the first 50 listed)', $page);
        $this->assertSame(50, substr_count($page, 'class="failed-step"'));
        $this->assertSame(50, substr_count($page, 'class="running-step"'));
        $this->assertStringContainsString('data-job="' . $steps[0] . '"', $page, 'the first by member');
        $this->assertStringNotContainsString('data-job="' . $steps[50] . '"', $page);
    }

    public function testAJobsPageShowsItsProgressAndTheWorkflowItIsAStepOf(): void
    {
        $import = $this->importWorkflow();
        $app = $this->app();
        $page = $app->page('/drover/job/' . $import['running']);
        $this->assertMatchesRegularExpression('/id="job-progress"><span class="progress"><span style="width: 40%"><\/span><\/span> 40% — parsed 4,000 rows <span class="muted">reported <time/', $page);
        $this->assertStringContainsString('id="job-workflow"><a href="http://localhost/drover/workflows/' . $import['wf'] . '">#' . $import['wf'] . ' import-42</a> (running), its node “resize”', $page);
        $queued = $app->page('/drover/job/' . $import['queued']);
        $this->assertStringContainsString('its node “resize”, member 2', $queued);
        $this->assertStringNotContainsString('id="job-progress"', $queued, 'no progress reported');
        // Any job reports progress, in a workflow or not; its note is redacted as any text.
        $plain = (int) $this->one("INSERT INTO drover.jobs (queue, payload) VALUES ('plain', '{\"displayName\":\"App\\\\Jobs\\\\Plain\"}') RETURNING id");
        $this->lease($plain);
        $this->progress($plain, 100, 'done, token=tok_abc123');
        $page = $app->page("/drover/job/$plain");
        $this->assertStringContainsString('100% — done, token=[redacted]', $page);
        $this->assertStringNotContainsString('id="job-workflow"', $page);
        $this->assertStringNotContainsString('tok_abc123', $page);
    }

    /**
     * The list's rows: id => state, in the page's order.
     *
     * @return array<int, string>
     */
    private static function rows(string $page): array
    {
        preg_match_all('/class="workflow-row" data-id="(\d+)" data-state="([a-z]+)"/', $page, $m, PREG_SET_ORDER);
        $rows = [];
        foreach ($m as [, $id, $state]) {
            $rows[(int) $id] = $state;
        }
        return $rows;
    }
}
