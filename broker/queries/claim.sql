-- Delete the completed jobs $6/$7 (id, token pairs: acks riding with this claim, so one commit
-- carries both), then lease up to $5 ready jobs of queue $3 to node $1 for $2 seconds. "Now" is
-- the database's (now(), this statement's start) unless $4 gives a time (a test's clock); the
-- lease expires at now + $2 by the same clock that reaps it. $9 is the pool's outage grace in
-- seconds (NULL: none), which the reap adds to the lease's end (reap_expired.sql), returned so
-- the master fences by what was written. The broker gives one only while its node row is known to
-- hold it (registered, or confirmed by a heartbeat since the connection was last opened) and no
-- master of 0.1 has a row (Broker::claim_with_grace). Deciding it here with EXISTS tests on
-- drover.nodes made every claim slow (hundreds of ms under load, bench shape 8).
-- The fencing token is $8, reserved for this claim alone before it was sent, so a claim whose
-- answer is lost can be asked about (src/claim_tokens.rs); every job of the claim gets it, and
-- (job, token) names one lease. The attempt is charged here and given back when an unstarted
-- prefetched job is returned.
-- The only index that serves this is jobs_ready, read in its order: there is no narrower index
-- on (queue, available_at) for the planner to prefer when its estimates are wrong (a burst
-- before ANALYZE, a new queue), which cost a sort of the whole backlog per claim
-- (bench/notes.md, "claim plan").
-- The candidates are collected into an array first (an InitPlan, run once), so the UPDATE finds
-- them by primary key and there is no join for the planner to get wrong: as `id IN (subquery)`
-- it chose a hash semi-join over a sequential scan of drover.jobs from statistics of a smaller
-- table (docs/decisions/0003-job-statements-keep-index-plans.md).
-- A queue paused by name (drover.paused_queues, queue:pause) gives nothing, whatever this
-- master knows of the pause: a pause committed before the statement began is never crossed
-- (migrations/0008_pause_confirmations.sql). The test names no column of drover.jobs, so it is
-- a one-time filter, run once per statement before any job is read.
-- The acked jobs are leased and the candidates are not, so no row is touched twice. Riding acks
-- are of ungrouped jobs that hold no concurrency slot only: a grouped job's ack moves its
-- group's next job in, and a slot holder's admits the next of its keys (AFTER triggers, run
-- after the claim), which this claim could not see (docs/leases.md, "Acks ride with claims");
-- `grouped` says so.
-- $10 is the queue's fleet-wide budget (NULL: none): the claim leases no more than the budget
-- less the jobs of the queue leased now, counted under a lock per queue that is held until this
-- statement commits, so two masters' claims can never both see the same room
-- (drover.budget_room, migrations/0010_queue_budgets.sql). Its leases are marked, so that their
-- end wakes the masters.
-- Rows come back in three kinds: a leased job (`acked` and `room` NULL), an acked id (`acked`
-- set), or, under a budget, the room the budget left (`room` set, one row).
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
), leased AS (
    UPDATE drover.jobs AS j
    SET lease_token      = $8,
        lease_owner      = $1,
        lease_expires_at = coalesce($4::timestamptz, now()) + make_interval(secs => $2),
        lease_grace      = $9::float8,
        lease_budgeted   = CASE WHEN $10::bigint IS NULL THEN NULL ELSE true END,
        attempts         = j.attempts + 1
    WHERE j.id = ANY (ARRAY(
        SELECT id FROM drover.jobs
        WHERE queue = $3 AND lease_token IS NULL AND available_at <= coalesce($4::timestamptz, now())
          AND NOT drover.queue_paused($3, coalesce($4::timestamptz, now()))
        ORDER BY priority DESC, available_at, id
        LIMIT (SELECT n FROM room)
        FOR UPDATE SKIP LOCKED))
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
