-- The start of every claim (claim.sql, claim_fair.sql, claim_from.sql: broker/src/queries.rs puts
-- it where a variant says `-- @include claim_room_and_acks.sql`): the room the queue's budget
-- leaves, and the completed jobs whose acks ride with the claim, deleted in its commit. An ack of
-- a job that completed inside its own transaction (`done` with `within`, docs/exactly-once.md)
-- finds its row gone already: its completion row is forgotten instead (`learned`), as
-- learn_completions.sql does for one the settle batcher writes.
-- $10 is the queue's fleet-wide budget (NULL: none): the claim leases no more than the budget
-- less the jobs of the queue leased now, counted under a lock per queue that is held until this
-- statement commits, so two masters' claims can never both see the same room
-- (drover.budget_room, migrations/0010_queue_budgets.sql). Its leases are marked, so that their
-- end wakes the masters.
-- The acked jobs are leased and the candidates are not, so no row is touched twice. Riding acks
-- are of ungrouped jobs that hold no concurrency slot only: a grouped job's ack moves its
-- group's next job in, and a slot holder's admits the next of its keys (AFTER triggers, run
-- after the claim), which this claim could not see (docs/leases.md, "Acks ride with claims");
-- `grouped` says so.
-- The rows are found by their primary key only, bounded by the list of ids (`id = ANY`), and the
-- token is matched with IS NOT DISTINCT FROM (tokens sent are never NULL), so no index but the
-- primary key can serve and no plan reads more of it than the ids sent. Joined on `id = s.id`
-- alone, once statistics said the table was small the planner read all of jobs_leased, or all
-- of jobs_pkey, once per statement and joined that: while a snapshot is held, every dead entry
-- (docs/decisions/0010-a-held-snapshot.md).
WITH room AS MATERIALIZED (
    SELECT CASE WHEN $10::bigint IS NULL THEN $5::bigint
        ELSE drover.budget_room($3, $10::bigint, $5::bigint) END AS n
), acked AS (
    DELETE FROM drover.jobs AS a
    USING unnest($6::bigint[], $7::bigint[]) AS s(id, token)
    WHERE a.id = s.id AND a.id = ANY ($6::bigint[])
    AND a.lease_token IS NOT DISTINCT FROM s.token
    RETURNING a.id
), learned AS (
    DELETE FROM drover.completions AS c
    USING unnest($6::bigint[], $7::bigint[]) AS s(id, token)
    WHERE c.job_id = s.id AND c.job_id = ANY ($6::bigint[]) AND c.lease_token = s.token
    RETURNING c.job_id AS id
)
