-- Keep this node's row alive (with its status document, $4, when given) and drop rows of nodes
-- silent for longer than $3 seconds, both by the database's clock unless $2 gives a time (a
-- test's clock). Returns that time, as seconds since the epoch: the master places its metrics'
-- minutes by it.
WITH beat AS (
    UPDATE drover.nodes
    SET heartbeat_at = coalesce($2::timestamptz, now()),
        status       = coalesce($4::text::jsonb, status),
        status_at    = CASE WHEN $4::text IS NULL THEN status_at ELSE coalesce($2::timestamptz, now()) END
    WHERE id = $1
    RETURNING id
), gone AS (
    DELETE FROM drover.nodes
    WHERE id <> $1 AND heartbeat_at < coalesce($2::timestamptz, now()) - make_interval(secs => $3)
    RETURNING id
)
SELECT extract(epoch FROM coalesce($2::timestamptz, now()))::float8
