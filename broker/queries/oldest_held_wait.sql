-- Per queue, the job that has waited longest where no claim sees it — behind its ordered group's
-- head (drover.group_jobs) or for a limit's key (drover.limit_waiting) — and due: whether it
-- waits for a 'group' or a 'key', which one, and how many seconds it has been due, by the
-- database's clock unless $2 gives a time. One probe of group_jobs_due and one of
-- limit_waiting_due per queue; queues with none are absent.
SELECT q.name, w.kind, w.name, extract(epoch FROM coalesce($2::timestamptz, now()) - w.available_at)::float8
FROM unnest($1::text[]) AS q(name)
CROSS JOIN LATERAL (
    SELECT * FROM (
        (SELECT 'group' AS kind, grp AS name, available_at FROM drover.group_jobs
         WHERE queue = q.name AND available_at <= coalesce($2::timestamptz, now())
         ORDER BY available_at
         LIMIT 1)
        UNION ALL
        (SELECT 'key', waits_on, available_at FROM drover.limit_waiting
         WHERE queue = q.name AND available_at <= coalesce($2::timestamptz, now())
         ORDER BY available_at
         LIMIT 1)
    ) AS both_
    ORDER BY available_at
    LIMIT 1
) AS w
