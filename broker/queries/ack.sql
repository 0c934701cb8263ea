-- Completed jobs, and jobs that failed for good and were recorded by the application (Laravel's
-- failer: $3 true), are deleted; a pair whose token is stale matches nothing. A grouped job that
-- failed under `hold` holds its group (the trigger on drover.jobs sees held_by at the end of
-- this statement and leaves the group waiting); any other grouped job lets its group go on.
WITH gone AS (
    DELETE FROM drover.jobs AS j
    USING unnest($1::bigint[], $2::bigint[], $3::bool[]) AS s(id, token, failed)
    WHERE j.id = s.id AND j.lease_token = s.token
    -- The payload only for a job that holds its group (its uuid names the held job): an ack
    -- carries no payload back otherwise.
    RETURNING j.id, j.queue, j.grp, j.grp_hold AND s.failed AS hold,
              CASE WHEN j.grp_hold AND s.failed THEN j.payload END AS payload
), held AS (
    UPDATE drover.groups AS g
    SET held_by = gone.id, held_uuid = coalesce(drover.payload_uuid(gone.payload), gone.id::text),
        held_at = coalesce($4::timestamptz, now()), held_error = 'failed (see failed_jobs)'
    FROM gone
    WHERE gone.hold AND g.queue = gone.queue AND g.name = gone.grp AND g.head = gone.id
)
SELECT id FROM gone
