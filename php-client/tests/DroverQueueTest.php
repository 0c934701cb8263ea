<?php

namespace Drover\Tests;

use Drover\DroverQueue;
use Drover\Middleware\LimitConcurrency;
use Illuminate\Container\Container;
use Illuminate\Database\Capsule\Manager as Capsule;
use PHPUnit\Framework\TestCase;

/** The queue against a real PostgreSQL, through a Laravel database connection. */
final class DroverQueueTest extends TestCase
{
    private DroverQueue $queue;

    private \Illuminate\Database\Connection $db;

    protected function setUp(): void
    {
        $server = PostgresServer::get();
        $server->pdo()->exec('TRUNCATE drover.jobs, drover.limit_waiting, drover.limit_wakes, drover.limit_holders, drover.limit_keys');
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $this->db = $capsule->getConnection();
        $this->queue = new DroverQueue($this->db, 'default');
        $this->queue->setContainer(new Container());
        $this->queue->setConnectionName('drover');
    }

    public function testPushWritesLaravelsStandardPayload(): void
    {
        $id = $this->queue->push('App\Handlers\Mailer@send', ['to' => 'a@b.c'], 'mail');
        $row = $this->db->selectOne('SELECT queue, payload, attempts FROM drover.jobs WHERE id = ?', [$id]);
        $payload = json_decode($row->payload, true);
        $this->assertSame('mail', $row->queue);
        $this->assertSame(0, $row->attempts);
        $this->assertSame('App\Handlers\Mailer@send', $payload['job']);
        $this->assertSame(['to' => 'a@b.c'], $payload['data']);
        $this->assertArrayHasKey('uuid', $payload);
        $this->assertSame(1, $this->queue->size('mail'));
        $this->assertSame(0, $this->queue->size());
    }

    public function testLaterDelaysAndSizesTellPendingFromDelayed(): void
    {
        $this->queue->later(60, 'Job@handle');
        $this->queue->pushRaw('{"job":"raw"}');
        $this->assertSame(2, $this->queue->size());
        $this->assertSame(1, $this->queue->pendingSize());
        $this->assertSame(1, $this->queue->delayedSize());
        $this->assertSame(0, $this->queue->reservedSize());
        $wait = (float) $this->db->selectOne("SELECT extract(epoch FROM max(available_at) - clock_timestamp()) AS w FROM drover.jobs")->w;
        $this->assertGreaterThan(55, $wait);
        $this->assertIsInt($this->queue->creationTimeOfOldestPendingJob());
    }

    public function testBulkInsertsInOneGoAndClearLeavesHeldJobsAlone(): void
    {
        $this->queue->bulk(array_fill(0, 2500, 'Job@handle'), '', 'bulk');
        $this->assertSame(2500, $this->queue->size('bulk'));
        // A job a worker holds is not pulled from under it.
        $this->db->update("UPDATE drover.jobs SET lease_token = 1, lease_owner = 1, lease_expires_at = now() WHERE id = (SELECT min(id) FROM drover.jobs)");
        $this->assertSame(2499, $this->queue->clear('bulk'));
        $this->assertSame(1, $this->queue->size('bulk'));
    }

    public function testALimitedJobWaitsForItsLimitsKeepsThemOnRetryAndIsCleared(): void
    {
        $job = new LimitedJob('t1', [new LimitConcurrency('tenant-1', 2)]);
        $id = $this->queue->push($job, '', 'limited');
        $row = $this->db->selectOne('SELECT keys, caps, windows, payload FROM drover.limit_waiting WHERE id = ?', [$id]);
        $this->assertSame(['{tenant-1}', '{2}', '{0}'], [$row->keys, $row->caps, $row->windows]);
        $this->assertSame([['tenant-1', 2, 0]], json_decode($row->payload, true)['droverLimits']);
        $this->assertSame(1, $this->queue->size('limited'), 'a waiting job counts in the queue\'s size');
        // Raw, as queue:retry pushes a failed job's payload: under the same limit.
        $again = $this->queue->pushRaw($row->payload, 'limited');
        $this->assertSame('tenant-1', $this->db->selectOne('SELECT waits_on FROM drover.limit_waiting WHERE id = ?', [$again])->waits_on);
        // In bulk, one by one through the limited enqueue.
        $this->queue->bulk([$job, 'Job@handle'], '', 'limited');
        $this->assertSame(4, $this->queue->size('limited'));
        $this->assertSame(3, (int) $this->db->selectOne("SELECT count(*) AS n FROM drover.limit_waiting WHERE queue = 'limited'")->n);
        $this->assertSame(4, $this->queue->clear('limited'));
        $this->assertSame(0, $this->queue->size('limited'));
    }

    public function testAGroupedJobUnderLimitsTakesThemAsItsGroupsHeadAndIsCleared(): void
    {
        $first = new LimitedJob('t1', [new LimitConcurrency('tenant-1', 2)]);
        $first->messageGroup = 'g1';
        $second = new LimitedJob('t2', [new LimitConcurrency('tenant-1', 2)]);
        $second->messageGroup = 'g1';
        $head = $this->queue->push($first, '', 'limited');
        $behind = $this->queue->push($second, '', 'limited');
        // The head takes its limits in the limit's line, carrying its group; the next waits
        // behind it in the group with its limits, taking nothing.
        $row = $this->db->selectOne('SELECT grp, waits_on FROM drover.limit_waiting WHERE id = ?', [$head]);
        $this->assertSame(['g1', 'tenant-1'], [$row->grp, $row->waits_on]);
        $row = $this->db->selectOne('SELECT keys, position FROM drover.group_jobs WHERE id = ?', [$behind]);
        $this->assertSame(['{tenant-1}', 1], [$row->keys, (int) $row->position]);
        $this->assertSame($head, (int) $this->db->selectOne("SELECT head FROM drover.groups WHERE name = 'g1'")->head);
        $this->assertSame(2, $this->queue->size('limited'));
        // Cleared: both jobs, and the group with them.
        $this->assertSame(2, $this->queue->clear('limited'));
        $this->assertSame(0, (int) $this->db->selectOne("SELECT count(*) AS n FROM drover.groups WHERE name = 'g1'")->n);
        $this->assertSame(0, $this->queue->size('limited'));
        $this->assertSame(0, (int) $this->db->selectOne("SELECT (SELECT count(*) FROM drover.limit_waiting WHERE queue = 'limited') + (SELECT count(*) FROM drover.group_jobs WHERE queue = 'limited') AS n")->n);
    }

    public function testAPushInsideARolledBackTransactionLeavesNoJob(): void
    {
        $this->db->beginTransaction();
        $this->queue->push('Job@handle');
        $this->assertSame(1, $this->queue->size(), 'visible inside the transaction');
        $this->db->rollBack();
        $this->assertSame(0, $this->queue->size());
    }

    public function testAPushIsOneUnpreparedStatementThatLaravelStillSees(): void
    {
        $seen = [];
        $this->db->setEventDispatcher(new \Illuminate\Events\Dispatcher(new Container()));
        $this->db->listen(function ($query) use (&$seen) {
            $seen[] = $query->sql;
        });
        $this->db->enableQueryLog();
        $id = $this->queue->pushRaw('{"job":"seen"}', 'listened');
        $this->assertCount(1, $seen, 'QueryExecuted fired once for the push');
        $this->assertStringStartsWith('INSERT INTO drover.jobs', $seen[0]);
        $this->assertSame('listened', $this->db->getQueryLog()[0]['bindings'][0]);
        $this->assertSame('{"job":"seen"}', $this->db->selectOne('SELECT payload FROM drover.jobs WHERE id = ?', [$id])->payload);
        // Pretend mode runs nothing, as with Laravel's own queries.
        $this->db->pretend(fn () => $this->queue->pushRaw('{"job":"pretend"}'));
        $this->assertSame(1, $this->queue->size('listened') + $this->queue->size());
    }

    public function testAvailableAtIsComputedByTheDatabasesClockFromTheDelay(): void
    {
        $this->db->enableQueryLog();
        $this->queue->later(60, 'Job@handle');
        $this->queue->later((new \DateTimeImmutable())->modify('-1 hour'), 'Job@handle');
        $this->queue->pushRaw('{"job":"now"}');
        $this->queue->bulk(['Job@handle', 'Job@handle'], '', 'bulk');
        $log = $this->db->getQueryLog();
        $this->assertCount(4, $log);
        foreach ($log as $entry) {
            // The SQL carries a delay in seconds, never a time taken from this host's clock.
            $this->assertStringContainsString('clock_timestamp() + make_interval(secs => ?)', $entry['query']);
            $this->assertStringNotContainsString('to_timestamp', $entry['query']);
        }
        $this->assertSame('60', $log[0]['bindings'][2]);
        $this->assertSame('0', $log[1]['bindings'][2], 'a time already past is no delay');
        $this->assertSame('0', $log[2]['bindings'][2]);
        $this->assertSame(['bulk', '0'], [$log[3]['bindings'][0], $log[3]['bindings'][2]]);
        $age = (float) $this->db->selectOne("SELECT extract(epoch FROM clock_timestamp() - available_at) AS a FROM drover.jobs WHERE payload = '{\"job\":\"now\"}'")->a;
        $this->assertGreaterThanOrEqual(0, $age);
        $this->assertLessThan(5, $age);
        $this->assertSame(1, $this->queue->delayedSize());
        $this->assertSame(2, $this->queue->pendingSize());
        $this->assertSame(2, $this->queue->pendingSize('bulk'));
    }

    public function testPopIsRefusedWithTheCommandToUse(): void
    {
        $this->expectExceptionMessage('php artisan drover');
        $this->queue->pop();
    }
}
