-- Forgets keys whose rate window is over and that wait for no time (drover.limit_purge), and
-- keys of fair queues behind their queue's virtual time (drover.fair_purge,
-- migrations/0011_limits.sql): how many of each. Never waits for a lock.
SELECT drover.limit_purge(), drover.fair_purge()
