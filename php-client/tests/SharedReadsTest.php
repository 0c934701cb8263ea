<?php

namespace Drover\Tests;

use Drover\Dashboard\Repositories\GroupRepository;
use Drover\Dashboard\Repositories\LimitRepository;
use Drover\Dashboard\Repositories\QueueRepository;
use Drover\Queue\QueuePauses;
use Drover\Schema\BrokerQuery;
use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Connection;
use PHPUnit\Framework\TestCase;

/**
 * The dashboard reads what the master reads: on the rows of fixtures/shared_reads.sql, the
 * package's reads give the answers the broker's own gave on the same rows, which
 * broker/tests/shared_reads.rs checks in as fixtures/shared_reads.json; and each read the two
 * share runs as its file (broker/queries/shared/) says, not as a copy. A read that changes on one
 * side only fails here or there.
 */
final class SharedReadsTest extends TestCase
{
    private Connection $db;

    /** @var array<string, mixed> the broker's answers */
    private array $answers;

    protected function setUp(): void
    {
        $server = PostgresServer::get();
        $server->pdo()->exec((string) file_get_contents(__DIR__ . '/fixtures/shared_reads.sql'));
        $text = file_get_contents(__DIR__ . '/fixtures/shared_reads.json');
        self::assertIsString($text);
        $this->answers = json_decode($text, true, 512, JSON_THROW_ON_ERROR);
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $this->db = $capsule->getConnection();
        $this->db->enableQueryLog();
    }

    protected function tearDown(): void
    {
        PostgresServer::get()->pdo()->exec('TRUNCATE drover.jobs, drover.groups, drover.group_jobs, drover.paused_queues, drover.limit_waiting, drover.limit_holders, drover.limit_keys');
    }

    /** Seconds as the broker's answers give waits: in whole minutes (the rows' times are relative to now). */
    private static function minutes(mixed $secs): ?int
    {
        return $secs === null ? null : (int) round((float) $secs / 60);
    }

    /**
     * `$value` with the keys of every map sorted, as the broker's JSON orders them.
     *
     * @param array<mixed> $value
     * @return array<mixed>
     */
    private static function sorted(array $value): array
    {
        if (!array_is_list($value)) {
            ksort($value);
        }
        return array_map(static fn ($v) => is_array($v) ? self::sorted($v) : $v, $value);
    }

    /** The statement of shared read $name ran on the connection, exactly as its file says. */
    private function assertRanAsItsFileSays(string $name): void
    {
        $ran = array_column($this->db->getQueryLog(), 'query');
        self::assertContains(BrokerQuery::named($name)->sql, $ran, "the package reads $name with a statement of its own, not broker/queries/shared/$name.sql");
    }

    public function testTheGroupCountsOfEachQueueAreTheMasters(): void
    {
        $got = array_map(static fn (object $row) => [
            'queue' => (string) $row->queue,
            'groups' => (int) $row->groups,
            'held' => (int) $row->held,
            'waiting' => (int) $row->waiting,
            'oldest_head_minutes' => self::minutes($row->oldest_head_secs),
        ], (new GroupRepository($this->db))->queues());
        self::assertSame(self::sorted($this->answers['group_stats']), self::sorted($got));
        $this->assertRanAsItsFileSays('group_stats');
    }

    public function testTheHeldGroupsAreTheMastersOldestFirst(): void
    {
        $rows = (new GroupRepository($this->db))->held();
        $got = array_map(static fn (object $row) => [
            'queue' => (string) $row->queue,
            'name' => (string) $row->name,
            'held_by' => (int) $row->held_by,
            'held_uuid' => $row->held_uuid,
            'held_error' => $row->held_error,
            'held_at_secs' => $row->held_at_secs === null ? null : (float) $row->held_at_secs,
            'waiting' => (int) $row->waiting,
        ], $rows);
        self::assertSame(self::sorted($this->answers['held_groups']), self::sorted($got));
        foreach ($rows as $row) {
            self::assertSame(date('Y-m-d H:i:sP', (int) $row->held_at_secs), $row->held_at, 'the page shows when, in the application\'s time zone');
        }
        $this->assertRanAsItsFileSays('held_groups');
    }

    public function testTheKeysJobsWaitForAreTheMasters(): void
    {
        $got = array_map(static fn (object $row) => [
            'key' => (string) $row->key,
            'waiting' => (int) $row->waiting,
            'held' => (int) $row->held,
            'rate_used' => $row->rate_used === null ? null : (int) $row->rate_used,
            'window_ends_in_minutes' => self::minutes($row->window_ends_in_secs),
            'oldest_wait_minutes' => self::minutes($row->oldest_wait_secs),
        ], (new LimitRepository($this->db))->keys());
        self::assertSame(self::sorted($this->answers['limit_keys']), self::sorted($got));
        $this->assertRanAsItsFileSays('limit_keys');
    }

    public function testThePausedQueuesAreTheMasters(): void
    {
        $got = array_map(self::minutes(...), (new QueuePauses($this->db))->paused());
        self::assertSame(self::sorted($this->answers['paused_queues']), self::sorted($got));
        $this->assertRanAsItsFileSays('paused_queues');
    }

    public function testEachQueuesOldestWaitAndPendingCountAreTheMastersOldestWaitAndBacklog(): void
    {
        $rows = (new QueueRepository($this->db))->queues($this->answers['queues']);
        $waits = $pending = [];
        foreach ($rows as $row) {
            $waits[(string) $row->queue] = self::minutes($row->oldest_wait);
            $pending[(string) $row->queue] = (int) $row->pending;
        }
        self::assertSame(self::sorted($this->answers['oldest_wait_minutes']), self::sorted($waits));
        self::assertSame(self::sorted($this->answers['backlog']), self::sorted($pending));
        $this->assertRanAsItsFileSays('oldest_wait');
    }

    public function testEveryReadTheBinaryShipsForThePackageIsOneItMakes(): void
    {
        self::assertSame(
            ['group_stats', 'held_groups', 'limit_keys', 'oldest_wait', 'paused_queues'],
            BrokerQuery::names(),
            'a shared read added or removed: give the package its read, and this test and the fixture its answers'
        );
    }

    public function testAStatementIsRewrittenForPdoWithItsParametersInTheOrderOfTheirUse(): void
    {
        $read = BrokerQuery::named('oldest_wait');
        self::assertStringNotContainsString('$', $read->sql);
        self::assertStringNotContainsString('--', $read->sql);
        // $1 once, then $2 twice: in the skip scan's final SELECT and its WHERE.
        self::assertSame(['{"a"}', null, null], $read->bindings(['{"a"}', null]));
        $this->expectException(\LogicException::class);
        $read->bindings(['{"a"}']);
    }
}
