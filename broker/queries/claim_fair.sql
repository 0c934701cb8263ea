-- The claim of a fair queue (`fair` in config/drover.php; migrations/0011_limits.sql, "Fair
-- share"): claim.sql, whose parameters, acks, budget and answer it shares (the files it
-- includes), but for the order in which it takes a queue's ready jobs — by the tag given at
-- enqueue (drover.fair_tag), read from the partial index jobs_fair, so the queue's keys are
-- taken in turn. Jobs enqueued without a tag (before the queue was declared fair, or by a
-- producer that gave none) come after the tagged ones, in claim.sql's order: read only when the
-- tagged ones do not fill the claim (a one-time filter), so a fair queue's backlog is never
-- walked past twice.
-- @include claim_room_and_acks.sql
, tagged AS MATERIALIZED (
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
), candidates AS (
    SELECT id FROM tagged UNION ALL SELECT id FROM untagged
)
-- @include claim_answer.sql
