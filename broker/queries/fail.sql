-- Move failed jobs out of the hot table, keeping the error. failed_at is the database's now
-- unless $4 gives a time (a test's clock).
WITH gone AS (
    DELETE FROM drover.jobs AS j
    USING unnest($1::bigint[], $2::bigint[], $3::text[]) AS s(id, token, error)
    WHERE j.id = s.id AND j.lease_token = s.token
    RETURNING j.id, j.queue, j.payload, j.attempts, s.error
)
INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
SELECT id, queue, payload, attempts, error, coalesce($4::timestamptz, now()) FROM gone
RETURNING id
