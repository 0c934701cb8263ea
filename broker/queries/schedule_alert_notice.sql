-- The right to alert for scheduled task $1 now: taken when it has not alerted within the last $2
-- seconds, by this master or another (one row per task; the update waits for a concurrent
-- one). Returns a row when taken.
INSERT INTO drover.schedule_alerts AS a (task, alerted_at)
VALUES ($1, clock_timestamp())
ON CONFLICT (task) DO UPDATE SET alerted_at = excluded.alerted_at
WHERE a.alerted_at < clock_timestamp() - make_interval(secs => $2)
RETURNING a.task
