-- Shared: the master (broker/src/metrics.rs, Broker::oldest_waits: drover:status, the metrics
-- and long-wait alerts) and the dashboard (php-client/src/Dashboard/Repositories/
-- QueueRepository.php, queues()) run this very file; php-client/tests/SharedReadsTest.php and
-- broker/tests/shared_reads.rs hold both to the same answers. Columns are read by name in PHP,
-- by position in Rust.
-- Per queue, how many seconds the oldest available job (not leased, available_at <= now) has
-- waited, by the database's clock unless $2 gives a time; queues with none are absent. The same
-- skip scan as next_due.sql: per queue, one probe per distinct priority, then the first entry of
-- each priority in jobs_ready's order (its oldest), never a scan of the backlog.
WITH RECURSIVE prio(queue, priority) AS (
    SELECT q.name, (
        SELECT priority FROM drover.jobs
        WHERE queue = q.name AND lease_token IS NULL
        ORDER BY priority DESC
        LIMIT 1)
    FROM unnest($1::text[]) AS q(name)
  UNION ALL
    SELECT p.queue, (
        SELECT priority FROM drover.jobs
        WHERE queue = p.queue AND lease_token IS NULL AND priority < p.priority
        ORDER BY priority DESC
        LIMIT 1)
    FROM prio AS p
    WHERE p.priority IS NOT NULL
)
SELECT p.queue,
       extract(epoch FROM coalesce($2::timestamptz, now()) - min(d.available_at))::float8 AS oldest_wait_secs
FROM prio AS p
CROSS JOIN LATERAL (
    SELECT available_at FROM drover.jobs
    WHERE queue = p.queue AND priority = p.priority AND lease_token IS NULL
    ORDER BY available_at
    LIMIT 1
) AS d
WHERE d.available_at <= coalesce($2::timestamptz, now())
GROUP BY p.queue
