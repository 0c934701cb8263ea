-- Takes the right to alert about queue $1 (its oldest job has waited $2 seconds): granted when the
-- queue has no alert on record, or its last one is more than $3 seconds old, by the database's
-- clock unless $4 gives a time. One statement, so of several masters asking at once exactly one
-- gets a row back: the time it took, by which a failed alert gives the right back
-- (broker/queries/long_wait_release.sql).
INSERT INTO drover.long_waits AS l (queue, notified_at, seconds)
VALUES ($1, coalesce($4::timestamptz, now()), $2)
ON CONFLICT (queue) DO UPDATE
SET notified_at = excluded.notified_at, seconds = excluded.seconds
WHERE l.notified_at <= excluded.notified_at - make_interval(secs => $3)
RETURNING extract(epoch FROM l.notified_at)::float8
