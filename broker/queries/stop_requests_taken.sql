-- This master ($1) carried out the stop requests of jobs $2, attempts $3 (it killed their
-- workers): marked taken, for the console and `drover:stop-job` to say by whom — a request for
-- a later attempt written meanwhile is left for its reading; and requests older than a day,
-- carried out or for an attempt long over, removed.
WITH old AS (
    DELETE FROM drover.stop_requests WHERE requested_at < now() - interval '1 day' AND job <> ALL($2::bigint[])
)
UPDATE drover.stop_requests r SET taken_by = $1, taken_at = now()
FROM unnest($2::bigint[], $3::bigint[]) AS t(job, token)
WHERE r.job = t.job AND r.lease_token = t.token AND r.taken_at IS NULL
