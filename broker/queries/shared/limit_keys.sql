-- Shared: the master (broker/src/limit_stats.rs, Broker::limit_keys: drover:status and the
-- metrics) and the dashboard (php-client/src/Dashboard/Repositories/LimitRepository.php) run
-- this very file; php-client/tests/SharedReadsTest.php and broker/tests/shared_reads.rs hold
-- both to the same answers. Columns are read by name in PHP, by position in Rust.
-- The keys jobs wait for (docs/limits.md), most waited for first, up to $1 keys (of the first
-- 100,000 waiting jobs read): per key the jobs in its line, the concurrency slots held, the
-- starts used in its rate's window while one is open (NULL: none), in how many seconds that
-- window ends (NULL: until its first job starts), and how long the line's oldest due job has been due (NULL: none is due) — by the
-- database's clock unless $2 gives a time. A key's line is one range scan of
-- limit_waiting_line; the counts per key are probes of their primary keys.
WITH lines AS (
    SELECT waits_on AS key, count(*) AS waiting,
           min(available_at) FILTER (WHERE available_at <= coalesce($2::timestamptz, now())) AS oldest_due
    FROM (SELECT waits_on, available_at FROM drover.limit_waiting LIMIT 100000) AS w
    GROUP BY waits_on
    ORDER BY count(*) DESC, waits_on
    LIMIT $1
)
SELECT l.key, l.waiting,
       (SELECT count(*) FROM drover.limit_holders AS h WHERE h.key = l.key) AS held,
       k.used::bigint AS rate_used,
       extract(epoch FROM k.ends_at - coalesce($2::timestamptz, now()))::float8 AS window_ends_in_secs,
       extract(epoch FROM coalesce($2::timestamptz, now()) - l.oldest_due)::float8 AS oldest_wait_secs
FROM lines AS l
LEFT JOIN drover.limit_keys AS k ON k.key = l.key AND k.window_start IS NOT NULL
    AND (k.ends_at IS NULL OR k.ends_at > coalesce($2::timestamptz, now()))
ORDER BY l.waiting DESC, l.key
