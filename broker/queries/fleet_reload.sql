-- A fleet restart's request to this master ($1): records that it applied request $2 (0: none
-- yet) when that is news, and returns the latest request (migrations/0009_outage_grace.sql).
-- Run at every reap pass: no row version is written when nothing changed.
WITH answered AS (
    UPDATE drover.nodes SET reload_done = $2 WHERE id = $1 AND reload_done < $2
)
SELECT reload_requested FROM drover.nodes WHERE id = $1
