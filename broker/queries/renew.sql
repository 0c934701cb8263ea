-- Extend the leases this node still holds to now + $4 seconds, by the database's clock unless
-- $5 gives a time (a test's clock); a pair whose token moved on is not renewed. Each pair asked
-- for comes back at most once, with what became of it:
-- - 'renewed': extended;
-- - 'completed': the job completed inside its own transaction under this lease
--   (drover.complete_within, migration 0015): not lost, nothing to renew;
-- - 'busy': still held with this token, but its row is locked — by the job's own transaction
--   between complete_within and its commit, or a settle or reap statement of this moment. It is
--   skipped, never waited on (a worker frozen inside that transaction would hold up every
--   renewal of this node): not renewed this time, and not lost either. If the lock outlives
--   the lease, the lease keeper kills that worker before the lease ends, which rolls the
--   transaction back.
-- Anything else asked for is missing: its lease was lost.
-- The rows are found by their primary key only, bounded by the list of ids (`id = ANY`), and the
-- token is matched with IS NOT DISTINCT FROM (tokens sent are never NULL), so no index but the
-- primary key can serve and no plan reads more of it than the ids sent. Joined on `id = s.id`
-- alone, once statistics said the table was small the planner read all of jobs_leased, or all
-- of jobs_pkey, once per statement and joined that: while a snapshot is held, every dead entry
-- (docs/decisions/0010-a-held-snapshot.md).
WITH mine AS (
    SELECT j.id
    FROM drover.jobs AS j, unnest($1::bigint[], $2::bigint[]) AS s(id, token)
    WHERE j.id = s.id AND j.id = ANY ($1::bigint[])
        AND j.lease_token IS NOT DISTINCT FROM s.token AND j.lease_owner = $3
    FOR UPDATE OF j SKIP LOCKED
), renewed AS (
    UPDATE drover.jobs AS j
    SET lease_expires_at = coalesce($5::timestamptz, now()) + make_interval(secs => $4)
    FROM mine
    WHERE j.id = mine.id AND j.id = ANY ($1::bigint[])
    RETURNING j.id
)
SELECT id, 'renewed' FROM renewed
UNION ALL
SELECT c.job_id, 'completed'
FROM drover.completions AS c, unnest($1::bigint[], $2::bigint[]) AS s(id, token)
WHERE c.job_id = s.id AND c.job_id = ANY ($1::bigint[]) AND c.lease_token = s.token
UNION ALL
SELECT j.id, 'busy'
FROM drover.jobs AS j, unnest($1::bigint[], $2::bigint[]) AS s(id, token)
WHERE j.id = s.id AND j.id = ANY ($1::bigint[])
    AND j.lease_token IS NOT DISTINCT FROM s.token AND j.lease_owner = $3
    AND j.id NOT IN (SELECT id FROM mine)
