-- Extend the leases this node still holds to now + $4 seconds, by the database's clock unless
-- $5 gives a time (a test's clock); a pair whose token moved on is not renewed.
UPDATE drover.jobs AS j
SET lease_expires_at = coalesce($5::timestamptz, now()) + make_interval(secs => $4)
FROM unnest($1::bigint[], $2::bigint[]) AS s(id, token)
WHERE j.id = s.id AND j.lease_token = s.token AND j.lease_owner = $3
RETURNING j.id
