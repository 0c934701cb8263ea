-- Run $1 ended: its status $2, why ($3), exit code $4, output tail $5, ended at $6 (the master's
-- clock). Only a run still out: one already marked lost (its master's row went while it ran)
-- keeps that.
UPDATE drover.schedule_runs
SET status = $2, reason = $3, exit_code = $4, output_tail = $5, ended_at = $6
WHERE id = $1 AND status = 'running'
