-- Keep this node's row alive (with its status document, $4, when given) and drop rows of nodes
-- silent for longer than $3 seconds, ten of their own leases, and three leases and their outage
-- grace (a node may hold a job that long without renewing it: migrations/0009_outage_grace.sql;
-- the reap takes the jobs of a node without a row back as soon as their leases end), all by the
-- database's clock unless $2 gives a time (a test's clock). $8 is the longest outage grace this
-- master's pools now want: the row's only grows, and is returned, since claims may not use more
-- than the row says.
-- A row that is gone (this master was silent that long, and another dropped it) is registered
-- again under the same id ($5 hostname, $6 pid, $7 lease seconds, $9 release): a master without
-- a row would not be waited for by a queue pause (drover.pause_unconfirmed). Returns that time,
-- as seconds since the epoch (the master places its metrics' minutes by it), whether the row had
-- to be registered again, the row's grace, and whether every other master with a row honours an
-- outage grace (none of release 0.1, whose reap would take a graced lease back at its end:
-- migrations/0009_outage_grace.sql).
WITH beat AS (
    INSERT INTO drover.nodes AS n (id, hostname, pid, started_at, heartbeat_at, lease_secs, grace_secs, release, status, status_at)
    VALUES ($1, $5, $6, coalesce($2::timestamptz, now()), coalesce($2::timestamptz, now()), $7, $8, $9,
            $4::text::jsonb, CASE WHEN $4::text IS NULL THEN NULL ELSE coalesce($2::timestamptz, now()) END)
    ON CONFLICT (id) DO UPDATE
    SET heartbeat_at = coalesce($2::timestamptz, now()),
        grace_secs   = greatest(n.grace_secs, $8),
        status       = coalesce($4::text::jsonb, n.status),
        status_at    = CASE WHEN $4::text IS NULL THEN n.status_at ELSE coalesce($2::timestamptz, now()) END
    RETURNING (xmax = 0) AS registered, n.grace_secs
), gone AS (
    -- Never a row of drover 0.1 (release NULL): such a master does not register its row again
    -- when it comes back from a partition, so without its row it would reap graced leases
    -- unseen. A 0.1 row goes when that master exits cleanly, when its host's 0.2 master starts
    -- in the same state directory, or by hand (docs/upgrading.md).
    DELETE FROM drover.nodes
    WHERE id <> $1 AND release IS NOT NULL
      AND heartbeat_at < coalesce($2::timestamptz, now())
          - make_interval(secs => greatest($3, 10 * lease_secs, 3 * lease_secs + grace_secs))
    RETURNING id
)
SELECT extract(epoch FROM coalesce($2::timestamptz, now()))::float8, (SELECT registered FROM beat),
    (SELECT grace_secs FROM beat),
    NOT EXISTS (SELECT 1 FROM drover.nodes AS o WHERE o.id <> $1 AND o.release IS NULL
                AND o.id NOT IN (SELECT id FROM gone))
