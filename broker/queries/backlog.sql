-- Jobs waiting per queue (available now and not leased), each counted up to $3. "Now" is the
-- database's unless $2 gives a time (a test's clock).
-- One index range scan per queue (jobs_ready); the cap keeps a huge backlog cheap to count.
SELECT q.name, (
    SELECT count(*) FROM (
        SELECT 1 FROM drover.jobs
        WHERE queue = q.name AND lease_token IS NULL AND available_at <= coalesce($2::timestamptz, now())
        LIMIT $3
    ) AS w
)
FROM unnest($1::text[]) AS q(name)
