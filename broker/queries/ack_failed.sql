-- Jobs that failed for good and were recorded by the application (Laravel's failer) are deleted,
-- as an ack deletes them; a pair whose token is stale matches nothing. A grouped job that failed
-- under `hold` holds its group: it is noted in drover.group_failures (an insert, which waits for
-- no lock), and the trigger on drover.jobs, at the end of this statement, holds the group; any
-- other grouped job lets its group go on. Apart from ack.sql so that a completion, the hot path,
-- runs the statement it always ran.
WITH gone AS (
    DELETE FROM drover.jobs AS j
    USING unnest($1::bigint[], $2::bigint[]) AS s(id, token)
    WHERE j.id = s.id AND j.lease_token = s.token
    RETURNING j.id, j.grp_hold, j.payload
), held AS (
    INSERT INTO drover.group_failures (job, uuid, error, at)
    SELECT id, coalesce(drover.payload_uuid(payload), id::text), 'failed (see failed_jobs)',
           coalesce($3::timestamptz, now())
    FROM gone WHERE grp_hold
    ON CONFLICT (job) DO NOTHING
)
SELECT id FROM gone
