-- Shared: the master (broker/src/groups.rs, Broker::group_stats: drover:status and the metrics)
-- and the dashboard (php-client/src/Dashboard/Repositories/GroupRepository.php, queues()) run
-- this very file; php-client/tests/SharedReadsTest.php and broker/tests/shared_reads.rs hold
-- both to the same answers. Columns are read by name in PHP, by position in Rust.
-- Ordered groups per queue, as operators see them (docs/ordered-groups.md): the groups that have
-- jobs (counted up to $3), those held by a failed job, the jobs waiting behind the heads, and how
-- long the oldest head has been its group's head (seconds, by the database's clock unless $2
-- gives a time; NULL when no group has a head). One range scan of drover.groups' primary key
-- per queue, capped.
SELECT q.name AS queue, s.groups, s.held, s.waiting, s.oldest_head_secs
FROM unnest($1::text[]) AS q(name)
CROSS JOIN LATERAL (
    SELECT count(*) AS groups,
           count(*) FILTER (WHERE g.head IS NULL) AS held,
           coalesce(sum(g.waiting), 0)::bigint AS waiting,
           extract(epoch FROM coalesce($2::timestamptz, now())
                              - min(g.head_since) FILTER (WHERE g.head IS NOT NULL))::float8 AS oldest_head_secs
    FROM (SELECT head, waiting, head_since FROM drover.groups WHERE queue = q.name LIMIT $3) AS g
) AS s
