-- Runs still out whose master has no row in drover.nodes any more (it died, and its row was
-- dropped after its silence): lost. Returns each (task, due time, host).
UPDATE drover.schedule_runs AS r
SET status = 'lost', ended_at = clock_timestamp(),
    reason = 'its master (node ' || coalesce(r.node::text, '?') || ' on ' || r.host || ') died while it ran'
WHERE r.status = 'running'
  AND NOT EXISTS (SELECT 1 FROM drover.nodes AS n WHERE n.id = r.node)
RETURNING r.task, r.due_at, r.host
