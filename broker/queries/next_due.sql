-- How many seconds until the earliest delayed job of these queues is due, by the database's
-- clock unless $2 gives a time (a test's clock); NULL when none is waiting. A duration, not a
-- time: the master waits for it on its own monotonic clock.
-- It walks jobs_ready, the claim's index, so that no second index on (queue, available_at)
-- exists for the claim's planner to pick: per queue, one probe per distinct priority (a skip
-- scan: the highest priority, then the next lower one, ...), then per priority the earliest
-- available_at after now. A handful of index probes, never a scan of every delayed job.
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
SELECT extract(epoch FROM min(d.available_at) - coalesce($2::timestamptz, now()))::float8
FROM prio AS p
CROSS JOIN LATERAL (
    SELECT available_at FROM drover.jobs
    WHERE queue = p.queue AND priority = p.priority AND lease_token IS NULL
      AND available_at > coalesce($2::timestamptz, now())
    ORDER BY available_at
    LIMIT 1
) AS d
