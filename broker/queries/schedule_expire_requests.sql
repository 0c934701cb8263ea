-- Runs asked for now that no master took within $1 seconds (none runs that task: its key changed
-- with a deploy, or no master runs the schedule): recorded as missed, with why. Returns each
-- (task, when it was asked).
UPDATE drover.schedule_runs
SET status = 'missed', ended_at = clock_timestamp(),
    reason = 'asked for now, but no master that runs this task took it within ' || $1::bigint || ' s'
WHERE status = 'requested'
  AND due_at < clock_timestamp() - make_interval(secs => $1::bigint)
RETURNING task, due_at
