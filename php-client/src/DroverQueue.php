<?php

namespace Drover;

use Illuminate\Contracts\Queue\ClearableQueue;
use Illuminate\Contracts\Queue\Queue as QueueContract;
use Illuminate\Database\Connection;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Database\DetectsLostConnections;
use Illuminate\Database\QueryException;
use Illuminate\Queue\Queue;
use Drover\Queue\FairShare;
use Drover\Queue\JobLimits;
use Drover\Queue\GroupOptions;
use Drover\Queue\JobStatement;
use Drover\Schema\BrokerQuery;
use Drover\Tracing\CurrentTraceContext;
use Drover\Tracing\TraceContext;

/**
 * The `drover` queue connection: Laravel's standard payload, inserted into drover.jobs through the
 * application's own database connection — so a dispatch inside DB::transaction() commits or rolls
 * back with it, and `after_commit` defers it like any Laravel queue. Jobs are run by the drover
 * master's workers (`php artisan drover`), never popped here.
 */
class DroverQueue extends Queue implements QueueContract, ClearableQueue
{
    use DetectsLostConnections;

    /** Seconds a deduplication id drops later dispatches of it when drover.dedup_window is unset. */
    public const DEFAULT_DEDUP_WINDOW = 300;

    /**
     * The dispatch statements prepared on each PDO connection (preparedOnce): they go with the
     * connection, so a reconnect prepares again.
     *
     * @var \WeakMap<\PDO, array<string, \PDOStatement>>|null
     */
    private ?\WeakMap $prepared = null;

    public function __construct(
        /** The application's connection to the database drover uses. */
        protected ConnectionInterface $database,
        /** The queue used when a job names none. */
        protected string $default = 'default',
        $dispatchAfterCommit = false,
        /** Queues whose groups stop at a job that fails for good (drover.groups.hold). */
        protected array $holdQueues = [],
        /** Seconds a deduplication id drops later dispatches of it (drover.dedup_window). */
        protected int $dedupWindow = self::DEFAULT_DEDUP_WINDOW,
        /**
         * Opt-in (`lose_dispatches_on_database_crash` on the queue connection): a dispatch
         * outside a transaction commits without waiting for its WAL flush (PostgreSQL's
         * synchronous_commit = off, for that one statement), so it returns sooner; a crash of
         * PostgreSQL (not a clean restart) can lose the dispatches of its last ~0.6 s
         * (3 × wal_writer_delay) that the application was told were queued. Inside the
         * application's transaction its own commit decides, as always.
         */
        protected bool $losesDispatchesOnCrash = false,
        /**
         * The fair queues (drover.fair: `connection:queue`, or a bare name for the `drover`
         * connection): their jobs are tagged for fair share by their key (Queue\FairShare).
         *
         * @var list<string>
         */
        protected array $fairQueues = [],
        /**
         * Whether a new job's payload carries the trace context it is dispatched in
         * (drover.traces.propagate; Tracing\CurrentTraceContext).
         */
        protected bool $propagatesTraces = true,
    ) {
        $this->dispatchAfterCommit = $dispatchAfterCommit;
    }

    /**
     * Every job of the queue not yet settled for good, with those waiting behind their groups'
     * heads and those waiting for their limits.
     */
    public function size($queue = null)
    {
        $queue = $this->getQueue($queue);
        return (int) $this->database->selectOne(
            'SELECT (SELECT count(*) FROM drover.jobs WHERE queue = ?) + (SELECT count(*) FROM drover.group_jobs WHERE queue = ?)
                    + (SELECT count(*) FROM drover.limit_waiting WHERE queue = ?) AS n',
            [$queue, $queue, $queue],
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
        return $this->enqueue(null, $job, $data, $queue);
    }

    /**
     * Laravel's payload, with the job's tags (Drover\Tags) for the dashboard's search and, for a
     * grouped job, its group, and for a limited one its limits (so that a retry, which pushes the
     * payload raw, keeps them), and the trace context it is dispatched in (withTraceContext).
     * Every new job's payload is made here once (push, later, bulk); a raw one (pushRaw:
     * `queue:retry`) and a released job (the master keeps its stored payload) are not.
     */
    protected function createPayloadArray($job, $queue, $data = '')
    {
        $payload = parent::createPayloadArray($job, $queue, $data);
        // Unless a createPayloadUsing hook of the application's set them already.
        if (is_object($job) && !isset($payload['tags'])) {
            $payload['tags'] = Tags::for($job);
        }
        $payload = JobLimits::ofJob($job)?->into($payload) ?? $payload;
        $payload = $this->fairShare($job, $this->getQueue($queue))?->into($payload) ?? $payload;
        $payload = $this->withTraceContext($payload);
        return GroupOptions::ofJob($job, $this->getQueue($queue), $this->holdQueues)->into($payload);
    }

    /**
     * The payload with the W3C trace context of the dispatch (`traceparent`, `tracestate`) and
     * its moment (`drover_sent_at`), when there is a context (Tracing\CurrentTraceContext) and
     * drover.traces.propagate is on; without one it is left as it is. A traceparent already
     * there (set by an application's createPayloadUsing hook, or an instrumentation of
     * createPayloadArray) is kept: only the moment is added to it.
     *
     * @param array<string, mixed> $payload
     * @return array<string, mixed>
     */
    private function withTraceContext(array $payload): array
    {
        if (!$this->propagatesTraces) {
            return $payload;
        }
        if (isset($payload[TraceContext::TRACEPARENT_KEY])) {
            $payload[TraceContext::SENT_AT_KEY] ??= microtime(true);
            return $payload;
        }
        return (new CurrentTraceContext($this->container))->resolve()?->into($payload, microtime(true)) ?? $payload;
    }

    /**
     * A raw payload keeps the group, the limits and the fair key it carries (`queue:retry` pushes
     * a failed job's payload); one without a fair key on a fair queue takes the key ''.
     */
    public function pushRaw($payload, $queue = null, array $options = [])
    {
        $step = $this->retriedWorkflowStep($payload);
        if ($step !== null) {
            return $step;
        }
        $share = $this->isFair($this->getQueue($queue)) ? (FairShare::ofPayload($payload) ?? FairShare::ofJob(null, $this->getQueue($queue), true)) : null;
        return $this->pushToDatabase($queue, $payload, 0, GroupOptions::ofPayload($payload), null, JobLimits::ofPayload($payload), $share);
    }

    /**
     * A payload pushed back raw is a retry (Laravel's `queue:retry`, the console's retry of a
     * kept failure): when it is a workflow step's that failed (its uuid, migration 0016), the step
     * is retried in its workflow — its node runs again and the steps its failure cancelled wait
     * for it again (drover.workflow_retry_payload, docs/workflows.md) — instead of running as a
     * job of no workflow, which would leave the workflow failed. Its job id, or null for any
     * other payload (then pushed as always). One round trip, only on this raw path.
     */
    private function retriedWorkflowStep(string $payload): ?int
    {
        if (!str_contains($payload, '"uuid"') || ($this->database instanceof Connection && $this->database->pretending())) {
            return null;
        }
        $step = $this->database->selectOne('SELECT drover.workflow_retry_payload(?) AS step', [$payload])->step;
        return $step === null ? null : (int) $step;
    }

    public function later($delay, $job, $data = '', $queue = null)
    {
        return $this->enqueue($delay, $job, $data, $queue);
    }

    /**
     * push() (no delay: null) and later(), as Laravel's drivers do them: Laravel 12's
     * createPayload($job, $queue, $data, $delay) writes the delay into the payload (`delay`, in
     * seconds; null for push), and its Job::backoff() falls back to it, so a delayed job without
     * a $backoff is retried after as long again. Laravel 8's createPayload has no $delay
     * parameter and PHP drops the extra argument: its payload has no `delay`, as its own
     * drivers write it.
     *
     * A job's deduplication id (its deduplicator or deduplicationId()) is read here, where the
     * payload it may depend on exists: a dispatch whose id this queue saw within the window is
     * dropped, and returns null instead of an id.
     */
    private function enqueue($delay, $job, $data, $queue, bool $delayInPayload = true)
    {
        $queueName = $this->getQueue($queue);
        $payload = $this->createPayload($job, $queueName, $data, $delayInPayload ? $delay : null);
        $group = GroupOptions::ofJob($job, $queueName, $this->holdQueues);
        $dedup = GroupOptions::deduplicationId($job, $payload, $queueName);
        $limits = JobLimits::ofJob($job);
        $share = $this->fairShare($job, $queueName);
        return $this->enqueueUsing(
            $job,
            $payload,
            $queue,
            $delay,
            fn ($payload, $queue, $delay) => $this->pushToDatabase($queue, $payload, $delay ?? 0, $group, $dedup, $limits, $share),
        );
    }

    /**
     * Many jobs in one INSERT (per 1000), like the database driver's bulk: each waits for its own
     * delay (as on Laravel 12; Laravel 8's database bulk ignores it), and no payload carries the
     * delay (as Laravel 12's database bulk; its redis bulk writes it, through later()).
     */
    public function bulk($jobs, $data = '', $queue = null)
    {
        $queue = $this->getQueue($queue);
        $rows = [];
        foreach ((array) $jobs as $job) {
            $delay = is_object($job) && isset($job->delay) ? $job->delay : null;
            if ($this->isFair($queue) || is_object($job) && (GroupOptions::ofJob($job, $queue, $this->holdQueues)->group !== null
                || GroupOptions::hasDeduplicator($job) || JobLimits::ofJob($job) !== null)) {
                // Grouped, deduplicated and limited jobs, and every job of a fair queue, go one by
                // one, in order, through drover.enqueue, enqueue_limited or enqueue_fair;
                // their payload has no delay either, as the database driver's bulk writes it.
                $this->enqueue($delay, $job, $data, $queue, delayInPayload: false);
                continue;
            }
            $rows[] = [$queue, $this->createPayload($job, $queue, $data), $this->delaySeconds($delay)];
        }
        foreach (array_chunk($rows, JobStatement::ROWS_PER_STATEMENT) as $chunk) {
            $query = JobStatement::insert(count($chunk), $this->commitsAsynchronously(), returning: false);
            try {
                if ($this->database instanceof Connection && !$this->database->pretending()) {
                    // Unprepared, as a single push is: safe through a transaction pooler.
                    $this->insertInOneRoundTrip($this->database, $query, array_merge(...$chunk), returnsId: false);
                } else {
                    $this->database->insert($query, array_merge(...$chunk));
                }
            } catch (\Throwable $e) {
                throw SchemaMissing::explain($e, $this->connectionName());
            }
        }
    }

    /** @return int|null the job id; null when its deduplication id dropped it */
    protected function pushToDatabase($queue, $payload, $delay = 0, ?GroupOptions $group = null, ?string $dedup = null, ?JobLimits $limits = null, ?FairShare $share = null)
    {
        $group ??= GroupOptions::none();
        if ($share !== null && $group->group !== null) {
            $name = json_decode($payload, true)['displayName'] ?? 'the job';
            throw new \InvalidArgumentException("drover: $name is in message group '{$group->group}' on the fair queue '" . $this->getQueue($queue) . "'; a grouped job cannot take a fair share yet: dispatch it to a queue that is not fair, or drop its group");
        }
        try {
            return $this->insertJob($queue, $payload, $delay, $group, $dedup, $limits, $share);
        } catch (\Throwable $e) {
            throw SchemaMissing::explain($e, $this->connectionName());
        }
    }

    /**
     * Whether this statement commits without waiting for its WAL flush: only when the
     * application opted in and no transaction of its own is open (its commit decides then).
     */
    private function commitsAsynchronously(): bool
    {
        return $this->losesDispatchesOnCrash && $this->database->transactionLevel() === 0;
    }

    /** The database connection's name, for messages. */
    private function connectionName(): string
    {
        return $this->database instanceof Connection ? (string) $this->database->getName() : 'drover';
    }

    /**
     * An ungrouped, unlimited job without a deduplication id is one plain INSERT; a limited one
     * goes through drover.enqueue_limited (broker/migrations/0011_limits.sql), which parks it
     * until it has taken its limits, a job of a fair queue through drover.enqueue_fair, which
     * tags it for its key's turn, any other through drover.enqueue
     * (broker/migrations/0005_groups.sql), which places it in its group; both check its
     * deduplication id, in the same round trip and the same transaction.
     *
     * @return int|null the job id, null when deduplicated
     */
    private function insertJob($queue, $payload, $delay, GroupOptions $group, ?string $dedup, ?JobLimits $limits, ?FairShare $share): ?int
    {
        $async = $this->commitsAsynchronously();
        if ($limits !== null) {
            $query = JobStatement::enqueueLimited($async);
            $bindings = [
                $this->getQueue($queue), $payload, $this->delaySeconds($delay),
                ...$limits->bindings(), $dedup, (string) $this->dedupWindow, '0', null,
                $share?->key, $share === null ? '1' : (string) $share->weight,
                $group->group, $group->hold ? 'true' : 'false',
            ];
        } elseif ($share !== null) {
            $query = JobStatement::enqueueFair($async);
            $bindings = [
                $this->getQueue($queue), $payload, $this->delaySeconds($delay),
                $share->key, (string) $share->weight, $dedup, (string) $this->dedupWindow, '0', null,
            ];
        } elseif ($group->group === null && $dedup === null) {
            $query = JobStatement::insert(1, $async, returning: true);
            $bindings = [$this->getQueue($queue), $payload, $this->delaySeconds($delay)];
        } else {
            $query = JobStatement::enqueue($async);
            $bindings = [
                $this->getQueue($queue), $payload, $this->delaySeconds($delay),
                $group->group, $group->hold ? 'true' : 'false', $dedup, (string) $this->dedupWindow,
                '0', null,
            ];
        }
        if (!$this->database instanceof Connection || $this->database->pretending()) {
            // Pretend mode (DB::pretend) records the query and runs nothing: there is no id.
            $id = $this->database->selectOne($query, $bindings, false)->id ?? 0;
            return $id === null ? null : (int) $id;
        }
        return $this->insertInOneRoundTrip($this->database, $query, $bindings);
    }

    /**
     * The INSERT in one round trip instead of Laravel's prepared statement, which costs three
     * per dispatch (prepare, execute, DEALLOCATE) — the dispatch of a web request waits for
     * each: a statement prepared once per connection and kept (preparedOnce) where the
     * connection prepares natively, else one unnamed statement (libpq's PQexecParams: parse,
     * bind and execute together, values sent apart from the SQL). It still goes through the application's connection and transaction,
     * fires QueryExecuted (query log, Telescope, DB::listen), and retries once on a lost connection
     * outside a transaction, as Laravel does.
     *
     * @param list<string> $bindings
     */
    private function insertInOneRoundTrip(Connection $connection, string $query, array $bindings, bool $returnsId = true): ?int
    {
        $start = microtime(true);
        // Null while connecting fails: there is then no statement to forget, and no second
        // attempt at connecting in the catch, which would throw past the QueryException.
        $pdo = null;
        try {
            $pdo = $connection->getPdo();
            $id = $this->executeInOneRoundTrip($pdo, $query, $bindings, $returnsId);
        } catch (\PDOException $e) {
            $statementGone = $pdo !== null && $this->forgetIfDeallocated($pdo, $e);
            if ($connection->transactionLevel() === 0 && ($statementGone || $this->causedByLostConnection($e))) {
                if (!$statementGone) {
                    $connection->reconnect();
                }
                $id = $this->executeInOneRoundTrip($connection->getPdo(), $query, $bindings, $returnsId);
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
    private function executeInOneRoundTrip(\PDO $pdo, string $query, array $bindings, bool $returnsId): ?int
    {
        $statement = $returnsId ? $this->preparedOnce($pdo, $query) : null;
        $statement ??= $pdo->prepare($query, [\PDO::PGSQL_ATTR_DISABLE_PREPARES => true]);
        $statement->execute($bindings);
        if (!$returnsId) {
            return null;
        }
        $id = $statement->fetchColumn();
        return $id === null ? null : (int) $id;
    }

    /**
     * A single dispatch's statement, prepared once per connection and kept (one round trip each
     * time after the first, and no parse or plan: ~0.1 ms less per dispatch, bench/notes.md) —
     * only where the connection prepares natively, as Laravel does by default. A connection that
     * emulates prepares (or disables them) gets null, and the caller's unnamed statement: what a
     * transaction pooler needs, where a named statement may be gone on the next server
     * (docs/postgres-topologies.md says to emulate there).
     */
    private function preparedOnce(\PDO $pdo, string $query): ?\PDOStatement
    {
        try {
            if ($pdo->getAttribute(\PDO::ATTR_EMULATE_PREPARES) || $pdo->getAttribute(\PDO::PGSQL_ATTR_DISABLE_PREPARES)) {
                return null;
            }
        } catch (\PDOException $e) {
            return null;
        }
        $this->prepared ??= new \WeakMap();
        $byQuery = $this->prepared[$pdo] ?? [];
        if (!isset($byQuery[$query])) {
            $byQuery[$query] = $pdo->prepare($query);
            $this->prepared[$pdo] = $byQuery;
        }
        return $byQuery[$query];
    }

    /**
     * The application ran DEALLOCATE ALL or DISCARD ALL on this connection, which dropped the
     * statements kept here (SQLSTATE 26000 on executing one): forget them, so that the next
     * dispatch prepares its statement again. Outside a transaction the caller retries at once;
     * inside one PostgreSQL has already aborted the transaction, so the error goes to the
     * application, and its next dispatch works.
     */
    private function forgetIfDeallocated(\PDO $pdo, \PDOException $e): bool
    {
        if (($e->errorInfo[0] ?? null) !== '26000' || $this->prepared === null || !isset($this->prepared[$pdo])) {
            return false;
        }
        unset($this->prepared[$pdo]);
        return true;
    }

    /**
     * The job's delay in whole seconds (0 for none or a time already past), bound as text: the
     * database turns it into available_at with its own clock (JobStatement::AVAILABLE_AT). A DateTime delay is
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

    /**
     * Deletes the queue's jobs that no worker holds, with the grouped jobs waiting behind them
     * and the jobs waiting for their limits; returns how many. A group whose head is running keeps its row until that job settles.
     *
     * A workflow's steps among them are deleted as deleted, not completed: locked, and noted by
     * drover.workflow_steps_deleted in the same transaction before the delete (their nodes fail,
     * and what depends on them is cancelled; migration 0016). A step that reaches the queue after
     * the lock is spared, never deleted unnoted. Like the rest of clear(), an operator's right
     * (drover_operator; a producer may not delete jobs).
     */
    public function clear($queue)
    {
        $queue = $this->getQueue($queue);
        return $this->database->transaction(function () use ($queue) {
            // The jobs behind the groups' heads first, so that a head deleted below ends its group
            // instead of moving the next one in; then the jobs waiting for their limits: the
            // delete of an admitted job below admits the next of its keys, which must not be one
            // of this queue's.
            $waiting = $this->database->delete('DELETE FROM drover.group_jobs WHERE queue = ?', [$queue]);
            $waiting += (int) $this->database->selectOne('SELECT drover.limit_clear(?) AS n', [$queue])->n;
            $this->database->delete('DELETE FROM drover.groups WHERE queue = ? AND head IS NULL', [$queue]);
            $steps = BrokerQuery::textArray(array_map(
                fn (object $row) => (string) $row->id,
                $this->database->select('SELECT id FROM drover.jobs WHERE queue = ? AND lease_token IS NULL AND wf IS NOT NULL ORDER BY id FOR UPDATE', [$queue]),
            ));
            if ($steps !== '{}') {
                $this->database->select('SELECT drover.workflow_steps_deleted(?::bigint[], ?)', [$steps, "deleted with the jobs of queue $queue (queue:clear)"]);
            }
            return $waiting + $this->database->delete(
                'DELETE FROM drover.jobs WHERE queue = ? AND lease_token IS NULL AND (wf IS NULL OR id = ANY(?::bigint[]))',
                [$queue, $steps],
            );
        });
    }

    /**
     * The payload push() would write for $job on $queue — Laravel's createPayload, with the job's
     * tags and trace context (createPayloadArray) — without pushing it: a workflow's steps are
     * stored by drover.workflow_add_steps and reach drover.jobs when their node is released, as
     * this payload, so `drover:work` runs them as any job (Workflow\StepPayloads).
     */
    public function payloadFor(object $job, string $queue): string
    {
        // Laravel 12's createPayload takes the delay too (null for push); Laravel 8's has no such
        // parameter and PHP drops the extra argument.
        return $this->createPayload($job, $this->getQueue($queue), '', null);
    }

    /** Whether queue $queue of this connection is fair (drover.fair). */
    public function queueIsFair(string $queue): bool
    {
        return $this->isFair($this->getQueue($queue));
    }

    /** Whether `$queue` of this connection is fair (drover.fair). */
    private function isFair(string $queue): bool
    {
        return $this->fairQueues !== [] && FairShare::isFair($this->fairQueues, $this->getConnectionName() ?? 'drover', $queue);
    }

    /** The job's fair share on `$queue`, or null when the queue is not fair. */
    private function fairShare(mixed $job, string $queue): ?FairShare
    {
        return FairShare::ofJob($job, $queue, $this->isFair($queue));
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
