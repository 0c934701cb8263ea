-- This master's row; started and alive as of the database's now unless $3 gives a time, with
-- its lease ($4 seconds: how long after its last heartbeat it may still hand out jobs it holds,
-- drover.pause_unconfirmed) and the longest outage grace of its pools ($5 seconds: how much
-- longer than a lease its workers may run a job it could not renew, so its row outlives that,
-- heartbeat.sql) and its release ($6). Returns the row's id, that time as seconds since the
-- epoch, and whether every other master with a row honours an outage grace (heartbeat.sql).
INSERT INTO drover.nodes (hostname, pid, started_at, heartbeat_at, lease_secs, grace_secs, release)
VALUES ($1, $2, coalesce($3::timestamptz, now()), coalesce($3::timestamptz, now()), $4, $5, $6)
RETURNING id, extract(epoch FROM started_at)::float8,
    NOT EXISTS (SELECT 1 FROM drover.nodes AS o WHERE o.release IS NULL)
