<?php

namespace Drover\Tests;

use Drover\Queue\PauseNotConfirmed;
use Drover\Queue\QueuePauses;
use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Connection;
use PHPUnit\Framework\TestCase;

/**
 * Pausing a queue by name against a real PostgreSQL: the pause returns once every master that may
 * still hand out its jobs confirmed it, holds at once even inside a transaction, and says which
 * master it could not get an answer from.
 */
final class QueuePausesTest extends TestCase
{
    private Connection $db;

    private \PDO $pdo;

    protected function setUp(): void
    {
        $this->pdo = PostgresServer::get()->pdo();
        $this->pdo->exec('TRUNCATE drover.paused_queues, drover.nodes');
        $this->db = self::connection();
    }

    private static function connection(): Connection
    {
        $server = PostgresServer::get();
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        return $capsule->getConnection();
    }

    private function pauses(float $timeout = QueuePauses::CONFIRM_TIMEOUT): QueuePauses
    {
        return new QueuePauses($this->db, static fn () => self::connection(), $timeout);
    }

    /**
     * A master's row, last heard from $silent seconds ago, with a lease of $lease seconds, of
     * drover $release (null: 0.1, which registers none and never confirms a pause).
     */
    private function master(string $host, float $silent = 0.0, float $lease = 30.0, ?string $release = '0.2.0'): int
    {
        $st = $this->pdo->prepare("INSERT INTO drover.nodes (hostname, pid, started_at, heartbeat_at, lease_secs, release)
            VALUES (?, 4242, now(), now() - make_interval(secs => ?), ?, ?) RETURNING id");
        $st->execute([$host, $silent, $lease, $release]);
        return (int) $st->fetchColumn();
    }

    /** In a child process: after $delay seconds, master $node confirms every pause in force. */
    private function confirmLater(int $node, float $delay): int
    {
        $pid = pcntl_fork();
        if ($pid === 0) {
            usleep((int) ($delay * 1e6));
            $pdo = PostgresServer::get()->pdo();
            $pdo->prepare('UPDATE drover.nodes SET pauses_held = ARRAY(SELECT version FROM drover.queues_paused()) WHERE id = ?')->execute([$node]);
            posix_kill(posix_getpid(), SIGKILL); // no shutdown functions: the server is the parent's
        }
        return $pid;
    }

    public function testAPauseReturnsOnceEveryMasterThatMayStillHandOutJobsConfirmedIt(): void
    {
        $live = $this->master('web-1');
        $this->master('web-2', silent: 61.0, lease: 30.0); // silent two leases: gone, not waited for
        $child = $this->confirmLater($live, 1.3);
        $said = [];
        $started = microtime(true);
        $this->pauses()->pause('emails', null, function (string $line) use (&$said) {
            $said[] = $line;
        });
        $took = microtime(true) - $started;
        pcntl_waitpid($child, $status);
        $this->assertGreaterThanOrEqual(1.2, $took, 'it waited for web-1');
        $this->assertLessThan(10.0, $took);
        $this->assertSame(['emails' => null], $this->pauses()->paused());
        $this->assertCount(1, $said, 'said once, after a second');
        $this->assertStringContainsString('the master on web-1 (pid 4242', $said[0]);
        $this->assertStringNotContainsString('web-2', $said[0]);
    }

    public function testAMasterThatAnswersTheDatabaseButNeverConfirmsFailsThePauseByName(): void
    {
        $this->master('web-3');
        try {
            $this->pauses(timeout: 0.3)->pause('reports');
            $this->fail('the pause was not confirmed');
        } catch (PauseNotConfirmed $e) {
            $this->assertStringContainsString('queue reports is paused', $e->getMessage());
            $this->assertStringContainsString('the master on web-3 (pid 4242', $e->getMessage());
        }
        $this->assertSame(['reports' => null], $this->pauses()->paused(), 'the pause stays in force');
    }

    public function testAMasterOfDrover01IsNotWaitedForItNeverConfirmsAndReadsThePauseEachSecond(): void
    {
        $this->master('old-host', release: null);
        $started = hrtime(true);
        $this->pauses(timeout: 5.0)->pause('reports');
        $this->assertLessThan(1.0, (hrtime(true) - $started) / 1e9, 'returned without waiting for it');
        $this->assertSame(['reports' => null], $this->pauses()->paused());
    }

    public function testASilentMasterIsWaitedForUntilItHasBeenSilentTwoLeasesEvenPastTheTimeout(): void
    {
        // Last heard from 1.5 s ago with a lease of 1 s: it does not answer, and it drops out of
        // the wait once silent for 2 s, however short the timeout.
        $this->master('frozen-1', silent: 1.5, lease: 1.0);
        $started = microtime(true);
        $this->pauses(timeout: 0.1)->pause('mail');
        $took = microtime(true) - $started;
        $this->assertGreaterThanOrEqual(0.3, $took, 'it waited for the silent master');
        $this->assertLessThan(5.0, $took);
    }

    public function testAPauseInsideATransactionWithoutAConnectionOfItsOwnIsRefusedByName(): void
    {
        $pauses = new QueuePauses($this->db);
        $this->db->beginTransaction();
        try {
            $pauses->pause('x');
            $this->fail('refused');
        } catch (\LogicException $e) {
            $this->assertStringContainsString('needs a connection of its own', $e->getMessage());
        } finally {
            $this->db->rollBack();
        }
    }

    public function testAPauseInsideATransactionHoldsAtOnceAndOutlivesItsRollback(): void
    {
        $this->db->beginTransaction();
        $this->pauses()->pause('imports', 600);
        $seen = $this->pdo->query("SELECT count(*) FROM drover.paused_queues WHERE queue = 'imports'")->fetchColumn();
        $this->db->rollBack();
        $this->assertSame(1, (int) $seen, 'every master sees it before the transaction ends');
        $paused = $this->pauses()->paused();
        $this->assertEqualsWithDelta(600.0, $paused['imports'], 5.0);
        $this->db->beginTransaction();
        $this->pauses()->resume('imports');
        $this->db->rollBack();
        $this->assertSame([], $this->pauses()->paused(), 'so does a resume');
    }

    public function testATtlAlreadyOverResumesAndAResumeEndsAPause(): void
    {
        $pauses = $this->pauses();
        $pauses->pause('a', 60);
        $pauses->pause('a', new \DateTimeImmutable('-1 minute'));
        $this->assertSame([], $pauses->paused());
        $pauses->pause('b', new \DateInterval('PT30S'));
        $this->assertEqualsWithDelta(30.0, $pauses->paused()['b'], 3.0);
        $pauses->resume('b');
        $this->assertSame([], $pauses->paused());
        // Whole seconds, as Laravel's cache counts a TTL: under one, the key is forgotten.
        $pauses->pause('c', 0.5);
        $this->assertSame([], $pauses->paused());
        foreach ([INF, NAN, 1e12, 'soon'] as $bad) {
            try {
                $pauses->pause('c', $bad);
                $this->fail('refused: ' . var_export($bad, true));
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('up to a century', $e->getMessage());
            }
        }
    }
}
