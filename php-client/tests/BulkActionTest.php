<?php

namespace Drover\Tests;

use Drover\Dashboard\Actions\Bulk;
use Drover\Dashboard\Actions\Preview;
use Drover\Dashboard\Actions\Verb;
use Drover\Dashboard\Redaction;
use Drover\Dashboard\Repositories\SearchRepository;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\State;
use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Connection;
use PHPUnit\Framework\TestCase;

/**
 * A bulk action against a real PostgreSQL: it settles exactly what its search matched when it was
 * confirmed, in batches, never a job a worker holds nor one dispatched after; it goes on from its
 * cursor when run again and never does a batch twice; every job it settled is named in its
 * batches; a move keeps grouped jobs on their queue.
 */
final class BulkActionTest extends TestCase
{
    private Connection $db;

    private \PDO $pdo;

    protected function setUp(): void
    {
        $this->pdo = PostgresServer::get()->pdo();
        $this->pdo->exec('TRUNCATE drover.jobs, drover.console_actions CASCADE');
        $server = PostgresServer::get();
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $this->db = $capsule->getConnection();
    }

    private function jobs(string $queue, string $class, int $n, ?string $grp = null): void
    {
        $payload = json_encode(['displayName' => $class, 'data' => []]);
        $st = $this->pdo->prepare("INSERT INTO drover.jobs (queue, payload, grp, created_at) SELECT ?, ?, ?, now() - interval '1 s' FROM generate_series(1, ?)");
        $st->execute([$queue, $payload, $grp, $n]);
    }

    /**
     * An action as the console confirms it: previewed now (the point the preview is taken at,
     * then its count), its row keeping the search with its free-text filters withheld.
     */
    private function action(Verb $verb, array $search, ?string $to = null): int
    {
        [$filter, $problems] = JobFilter::fromQuery($search);
        $this->assertSame([], $problems);
        $repo = new SearchRepository($this->db);
        $point = $repo->previewPoint($filter->state);
        [$count, $exact] = $repo->count($filter);
        $target = [
            'search' => Redaction::search($filter->query()),
            'preview' => ['at' => $point['at'], 'horizon' => $point['horizon'], 'count' => $count, 'exact' => $exact],
        ] + ($to === null ? [] : ['queue' => $to]);
        $st = $this->pdo->prepare("INSERT INTO drover.console_actions (actor, verb, target, state, matched, upto)
            VALUES ('test', ?, ?::jsonb, 'requested', ?, ?) RETURNING id");
        $st->execute([$verb->value, json_encode($target), $exact ? $count : null, $point['upto']]);
        return (int) $st->fetchColumn();
    }

    private function rows(string $sql): int
    {
        return (int) $this->pdo->query($sql)->fetchColumn();
    }

    public function testDeleteSettlesWhatMatchedNeverAJobAWorkerHoldsNorOneDispatchedAfter(): void
    {
        $this->jobs('mail', 'App\\Jobs\\Spam', 1200);
        $this->jobs('mail', 'App\\Jobs\\Welcome', 30);
        // A worker holds one of the matches.
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = 1, lease_owner = 1, lease_expires_at = now() + interval '1 min'
            WHERE id = (SELECT min(id) + 7 FROM drover.jobs)");
        $id = $this->action(Verb::Delete, ['state' => 'pending', 'queue' => 'mail', 'class' => 'Spam']);
        // Dispatched after the confirmation: not the action's.
        $this->pdo->exec("INSERT INTO drover.jobs (queue, payload) VALUES ('mail', '{\"displayName\":\"App\\\\\\\\Jobs\\\\\\\\Spam\"}')");
        $row = (new Bulk($this->db))->run($id);
        $this->assertSame('done', $row->state, (string) $row->outcome);
        $this->assertSame(1199, (int) $row->acted);
        $this->assertSame(0, (int) $row->passed, 'the running one is not pending: never selected');
        $this->assertSame(1 + 30 + 1, $this->rows('SELECT count(*) FROM drover.jobs'), 'the running job, the others, the late one');
        $this->assertSame(1, $this->rows('SELECT count(*) FROM drover.jobs WHERE lease_token IS NOT NULL'));
        $this->assertSame(3, $this->rows("SELECT count(*) FROM drover.console_action_jobs WHERE action = $id"), 'batches of 500');
        $this->assertSame(1199, $this->rows("SELECT count(DISTINCT k) FROM drover.console_action_jobs, unnest(keys) k WHERE action = $id"));
        $this->assertStringStartsWith('1,199 deleted', (string) $row->outcome);
    }

    public function testARunStoppedHalfWayGoesOnFromItsCursorAndNeverDoesABatchTwice(): void
    {
        $this->jobs('mail', 'App\\Jobs\\Spam', 1500);
        $id = $this->action(Verb::Delete, ['state' => 'pending', 'queue' => 'mail']);
        $first = (new Bulk($this->db))->run($id, 0.000001);
        $this->assertSame('running', $first->state);
        $this->assertSame(500, (int) $first->acted, 'one batch in the time given');
        $row = (new Bulk($this->db))->run($id);
        $this->assertSame('done', $row->state);
        $this->assertSame(1500, (int) $row->acted);
        $this->assertSame(0, $this->rows('SELECT count(*) FROM drover.jobs'));
        $this->assertSame('done', (new Bulk($this->db))->run($id)->state, 'a third run finds it over');
        $this->assertSame(1500, (int) $this->db->selectOne("SELECT acted FROM drover.console_actions WHERE id = $id")->acted);
    }

    public function testAMoveKeepsGroupedJobsOnTheirQueueAndSaysSo(): void
    {
        $this->jobs('slow', 'App\\Jobs\\Report', 20);
        $this->jobs('slow', 'App\\Jobs\\Report', 1, 'order-1');
        $id = $this->action(Verb::Move, ['state' => 'pending', 'queue' => 'slow'], 'fast');
        $row = (new Bulk($this->db))->run($id);
        $this->assertSame([20, 1], [(int) $row->acted, (int) $row->passed]);
        $this->assertSame(20, $this->rows("SELECT count(*) FROM drover.jobs WHERE queue = 'fast'"));
        $this->assertSame(1, $this->rows("SELECT count(*) FROM drover.jobs WHERE queue = 'slow' AND grp = 'order-1'"));
        $this->assertStringContainsString('1 passed over', (string) $row->outcome);
    }

    public function testAnActionThatCannotBeCarriedOutFailsNamingWhy(): void
    {
        $id = $this->action(Verb::Delete, ['state' => 'running']);
        $row = (new Bulk($this->db))->run($id);
        $this->assertSame('failed', $row->state);
        $this->assertStringContainsString('delete applies to pending, delayed jobs, not running ones', (string) $row->outcome);
    }

    public function testKeptJobsAreRetriedAsTheyWereKeptOrForgotten(): void
    {
        $this->pdo->exec('TRUNCATE drover.failed_jobs');
        $this->pdo->exec("INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
            SELECT g, 'mail', '{\"displayName\":\"App\\\\Jobs\\\\Kept' || g || '\"}', 3, 'Unreadable payload', now() - interval '1 s' FROM generate_series(1, 3) g");
        $retry = (new Bulk($this->db))->run($this->action(Verb::Retry, ['state' => 'kept', 'class' => 'Kept2']));
        $this->assertSame([1, 'done'], [(int) $retry->acted, $retry->state]);
        $this->assertSame(1, $this->rows("SELECT count(*) FROM drover.jobs WHERE queue = 'mail' AND payload LIKE '%Kept2%' AND attempts = 0"), 'back on its queue as it was kept');
        $forget = (new Bulk($this->db))->run($this->action(Verb::Forget, ['state' => 'kept']));
        $this->assertSame(2, (int) $forget->acted);
        $this->assertSame(0, $this->rows('SELECT count(*) FROM drover.failed_jobs'));
    }

    public function testReleaseLetsTheGroupsTheirJobsWaitBehindGoOnWithoutTheirFailedJob(): void
    {
        $this->pdo->exec('TRUNCATE drover.groups, drover.group_jobs, drover.group_failures');
        $enqueue = $this->pdo->prepare("SELECT drover.enqueue('billing', ?, 0, ?, true, NULL, NULL, 0::smallint, NULL)");
        $ids = [];
        foreach ([['{"uuid":"0b4ed1f2-9c33-4f6e-8a0e-2a6f3c1d5e7b","displayName":"App\\Jobs\\Charge"}', 'order-7'], ['{"displayName":"App\\Jobs\\Ship"}', 'order-7'], ['{"displayName":"App\\Jobs\\Ship"}', 'order-8']] as [$payload, $group]) {
            $enqueue->execute([$payload, $group]);
            $ids[] = (int) $enqueue->fetchColumn();
        }
        // The head of order-7 fails under hold (as ack_failed.sql settles it): the group is held.
        $this->pdo->exec("WITH gone AS (DELETE FROM drover.jobs WHERE id = {$ids[0]} RETURNING id, payload)
            INSERT INTO drover.group_failures (job, uuid, error, at) SELECT id, drover.payload_uuid(payload), 'boom', now() FROM gone");
        $this->assertNull($this->db->selectOne("SELECT head FROM drover.groups WHERE name = 'order-7'")->head);
        usleep(20000);
        $row = (new Bulk($this->db))->run($this->action(Verb::Release, ['state' => 'held', 'group' => 'order-7']));
        $this->assertSame([1, 0, 'done'], [(int) $row->acted, (int) $row->passed, $row->state]);
        $this->assertSame($ids[1], (int) $this->db->selectOne("SELECT head FROM drover.groups WHERE name = 'order-7'")->head, 'its next job is its head');
        $this->assertSame(1, $this->rows("SELECT count(*) FROM drover.jobs WHERE id = {$ids[1]}"));
    }

    public function testOnlyRowsAsThePreviewSawThemAreActedOn(): void
    {
        $this->jobs('grow', 'App\\Jobs\\Grow', 4);
        [$p1, $p2, $p3, $p4] = array_map('intval', $this->pdo->query("SELECT id FROM drover.jobs ORDER BY id")->fetchAll(\PDO::FETCH_COLUMN));
        $id = $this->action(Verb::Delete, ['state' => 'pending', 'queue' => 'grow']);
        // Since the preview: p2 is claimed (running), p3 claimed and put back in its place (a
        // dead worker's release keeps its due time), and a job promoted from its group's line
        // with an id below the preview's newest (a group's next job keeps its id and place).
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = 1, lease_owner = 1, lease_expires_at = now() + interval '1 min' WHERE id IN ($p2, $p3)");
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = $p3");
        $this->pdo->exec("INSERT INTO drover.jobs (id, queue, payload, available_at, created_at) VALUES ($p1 - 1, 'grow', '{}', now() - interval '1 hour', now() - interval '1 hour')");
        $row = (new Bulk($this->db))->run($id);
        $this->assertSame(['done', 2, 0], [$row->state, (int) $row->acted, (int) $row->passed], (string) $row->outcome);
        $this->assertSame([$p1 - 1, $p2, $p3], array_map('intval', $this->pdo->query('SELECT id FROM drover.jobs ORDER BY id')->fetchAll(\PDO::FETCH_COLUMN)));
        $this->assertSame(2, (int) $row->target['preview']['changed']);
        $this->assertSame('2 deleted of the 4 previewed; 2 no longer matched (gone, started, or changed since the preview); 2 that match now but did not when previewed (dispatched before it but due, released or changed since) were not touched', $row->outcome);

        // A kept job kept again since the preview is a new row under the same id: not touched.
        $this->pdo->exec('TRUNCATE drover.failed_jobs');
        $this->pdo->exec("INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at) VALUES (7, 'mail', '{}', 3, 'boom', now()), (8, 'mail', '{}', 3, 'boom', now())");
        $forget = $this->action(Verb::Forget, ['state' => 'kept']);
        $this->pdo->exec("DELETE FROM drover.failed_jobs WHERE id = 8; INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at) VALUES (8, 'mail', '{}', 4, 'boom again', now())");
        $row = (new Bulk($this->db))->run($forget);
        $this->assertSame([1, 'boom again'], [(int) $row->acted, (string) $this->pdo->query('SELECT error FROM drover.failed_jobs')->fetchColumn()]);
    }

    public function testASearchsWithheldTextComesWithTheJobThatRunsTheActionNotWithItsRow(): void
    {
        $this->jobs('mail', 'App\\Jobs\\Spam', 2);
        $this->pdo->exec("INSERT INTO drover.jobs (queue, payload) VALUES ('mail', '{\"displayName\":\"App\\\\\\\\Jobs\\\\\\\\Spam\",\"data\":{\"command\":\"needle-42\"}}')");
        $search = ['state' => 'pending', 'queue' => 'mail', 'text' => 'needle-42'];
        $without = $this->action(Verb::Delete, $search);
        $this->assertStringNotContainsString('needle-42', (string) $this->pdo->query("SELECT target::text FROM drover.console_actions WHERE id = $without")->fetchColumn());
        $row = (new Bulk($this->db))->run($without);
        $this->assertSame('failed', $row->state);
        $this->assertStringContainsString('its `text` filter is withheld from the audit trail and did not come with the job that runs it', (string) $row->outcome);
        $row = (new Bulk($this->db))->run($this->action(Verb::Delete, $search), INF, Redaction::withheld($search));
        $this->assertSame(['done', 1], [$row->state, (int) $row->acted]);
        $this->assertSame(2, $this->rows('SELECT count(*) FROM drover.jobs'));
    }

    public function testAPreviewTokenCarriesWhatThePageShowedAndNothingElse(): void
    {
        $preview = new Preview(['state' => 'pending', 'text' => 'ünïcode'], 'move', 'fast', '42', '2026-12-07T10:00:00.000001Z', '777', 3, true, 1000);
        $token = $preview->token('key-1');
        $this->assertEquals($preview, Preview::fromToken($token, 'key-1', 1000 + Preview::LIFETIME));
        $refusals = [
            'altered' => [substr_replace($token, $token[3] === 'A' ? 'B' : 'A', 3, 1), 'key-1', 1000],
            'another key' => [$token, 'key-2', 1000],
            'expired' => [$token, 'key-1', 1001 + Preview::LIFETIME],
            'no signature' => ['abc', 'key-1', 1000],
        ];
        foreach ($refusals as $why => [$candidate, $key, $now]) {
            try {
                Preview::fromToken($candidate, $key, $now);
                $this->fail("$why: accepted");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('preview the action again from the search', $e->getMessage(), $why);
            }
        }
    }

    public function testTheVerbsSayWhatTheyMayBeDoneTo(): void
    {
        $this->assertSame([Verb::Delete, Verb::Move], Verb::for(State::Pending));
        $this->assertSame([], Verb::for(State::Running), 'a running job is stopped from its page, one at a time');
        $this->assertSame([Verb::Retry, Verb::Forget], Verb::for(State::Failed));
        $this->assertSame([Verb::Release], Verb::for(State::Held));
        $this->assertSame('move needs the queue to move the jobs to', Verb::Move->refusal(State::Delayed, ' '));
        $this->assertNull(Verb::Move->refusal(State::Delayed, 'fast'));
    }
}
