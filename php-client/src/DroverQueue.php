<?php

namespace Drover;

use Illuminate\Contracts\Queue\ClearableQueue;
use Illuminate\Contracts\Queue\Queue as QueueContract;
use Illuminate\Database\Connection;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Database\DetectsLostConnections;
use Illuminate\Database\QueryException;
use Illuminate\Queue\Queue;

/**
 * The `drover` queue connection: Laravel's standard payload, inserted into drover.jobs through the
 * application's own database connection — so a dispatch inside DB::transaction() commits or rolls
 * back with it, and `after_commit` defers it like any Laravel queue. Jobs are run by the drover
 * master's workers (`php artisan drover`), never popped here.
 */
class DroverQueue extends Queue implements QueueContract, ClearableQueue
{
    use DetectsLostConnections;

    /**
     * available_at from the job's delay in seconds, by the database's clock: the master compares
     * it with the database's clock too (docs/leases.md), so a producer host whose clock is off
     * cannot make a job due early or late. clock_timestamp(), not now(): the time of the
     * insert, not the start of the application's transaction.
     */
    private const AVAILABLE_AT = 'clock_timestamp() + make_interval(secs => ?)';

    public function __construct(
        /** The application's connection to the database drover uses. */
        protected ConnectionInterface $database,
        /** The queue used when a job names none. */
        protected string $default = 'default',
        $dispatchAfterCommit = false,
    ) {
        $this->dispatchAfterCommit = $dispatchAfterCommit;
    }

    public function size($queue = null)
    {
        return (int) $this->database->selectOne(
            'SELECT count(*) AS n FROM drover.jobs WHERE queue = ?',
            [$this->getQueue($queue)],
            false,
        )->n;
    }

    /** Ready now, not held by any worker. */
    public function pendingSize($queue = null)
    {
        return $this->countWhere($queue, 'lease_token IS NULL AND available_at <= clock_timestamp()');
    }

    /** Waiting for their delay. */
    public function delayedSize($queue = null)
    {
        return $this->countWhere($queue, 'lease_token IS NULL AND available_at > clock_timestamp()');
    }

    /** Held by a worker (running or prefetched). */
    public function reservedSize($queue = null)
    {
        return $this->countWhere($queue, 'lease_token IS NOT NULL');
    }

    /** Unix time since which the oldest ready job has been waiting, or null (as Laravel's database queue). */
    public function creationTimeOfOldestPendingJob($queue = null)
    {
        $row = $this->database->selectOne(
            'SELECT extract(epoch FROM min(available_at))::bigint AS t FROM drover.jobs WHERE queue = ? AND lease_token IS NULL AND available_at <= clock_timestamp()',
            [$this->getQueue($queue)],
            false,
        );
        return $row->t === null ? null : (int) $row->t;
    }

    private function countWhere($queue, string $condition): int
    {
        return (int) $this->database->selectOne(
            "SELECT count(*) AS n FROM drover.jobs WHERE queue = ? AND $condition",
            [$this->getQueue($queue)],
            false,
        )->n;
    }

    public function push($job, $data = '', $queue = null)
    {
        return $this->enqueueUsing(
            $job,
            $this->createPayload($job, $this->getQueue($queue), $data),
            $queue,
            null,
            fn ($payload, $queue) => $this->pushToDatabase($queue, $payload),
        );
    }

    /** Laravel's payload, with the job's tags (Drover\Tags) for the dashboard's search. */
    protected function createPayloadArray($job, $queue, $data = '')
    {
        $payload = parent::createPayloadArray($job, $queue, $data);
        // Unless a createPayloadUsing hook of the application's set them already.
        if (is_object($job) && !isset($payload['tags'])) {
            $payload['tags'] = Tags::for($job);
        }
        return $payload;
    }

    public function pushRaw($payload, $queue = null, array $options = [])
    {
        return $this->pushToDatabase($queue, $payload);
    }

    public function later($delay, $job, $data = '', $queue = null)
    {
        return $this->enqueueUsing(
            $job,
            $this->createPayload($job, $this->getQueue($queue), $data),
            $queue,
            $delay,
            fn ($payload, $queue, $delay) => $this->pushToDatabase($queue, $payload, $delay),
        );
    }

    /** Many jobs in one INSERT (per 1000), like the database driver's bulk. */
    public function bulk($jobs, $data = '', $queue = null)
    {
        $queue = $this->getQueue($queue);
        $rows = [];
        foreach ((array) $jobs as $job) {
            $delay = is_object($job) && isset($job->delay) ? $job->delay : 0;
            $rows[] = [$queue, $this->createPayload($job, $queue, $data), $this->delaySeconds($delay)];
        }
        foreach (array_chunk($rows, 1000) as $chunk) {
            $values = implode(', ', array_fill(0, count($chunk), '(?, ?, ' . self::AVAILABLE_AT . ')'));
            try {
                $this->database->insert(
                    "INSERT INTO drover.jobs (queue, payload, available_at) VALUES $values",
                    array_merge(...$chunk),
                );
            } catch (\Throwable $e) {
                throw SchemaMissing::explain($e, $this->connectionName());
            }
        }
    }

    /** @return int|string the job id */
    protected function pushToDatabase($queue, $payload, $delay = 0)
    {
        try {
            return $this->insertJob($queue, $payload, $delay);
        } catch (\Throwable $e) {
            throw SchemaMissing::explain($e, $this->connectionName());
        }
    }

    /** The database connection's name, for messages. */
    private function connectionName(): string
    {
        return $this->database instanceof Connection ? (string) $this->database->getName() : 'drover';
    }

    /** @return int the job id */
    private function insertJob($queue, $payload, $delay): int
    {
        $query = 'INSERT INTO drover.jobs (queue, payload, available_at) VALUES (?, ?, ' . self::AVAILABLE_AT . ') RETURNING id';
        $bindings = [$this->getQueue($queue), $payload, $this->delaySeconds($delay)];
        if (!$this->database instanceof Connection || $this->database->pretending()) {
            // Pretend mode (DB::pretend) records the query and runs nothing: there is no id.
            return (int) ($this->database->selectOne($query, $bindings, false)->id ?? 0);
        }
        return $this->insertInOneRoundTrip($this->database, $query, $bindings);
    }

    /**
     * The INSERT as one unnamed statement (libpq's PQexecParams: parse, bind and execute in one
     * round trip, values sent apart from the SQL) instead of Laravel's prepared statement, which
     * costs three round trips per dispatch (prepare, execute, DEALLOCATE) — the dispatch of a web
     * request waits for each. It still goes through the application's connection and transaction,
     * fires QueryExecuted (query log, Telescope, DB::listen), and retries once on a lost connection
     * outside a transaction, as Laravel does.
     *
     * @param list<string> $bindings
     */
    private function insertInOneRoundTrip(Connection $connection, string $query, array $bindings): int
    {
        $start = microtime(true);
        try {
            $id = $this->executeUnprepared($connection->getPdo(), $query, $bindings);
        } catch (\PDOException $e) {
            if ($connection->transactionLevel() === 0 && $this->causedByLostConnection($e)) {
                $connection->reconnect();
                $id = $this->executeUnprepared($connection->getPdo(), $query, $bindings);
            } else {
                // Laravel 10 added the connection's name as the first argument.
                $arity = (new \ReflectionMethod(QueryException::class, '__construct'))->getNumberOfParameters();
                throw $arity >= 4
                    ? new QueryException($connection->getName(), $query, $bindings, $e)
                    : new QueryException($query, $bindings, $e);
            }
        }
        $connection->logQuery($query, $bindings, round((microtime(true) - $start) * 1000, 2));
        return $id;
    }

    /** @param list<string> $bindings */
    private function executeUnprepared(\PDO $pdo, string $query, array $bindings): int
    {
        $statement = $pdo->prepare($query, [\PDO::PGSQL_ATTR_DISABLE_PREPARES => true]);
        $statement->execute($bindings);
        return (int) $statement->fetchColumn();
    }

    /**
     * The job's delay in whole seconds (0 for none or a time already past), bound as text: the
     * database turns it into available_at with its own clock (AVAILABLE_AT). A DateTime delay is
     * turned into seconds from now on this host's clock first, as Laravel's database queue does.
     */
    private function delaySeconds($delay): string
    {
        return (string) max(0, $this->secondsUntil($delay));
    }

    /**
     * Workers are fed by the drover master over a socket; nothing pops from this connection.
     */
    public function pop($queue = null)
    {
        throw new \LogicException('drover: jobs on a drover connection are run by the drover master\'s workers; start them with `php artisan drover` instead of queue:work');
    }

    /** Deletes the queue's jobs that no worker holds; returns how many. */
    public function clear($queue)
    {
        return $this->database->delete(
            'DELETE FROM drover.jobs WHERE queue = ? AND lease_token IS NULL',
            [$this->getQueue($queue)],
        );
    }

    public function getQueue($queue)
    {
        return $queue ?: $this->default;
    }

    public function getDatabase(): ConnectionInterface
    {
        return $this->database;
    }
}
