-- Completion rows no master learned (their master died with the worker that wrote them) older
-- than $2 seconds before now — the database's, unless $1 gives a time (a test's clock) — up to
-- $3 per statement, oldest first. A master deletes the rows it learns at once
-- (learn_completions.sql); these only keep the table small.
DELETE FROM drover.completions
WHERE job_id IN (
    SELECT job_id FROM drover.completions
    WHERE completed_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2)
    ORDER BY completed_at
    LIMIT $3)
