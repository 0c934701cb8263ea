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

    private function action(Verb $verb, array $search, ?string $to = null): int
    {
        $target = ['search' => $search] + ($to === null ? [] : ['queue' => $to]);
        $st = $this->pdo->prepare("INSERT INTO drover.console_actions (actor, verb, target, state, upto) VALUES ('test', ?, ?::jsonb, 'requested', now()::text) RETURNING id");
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
        usleep(20000);
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
