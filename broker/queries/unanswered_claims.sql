-- The jobs leased to node $1 under the tokens $2 of claims whose answer never came back
-- (src/claim_tokens.rs), less the (job, token) pairs $3/$4 the master already has. No worker
-- got them: the master gives them back with their attempt uncharged. Read through jobs_leased,
-- which holds only leased jobs.
SELECT j.id, j.lease_token
FROM drover.jobs AS j
WHERE j.lease_owner = $1 AND j.lease_token = ANY ($2::bigint[])
  AND NOT EXISTS (
      SELECT 1 FROM unnest($3::bigint[], $4::bigint[]) AS k(id, token)
      WHERE k.id = j.id AND k.token = j.lease_token)
