-- Extend the leases this node still holds; a pair whose token moved on is not renewed.
UPDATE drover.jobs AS j
SET lease_expires_at = $4
FROM unnest($1::bigint[], $2::bigint[]) AS s(id, token)
WHERE j.id = s.id AND j.lease_token = s.token AND j.lease_owner = $3
RETURNING j.id
