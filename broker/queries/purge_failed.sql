-- Retention: delete up to $3 failed jobs that failed more than $2 seconds before now — the
-- database's, unless $1 gives a time (a test's clock) — oldest first, through the index
-- failed_jobs_failed_at. The caller repeats it until fewer than $3 are deleted, so no statement
-- holds many row locks or runs long.
DELETE FROM drover.failed_jobs
WHERE id IN (
    SELECT id FROM drover.failed_jobs
    WHERE failed_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2)
    ORDER BY failed_at
    LIMIT $3)
