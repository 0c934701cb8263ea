-- Due times $3 (an array) of task $1 ($2 its summary), scope $4, that no master started in time:
-- recorded as missed by this master ($5, host $6), reason $7, unless a run of one is on record.
-- Returns how many were recorded.
INSERT INTO drover.schedule_runs (task, summary, due_at, scope, node, host, status, reason, claimed_at, ended_at)
SELECT $1, $2, d, $4, $5, $6, 'missed', $7, clock_timestamp(), clock_timestamp()
FROM unnest($3::timestamptz[]) AS d
ON CONFLICT (task, due_at, scope) DO NOTHING
