-- Jobs that failed for good and were recorded by the application (Laravel's failer) are deleted,
-- as an ack deletes them; a pair whose token is stale matches nothing. A grouped job that failed
-- under `hold` holds its group: it is noted in drover.group_failures (an insert, which waits for
-- no lock), and the trigger on drover.jobs, at the end of this statement, holds the group; any
-- other grouped job lets its group go on. A workflow's step is noted in drover.step_failures the
-- same way, so that its workflow sees it failed (migration 0016). Apart from ack.sql so that a completion, the hot path,
-- runs the statement it always ran.
-- The rows are found by their primary key only, bounded by the list of ids (`id = ANY`), and the
-- token is matched with IS NOT DISTINCT FROM (tokens sent are never NULL), so no index but the
-- primary key can serve and no plan reads more of it than the ids sent. Joined on `id = s.id`
-- alone, once statistics said the table was small the planner read all of jobs_leased, or all
-- of jobs_pkey, once per statement and joined that: while a snapshot is held, every dead entry
-- (docs/decisions/0010-a-held-snapshot.md).
WITH gone AS (
    DELETE FROM drover.jobs AS j
    USING unnest($1::bigint[], $2::bigint[]) AS s(id, token)
    WHERE j.id = s.id AND j.id = ANY ($1::bigint[])
    AND j.lease_token IS NOT DISTINCT FROM s.token
    RETURNING j.id, j.grp_hold, j.payload, j.wf
), held AS (
    INSERT INTO drover.group_failures (job, uuid, error, at)
    SELECT id, coalesce(drover.payload_uuid(payload), id::text), 'failed (see failed_jobs)',
           coalesce($3::timestamptz, now())
    FROM gone WHERE grp_hold
    ON CONFLICT (job) DO NOTHING
), step_failed AS (
    -- A workflow's step failed: its node fails (drover.step_failures, migration 0016).
    INSERT INTO drover.step_failures (job, outcome, error)
    SELECT id, 'failed', 'failed (see failed_jobs)' FROM gone WHERE wf IS NOT NULL
    ON CONFLICT (job) DO NOTHING
)
SELECT id FROM gone
