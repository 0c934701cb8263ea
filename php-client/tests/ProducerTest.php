<?php

namespace Drover\Tests;

use Drover\Middleware\LimitConcurrency;
use Drover\Middleware\LimitRate;
use Drover\Producer;
use PHPUnit\Framework\TestCase;

final class ProducerTest extends TestCase
{
    private \PDO $pdo;

    protected function setUp(): void
    {
        $this->pdo = PostgresServer::get()->pdo();
        $this->pdo->exec('TRUNCATE drover.jobs, drover.group_jobs, drover.groups, drover.dedup, drover.limit_waiting, drover.limit_wakes, drover.limit_holders, drover.limit_keys');
    }

    public function testGroupedJobsWaitBehindTheirHeadAndADuplicateIsDropped(): void
    {
        $producer = new Producer($this->pdo);
        $head = $producer->enqueueGrouped('{"n":1}', 'order-1', 'mail', 0, 3, 0, true);
        $behind = $producer->enqueueGrouped('{"n":2}', 'order-1', 'mail');
        $this->assertSame([$head], array_map('intval', $this->pdo->query("SELECT id FROM drover.jobs WHERE grp = 'order-1'")->fetchAll(\PDO::FETCH_COLUMN)));
        $this->assertSame($behind, (int) $this->pdo->query("SELECT id FROM drover.group_jobs WHERE grp = 'order-1'")->fetchColumn());
        $this->assertSame(['max_attempts' => 3, 'grp_hold' => true], $this->pdo->query("SELECT max_attempts, grp_hold FROM drover.jobs WHERE id = $head")->fetch(\PDO::FETCH_ASSOC));
        $this->assertIsInt($producer->enqueueGrouped('{"n":3}', null, 'mail', deduplicationId: 'once'));
        $this->assertNull($producer->enqueueGrouped('{"n":4}', null, 'mail', deduplicationId: 'once'));
        $this->expectExceptionMessage('a group must be 1 to 128 characters, got 0');
        $producer->enqueueGrouped('{}', '');
    }

    public function testALimitedJobWaitsForItsLimitsAndAMasterIsWokenToAdmitIt(): void
    {
        $producer = new Producer($this->pdo);
        $this->pdo->exec('LISTEN drover_limits');
        $id = $producer->enqueueLimited('{"n":1}', [new LimitConcurrency('tenant-7', 2), LimitRate::perSecond(5, 'api')], 'mail', 0, 3);
        $this->assertSame(0, (int) $this->pdo->query('SELECT count(*) FROM drover.jobs')->fetchColumn(), 'not in the queue until admitted');
        $this->assertSame(
            ['keys' => '{tenant-7,api@1s}', 'caps' => '{2,5}', 'windows' => '{0,1000}', 'queue' => 'mail', 'max_attempts' => 3],
            $this->pdo->query("SELECT keys, caps, windows, queue, max_attempts FROM drover.limit_waiting WHERE id = $id")->fetch(\PDO::FETCH_ASSOC),
        );
        $this->assertNotFalse($this->pdo->pgsqlGetNotify(\PDO::FETCH_ASSOC, 1000), 'NOTIFY drover_limits on commit');
        // A master's passes admit it, a limit at a time.
        $admitted = 0;
        for ($i = 0; $i < 3; $i++) {
            $admitted += (int) $this->pdo->query('SELECT admitted FROM drover.limit_pass()')->fetchColumn();
        }
        $this->assertSame(1, $admitted);
        $this->assertTrue($this->pdo->query("SELECT limited FROM drover.jobs WHERE id = $id")->fetchColumn());
        $this->assertIsInt($producer->enqueueLimited('{"n":2}', [new LimitConcurrency('tenant-7', 2)], deduplicationId: 'd1'));
        $this->assertNull($producer->enqueueLimited('{"n":3}', [new LimitConcurrency('tenant-7', 2)], deduplicationId: 'd1'), 'a duplicate within its window is dropped');
        $this->expectExceptionMessage('enqueueLimited takes a non-empty list of LimitConcurrency and LimitRate');
        $producer->enqueueLimited('{}', []);
    }

    public function testEnqueueInsertsAReadyJob(): void
    {
        $id = (new Producer($this->pdo))->enqueue('{"x":1}', 'mail', 0, 3, 5);
        $row = $this->pdo->query("SELECT queue, payload, max_attempts, priority, attempts, lease_token, available_at <= clock_timestamp() AS ready FROM drover.jobs WHERE id = $id")->fetch(\PDO::FETCH_ASSOC);
        $this->assertSame(['queue' => 'mail', 'payload' => '{"x":1}', 'max_attempts' => 3, 'priority' => 5, 'attempts' => 0, 'lease_token' => null, 'ready' => true], $row);
    }

    public function testDelayedJobsBecomeAvailableLater(): void
    {
        $id = (new Producer($this->pdo))->enqueue('p', 'default', 90);
        $wait = (float) $this->pdo->query("SELECT extract(epoch FROM available_at - clock_timestamp()) FROM drover.jobs WHERE id = $id")->fetchColumn();
        $this->assertGreaterThan(85, $wait);
        $this->assertLessThanOrEqual(90, $wait);
    }

    public function testTheDelayIsCountedByTheDatabasesClockFromTheInsert(): void
    {
        $this->pdo->beginTransaction();
        usleep(500000);
        $id = (new Producer($this->pdo))->enqueue('p', 'default', 10);
        // now() is the transaction's start; clock_timestamp() the database's clock at the insert.
        $row = $this->pdo->query("SELECT extract(epoch FROM available_at - now()) AS from_start, extract(epoch FROM available_at - clock_timestamp()) AS from_now FROM drover.jobs WHERE id = $id")->fetch(\PDO::FETCH_ASSOC);
        $this->pdo->commit();
        $this->assertGreaterThan(10.4, (float) $row['from_start']);
        $this->assertGreaterThan(9, (float) $row['from_now']);
        $this->assertLessThanOrEqual(10, (float) $row['from_now']);
    }

    public function testEnqueueCommitsAndRollsBackWithTheCallersTransaction(): void
    {
        $producer = new Producer($this->pdo);
        $this->pdo->beginTransaction();
        $producer->enqueueMany(['a', 'b']);
        $this->pdo->rollBack();
        $this->pdo->beginTransaction();
        $ids = $producer->enqueueMany(['c', 'd', 'e']);
        $this->pdo->commit();
        $this->assertCount(3, $ids);
        $this->assertSame(['c', 'd', 'e'], $this->pdo->query('SELECT payload FROM drover.jobs ORDER BY id')->fetchAll(\PDO::FETCH_COLUMN));
    }

    public function testNotifyFiresOnCommitOnly(): void
    {
        $listener = PostgresServer::get()->pdo();
        $listener->exec('LISTEN drover_jobs');
        $producer = new Producer($this->pdo);
        $this->pdo->beginTransaction();
        $producer->enqueue('rolled back');
        $this->pdo->rollBack();
        $this->assertFalse($listener->pgsqlGetNotify(\PDO::FETCH_ASSOC, 200));
        $producer->enqueue('committed');
        $this->assertSame('drover_jobs', $listener->pgsqlGetNotify(\PDO::FETCH_ASSOC, 2000)['message']);
    }

    public function testAMissingSchemaIsExplained(): void
    {
        $pdo = PostgresServer::get()->pdo();
        $pdo->exec('CREATE SCHEMA IF NOT EXISTS empty');
        $pdo->exec('SET search_path = empty');
        $pdo->setAttribute(\PDO::ATTR_ERRMODE, \PDO::ERRMODE_SILENT);
        $pdo->exec('ALTER TABLE drover.jobs RENAME TO jobs_hidden');
        try {
            (new Producer($pdo))->enqueue('x');
            $this->fail('expected an exception');
        } catch (\RuntimeException $e) {
            $this->assertStringContainsString('drover migrate', $e->getMessage());
        } finally {
            $pdo->exec('ALTER TABLE drover.jobs_hidden RENAME TO jobs');
        }
    }

    public function testInvalidMaxAttemptsIsRefused(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        (new Producer($this->pdo))->enqueue('x', 'default', 0, 0);
    }

    public function testManyThousandsOfJobsGoInSeveralStatements(): void
    {
        $ids = (new Producer($this->pdo))->enqueueMany(array_fill(0, 14000, 'x'));
        $this->assertCount(14000, $ids);
        $this->assertSame(14000, (int) $this->pdo->query('SELECT count(*) FROM drover.jobs')->fetchColumn());
    }
}
