<?php

namespace Drover\Tests;

use Drover\Dashboard\Actions\Bulk;
use Drover\Dashboard\Actions\Verb;
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

    /** An action as the console confirms it, on what exists now (the newest job id). */
    private function action(Verb $verb, array $search, ?string $to = null): int
    {
        $target = ['search' => $search] + ($to === null ? [] : ['queue' => $to]);
        $st = $this->pdo->prepare("INSERT INTO drover.console_actions (actor, verb, target, state, upto)
            VALUES ('test', ?, ?::jsonb, 'requested', (SELECT greatest((SELECT coalesce(max(id), 0) FROM drover.jobs), (SELECT coalesce(max(id), 0) FROM drover.failed_jobs), (SELECT coalesce(max(id), 0) FROM drover.group_jobs))::text)) RETURNING id");
        $st->execute([$verb->value, json_encode($target)]);
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
