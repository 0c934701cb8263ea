-- This master ($1) applied, or refused, the sizes of pools $2 with outcomes $3.
UPDATE drover.pool_sizes p SET outcome = o.outcome, applied_at = now()
FROM unnest($2::text[], $3::text[]) AS o(pool, outcome)
WHERE p.node = $1 AND p.pool = o.pool
