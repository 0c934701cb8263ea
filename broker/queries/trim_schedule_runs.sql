-- Retention of the schedule's history: up to $3 runs due more than $2 seconds ago by the
-- database's clock (unless $1 gives a time), oldest first, never one still running.
DELETE FROM drover.schedule_runs
WHERE id IN (
    SELECT id FROM drover.schedule_runs
    WHERE due_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2)
      AND status <> 'running'
    ORDER BY due_at
    LIMIT $3)
