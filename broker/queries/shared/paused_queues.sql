-- Shared: the master (broker/src/queue_pauses.rs, Broker::paused_queues: what it claims from)
-- and the dashboard (php-client/src/Queue/QueuePauses.php, paused(), through QueueRepository)
-- run this very file; php-client/tests/SharedReadsTest.php and
-- broker/tests/shared_reads.rs hold both to the same answers. Columns are read by name in PHP,
-- by position in Rust.
-- The queues paused now (drover.queues_paused, migrations/0008_pause_confirmations.sql), each
-- with the seconds its pause has left (NULL: until resumed) and the pause's version, which this
-- master confirms once it holds it (confirm_pauses.sql). "Now" is the database's unless $1 gives
-- a time (a test's clock).
SELECT queue, left_secs, version FROM drover.queues_paused(coalesce($1::timestamptz, now()))
