-- Set on the master's job connection before its statements are prepared (claim, settle, renew,
-- reap, next-due, heartbeat, and the group triggers they fire): each of them finds its rows
-- through an index with a condition (jobs_ready in order, jobs_leased by expiry, a primary key),
-- and no plan without one is right for a queue table at any size. A queue table's statistics are
-- always out of date — it is empty, then holds a backlog, then is empty again, faster than
-- autoanalyze visits — and a prepared statement keeps the generic plan it chose while the table
-- was small. Measured (bench shape 6's control, 150,000 jobs through a table that started empty):
-- the ack kept a hash join over a sequential scan of drover.jobs, the claim a hash semi-join over
-- one and a sort of every ready job, the settle connection's backend used a whole core, and the
-- drain ran at 2,242 jobs/s with a 37,000-job backlog; with these settings it kept up with the
-- producers (4,393 jobs/s, backlog at most 166). Each setting only makes the plans it names
-- a last resort (PostgreSQL adds a large cost to them), so a statement with no other plan still
-- runs. The metrics, status, retention and compaction connections do not set them.
-- docs/decisions/0003-job-statements-keep-index-plans.md.
-- And no JIT: a plan that keeps a node these settings name (a sequential scan of a table with no
-- index to use, as the take of drover.limit_wakes) costs over 10^10, far past `jit_above_cost`,
-- so PostgreSQL compiled it with LLVM on every run (a limit pass over a million notes, timed
-- with psql: 81 ms with JIT, 11 ms without; in bench --limits-scale passes took 121-138 ms with
-- it, 1.7-1.9 ms without). Nothing on the job
-- connection runs long enough for JIT to pay.
SET jit = off;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_sort = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
