-- Completed jobs are deleted; a pair whose token is stale matches nothing. A grouped job lets its
-- group go on (the trigger on drover.jobs moves the next one in).
-- The rows are found by their primary key only, bounded by the list of ids (`id = ANY`), and the
-- token is matched with IS NOT DISTINCT FROM (tokens sent are never NULL), so no index but the
-- primary key can serve and no plan reads more of it than the ids sent. Joined on `id = s.id`
-- alone, once statistics said the table was small the planner read all of jobs_leased, or all
-- of jobs_pkey, once per statement and joined that: while a snapshot is held, every dead entry
-- (docs/decisions/0010-a-held-snapshot.md).
DELETE FROM drover.jobs AS j
USING unnest($1::bigint[], $2::bigint[]) AS s(id, token)
WHERE j.id = s.id AND j.id = ANY ($1::bigint[])
    AND j.lease_token IS NOT DISTINCT FROM s.token
RETURNING j.id
