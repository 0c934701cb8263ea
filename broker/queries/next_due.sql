-- When the earliest delayed job of these queues becomes available: one index probe per queue
-- (jobs_due), not a scan of every delayed job.
SELECT min(d.available_at)
FROM unnest($1::text[]) AS q(name)
CROSS JOIN LATERAL (
    SELECT available_at FROM drover.jobs
    WHERE queue = q.name AND lease_token IS NULL AND available_at > $2
    ORDER BY available_at
    LIMIT 1
) AS d
