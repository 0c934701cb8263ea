-- Lease up to $5 ready jobs of queue $3 to node $1 until $2, as of $4.
-- A fresh fencing token per claim; the attempt is charged here and given back when an
-- unstarted prefetched job is returned.
UPDATE drover.jobs AS j
SET lease_token      = nextval('drover.lease_tokens'),
    lease_owner      = $1,
    lease_expires_at = $2,
    attempts         = j.attempts + 1
WHERE j.id IN (
    SELECT id FROM drover.jobs
    WHERE queue = $3 AND lease_token IS NULL AND available_at <= $4
    ORDER BY priority DESC, available_at, id
    LIMIT $5
    FOR UPDATE SKIP LOCKED)
RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.lease_token, j.priority, j.available_at, j.failure
