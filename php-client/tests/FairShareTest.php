<?php

namespace Drover\Tests;

use Drover\Config\Exporter;
use Drover\Config\InvalidConfig;
use Drover\Config\Pools;
use Drover\DroverQueue;
use Drover\Queue\FairShare;
use Illuminate\Container\Container;
use Illuminate\Database\Capsule\Manager as Capsule;
use PHPUnit\Framework\TestCase;

/** A job of a tenant, as an application writes one. */
final class TenantJob
{
    use \Illuminate\Bus\Queueable;

    public function __construct(public mixed $fairKey = null, public mixed $fairWeight = null)
    {
    }
}

/** Fair share read at dispatch and written by the driver, on both Laravels. */
final class FairShareTest extends TestCase
{
    public function testAJobNamesItsKeyAndWeightOnAFairQueueAndSharesTheEmptyKeyWithoutOne(): void
    {
        $share = FairShare::ofJob(new TenantJob('acme', 2), 'tenants', true);
        $this->assertSame(['acme', 2.0], [$share->key, $share->weight]);
        $this->assertSame(['droverFair' => ['acme', 2.0]], $share->into([]));
        $share = FairShare::ofJob(new TenantJob(), 'tenants', true);
        $this->assertSame(['', 1.0], [$share->key, $share->weight]);
        $this->assertNull(FairShare::ofJob(new TenantJob(), 'default', false));
        $this->assertSame('42', FairShare::ofJob(new TenantJob(42), 'tenants', true)->key);
    }

    public function testAKeyOnAQueueThatIsNotFairAndBadKeysAndWeightsAreRefusedNamingTheJob(): void
    {
        foreach ([
            [new TenantJob('acme'), false, "Drover\\Tests\\TenantJob names the fair key 'acme' but queue 'q' is not fair; add it to `fair` in config/drover.php"],
            [new TenantJob(['a']), true, 'the fair key of Drover\Tests\TenantJob is a array'],
            [new TenantJob(str_repeat('k', 256)), true, 'is 256 characters long; at most 255'],
            [new TenantJob('k', 0), true, 'the fair weight of Drover\Tests\TenantJob is 0; give a number above 0 and at most 1000'],
            [new TenantJob('k', 1001), true, 'the fair weight of Drover\Tests\TenantJob is 1001'],
        ] as [$job, $fair, $message]) {
            try {
                FairShare::ofJob($job, 'q', $fair);
                $this->fail("no error for: $message");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString($message, $e->getMessage());
            }
        }
    }

    public function testFairQueuesAreNamedByConnectionAndQueueAsBudgetsAre(): void
    {
        $this->assertTrue(FairShare::isFair(['drover:tenants'], 'drover', 'tenants'));
        $this->assertTrue(FairShare::isFair(['tenants'], 'drover', 'tenants'));
        $this->assertFalse(FairShare::isFair(['other:tenants'], 'drover', 'tenants'));
        $this->assertSame(['a', 'tenants'], Exporter::fairQueues(['drover:tenants', 'a', 'redis:b', 'tenants']));
    }

    public function testABadFairListIsRefusedByName(): void
    {
        $this->expectException(InvalidConfig::class);
        $this->expectExceptionMessage('drover.fair must be a list of queues');
        Pools::resolve(['fair' => ['drover:'], 'defaults' => [], 'environments' => []], 'production');
    }

    public function testTheDriverTagsAFairQueuesJobsAndARetryKeepsItsKey(): void
    {
        $server = PostgresServer::get();
        $server->pdo()->exec('TRUNCATE drover.jobs, drover.fair_keys, drover.limit_waiting, drover.limit_wakes');
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $db = $capsule->getConnection();
        $queue = new DroverQueue($db, 'default', false, [], 300, false, ['drover:tenants']);
        $queue->setContainer(new Container());
        $queue->setConnectionName('drover');

        $first = $queue->push(new TenantJob('acme'), '', 'tenants');
        $second = $queue->push(new TenantJob('acme'), '', 'tenants');
        $other = $queue->push(new TenantJob('zeta'), '', 'tenants');
        $tags = fn (int $id) => (float) $db->selectOne('SELECT fair_tag AS t FROM drover.jobs WHERE id = ?', [$id])->t;
        $this->assertSame(1.0, $tags($second) - $tags($first), 'one step per job of a key');
        $this->assertSame($tags($first), $tags($other), 'a new key is placed where service is');
        $payload = $db->selectOne('SELECT payload FROM drover.jobs WHERE id = ?', [$first])->payload;
        $this->assertSame(['acme', 1], json_decode($payload, true)['droverFair']);
        $again = $queue->pushRaw($payload, 'tenants');
        $this->assertSame(2.0, $tags($again) - $tags($first), 'a retry takes its key\'s next turn');
        $queue->bulk([new TenantJob('acme'), new TenantJob('zeta')], '', 'tenants');
        $this->assertSame(0, (int) $db->selectOne("SELECT count(*) AS n FROM drover.jobs WHERE queue = 'tenants' AND fair_tag IS NULL")->n, 'bulk tags each');
        $this->assertNull($db->selectOne("SELECT fair_tag AS t FROM drover.jobs WHERE id = ?", [$queue->push(new TenantJob(), '', 'default')])->t, 'not on a queue that is not fair');
        $grouped = new TenantJob('acme');
        $grouped->messageGroup = 'g';
        $this->expectExceptionMessage("is in message group 'g' on the fair queue 'tenants'; a grouped job cannot take a fair share yet");
        $queue->push($grouped, '', 'tenants');
    }
}
