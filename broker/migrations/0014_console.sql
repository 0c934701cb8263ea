-- oldest reader: 7
-- (Expand-only: tables no binary of schema 7-13 reads or needs. docs/upgrading.md, "Schema".)
--
-- The console's actions (issue 41, docs/dashboard.md "Actions and the audit trail"): every action
-- an operator takes from the dashboard — retry, delete, forget, move or release the jobs a search
-- matches, retry or forget one failed job, pause or resume a queue, the schedule's verbs — is a
-- row here: who, what, on which jobs, when, and how it ended. A bulk action is also its own
-- progress: the background job that carries it out (Drover\Dashboard\Actions\ApplyBulkAction)
-- moves `cursor` and the counts forward in the same transaction as each batch it settles, so a
-- worker killed half-way leaves a row another attempt goes on from, never a batch done twice.
CREATE TABLE drover.console_actions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Who: the signed-in user as the dashboard saw them ("#42 ops@example.com"), or the
    -- environment's name for a dashboard open to all in `local`; with the address they came from.
    actor        text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 300),
    source       text,
    -- What: a verb of Drover\Dashboard\Actions\Verb (retry, delete, forget, move, release,
    -- pause, resume, run-now, ...).
    verb         text        NOT NULL CHECK (length(verb) BETWEEN 1 AND 40),
    -- On what: the search's filter (as in its URL) for a bulk action, else the job, queue or task.
    target       jsonb       NOT NULL,
    -- requested: waiting for a worker; running; done; failed (outcome says why).
    state        text        NOT NULL DEFAULT 'done'
                             CHECK (state IN ('requested', 'running', 'done', 'failed')),
    -- How many the preview counted when the operator confirmed (NULL: more than it counts).
    matched      bigint,
    -- Jobs the action settled, and those it passed over (a worker started them, or they went).
    acted        bigint      NOT NULL DEFAULT 0 CHECK (acted >= 0),
    passed       bigint      NOT NULL DEFAULT 0 CHECK (passed >= 0),
    -- Where a bulk action goes on from: the last key of the last batch it settled.
    cursor       text,
    -- The newest key the action may touch: what existed when it was confirmed, not what is
    -- dispatched while it runs.
    upto         text,
    outcome      text,
    requested_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz
);
-- The audit page (newest first) and the retention's trim.
CREATE INDEX console_actions_requested_at ON drover.console_actions (requested_at);

-- Which jobs: each batch a bulk action settled, with the keys it settled (job ids, or the
-- failer's ids), so the audit trail names every job without a row per job.
CREATE TABLE drover.console_action_jobs (
    action   bigint NOT NULL REFERENCES drover.console_actions (id) ON DELETE CASCADE,
    batch    integer NOT NULL,
    keys     text[] NOT NULL,
    PRIMARY KEY (action, batch)
);

-- Stopping a running job (docs/dashboard.md, "Stopping a running job"): the console or
-- `drover:stop-job` asks, the master holding the job's lease kills exactly the worker running
-- that attempt, and the job is settled as the request says. One request per job; the lease token
-- names the attempt, so a request never stops a later attempt of the same job.
CREATE TABLE drover.stop_requests (
    job          bigint      PRIMARY KEY,
    lease_token  bigint      NOT NULL,
    -- graceful: the job's own failure path runs in the next worker (failed() called, logged by
    -- Laravel's failer) or it is released to run again; kill: no code of the job runs again — it
    -- is failed into drover.failed_jobs, or put back on its queue.
    mode         text        NOT NULL CHECK (mode IN ('graceful', 'kill')),
    outcome      text        NOT NULL CHECK (outcome IN ('fail', 'release')),
    requested_by text        NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 300),
    requested_at timestamptz NOT NULL DEFAULT now(),
    -- The master that killed the worker, and when.
    taken_by     bigint,
    taken_at     timestamptz
);

-- A pool's size set from the console for one master (docs/dashboard.md, "A pool's size"): that
-- master scales the pool to it when it hears, and says how it went (`outcome`). It holds until
-- the master re-reads its configuration (a reload or a restart, which remove the master's rows):
-- config/drover.php stays what a deploy brings back.
CREATE TABLE drover.pool_sizes (
    node         bigint      NOT NULL,
    pool         text        NOT NULL CHECK (length(pool) BETWEEN 1 AND 200),
    processes    integer     NOT NULL CHECK (processes BETWEEN 0 AND 1000),
    requested_by text        NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 300),
    requested_at timestamptz NOT NULL DEFAULT now(),
    -- What the master did: "scaled to N", or why it did not (an autoscaled pool, no such pool).
    outcome      text,
    applied_at   timestamptz,
    PRIMARY KEY (node, pool)
);

-- The masters hear of a request at once (broker/src/listener.rs, channel drover_console); each
-- reads the stop requests for the jobs it holds (broker/queries/stop_requests.sql) and the pool
-- sizes set for it (pool_sizes.sql), and again at every reap pass.
CREATE FUNCTION drover.notify_console() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_console', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER stop_requests_notify AFTER INSERT OR UPDATE OF lease_token, mode, outcome, requested_at ON drover.stop_requests
    FOR EACH STATEMENT EXECUTE FUNCTION drover.notify_console();
CREATE TRIGGER pool_sizes_notify AFTER INSERT OR UPDATE OF processes, requested_at ON drover.pool_sizes
    FOR EACH STATEMENT EXECUTE FUNCTION drover.notify_console();
