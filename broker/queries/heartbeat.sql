-- Keep this node's row alive and drop rows of nodes silent for longer than $3 seconds, both by
-- the database's clock unless $2 gives a time (a test's clock).
WITH beat AS (UPDATE drover.nodes SET heartbeat_at = coalesce($2::timestamptz, now()) WHERE id = $1 RETURNING id)
DELETE FROM drover.nodes
WHERE id <> $1 AND heartbeat_at < coalesce($2::timestamptz, now()) - make_interval(secs => $3)
