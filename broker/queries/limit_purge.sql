-- Forgets keys whose rate window is over and that wait for no time (drover.limit_purge,
-- migrations/0011_limits.sql): how many. Never waits for a key's lock.
SELECT drover.limit_purge()
