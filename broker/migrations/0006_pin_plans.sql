-- drover.enqueue runs in the application's sessions, which drover does not configure: it keeps
-- the index plans the master's job connection gets from broker/queries/pin_plans.sql, for the
-- same reason (a plan cached while drover.jobs or drover.groups was small, e.g. a sequential
-- scan for `drover.jobs WHERE id = $1`, would be kept as the table grows). A function's own
-- settings apply while it runs (and to what it calls) and are undone when it returns, so nothing
-- is left in the application's session, and a transaction pooler passes them through.
-- docs/decisions/0003-job-statements-keep-index-plans.md.
ALTER FUNCTION drover.enqueue(text, text, float8, text, boolean, text, float8, smallint, integer)
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_sort = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off;
