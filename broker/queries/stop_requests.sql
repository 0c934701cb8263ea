-- The requests to stop a job this master ($1) holds, for the attempt it holds (the lease token
-- matches), not yet carried out (migrations/0014_console.sql). Requests for an attempt that has
-- ended match no lease and are never returned; they are removed with the audit trail's age
-- (stop_requests_taken.sql). Run on NOTIFY drover_console and at every reap pass.
SELECT r.job, r.lease_token, r.mode, r.outcome, r.requested_by
FROM drover.stop_requests r
JOIN drover.jobs j ON j.id = r.job AND j.lease_token = r.lease_token
WHERE r.taken_at IS NULL AND j.lease_owner = $1
ORDER BY r.job
