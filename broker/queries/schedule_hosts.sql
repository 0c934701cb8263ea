-- How many hosts have a master of this database now: a task without onOneServer() runs on each
-- (as under cron on each host).
SELECT count(DISTINCT hostname) FROM drover.nodes
