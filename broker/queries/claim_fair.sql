-- The claim of a fair queue (`fair` in config/drover.php; migrations/0011_limits.sql, "Fair
-- share"): claim.sql, whose parameters, acks, budget and answer it shares, but for the order in
-- which it takes a queue's ready jobs — by the tag given at enqueue (drover.fair_tag), read from
-- the partial index jobs_fair, so the queue's keys are taken in turn. Jobs enqueued without a tag
-- (before the queue was declared fair, or by a producer that gave none) come after the tagged
-- ones, in claim.sql's order: read only when the tagged ones do not fill the claim (a one-time
-- filter), so a fair queue's backlog is never walked past twice.
-- The rows are found by their primary key only, bounded by the list of ids (`id = ANY`), and the
-- token is matched with IS NOT DISTINCT FROM (tokens sent are never NULL), so no index but the
-- primary key can serve and no plan reads more of it than the ids sent. Joined on `id = s.id`
-- alone, once statistics said the table was small the planner read all of jobs_leased, or all
-- of jobs_pkey, once per statement and joined that: while a snapshot is held, every dead entry
-- (docs/decisions/0010-a-held-snapshot.md).
WITH room AS MATERIALIZED (
    SELECT CASE WHEN $10::bigint IS NULL THEN $5::bigint
        ELSE drover.budget_room($3, $10::bigint, $5::bigint) END AS n
), acked AS (
    DELETE FROM drover.jobs AS a
    USING unnest($6::bigint[], $7::bigint[]) AS s(id, token)
    WHERE a.id = s.id AND a.id = ANY ($6::bigint[])
    AND a.lease_token IS NOT DISTINCT FROM s.token
    RETURNING a.id
), tagged AS MATERIALIZED (
    SELECT id FROM drover.jobs
    WHERE queue = $3 AND lease_token IS NULL AND fair_tag IS NOT NULL
      AND available_at <= coalesce($4::timestamptz, now())
      AND NOT drover.queue_paused($3, coalesce($4::timestamptz, now()))
    ORDER BY priority DESC, fair_tag, id
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
), untagged AS MATERIALIZED (
    SELECT id FROM drover.jobs
    WHERE queue = $3 AND lease_token IS NULL AND fair_tag IS NULL
      AND available_at <= coalesce($4::timestamptz, now())
      AND NOT drover.queue_paused($3, coalesce($4::timestamptz, now()))
      AND (SELECT count(*) FROM tagged) < (SELECT n FROM room)
    ORDER BY priority DESC, available_at, id
    LIMIT greatest((SELECT n FROM room) - (SELECT count(*) FROM tagged), 0)
    FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE drover.jobs AS j
    SET lease_token      = $8,
        lease_owner      = $1,
        lease_expires_at = coalesce($4::timestamptz, now()) + make_interval(secs => $2),
        lease_grace      = $9::float8,
        lease_budgeted   = CASE WHEN $10::bigint IS NULL THEN NULL ELSE true END,
        attempts         = j.attempts + 1
    WHERE j.id = ANY (ARRAY(SELECT id FROM tagged UNION ALL SELECT id FROM untagged))
    RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.lease_token, j.priority,
        j.available_at, j.failure,
        greatest(extract(epoch FROM coalesce($4::timestamptz, now()) - j.available_at), 0)::float8 AS waited,
        (j.grp IS NOT NULL OR j.limited IS TRUE) AS grouped, j.lease_grace
)
SELECT id, queue, payload, attempts, max_attempts, lease_token, priority, available_at, failure,
    waited, grouped, NULL::bigint AS acked, lease_grace, NULL::bigint AS room
FROM leased
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, id, NULL, NULL FROM acked
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, n FROM room
WHERE $10::bigint IS NOT NULL
