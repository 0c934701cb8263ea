-- Take back up to 1000 jobs whose lease ran out (their master died or lost the database), by
-- the database's clock unless $1 gives a time (a test's clock): the same clock that wrote the
-- expiry. A lease with an outage grace (lease_grace, a pool's `outage_grace`) is taken back only
-- once that grace has passed too, for its worker may run its job that long past the lease's end
-- while its master cannot reach the database (migrations/0009_outage_grace.sql) — unless its
-- holder's node row is gone (it exited, or its successor in the same state directory removed
-- it: nothing of it runs any more; a silent node's row outlives its lease and grace). The
-- attempt stays charged: the job may have run. A job taken back keeps its place in line
-- (available_at as it was): it is not sent behind the backlog that arrived meanwhile. Jobs out
-- of attempts fail.
WITH expired AS (
    SELECT id FROM drover.jobs AS x
    WHERE lease_token IS NOT NULL AND lease_expires_at < coalesce($1::timestamptz, now())
      AND (lease_grace IS NULL
           OR lease_expires_at + make_interval(secs => lease_grace) < coalesce($1::timestamptz, now())
           OR NOT EXISTS (SELECT 1 FROM drover.nodes AS n WHERE n.id = x.lease_owner))
    ORDER BY lease_expires_at
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
), exhausted AS (
    DELETE FROM drover.jobs AS j USING expired e
    WHERE j.id = e.id AND j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts
    RETURNING j.id, j.queue, j.payload, j.attempts, j.grp, j.grp_hold, j.wf
), held AS (
    -- A grouped job under `hold` holds its group (noted in drover.group_failures, see ack.sql).
    INSERT INTO drover.group_failures (job, uuid, error, at)
    SELECT id, coalesce(drover.payload_uuid(payload), id::text),
           'drover: lease expired (its master stopped renewing) and no attempts are left',
           coalesce($1::timestamptz, now())
    FROM exhausted WHERE grp_hold
    ON CONFLICT (job) DO NOTHING
), step_failed AS (
    -- A workflow's step failed: its node fails (drover.step_failures, migration 0016).
    INSERT INTO drover.step_failures (job, outcome, error)
    SELECT id, 'failed', 'drover: lease expired (its master stopped renewing) and no attempts are left'
    FROM exhausted WHERE wf IS NOT NULL
    ON CONFLICT (job) DO NOTHING
), failed AS (
    INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
    SELECT id, queue, payload, attempts, 'drover: lease expired (its master stopped renewing) and no attempts are left',
           coalesce($1::timestamptz, now())
    FROM exhausted
    RETURNING id
), released AS (
    UPDATE drover.jobs AS j
    SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
    FROM expired e
    WHERE j.id = e.id AND NOT (j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts)
    RETURNING j.id
)
SELECT (SELECT count(*) FROM released), (SELECT count(*) FROM failed)
