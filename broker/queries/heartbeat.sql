-- Keep this node's row alive and drop rows of nodes silent for longer than $3 seconds.
WITH beat AS (UPDATE drover.nodes SET heartbeat_at = $2 WHERE id = $1 RETURNING id)
DELETE FROM drover.nodes WHERE id <> $1 AND heartbeat_at < $2 - make_interval(secs => $3)
