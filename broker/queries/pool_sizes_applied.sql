-- This master ($1) applied, or refused, the sizes of pools $2 as it read them ($3 processes) with
-- outcomes $4. A row set again since (another size) is left for the next reading.
UPDATE drover.pool_sizes p SET outcome = o.outcome, applied_at = now()
FROM unnest($2::text[], $3::int4[], $4::text[]) AS o(pool, processes, outcome)
WHERE p.node = $1 AND p.pool = o.pool AND p.processes = o.processes
