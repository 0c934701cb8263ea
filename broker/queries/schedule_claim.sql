-- Claims due time $3 of scheduled task $1 ($2 its summary) for this master ($5, on host $6):
-- scope $4 is '' for a task of onOneServer() (one run across every master), else the host name.
-- Returns the run's id, or no row when another master (or this host's) has it already.
INSERT INTO drover.schedule_runs (task, summary, due_at, scope, node, host, status, claimed_at)
VALUES ($1, $2, $3, $4, $5, $6, 'running', clock_timestamp())
ON CONFLICT (task, due_at, scope) DO NOTHING
RETURNING id
