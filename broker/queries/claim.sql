-- Delete the completed jobs $6/$7 riding with this claim (acks: one commit carries both), then
-- lease up to $5 ready jobs of queue $3 in the queue's order: the claim of a queue that is not
-- fair (claim_fair.sql) and not read from a cursor (claim_from.sql). Its start and its end are
-- every claim's, in the files it includes.
-- @include claim_room_and_acks.sql
-- The only index that serves this is jobs_ready, read in its order: there is no narrower index
-- on (queue, available_at) for the planner to prefer when its estimates are wrong (a burst
-- before ANALYZE, a new queue), which cost a sort of the whole backlog per claim
-- (bench/notes.md, "claim plan").
-- A queue paused by name (drover.paused_queues, queue:pause) gives nothing, whatever this
-- master knows of the pause: a pause committed before the statement began is never crossed
-- (migrations/0008_pause_confirmations.sql). The test names no column of drover.jobs, so it is
-- a one-time filter, run once per statement before any job is read.
, candidates AS (
    SELECT id FROM drover.jobs
    WHERE queue = $3 AND lease_token IS NULL AND available_at <= coalesce($4::timestamptz, now())
      AND NOT drover.queue_paused($3, coalesce($4::timestamptz, now()))
    ORDER BY priority DESC, available_at, id
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
)
-- @include claim_answer.sql
