-- The pool sizes the console set for this master ($1) and it has not applied yet
-- (migrations/0014_console.sql). Run on NOTIFY drover_console and at every reap pass.
SELECT pool, processes, requested_by
FROM drover.pool_sizes
WHERE node = $1 AND (applied_at IS NULL OR applied_at < requested_at)
ORDER BY pool
