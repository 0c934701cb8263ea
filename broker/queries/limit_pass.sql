-- Admits the jobs waiting for limits whose keys were noted or whose wake-up time has come
-- (drover.limit_pass, migrations/0011_limits.sql): how many entered drover.jobs, and in how many
-- seconds the next key's wake-up falls (NULL: none). Waits only for a key's lock held by another
-- pass or a settle, never for a producer; nearly free when nothing is noted or due.
SELECT admitted, next_wake_secs FROM drover.limit_pass()
