-- The claim reads jobs_ready in its order and nothing else. jobs_due (queue, available_at) was
-- narrower and matched the claim's WHERE too: when the planner's estimates were wrong (a burst
-- committed before ANALYZE, a queue name the statistics had not seen) it chose a bitmap scan of
-- jobs_due and a sort of the whole backlog, which spilled to disk, once per claim (58 ms per
-- claim for a 200,000-job burst until autoanalyze). The next-due lookup now walks jobs_ready
-- (broker/queries/next_due.sql), and every enqueue, claim and release writes one index entry
-- fewer.
DROP INDEX drover.jobs_due;

-- Retention deletes failed jobs oldest first, in batches (broker/queries/purge_failed.sql).
CREATE INDEX failed_jobs_failed_at ON drover.failed_jobs (failed_at);
