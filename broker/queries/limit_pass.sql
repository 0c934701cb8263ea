-- Admits the jobs waiting for limits whose keys were noted or whose wake-up time has come
-- (drover.limit_pass, migrations/0011_limits.sql): how many entered drover.jobs, and in how many
-- seconds the next key's wake-up falls (NULL: none). Waits only for a key's lock held by another
-- pass or a settle, never for a producer. No row when nothing is noted and no key waits for a
-- time: then the PL/pgSQL is not even called (a session's first call compiles it, tens of ms a
-- master with no limits should not spend).
SELECT p.admitted, p.next_wake_secs
FROM (SELECT 1 WHERE EXISTS (SELECT 1 FROM drover.limit_wakes)
                  OR EXISTS (SELECT 1 FROM drover.limit_keys WHERE wake_at IS NOT NULL)) AS needed,
     LATERAL drover.limit_pass() AS p
