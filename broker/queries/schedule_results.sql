-- What drover:status, /metrics and the alerts say of each scheduled task $1 in the scopes $2
-- (the fleet's, '', and this host's), in the order given: its latest run (a request not yet taken
-- aside), its latest success, its latest run that went by Laravel's rules (succeeded, skipped or
-- handed to the background), and how many runs failed since that one (counted up to 1000). Each
-- lookup walks an index of the task's rows from the newest due time (the unique one, and the
-- partial ones of migration 12).
SELECT t.task,
       l.status,
       l.due_at,
       l.ended_at,
       l.reason,
       l.host,
       s.due_at AS last_success,
       o.due_at AS last_ok,
       (SELECT count(*)
          FROM (SELECT 1
                  FROM drover.schedule_runs f
                 WHERE f.task = t.task
                   AND f.status = 'failed'
                   AND f.scope = ANY ($2::text[])
                   AND f.due_at > coalesce(o.due_at, '-infinity')
                 LIMIT 1000) AS failed) AS failed_in_a_row
  FROM unnest($1::text[]) WITH ORDINALITY AS t (task, position)
  LEFT JOIN LATERAL (
        SELECT r.status, r.due_at, r.ended_at, r.reason, r.host
          FROM drover.schedule_runs r
         WHERE r.task = t.task
           AND r.scope = ANY ($2::text[])
           AND r.status <> 'requested'
         ORDER BY r.due_at DESC
         LIMIT 1) AS l ON true
  LEFT JOIN LATERAL (
        SELECT r.due_at
          FROM drover.schedule_runs r
         WHERE r.task = t.task
           AND r.status = 'succeeded'
           AND r.scope = ANY ($2::text[])
         ORDER BY r.due_at DESC
         LIMIT 1) AS s ON true
  LEFT JOIN LATERAL (
        SELECT r.due_at
          FROM drover.schedule_runs r
         WHERE r.task = t.task
           AND r.status IN ('succeeded', 'skipped', 'started')
           AND r.scope = ANY ($2::text[])
         ORDER BY r.due_at DESC
         LIMIT 1) AS o ON true
 ORDER BY t.position
