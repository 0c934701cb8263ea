-- Per queue, the grouped job that has waited longest behind its group's head (due, in
-- drover.group_jobs): its group and how many seconds it has been due, by the database's clock
-- unless $2 gives a time. One probe of group_jobs_due per queue; queues with none are absent.
SELECT q.name, w.grp, extract(epoch FROM coalesce($2::timestamptz, now()) - w.available_at)::float8
FROM unnest($1::text[]) AS q(name)
CROSS JOIN LATERAL (
    SELECT grp, available_at FROM drover.group_jobs
    WHERE queue = q.name AND available_at <= coalesce($2::timestamptz, now())
    ORDER BY available_at
    LIMIT 1
) AS w
