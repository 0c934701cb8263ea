-- Admits the jobs waiting on concurrency keys that may have room now (drover.slot_admit_woken,
-- migrations/0011_concurrency_limits.sql): how many it moved into drover.jobs. Waits only for a
-- key's lock held by another pass or a settle, never for a producer; nearly free when no key
-- is noted.
SELECT drover.slot_admit_woken()
