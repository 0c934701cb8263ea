-- When the earliest delayed job of these queues becomes available.
SELECT min(available_at) FROM drover.jobs
WHERE queue = ANY($1) AND lease_token IS NULL AND available_at > $2
