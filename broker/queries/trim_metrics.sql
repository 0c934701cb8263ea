-- Retention: up to $3 metric rows older than $2 minutes by the database's clock (unless $1 gives a
-- time), oldest first. The primary key leads with the minute, so this reads only what it deletes.
DELETE FROM drover.metrics
WHERE (minute, node, queue, class) IN (
    SELECT minute, node, queue, class FROM drover.metrics
    WHERE minute < coalesce($1::timestamptz, now()) - make_interval(mins => $2)
    ORDER BY minute
    LIMIT $3)
