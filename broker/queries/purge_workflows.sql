-- Workflows that ended more than $2 seconds before now — the database's, unless $1 gives a time
-- (a test's clock) — up to $3 top-level ones per statement, oldest first, with their
-- sub-workflows (at any depth) and every node, step and signal of them (migration 0016). A
-- workflow being changed (its row locked) waits for the next pass.
WITH RECURSIVE old AS (
    SELECT id FROM drover.workflows
    WHERE finished_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2)
      AND parent IS NULL
    ORDER BY finished_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), doomed (id) AS (
    SELECT id FROM old
    UNION ALL
    SELECT w.id FROM drover.workflows AS w JOIN doomed AS d ON w.parent = d.id
), steps AS (
    DELETE FROM drover.workflow_steps WHERE wf IN (SELECT id FROM doomed)
), nodes AS (
    DELETE FROM drover.workflow_nodes WHERE wf IN (SELECT id FROM doomed)
), signals AS (
    DELETE FROM drover.workflow_signals WHERE wf IN (SELECT id FROM doomed)
), children AS (
    DELETE FROM drover.workflows WHERE id IN (SELECT id FROM doomed) AND id NOT IN (SELECT id FROM old)
)
DELETE FROM drover.workflows WHERE id IN (SELECT id FROM old)
