-- The last due time on record of each task $1 (an array of keys) in scope $2 ('' and the host
-- name: both the one-server and the per-host rows of this host). Runs asked for now are not due
-- times of the schedule: they are left out.
SELECT task, scope, max(due_at) FROM drover.schedule_runs
WHERE task = ANY ($1::text[]) AND scope = ANY ($2::text[]) AND asked_by IS NULL
GROUP BY task, scope
