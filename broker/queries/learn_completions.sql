-- Which of these jobs completed inside their own transaction under these leases
-- (drover.complete_within, migration 0015): their completion rows, deleted now that their
-- master has learned of them. Asked for the jobs whose worker said so (`done` with `within`) and
-- for every settle that changed nothing (its worker was killed after the commit, before its
-- `done` reached the master): such a job is counted completed, once, not taken back.
-- Found by the primary key only, bounded by the list of ids, as ack.sql.
DELETE FROM drover.completions AS c
USING unnest($1::bigint[], $2::bigint[]) AS s(id, token)
WHERE c.job_id = s.id AND c.job_id = ANY ($1::bigint[]) AND c.lease_token = s.token
RETURNING c.job_id
