-- claim.sql from a cursor: the same parameters, acks, budget and answer (the files it includes),
-- but the queue's ready jobs are read from where the last full claim found its head, so a claim
-- does not walk past the index entries that jobs settled since left behind. While another session holds a snapshot
-- (a report in REPEATABLE READ, a pg_dump, a standby's feedback) VACUUM may remove none of them,
-- and claim.sql, which reads jobs_ready from the queue's start, visits every one: 150,000 after
-- two minutes at 500 jobs/s (docs/decisions/0010-a-held-snapshot.md, bench/src/bin/held_snapshot.rs).
-- $11 is the priority the last full claim took first and $12 its floor: the oldest available_at
-- of that priority it leased, less a margin for producers' transactions still open then
-- (broker/src/claim_cursor.rs decides both, and when a full claim is due again). Jobs of that
-- priority are read from the floor on — an index condition on (queue, priority, available_at)
-- that starts the scan there — and the jobs of every other priority in full, each its own range
-- of jobs_ready, so a queue of one priority never walks its dead entries. A job of that
-- priority moved in before the floor keeping its dispatch time — a group's next job, a job
-- admitted under its limits — is read from jobs_moved_in (migrations/0011_limits.sql), so it is
-- taken at once; one made available before the floor otherwise (its producer's transaction
-- outlived the margin, or another master gave it back unstarted in its place) is taken by the
-- next full claim, at most claim_cursor's FULL_EVERY later.
-- Each branch locks up to the room and the first of them by claim.sql's order are leased; the
-- others' locks end with the statement.
-- @include claim_room_and_acks.sql
, higher AS MATERIALIZED (
    SELECT id, priority, available_at FROM drover.jobs
    WHERE queue = $3 AND lease_token IS NULL AND priority > $11::int2
      AND available_at <= coalesce($4::timestamptz, now())
      AND NOT drover.queue_paused($3, coalesce($4::timestamptz, now()))
    ORDER BY priority DESC, available_at, id
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
), cursor AS MATERIALIZED (
    SELECT id, priority, available_at FROM drover.jobs
    WHERE queue = $3 AND lease_token IS NULL AND priority = $11::int2 AND available_at >= $12::timestamptz
      AND available_at <= coalesce($4::timestamptz, now())
      AND NOT drover.queue_paused($3, coalesce($4::timestamptz, now()))
    ORDER BY priority DESC, available_at, id
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
), lower AS MATERIALIZED (
    SELECT id, priority, available_at FROM drover.jobs
    WHERE queue = $3 AND lease_token IS NULL AND priority < $11::int2
      AND available_at <= coalesce($4::timestamptz, now())
      AND NOT drover.queue_paused($3, coalesce($4::timestamptz, now()))
    ORDER BY priority DESC, available_at, id
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
), moved_in AS MATERIALIZED (
    SELECT id, priority, available_at FROM drover.jobs
    WHERE queue = $3 AND lease_token IS NULL AND (grp IS NOT NULL OR limited OR rated)
      AND priority = $11::int2 AND available_at < $12::timestamptz
      AND available_at <= coalesce($4::timestamptz, now())
      AND NOT drover.queue_paused($3, coalesce($4::timestamptz, now()))
    ORDER BY priority DESC, available_at, id
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
), candidates AS (
    SELECT id FROM (
        SELECT * FROM higher UNION ALL SELECT * FROM cursor UNION ALL SELECT * FROM moved_in
        UNION ALL SELECT * FROM lower
    ) AS c
    ORDER BY priority DESC, available_at, id
    LIMIT (SELECT n FROM room)
)
-- @include claim_answer.sql
