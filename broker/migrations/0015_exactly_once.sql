-- oldest reader: 10
-- (Expand-only: two tables and three functions no binary or package of schema 10-14 reads or
-- calls. docs/upgrading.md, "Schema".)
--
-- Exactly once for what a job writes (issue 59, docs/exactly-once.md). A job that opts in
-- completes inside its own transaction on the application's connection: `complete_within` is
-- the last statement of that transaction, and it deletes the job's row only while the job still
-- holds the lease it was handed (its token), so the job's effects and its completion commit
-- together or not at all, and a holder whose lease was taken back (frozen, cut off, its master
-- declared gone) can never commit: the function raises, the transaction and every effect in it
-- roll back. The delete fires the same triggers an ack's does (a group goes on, a limit's slot
-- and a budget's room are freed).
--
-- The job's row is locked from that delete until the transaction ends (microseconds, unless its
-- worker freezes between the two): renew.sql and reap_expired.sql skip a locked row instead of
-- waiting on it, and the master's lease keeper kills a worker that holds one past its lease, which
-- rolls the transaction back.

-- What a master learns a completion from when its worker could not tell it (killed after the
-- commit, before its `done` reached the master), and what tells a renewal that a job it no longer
-- finds completed rather than was taken back. The master deletes a row once it has counted it
-- (settle.rs, `Settle::CompletedWithin`, and the stale settles it looks up); what no master
-- learned (its master died too) is trimmed after a day by the retention pass.
CREATE TABLE drover.completions (
    job_id       bigint      PRIMARY KEY,
    -- The lease the completion was fenced by: a master holding another token for the same job
    -- (impossible once the row is gone, but read defensively) does not take it as its own.
    lease_token  bigint      NOT NULL,
    -- The node that held the lease: its master counts the completion.
    lease_owner  bigint      NOT NULL,
    queue        text        NOT NULL,
    -- The attempt that completed.
    attempt      integer     NOT NULL,
    -- By the database's clock, as every other time drover writes.
    completed_at timestamptz NOT NULL DEFAULT now()
);
-- No index on completed_at: every completing job would pay for it twice (its insert here, its
-- delete by its master), and the retention pass that reads it by age finds the table nearly
-- empty (a master deletes the rows it learns within moments).

-- Steps that run once across a job's retries (`$this->once('charge', fn ($key) => ...)`): the
-- result of each step of each job, keyed by the job's uuid (Laravel's payload `uuid`, the same
-- across its attempts and a `queue:retry`) and the step's name. Written in its own transaction
-- as soon as the step returns, before the job's; read before the step runs. Trimmed by the
-- retention pass a week after it was recorded.
CREATE TABLE drover.job_steps (
    job_uuid    text        NOT NULL CHECK (length(job_uuid) BETWEEN 1 AND 200),
    step        text        NOT NULL CHECK (length(step) BETWEEN 1 AND 200),
    -- The step's result as the package serialized it.
    result      text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_uuid, step)
);
CREATE INDEX job_steps_age ON drover.job_steps (recorded_at);

-- Completes job p_id inside the caller's transaction, fenced by its lease token p_token: raises
-- SQLSTATE DRL01 when the job no longer holds that lease (or is gone). Runs with its owner's
-- rights (the application's role may not delete jobs), callable by drover_producer.
CREATE FUNCTION drover.complete_within(p_id bigint, p_token bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gone record;
BEGIN
    IF p_id IS NULL OR p_token IS NULL THEN
        RAISE EXCEPTION 'drover.complete_within needs the job''s id and the lease token it was handed'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM drover.jobs WHERE id = p_id AND lease_token = p_token
    RETURNING queue, attempts, lease_owner INTO gone;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'drover: job % no longer holds lease % (its lease was taken back while it ran: its worker was frozen or cut off, or its master was declared gone); this transaction and the job''s effects in it are rolled back, and the job runs where it is held now', p_id, p_token
            USING ERRCODE = 'DRL01';
    END IF;
    INSERT INTO drover.completions (job_id, lease_token, lease_owner, queue, attempt)
    VALUES (p_id, p_token, gone.lease_owner, gone.queue, gone.attempts);
END $$;

-- A step's recorded result, or NULL when the step has not completed in any attempt of the job.
CREATE FUNCTION drover.step_result(p_uuid text, p_step text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT result FROM drover.job_steps WHERE job_uuid = p_uuid AND step = p_step
$$;

-- Records a step's result; the first recorded wins (two attempts that raced — only possible for a
-- step whose result was not recorded before its worker died — keep one), and it is what returns.
CREATE FUNCTION drover.record_step(p_uuid text, p_step text, p_result text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kept text;
BEGIN
    INSERT INTO drover.job_steps (job_uuid, step, result) VALUES (p_uuid, p_step, p_result)
    ON CONFLICT (job_uuid, step) DO NOTHING;
    SELECT result INTO kept FROM drover.job_steps WHERE job_uuid = p_uuid AND step = p_step;
    RETURN kept;
END $$;

REVOKE EXECUTE ON FUNCTION drover.complete_within(bigint, bigint), drover.step_result(text, text),
    drover.record_step(text, text, text) FROM PUBLIC;
