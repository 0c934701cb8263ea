-- Retention of the history: up to $3 rows that finished more than $2 seconds ago by the
-- database's clock (unless $1 gives a time), oldest first, through recent_jobs_finished_at.
DELETE FROM drover.recent_jobs
WHERE (id, attempt) IN (
    SELECT id, attempt FROM drover.recent_jobs
    WHERE finished_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2)
    ORDER BY finished_at
    LIMIT $3)
