-- Completed jobs are deleted; a pair whose token is stale matches nothing. A grouped job lets its
-- group go on (the trigger on drover.jobs moves the next one in).
DELETE FROM drover.jobs AS j
USING unnest($1::bigint[], $2::bigint[]) AS s(id, token)
WHERE j.id = s.id AND j.lease_token = s.token
RETURNING j.id
