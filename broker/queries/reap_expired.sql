-- Take back up to 1000 jobs whose lease ran out before $1 (their master died or lost the
-- database). The attempt stays charged: the job may have run. Jobs out of attempts fail.
WITH expired AS (
    SELECT id FROM drover.jobs
    WHERE lease_token IS NOT NULL AND lease_expires_at < $1
    ORDER BY lease_expires_at
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
), exhausted AS (
    DELETE FROM drover.jobs AS j USING expired e
    WHERE j.id = e.id AND j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts
    RETURNING j.id, j.queue, j.payload, j.attempts
), failed AS (
    INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
    SELECT id, queue, payload, attempts, 'drover: lease expired (its master stopped renewing) and no attempts are left', $1
    FROM exhausted
    RETURNING id
), released AS (
    UPDATE drover.jobs AS j
    SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, available_at = $1
    FROM expired e
    WHERE j.id = e.id AND NOT (j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts)
    RETURNING j.id
)
SELECT (SELECT count(*) FROM released), (SELECT count(*) FROM failed)
