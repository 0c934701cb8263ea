-- A fleet restart's request to this master ($1): records that it applied request $2 (0: none
-- yet), and returns the latest request (migrations/0009_outage_grace.sql).
UPDATE drover.nodes SET reload_done = greatest(reload_done, $2)
WHERE id = $1
RETURNING reload_requested
