-- Recorded steps (`once()`, drover.job_steps) older than $2 seconds before now — the database's,
-- unless $1 gives a time (a test's clock) — up to $3 per statement, oldest first. A job retried
-- after that (a `queue:retry` of a failed job a week later) runs its steps again.
DELETE FROM drover.job_steps
WHERE (job_uuid, step) IN (
    SELECT job_uuid, step FROM drover.job_steps
    WHERE recorded_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2)
    ORDER BY recorded_at
    LIMIT $3)
