-- Deduplication ids whose window ended more than $2 seconds before now — the database's, unless
-- $1 gives a time (a test's clock) — up to $3 per statement, oldest first (dedup_expires_at).
-- The caller repeats it until fewer than $3 are deleted. An expired id is already ignored by
-- drover.enqueue; deleting it only keeps the table small.
DELETE FROM drover.dedup
WHERE (queue, id) IN (
    SELECT queue, id FROM drover.dedup
    WHERE expires_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2)
    ORDER BY expires_at
    LIMIT $3)
