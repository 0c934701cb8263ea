-- Forgets keys whose rate window is over and that wait for no time (drover.limit_purge), and
-- keys of fair queues behind their queue's virtual time (drover.fair_purge,
-- migrations/0011_limits.sql): how many of each, up to 1000 each. $1 and $2 say whether each is
-- still to be purged (a caller going on while the other's batch was full asks for it alone).
-- Never waits for a lock. Neither function is called while its table is empty.
SELECT CASE WHEN $1::boolean AND EXISTS (SELECT 1 FROM drover.limit_keys) THEN drover.limit_purge() ELSE 0 END,
       CASE WHEN $2::boolean AND EXISTS (SELECT 1 FROM drover.fair_keys) THEN drover.fair_purge() ELSE 0 END
