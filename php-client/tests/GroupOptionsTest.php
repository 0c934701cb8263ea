<?php

namespace Drover\Tests;

use Drover\DroverQueue;
use Drover\Queue\GroupOptions;
use Illuminate\Container\Container;
use Illuminate\Database\Capsule\Manager as Capsule;
use PHPUnit\Framework\TestCase;

enum Region: string
{
    case Eu = 'eu';
}

enum Plain
{
    case One;
}

/** A serializable job for the push tests. */
final class GroupedJob
{
    public $messageGroup;

    public function __construct(mixed $group, public mixed $dedup = null)
    {
        $this->messageGroup = $group;
    }

    public function deduplicationId($payload, $queue)
    {
        return $this->dedup;
    }
}

/** A job's group and deduplication id as DroverQueue reads them, and their limits. */
final class GroupOptionsTest extends TestCase
{
    private function job(mixed $group, mixed $dedup = null): object
    {
        return new class ($group, $dedup) {
            public $messageGroup;

            public function __construct(mixed $group, public mixed $dedup)
            {
                $this->messageGroup = $group;
            }

            public function deduplicationId($payload, $queue)
            {
                return $this->dedup;
            }
        };
    }

    public function testAGroupIsAStringAnIntOrABackedEnumAndItsHoldComesFromTheJobOrTheQueue(): void
    {
        $this->assertSame('order-42', GroupOptions::ofJob($this->job('order-42'), 'default', [])->group);
        $this->assertSame('42', GroupOptions::ofJob($this->job(42), 'default', [])->group);
        $this->assertSame('eu', GroupOptions::ofJob($this->job(Region::Eu), 'default', [])->group);
        $this->assertNull(GroupOptions::ofJob($this->job(null), 'default', [])->group);
        $this->assertNull(GroupOptions::ofJob('App\Handler@run', 'default', [])->group);
        $this->assertFalse(GroupOptions::ofJob($this->job('g'), 'default', ['payments'])->hold);
        $this->assertTrue(GroupOptions::ofJob($this->job('g'), 'payments', ['payments'])->hold);
    }

    /** @return iterable<string, array{mixed, string}> */
    public static function badIds(): iterable
    {
        yield 'empty' => ['', 'is empty'];
        yield 'too long' => [str_repeat('é', 129), 'is 129 characters long; at most 128'];
        yield 'array' => [['a'], 'is a array; give a string, an int or a backed enum'];
        yield 'float' => [1.5, 'is a float'];
        yield 'unit enum' => [Plain::One, 'is a Drover\Tests\Plain'];
    }

    /** @dataProvider badIds */
    public function testABadGroupIsRefusedNamingTheJobAndTheLimit(mixed $group, string $said): void
    {
        try {
            GroupOptions::ofJob($this->job($group), 'default', []);
            $this->fail('accepted');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString('the message group of class@anonymous', $e->getMessage());
            $this->assertStringContainsString($said, $e->getMessage());
        }
    }

    /** @dataProvider badIds */
    public function testABadDeduplicationIdIsRefusedToo(mixed $dedup, string $said): void
    {
        $this->expectExceptionMessage($said);
        GroupOptions::deduplicationId($this->job(null, $dedup), '{}', 'default');
    }

    public function testARetriedPayloadKeepsItsGroupAndHold(): void
    {
        $server = PostgresServer::get();
        $server->pdo()->exec('TRUNCATE drover.jobs, drover.group_jobs, drover.groups, drover.dedup');
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $db = $capsule->getConnection();
        $queue = new DroverQueue($db, 'default', false, ['default']);
        $queue->setContainer(new Container());
        $queue->setConnectionName('drover');

        $first = $queue->push(new GroupedJob('g1'));
        $payload = $db->selectOne('SELECT payload FROM drover.jobs WHERE id = ?', [$first])->payload;
        $this->assertSame('g1', json_decode($payload, true)[GroupOptions::PAYLOAD_GROUP]);
        $this->assertTrue(json_decode($payload, true)[GroupOptions::PAYLOAD_HOLD]);
        // Raw, as queue:retry pushes it: behind the head, in the same group.
        $second = $queue->pushRaw($payload);
        $this->assertSame(['g1'], array_column($db->select('SELECT grp FROM drover.jobs'), 'grp'));
        $this->assertSame($second, (int) $db->selectOne("SELECT id FROM drover.group_jobs WHERE grp = 'g1'")->id);
        // Deduplicated: the second push returns null and adds nothing.
        $this->assertIsInt($queue->push(new GroupedJob(null, 'once')));
        $this->assertNull($queue->push(new GroupedJob(null, 'once')));
        // size() counts the job waiting behind its head, and clear() takes it too.
        $this->assertSame(3, $queue->size());
        $this->assertSame(3, $queue->clear('default'));
        $this->assertSame(0, (int) $db->selectOne('SELECT count(*) AS n FROM drover.groups')->n);
    }
}
