-- oldest reader: 7
-- (Expand-only: a nullable column with no default, a function and two triggers, none of which a
-- binary of schema 7-9 reads or needs. docs/upgrading.md, "Schema".)
-- A fleet-wide budget for a queue (`budgets` in config/drover.php, docs/budgets.md): at most N
-- jobs of the queue leased at once across every master of the database. A leased job is one a
-- worker runs or holds to run next, and a lease is only given up once its worker can no longer
-- run it (settled, reaped after its lease and grace, or handed back unstarted), so counting
-- leases bounds the executions, whatever process is killed or cut off.

-- Whether the claim that wrote this lease counted it against a budget. Meaningful while the row
-- is leased (the next claim writes its own): the triggers below announce that such a lease ended.
ALTER TABLE drover.jobs ADD COLUMN lease_budgeted boolean;

-- How many of `wanted` jobs of queue `q` a claim may lease under a budget of `budget`: the
-- budget less the jobs of `q` leased now, never below 0. It takes a transaction-scoped advisory
-- lock per queue first (the two-key form, class 0x64726276 "drbv", apart from the migrations'
-- one-key lock), so claims of one budgeted queue are taken one at a time, and counts with a
-- snapshot taken after the lock (PL/pgSQL takes one per statement of a VOLATILE function under
-- READ COMMITTED): a claim sees every lease that the claim before it committed. The lock is held
-- until the claim commits, so nothing can lease between this count and the claim's own update.
-- The count walks jobs_leased (every lease of the fleet, a few hundred rows), not the backlog.
CREATE FUNCTION drover.budget_room(q text, budget bigint, wanted bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    held bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(x'64726276'::int, hashtext(q));
    SELECT count(*) INTO held FROM drover.jobs WHERE queue = q AND lease_token IS NOT NULL;
    RETURN greatest(least(wanted, budget - held), 0);
END
$$;

-- A budgeted lease ended (acked, failed, released, taken back, reaped): the room it frees may let
-- another master's claim lease a waiting job, so the masters are woken as an enqueue wakes them
-- (drover.notify_enqueue, migrations/0001_jobs.sql: NOTIFY drover_jobs, delivered on commit,
-- after the lease is gone, and dropped on rollback).
-- The WHEN conditions are checked per row before any event is queued: an unbudgeted lease costs
-- one test of a NULL column.
CREATE TRIGGER jobs_budget_freed_on_delete AFTER DELETE ON drover.jobs
    FOR EACH ROW WHEN (OLD.lease_budgeted AND OLD.lease_token IS NOT NULL)
    EXECUTE FUNCTION drover.notify_enqueue();
CREATE TRIGGER jobs_budget_freed_on_update AFTER UPDATE OF lease_token ON drover.jobs
    FOR EACH ROW WHEN (OLD.lease_budgeted AND OLD.lease_token IS NOT NULL
        AND NEW.lease_token IS DISTINCT FROM OLD.lease_token)
    EXECUTE FUNCTION drover.notify_enqueue();
