-- Progress rows (drover.job_progress, migration 0016) of jobs that left drover.jobs, last
-- reported more than $2 seconds before now — the database's, unless $1 gives a time (a test's
-- clock) — up to $3 per statement, oldest first.
DELETE FROM drover.job_progress
WHERE job_id IN (
    SELECT p.job_id FROM drover.job_progress AS p
    WHERE p.at < coalesce($1::timestamptz, now()) - make_interval(secs => $2)
      AND NOT EXISTS (SELECT 1 FROM drover.jobs AS j WHERE j.id = p.job_id)
    ORDER BY p.at
    LIMIT $3)
