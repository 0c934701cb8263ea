-- Claims due time $3 of scheduled task $1 ($2 its summary) for this master ($5, on host $6):
-- scope $4 is '' for a task of onOneServer() (one run across every master), else the host name.
-- A paused task's due time is recorded as skipped instead (drover.schedule_pauses), once, by
-- whichever master claims it. Returns the row's id and status ('running': run it; 'skipped':
-- paused), or no row when another master (or this host's) has it already.
INSERT INTO drover.schedule_runs (task, summary, due_at, scope, node, host, status, reason, claimed_at, ended_at)
SELECT $1, $2, $3, $4, $5, $6,
       CASE WHEN p.task IS NULL THEN 'running' ELSE 'skipped' END,
       CASE WHEN p.task IS NULL THEN NULL
            ELSE 'paused since ' || to_char(p.paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC'
                 || coalesce(' by ' || p.paused_by, '') END,
       clock_timestamp(),
       CASE WHEN p.task IS NULL THEN NULL ELSE clock_timestamp() END
  FROM (VALUES (1)) AS one (x)
  LEFT JOIN drover.schedule_pauses AS p ON p.task = $1
ON CONFLICT (task, due_at, scope) DO NOTHING
RETURNING id, status
