INSERT INTO drover.nodes (hostname, pid, started_at, heartbeat_at) VALUES ($1, $2, $3, $3) RETURNING id
