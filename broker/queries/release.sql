-- Give jobs back. Per job: $4 the delay in ms, or NULL to keep its place in line; $5 whether
-- the attempt stays charged; $6 a failure request.
-- - A job that ended its own attempt with a release or backoff (delay given, charged) becomes
--   available $4 ms after now — the database's, unless $3 gives a time (a test's clock) — and
--   its failure request, now handled, is replaced by $6 (normally none).
-- - A job taken back from a worker that died (no delay, charged) keeps its place in line and
--   its attempt stays counted, as the reap does for a dead master's jobs.
-- - A prefetched job that never started (no delay, uncharged) keeps its place in line and gets
--   its attempt back.
-- A job that keeps its place keeps its failure request too, unless $6 sets one: the next worker
-- fails it with that reason instead of running it. A note `died: ...` (how the worker running
-- it died) never replaces a failure request: the request still has to be handled.
-- The rows are found by their primary key only, bounded by the list of ids (`id = ANY`), and the
-- token is matched with IS NOT DISTINCT FROM (tokens sent are never NULL), so no index but the
-- primary key can serve and no plan reads more of it than the ids sent. Joined on `id = s.id`
-- alone, once statistics said the table was small the planner read all of jobs_leased, or all
-- of jobs_pkey, once per statement and joined that: while a snapshot is held, every dead entry
-- (docs/decisions/0010-a-held-snapshot.md).
UPDATE drover.jobs AS j
SET lease_token      = NULL,
    lease_owner      = NULL,
    lease_expires_at = NULL,
    available_at     = CASE WHEN s.delay_ms IS NULL THEN j.available_at
                            ELSE coalesce($3::timestamptz, now()) + make_interval(secs => s.delay_ms / 1000.0) END,
    attempts         = CASE WHEN s.charged THEN j.attempts ELSE greatest(j.attempts - 1, 0) END,
    failure          = CASE WHEN s.delay_ms IS NOT NULL THEN s.failure
                            WHEN s.failure LIKE 'died: %' AND j.failure NOT LIKE 'died: %' THEN j.failure
                            ELSE coalesce(s.failure, j.failure) END
FROM unnest($1::bigint[], $2::bigint[], $4::bigint[], $5::bool[], $6::text[]) AS s(id, token, delay_ms, charged, failure)
WHERE j.id = s.id AND j.id = ANY ($1::bigint[])
    AND j.lease_token IS NOT DISTINCT FROM s.token
RETURNING j.id
