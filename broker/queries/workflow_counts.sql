-- Workflows as `drover status` and /metrics show them (migration 0016, docs/workflows.md), in
-- one row; "now" is the database's unless $1 gives a time (a test's clock). Every figure is
-- bounded, so the row costs the same with a million workflows kept:
--   pending, running: counted up to $2 each, in workflows_state_age alone (index-only scans);
--   nodes waiting for a signal ('waiting') and for a time (released, their steps in drover.jobs
--     due later): among the nodes of the $3 newest running workflows (only a running workflow
--     has such nodes), one probe of each one's nodes by the primary key;
--   failed in the last hour: of the latest $2 workflows that ended in the last hour
--     (workflows_finished).
-- A sub-workflow is a workflow of its own here (a failed one fails its parent: both count).
SELECT
    (SELECT count(*) FROM (SELECT 1 FROM drover.workflows WHERE state = 'pending' LIMIT $2) AS p),
    (SELECT count(*) FROM (SELECT 1 FROM drover.workflows WHERE state = 'running' LIMIT $2) AS r),
    coalesce(sum(n.signal), 0)::bigint,
    coalesce(sum(n.time), 0)::bigint,
    (SELECT count(*) FILTER (WHERE e.state = 'failed') FROM (
        SELECT state FROM drover.workflows
        WHERE finished_at > coalesce($1::timestamptz, now()) - interval '1 hour'
        ORDER BY finished_at DESC
        LIMIT $2) AS e)
FROM (SELECT id FROM drover.workflows WHERE state = 'running'
      ORDER BY created_at DESC, id DESC
      LIMIT $3) AS w
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE state = 'waiting') AS signal,
           count(*) FILTER (WHERE state = 'running' AND sub_wf IS NULL
                            AND due_at > coalesce($1::timestamptz, now())) AS time
    FROM drover.workflow_nodes
    WHERE wf = w.id
) AS n
