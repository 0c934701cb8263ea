-- What drover:status and /metrics say of each scheduled task $1 in the scopes $2 (the fleet's,
-- '', and this host's): its latest run, its latest success, and how many runs failed since that
-- success (counted up to 1000). Each lookup walks the unique index (task, due_at, scope) from
-- the newest due time.
SELECT t.task,
       l.status,
       l.due_at,
       l.ended_at,
       l.reason,
       l.host,
       s.due_at AS last_success,
       (SELECT count(*)
          FROM (SELECT 1
                  FROM drover.schedule_runs f
                 WHERE f.task = t.task
                   AND f.scope = ANY ($2::text[])
                   AND f.status = 'failed'
                   AND f.due_at > coalesce(s.due_at, '-infinity')
                 LIMIT 1000) AS failed) AS failed_since_success
  FROM unnest($1::text[]) AS t (task)
  LEFT JOIN LATERAL (
        SELECT r.status, r.due_at, r.ended_at, r.reason, r.host
          FROM drover.schedule_runs r
         WHERE r.task = t.task
           AND r.scope = ANY ($2::text[])
         ORDER BY r.due_at DESC
         LIMIT 1) AS l ON true
  LEFT JOIN LATERAL (
        SELECT r.due_at
          FROM drover.schedule_runs r
         WHERE r.task = t.task
           AND r.scope = ANY ($2::text[])
           AND r.status = 'succeeded'
         ORDER BY r.due_at DESC
         LIMIT 1) AS s ON true
