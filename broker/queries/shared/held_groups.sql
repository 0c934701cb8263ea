-- Shared: the master (broker/src/groups.rs, Broker::held_groups: drover:status) and the
-- dashboard (php-client/src/Dashboard/Repositories/GroupRepository.php, held()) run this very
-- file; php-client/tests/SharedReadsTest.php and broker/tests/shared_reads.rs hold both to the
-- same answers. Columns are read by name in PHP, by position in Rust.
-- The groups of these queues held by a job that failed for good, oldest first, at most $2
-- (through groups_held): what holds each, since when, and how many jobs wait behind it.
SELECT queue, name, held_by, held_uuid, held_error,
       extract(epoch FROM held_at)::float8 AS held_at_secs, waiting
FROM drover.groups
WHERE head IS NULL AND queue = ANY($1::text[])
ORDER BY held_at
LIMIT $2
