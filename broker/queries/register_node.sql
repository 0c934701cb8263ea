-- This master's row; started and alive as of the database's now unless $3 gives a time. Returns
-- the row's id and that time as seconds since the epoch.
INSERT INTO drover.nodes (hostname, pid, started_at, heartbeat_at)
VALUES ($1, $2, coalesce($3::timestamptz, now()), coalesce($3::timestamptz, now()))
RETURNING id, extract(epoch FROM started_at)::float8
