-- Move failed jobs out of the hot table, keeping the error. failed_at is the database's now
-- unless $4 gives a time (a test's clock). A grouped job under `hold` holds its group (noted in
-- drover.group_failures, see ack.sql); any other lets its group go on.
-- The rows are found by their primary key only, bounded by the list of ids (`id = ANY`), and the
-- token is matched with IS NOT DISTINCT FROM (tokens sent are never NULL), so no index but the
-- primary key can serve and no plan reads more of it than the ids sent. Joined on `id = s.id`
-- alone, once statistics said the table was small the planner read all of jobs_leased, or all
-- of jobs_pkey, once per statement and joined that: while a snapshot is held, every dead entry
-- (docs/decisions/0010-a-held-snapshot.md).
WITH gone AS (
    DELETE FROM drover.jobs AS j
    USING unnest($1::bigint[], $2::bigint[], $3::text[]) AS s(id, token, error)
    WHERE j.id = s.id AND j.id = ANY ($1::bigint[])
    AND j.lease_token IS NOT DISTINCT FROM s.token
    RETURNING j.id, j.queue, j.payload, j.attempts, s.error, j.grp, j.grp_hold, j.wf
), held AS (
    INSERT INTO drover.group_failures (job, uuid, error, at)
    SELECT id, coalesce(drover.payload_uuid(payload), id::text), error, coalesce($4::timestamptz, now())
    FROM gone WHERE grp_hold
    ON CONFLICT (job) DO NOTHING
), step_failed AS (
    -- A workflow's step failed: its node fails (drover.step_failures, migration 0016).
    INSERT INTO drover.step_failures (job, outcome, error)
    SELECT id, 'failed', error FROM gone WHERE wf IS NOT NULL
    ON CONFLICT (job) DO NOTHING
)
INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
SELECT id, queue, payload, attempts, error, coalesce($4::timestamptz, now()) FROM gone
RETURNING id
