-- Keep this node's row alive (with its status document, $4, when given) and drop rows of nodes
-- silent for longer than $3 seconds and ten of their own leases (a master with a longer lease
-- heartbeats less often), both by the database's clock unless $2 gives a time (a test's clock).
-- A row that is gone (this master was silent that long, and another dropped it) is registered
-- again under the same id ($5 hostname, $6 pid, $7 lease seconds): a master without a row would
-- not be waited for by a queue pause (drover.pause_unconfirmed). Returns that time, as seconds
-- since the epoch (the master places its metrics' minutes by it), and whether the row had to be
-- registered again.
WITH beat AS (
    INSERT INTO drover.nodes AS n (id, hostname, pid, started_at, heartbeat_at, lease_secs, status, status_at)
    VALUES ($1, $5, $6, coalesce($2::timestamptz, now()), coalesce($2::timestamptz, now()), $7,
            $4::text::jsonb, CASE WHEN $4::text IS NULL THEN NULL ELSE coalesce($2::timestamptz, now()) END)
    ON CONFLICT (id) DO UPDATE
    SET heartbeat_at = coalesce($2::timestamptz, now()),
        status       = coalesce($4::text::jsonb, n.status),
        status_at    = CASE WHEN $4::text IS NULL THEN n.status_at ELSE coalesce($2::timestamptz, now()) END
    RETURNING (xmax = 0) AS registered
), gone AS (
    DELETE FROM drover.nodes
    WHERE id <> $1
      AND heartbeat_at < coalesce($2::timestamptz, now()) - make_interval(secs => greatest($3, 10 * lease_secs))
    RETURNING id
)
SELECT extract(epoch FROM coalesce($2::timestamptz, now()))::float8, (SELECT registered FROM beat)
