-- The latest run on each host of Laravel's own scheduler — a cron `schedule:run` or a
-- `schedule:work` still running beside the masters — among those recorded in the last $1
-- seconds. The package records them with scope 'laravel:HOST' (php-client's RunHistory), a scope
-- no master claims in. Walks the due-time index from $1 seconds ago.
SELECT DISTINCT ON (host) host, summary, due_at, status
  FROM drover.schedule_runs
 WHERE due_at > now() - make_interval(secs => $1)
   AND scope LIKE 'laravel:%'
 ORDER BY host, due_at DESC
