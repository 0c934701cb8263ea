-- A job the master could not settle by itself (its worker timed out and Laravel's rules say it fails)
-- is released with the reason here; the next worker that receives it runs the application's
-- failure path (failed() hook, JobFailed, the failer) instead of the job.
ALTER TABLE drover.jobs ADD COLUMN failure text;
