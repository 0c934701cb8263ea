-- The progress the jobs $1 last reported (`$this->progress(40, 'parsed 4,000 rows')`, stored by
-- drover.job_progress(), migration 0016): percent, note, and how many seconds ago, by the
-- database's clock unless $2 gives a time (a test's clock). The ids are the jobs one master's
-- workers run, one primary-key probe each; a job that reported nothing is absent.
SELECT p.job_id, p.percent, p.note,
       extract(epoch FROM coalesce($2::timestamptz, now()) - p.at)::float8
FROM drover.job_progress AS p
WHERE p.job_id = ANY ($1::bigint[])
ORDER BY p.job_id
