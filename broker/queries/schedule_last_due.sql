-- The last due time on record of each task $1 (an array of keys) in scope $2 ('' and the host
-- name: both the one-server and the per-host rows of this host).
SELECT task, scope, max(due_at) FROM drover.schedule_runs
WHERE task = ANY ($1::text[]) AND scope = ANY ($2::text[])
GROUP BY task, scope
