-- Give jobs back. Charged releases ($5 true) become available $4 ms after $3; uncharged ones
-- (prefetched, never started) keep their place in line and get their attempt back. A non-null
-- failure ($6) asks the next worker to fail the job with that reason instead of running it.
UPDATE drover.jobs AS j
SET lease_token      = NULL,
    lease_owner      = NULL,
    lease_expires_at = NULL,
    available_at     = CASE WHEN s.charged THEN $3::timestamptz + make_interval(secs => s.delay_ms / 1000.0)
                            ELSE j.available_at END,
    attempts         = CASE WHEN s.charged THEN j.attempts ELSE greatest(j.attempts - 1, 0) END,
    -- A charged release means the job ran (or its failure request was handled): clear the
    -- request. An uncharged one (never started) keeps it.
    failure          = CASE WHEN s.charged THEN s.failure ELSE coalesce(s.failure, j.failure) END
FROM unnest($1::bigint[], $2::bigint[], $4::bigint[], $5::bool[], $6::text[]) AS s(id, token, delay_ms, charged, failure)
WHERE j.id = s.id AND j.lease_token = s.token
RETURNING j.id
