-- This master ($1) carried out the stop requests of jobs $2 (it killed their workers): marked
-- taken, for the console and `drover:stop-job` to say by whom; and requests older than a day,
-- carried out or for an attempt long over, removed.
WITH old AS (
    DELETE FROM drover.stop_requests WHERE requested_at < now() - interval '1 day'
)
UPDATE drover.stop_requests SET taken_by = $1, taken_at = now()
WHERE job = ANY($2::bigint[]) AND taken_at IS NULL
