<?php

namespace Drover\Jobs;

use Illuminate\Container\Container;
use Illuminate\Database\Connection;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Database\Connectors\ConnectionFactory;
use Illuminate\Database\Events\TransactionCommitted;
use Illuminate\Database\Events\TransactionRolledBack;

/**
 * Exactly once for what a job writes (issue 59; broker/migrations/0015_exactly_once.sql), the
 * repository: a job's completion inside the application's transaction (`drover.complete_within`),
 * and the recorded results of a job's steps (`drover.step_result`, `drover.record_step`).
 *
 * One per worker, on the database connection drover's jobs live in — the drover queue
 * connection's (DroverQueue::getDatabase()): a job's writes on that connection commit or roll back
 * with its completion; writes elsewhere are not covered. Steps are recorded on a second connection
 * to the same database, opened on first use, so that a step's record survives the job's own
 * transaction rolling back.
 *
 * It also follows the application's transaction a completion was written in (watch()): the
 * completion counts only once that transaction committed, as the database's events on the
 * connection tell (TransactionCommitted / TransactionRolledBack, the same on Laravel 8.83 and 12).
 */
final class Completions
{
    /** The second connection, for steps (steps()). */
    private ?ConnectionInterface $steps = null;

    /** The connection's events are listened to (watch()). */
    private bool $listening = false;

    /**
     * The completion written last in the application's transaction, while that is followed:
     * the job, its lease token, the transaction level it is part of now, and whether it committed.
     * Null when none is, or its transaction rolled back.
     *
     * @var array{job: int, token: int, level: int, committed: bool}|null
     */
    private ?array $watched = null;

    public function __construct(private readonly ConnectionInterface $db)
    {
    }

    /** The connection drover's jobs live in, which a job's writes must be on to be covered. */
    public function connection(): ConnectionInterface
    {
        return $this->db;
    }

    /** Its name, for messages. */
    public function connectionName(): string
    {
        return $this->db instanceof Connection ? (string) $this->db->getName() : 'the drover queue connection\'s';
    }

    /**
     * Completes job $job in the open transaction, fenced by its lease token: deletes its row in
     * drover.jobs while it still holds $token. Throws the database's error, SQLSTATE DRL01
     * (LeaseTakenBack::isRefusal), when the lease was taken back.
     *
     * Sent unprepared, the two integers written into the statement: a prepared statement costs
     * pdo_pgsql two round trips (prepare, then execute) where this costs one, and it is the one
     * statement every such job adds to its transaction (bench/RESULTS.md, "Exactly-once
     * completion"). Both are ints, so nothing else can reach the text.
     */
    public function completeWithin(int $job, int $token): void
    {
        $this->db->unprepared(sprintf('SELECT drover.complete_within(%d, %d)', $job, $token));
    }

    /** The result step $step of the job of payload uuid $uuid recorded, or null when none did. */
    public function stepResult(string $uuid, string $step): ?string
    {
        $result = $this->steps()->selectOne('SELECT drover.step_result(?, ?) AS result', [$uuid, $step], false)->result ?? null;
        return $result === null ? null : (string) $result;
    }

    /**
     * Records $result as step $step's, in its own transaction on the second connection; the
     * first recorded wins, and is what returns.
     */
    public function recordStep(string $uuid, string $step, string $result): string
    {
        return (string) $this->steps()->transaction(
            fn (ConnectionInterface $steps) => $steps->selectOne('SELECT drover.record_step(?, ?, ?) AS kept', [$uuid, $step, $result], false)->kept,
        );
    }

    /**
     * The second connection (steps()), for what a job writes that must not wait for its open
     * transaction on the first: a step's record, a progress report (Jobs\Progress).
     */
    public function autonomous(): ConnectionInterface
    {
        return $this->steps();
    }

    /**
     * The second connection to the same database, opened once: a statement on the job's
     * connection would be inside the job's open transaction. A persistent PDO is not asked for
     * (PHP would hand back the first connection's session).
     */
    private function steps(): ConnectionInterface
    {
        if ($this->steps !== null) {
            return $this->steps;
        }
        if (!$this->db instanceof Connection) {
            throw new \LogicException('drover: steps (once()) need a database connection of Laravel\'s, got ' . get_class($this->db));
        }
        $config = $this->db->getConfig();
        if (isset($config['options']) && is_array($config['options'])) {
            unset($config['options'][\PDO::ATTR_PERSISTENT]);
        }
        $container = Container::getInstance();
        $factory = $container->bound('db.factory') ? $container->make('db.factory') : new ConnectionFactory($container);
        $name = $this->db->getName() . '-drover-steps';
        $steps = $factory->make($config, $name);
        // A lost connection (a restart of PostgreSQL, a pooler's idle timeout) is opened again, as
        // Laravel's DatabaseManager does for its own.
        $steps->setReconnector(function (Connection $lost) use ($factory, $config, $name): void {
            $fresh = $factory->make($config, $name);
            $lost->setPdo($fresh->getRawPdo())->setReadPdo($fresh->getRawReadPdo());
        });
        return $this->steps = $steps;
    }

    /**
     * Whether watch() can follow the connection's transactions (its events): checked before a
     * completion is written, so that none is written that could not be followed.
     */
    public function canWatch(): bool
    {
        return $this->db instanceof Connection && $this->db->getEventDispatcher() !== null;
    }

    /**
     * Follows the completion of job $job (lease $token) just written in the open transaction: it
     * counts once that transaction has committed (committed()), and is forgotten when it rolls
     * back. The connection's events are listened to from the first call on, once per worker.
     */
    public function watch(int $job, int $token): void
    {
        if (!$this->canWatch()) {
            throw new \LogicException("drover: completeWithin() needs the database events of connection {$this->connectionName()} to know when its transaction commits, and it has no event dispatcher");
        }
        if (!$this->listening) {
            $events = $this->db->getEventDispatcher();
            $events->listen(TransactionCommitted::class, function (TransactionCommitted $event): void {
                if ($event->connection === $this->db) {
                    $this->ended($this->db->transactionLevel(), committed: true);
                }
            });
            $events->listen(TransactionRolledBack::class, function (TransactionRolledBack $event): void {
                if ($event->connection === $this->db) {
                    $this->ended($this->db->transactionLevel(), committed: false);
                }
            });
            $this->listening = true;
        }
        $this->watched = ['job' => $job, 'token' => $token, 'level' => $this->db->transactionLevel(), 'committed' => false];
    }

    /**
     * A transaction (or savepoint) of the connection ended, leaving it at $level. A commit down to
     * 0 commits the watched completion, one that leaves an outer transaction makes the completion
     * part of that one; a rollback below its level undoes it.
     */
    private function ended(int $level, bool $committed): void
    {
        if ($this->watched === null || $this->watched['committed'] || $level >= $this->watched['level']) {
            return;
        }
        if (!$committed) {
            $this->watched = null;
        } elseif ($level === 0) {
            $this->watched['committed'] = true;
        } else {
            $this->watched['level'] = $level;
        }
    }

    /**
     * The state of job $job's completion under lease $token: true once written and committed,
     * false while written in a transaction that is still open, null when none was written (or it
     * rolled back).
     */
    public function committed(int $job, int $token): ?bool
    {
        if ($this->watched === null || $this->watched['job'] !== $job || $this->watched['token'] !== $token) {
            return null;
        }
        return $this->watched['committed'];
    }

    /** Forgets the completion of job $job (lease $token): its transaction was rolled back by the worker. */
    public function forget(int $job, int $token): void
    {
        if ($this->committed($job, $token) !== null) {
            $this->watched = null;
        }
    }
}
