<?php

namespace Drover\Queue;

/**
 * The statements that enqueue a job, for every producer: the `drover` queue driver
 * (DroverQueue) and the plain-PDO Producer. A plain job is an INSERT into drover.jobs; a grouped
 * or deduplicated one goes through drover.enqueue (broker/migrations/0005_groups.sql), which
 * places it in its group and checks its deduplication id in the same round trip and transaction.
 * The insert trigger's NOTIFY wakes the master when the caller's transaction commits.
 */
final class JobStatement
{
    /**
     * available_at from the job's delay in seconds, by the database's clock: the master compares
     * it with the database's clock too (docs/leases.md), so a producer host whose clock is off
     * cannot make a job due early or late. clock_timestamp(), not now(): the time of the insert,
     * not the start of the application's transaction.
     */
    public const AVAILABLE_AT = 'clock_timestamp() + make_interval(secs => ?)';

    /**
     * A one-row relation that sets synchronous_commit off for the statement's own implicit
     * transaction (set_config with is_local: nothing outlives it, on a pooled connection either):
     * the opt-in asynchronous commit, in the same single round trip.
     */
    public const ASYNC_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit";

    /** The most rows one INSERT carries (PostgreSQL allows 65,535 bind parameters; well below). */
    public const ROWS_PER_STATEMENT = 1000;

    /**
     * Plain jobs: `$rows` rows, each bound as (queue, payload, delay seconds), followed by
     * (priority, max_attempts) with `$withRules`; the ids come back in order with `$returning`.
     * `$async` commits without waiting for the WAL flush (only outside the caller's own
     * transaction, where its commit decides).
     */
    public static function insert(int $rows, bool $async, bool $returning, bool $withRules = false): string
    {
        $row = '(?, ?, ' . self::AVAILABLE_AT . ($withRules ? ', ?, ?' : '') . ')';
        $columns = 'queue, payload, available_at' . ($withRules ? ', priority, max_attempts' : '');
        $values = implode(', ', array_fill(0, max(1, $rows), $row));
        $sql = $async
            ? "INSERT INTO drover.jobs ($columns) SELECT v.* FROM (VALUES $values) AS v, " . self::ASYNC_COMMIT
            : "INSERT INTO drover.jobs ($columns) VALUES $values";
        return $returning ? "$sql RETURNING id" : $sql;
    }

    /**
     * One grouped or deduplicated job, bound as (queue, payload, delay seconds, group, hold
     * 'true'|'false', deduplication id, window seconds, priority, max_attempts); its id comes
     * back as `id`, null when its deduplication id dropped it.
     */
    public static function enqueue(bool $async): string
    {
        return 'SELECT drover.enqueue(?, ?, ?, ?, ?, ?, ?, ?::smallint, ?::integer) AS id' . ($async ? ' FROM ' . self::ASYNC_COMMIT : '');
    }

    /**
     * One job under limits, bound as (queue, payload, delay seconds, keys, caps, windows — three
     * PostgreSQL array literals, JobLimits::bindings — deduplication id, window seconds,
     * priority, max_attempts, fair key or null, fair weight, group or null, hold 'true'|'false');
     * it waits until it has taken them, behind its group's head when it has a group
     * (broker/migrations/0011_limits.sql). Its id comes back as `id`, null when its
     * deduplication id dropped it.
     */
    public static function enqueueLimited(bool $async): string
    {
        return 'SELECT drover.enqueue_limited(?, ?, ?, ?::text[], ?::integer[], ?::integer[], ?, ?, ?::smallint, ?::integer, ?, ?::float8, ?, ?::boolean) AS id' . ($async ? ' FROM ' . self::ASYNC_COMMIT : '');
    }

    /**
     * One job of a fair queue, bound as (queue, payload, delay seconds, fair key, weight,
     * deduplication id, window seconds, priority, max_attempts); tagged for its key's turn
     * (drover.enqueue_fair, broker/migrations/0011_limits.sql). Its id comes back as `id`, null
     * when its deduplication id dropped it.
     */
    public static function enqueueFair(bool $async): string
    {
        return 'SELECT drover.enqueue_fair(?, ?, ?, ?, ?::float8, ?, ?, ?::smallint, ?::integer) AS id' . ($async ? ' FROM ' . self::ASYNC_COMMIT : '');
    }
}
