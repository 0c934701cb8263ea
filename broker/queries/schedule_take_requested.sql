-- The oldest run asked for now ("run now") of a task this master runs ($3: their keys), taken by
-- this master ($1, on host $2) to run as a due time of its own: the first master to take it
-- runs it, whatever the task's scope or pause. SKIP LOCKED: two masters never take one row.
UPDATE drover.schedule_runs AS r
SET status = 'running', node = $1, host = $2, claimed_at = clock_timestamp()
WHERE r.id = (SELECT q.id
                FROM drover.schedule_runs AS q
               WHERE q.status = 'requested'
                 AND q.task = ANY ($3::text[])
               ORDER BY q.due_at
               LIMIT 1
                 FOR UPDATE SKIP LOCKED)
RETURNING r.id, r.task, r.due_at
