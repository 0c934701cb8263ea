-- Completed jobs, and jobs that failed for good and were recorded by the application (Laravel's
-- failer: $3 true), are deleted; a pair whose token is stale matches nothing. A grouped job that
-- failed under `hold` holds its group: it is noted in drover.group_failures (an insert, which
-- waits for no lock), and the trigger on drover.jobs, at the end of this statement, holds the
-- group; any other grouped job lets its group go on.
WITH gone AS (
    DELETE FROM drover.jobs AS j
    USING unnest($1::bigint[], $2::bigint[], $3::bool[]) AS s(id, token, failed)
    WHERE j.id = s.id AND j.lease_token = s.token
    -- The payload only for a job that holds its group (its uuid names the held job): an ack
    -- carries no payload back otherwise.
    RETURNING j.id, j.queue, j.grp, j.grp_hold AND s.failed AS hold,
              CASE WHEN j.grp_hold AND s.failed THEN j.payload END AS payload
), held AS (
    INSERT INTO drover.group_failures (job, uuid, error, at)
    SELECT id, coalesce(drover.payload_uuid(payload), id::text), 'failed (see failed_jobs)',
           coalesce($4::timestamptz, now())
    FROM gone WHERE hold
    ON CONFLICT (job) DO NOTHING
)
SELECT id FROM gone
