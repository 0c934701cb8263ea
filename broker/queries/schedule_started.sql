-- Run $1's process started: its pid $2, at $3 (the master's clock: when the run began).
UPDATE drover.schedule_runs SET pid = $2, started_at = $3 WHERE id = $1
