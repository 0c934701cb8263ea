-- The queues paused now (drover.paused_queues), and until when (NULL: until resumed). "Now" is
-- the database's unless $1 gives a time (a test's clock). A handful of rows: a scan is the plan.
SELECT queue, extract(epoch FROM until - coalesce($1::timestamptz, now()))::float8
FROM drover.paused_queues
WHERE until IS NULL OR until > coalesce($1::timestamptz, now())
ORDER BY queue
