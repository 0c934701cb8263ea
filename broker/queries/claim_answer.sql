-- The end of every claim (claim.sql, claim_fair.sql, claim_from.sql: broker/src/queries.rs puts it
-- where a variant says `-- @include claim_answer.sql`): the ids its variant chose (`candidates`)
-- leased, and the answer, the same for every variant.
-- The candidates are leased to node $1 for $2 seconds. "Now" is the database's (now(), this
-- statement's start) unless $4 gives a time (a test's clock); the lease expires at now + $2 by
-- the same clock that reaps it. $9 is the pool's outage grace in
-- seconds (NULL: none), which the reap adds to the lease's end (reap_expired.sql), returned so
-- the master fences by what was written. The broker gives one only while its node row is known to
-- hold it (registered, or confirmed by a heartbeat since the connection was last opened) and no
-- master of 0.1 has a row (Broker::claim_with_grace). Deciding it here with EXISTS tests on
-- drover.nodes made every claim slow (hundreds of ms under load, bench shape 8).
-- The fencing token is $8, reserved for this claim alone before it was sent, so a claim whose
-- answer is lost can be asked about (src/claim_tokens.rs); every job of the claim gets it, and
-- (job, token) names one lease. The attempt is charged here and given back when an unstarted
-- prefetched job is returned.
-- The candidates are collected into an array first (an InitPlan, run once), so the UPDATE finds
-- them by primary key and there is no join for the planner to get wrong: as `id IN (subquery)`
-- it chose a hash semi-join over a sequential scan of drover.jobs from statistics of a smaller
-- table (docs/decisions/0003-job-statements-keep-index-plans.md).
-- Rows come back in three kinds: a leased job (`acked` and `room` NULL), an acked id (`acked`
-- set: a job deleted, or a completion forgotten), or, under a budget, the room the budget left
-- (`room` set, one row).
, leased AS (
    UPDATE drover.jobs AS j
    SET lease_token      = $8,
        lease_owner      = $1,
        lease_expires_at = coalesce($4::timestamptz, now()) + make_interval(secs => $2),
        lease_grace      = $9::float8,
        lease_budgeted   = CASE WHEN $10::bigint IS NULL THEN NULL ELSE true END,
        attempts         = j.attempts + 1
    WHERE j.id = ANY (ARRAY(SELECT id FROM candidates))
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
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, id, NULL, NULL FROM learned
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, n FROM room
WHERE $10::bigint IS NOT NULL
