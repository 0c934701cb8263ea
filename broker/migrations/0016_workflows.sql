-- oldest reader: 10
-- (Expand-only: a nullable column on drover.jobs no earlier statement names, tables and
-- functions no binary or package of schema 10-15 reads or calls. docs/upgrading.md, "Schema".)
--
-- Durable workflows (issue 60, docs/workflows.md): a graph of ordinary Laravel jobs. A workflow
-- has named nodes; a node is one job (`add`), many jobs under one name (`addMany`) or a whole
-- workflow (a sub-workflow); a node runs when every node it depends on has ended satisfied.
--
-- Where the steps wait. A step whose node may not run yet is not in drover.jobs: it waits in
-- drover.workflow_steps, where no claim looks (as a grouped job waits in drover.group_jobs), and
-- is inserted into drover.jobs — its id taken from drover.jobs' own sequence at dispatch — when
-- its node is released. So the claim's index scan never walks past a held step, a step waiting
-- for a time sits in drover.jobs with that time as its available_at (the master's due timer
-- wakes for it), and a step waiting for a signal or a dependency holds no worker, no lease and
-- no row any master reads.
--
-- How a step's end moves the graph. A step's job leaves drover.jobs by whatever path (an ack, a
-- completion inside the job's own transaction, a failure for good, the reap of a job out of
-- attempts, an operator's delete): a statement-level trigger on drover.jobs takes the steps the
-- statement deleted, their outcomes — failed or deleted when the deleting statement noted it in
-- drover.step_failures (as a held group's failure is noted in drover.group_failures), completed
-- otherwise — and moves each workflow once, under the workflow's row lock (one update per node,
-- however many of its steps ended): every transition of one workflow is made by one
-- transaction at a time, so the last of two parents ending together releases their child
-- exactly once (the fan-in race of READ COMMITTED cannot happen). The lock is taken with SKIP
-- LOCKED: when another transaction holds it (another settle's, an application's signal, a
-- completion inside an application's transaction that has not committed), the ends are noted in
-- drover.workflow_events, and drover.workflows_catch_up() — pipelined by the master's settles
-- and reap ticks with the groups' catch-up — applies them once the lock is free. No settle ever
-- waits for a workflow.
--
-- The rules (php-client/src/Workflow/Graph.php holds the same as a pure state machine, unit
-- tested; the broker's tests drive these functions through the same scenarios):
--   a node is satisfied when it completed, was skipped (its condition was false), or failed
--     under `continue`;
--   a pending node whose dependencies are all satisfied is released: skipped when its condition
--     on a dependency's result is false, `waiting` when it waits for a signal not yet sent,
--     else its steps go to drover.jobs (available after its wait, if it has one) or its
--     sub-workflow starts;
--   a node ends when all its steps (or its sub-workflow) ended: failed when one failed, else
--     completed;
--   a node that failed under `cancel` (the default), or was cancelled, cancels every node that
--     depends on it, transitively, naming it as the cause;
--   a workflow ends when all its nodes ended: failed when one failed, else completed;
--   retrying a failed step reopens its node and the nodes it cancelled; cancelling a workflow
--     cancels what has not run and deletes what waits in drover.jobs; running steps finish and
--     release nothing.

-- The workflow a job is a step of; NULL for every other job.
ALTER TABLE drover.jobs ADD COLUMN wf bigint;

CREATE TABLE drover.workflows (
    id          bigserial   PRIMARY KEY,
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- Whether a second workflow of this name is refused while this one has not ended.
    unique_name boolean     NOT NULL DEFAULT false,
    -- pending: dispatched but not started (a top-level workflow until its dispatch's last
    -- statement; a sub-workflow until its node in the parent is released).
    state       text        NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    -- A sub-workflow: the parent workflow and the node it stands for there.
    parent      bigint,
    parent_node text,
    -- Nodes, and nodes not yet ended: the workflow ends when this reaches 0.
    nodes       integer     NOT NULL DEFAULT 0,
    nodes_left  integer     NOT NULL DEFAULT 0,
    -- Steps (jobs) of all its nodes, for the console's list.
    steps       bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz,
    CHECK ((parent IS NULL) = (parent_node IS NULL))
) WITH (fillfactor = 70);
-- A unique name is refused while a workflow of that name has not ended (Oban Pro's `unique`).
CREATE UNIQUE INDEX workflows_running_name ON drover.workflows (name)
    WHERE unique_name AND state IN ('pending', 'running');
-- The console's list and search at a million rows: newest first, by state, by a name's prefix.
CREATE INDEX workflows_age ON drover.workflows (created_at DESC, id DESC);
CREATE INDEX workflows_state_age ON drover.workflows (state, created_at DESC, id DESC);
CREATE INDEX workflows_name ON drover.workflows (name text_pattern_ops, created_at DESC);
CREATE INDEX workflows_parent ON drover.workflows (parent) WHERE parent IS NOT NULL;
-- The retention pass deletes workflows that ended long ago (broker/queries/purge_workflows.sql).
CREATE INDEX workflows_finished ON drover.workflows (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE drover.workflow_nodes (
    wf             bigint      NOT NULL,
    name           text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- Declaration order, for drawing.
    position       integer     NOT NULL,
    -- The nodes this one waits for.
    deps           text[]      NOT NULL DEFAULT '{}',
    -- What its failure does to the nodes that depend on it.
    on_failure     text        NOT NULL DEFAULT 'cancel' CHECK (on_failure IN ('cancel', 'continue')),
    -- Released this long after its dependencies ended (`->after('2 days')`).
    wait_secs      float8      CHECK (wait_secs IS NULL OR wait_secs >= 0),
    -- Released only once this signal was sent to the workflow.
    wait_signal    text        CHECK (wait_signal IS NULL OR length(wait_signal) BETWEEN 1 AND 200),
    -- Runs only when this holds of a dependency's result, else is skipped:
    -- {"node": name, "path": [keys], "op": "=|!=|>|>=|<|<=|exists", "value": json}.
    condition      jsonb,
    -- A sub-workflow node: the workflow it starts.
    sub_wf         bigint,
    members        integer     NOT NULL DEFAULT 0,
    members_left   integer     NOT NULL DEFAULT 0,
    failed_members integer     NOT NULL DEFAULT 0,
    state          text        NOT NULL DEFAULT 'pending'
                   CHECK (state IN ('pending', 'waiting', 'running', 'completed', 'failed', 'cancelled', 'skipped')),
    -- Why it was cancelled or skipped: the node whose failure cancelled it, 'cancelled' for the
    -- workflow's cancel, 'condition' for a false condition.
    cause          text,
    released_at    timestamptz,
    -- When its steps become available (released_at plus its wait).
    due_at         timestamptz,
    ended_at       timestamptz,
    PRIMARY KEY (wf, name)
) WITH (fillfactor = 70);

CREATE TABLE drover.workflow_steps (
    -- The job's id, taken from drover.jobs' own sequence at dispatch and kept in drover.jobs.
    id           bigint      PRIMARY KEY,
    wf           bigint      NOT NULL,
    node         text        NOT NULL,
    -- Its index among its node's jobs (0 for a node of one job).
    member       integer     NOT NULL,
    queue        text        NOT NULL,
    priority     smallint    NOT NULL DEFAULT 0,
    max_attempts integer     CHECK (max_attempts IS NULL OR max_attempts > 0),
    -- Kept after release, so a failed step can be retried from the console.
    payload      text        NOT NULL,
    -- The Laravel payload's uuid (drover.payload_uuid): what `queue:retry` of the step's
    -- failed_jobs record is recognised by (drover.workflow_retry_payload).
    uuid         text,
    state        text        NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'queued', 'completed', 'failed', 'cancelled', 'skipped')),
    -- What the step recorded (`$this->recordResult($value)`, JSON), fenced by its lease.
    result       text        CHECK (result IS NULL OR octet_length(result) <= 1048576),
    error        text,
    queued_at    timestamptz,
    ended_at     timestamptz
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02);
CREATE UNIQUE INDEX workflow_steps_node ON drover.workflow_steps (wf, node, member);
CREATE INDEX workflow_steps_uuid ON drover.workflow_steps (uuid) WHERE uuid IS NOT NULL;

-- A step's job that left drover.jobs other than by completing: written by the statement that
-- deleted it (ack_failed.sql, fail.sql, reap_expired.sql; an operator's delete through
-- drover.workflow_steps_deleted) — an insert, which never waits for a lock — and read by the
-- trigger at the end of that statement.
CREATE TABLE drover.step_failures (
    job     bigint PRIMARY KEY,
    outcome text   NOT NULL CHECK (outcome IN ('failed', 'deleted')),
    error   text   NOT NULL
);

-- Step and sub-workflow ends whose workflow's lock another transaction held; applied in order by
-- drover.workflows_catch_up().
CREATE TABLE drover.workflow_events (
    seq     bigserial PRIMARY KEY,
    wf      bigint    NOT NULL,
    -- A step's job left drover.jobs ...
    step    bigint,
    -- ... or a sub-workflow ended.
    child   bigint,
    outcome text      NOT NULL CHECK (outcome IN ('completed', 'failed', 'deleted')),
    error   text,
    CHECK ((step IS NULL) <> (child IS NULL))
);
CREATE INDEX workflow_events_wf ON drover.workflow_events (wf, seq);
ALTER TABLE drover.workflow_events SET (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0);

-- Signals sent to a workflow (`Drover::signal('import-42', 'approved', $data)`), kept whether or
-- not a node waits for them yet: a signal sent early is not lost. The first of a name is kept.
CREATE TABLE drover.workflow_signals (
    wf      bigint      NOT NULL,
    name    text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    data    text        CHECK (data IS NULL OR octet_length(data) <= 1048576),
    sent_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (wf, name)
);

-- A running job's progress (`$this->progress(40, 'parsed 4,000 rows')`, any job): one narrow row
-- per job, updated at most once a second (the package throttles too), never in drover.jobs, so
-- progress never dirties the claim's rows or indexes. Kept an hour after the job left.
CREATE TABLE drover.job_progress (
    job_id  bigint      PRIMARY KEY,
    percent smallint    NOT NULL CHECK (percent BETWEEN 0 AND 100),
    note    text        CHECK (note IS NULL OR length(note) <= 500),
    at      timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 50);
CREATE INDEX job_progress_at ON drover.job_progress (at);

-- Whether node n's condition holds of its dependency's result (the first step's, for a node of
-- many). A missing result or path is false, except for the `!=` and `exists` operators' plain
-- meaning. A result that is not JSON is false.
CREATE FUNCTION drover.wf_condition_holds(n drover.workflow_nodes) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_result text;
    v jsonb;
    want jsonb := n.condition -> 'value';
    op text := n.condition ->> 'op';
BEGIN
    SELECT result INTO v_result FROM drover.workflow_steps
    WHERE wf = n.wf AND node = n.condition ->> 'node' AND result IS NOT NULL
    ORDER BY member LIMIT 1;
    BEGIN
        v := v_result::jsonb #> ARRAY(SELECT k FROM jsonb_array_elements_text(n.condition -> 'path')
                                      WITH ORDINALITY AS p(k, i) ORDER BY i);
    EXCEPTION WHEN invalid_text_representation THEN
        RETURN false;
    END;
    IF op = 'exists' THEN
        RETURN v IS NOT NULL AND v <> 'null'::jsonb;
    ELSIF op = '!=' THEN
        RETURN v IS DISTINCT FROM want;
    ELSIF v IS NULL THEN
        RETURN false;
    ELSIF op = '=' THEN
        RETURN v = want;
    ELSIF jsonb_typeof(v) = 'number' AND jsonb_typeof(want) = 'number' THEN
        RETURN CASE op WHEN '>' THEN v::numeric > want::numeric WHEN '>=' THEN v::numeric >= want::numeric
                       WHEN '<' THEN v::numeric < want::numeric WHEN '<=' THEN v::numeric <= want::numeric
                       ELSE false END;
    ELSIF jsonb_typeof(v) = 'string' AND jsonb_typeof(want) = 'string' THEN
        RETURN CASE op WHEN '>' THEN v #>> '{}' > want #>> '{}' WHEN '>=' THEN v #>> '{}' >= want #>> '{}'
                       WHEN '<' THEN v #>> '{}' < want #>> '{}' WHEN '<=' THEN v #>> '{}' <= want #>> '{}'
                       ELSE false END;
    END IF;
    RETURN false;
END $$;

-- The workflow p_wf ends if no node is left: failed when a node failed, else completed. A
-- sub-workflow's end is an event of its parent. The caller holds p_wf's row lock.
CREATE FUNCTION drover.wf_finish_if_done(p_wf bigint) RETURNS void LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    w drover.workflows;
BEGIN
    UPDATE drover.workflows
    SET state = CASE WHEN EXISTS (SELECT 1 FROM drover.workflow_nodes
                                  WHERE wf = p_wf AND state IN ('failed', 'cancelled'))
                     THEN 'failed' ELSE 'completed' END,
        finished_at = now()
    WHERE id = p_wf AND state = 'running' AND nodes_left <= 0
    RETURNING * INTO w;
    IF FOUND AND w.parent IS NOT NULL THEN
        PERFORM drover.wf_event(w.parent, NULL, w.id,
                                CASE w.state WHEN 'completed' THEN 'completed' ELSE 'failed' END,
                                CASE w.state WHEN 'completed' THEN NULL ELSE 'sub-workflow ' || w.name || ' failed' END);
    END IF;
END $$;

-- Nodes p_names of workflows p_wfs (element by element) have ended (completed, failed, skipped or
-- cancelled), for many workflows at once: each workflow has that many nodes less; the dependants
-- that are now ready and plain (no condition, no signal still awaited, not a sub-workflow, with
-- steps) are released together — their steps copied into drover.jobs in one statement —; the
-- others are taken one by one: cancelled when a dependency failed under `cancel` or was cancelled
-- (the cause named is the failed node a cancellation came from), else released by
-- drover.wf_release (a condition, a signal, a sub-workflow, no steps); then every workflow left
-- with no node ends. The caller holds every p_wfs' row lock.
-- Its plans are pinned to index scans and nested loops (as migration 6 pins the claim's): the
-- planner, not knowing how few nodes ended, would read every node of every workflow.
CREATE FUNCTION drover.wf_nodes_ended(p_wfs bigint[], p_names text[]) RETURNS void LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    d record;
    v_wf bigint;
BEGIN
    UPDATE drover.workflows AS w SET nodes_left = w.nodes_left - c.k
    FROM (SELECT wf, count(*)::integer AS k FROM unnest(p_wfs) AS wf GROUP BY wf) AS c
    WHERE w.id = c.wf;
    FOR d IN
        WITH ended AS (
            SELECT * FROM unnest(p_wfs, p_names) AS e(wf, name)
        ), candidates AS (
            SELECT DISTINCT n.wf, n.name
            FROM ended AS e JOIN drover.workflow_nodes AS n ON n.wf = e.wf
            WHERE e.name = ANY (n.deps) AND n.state = 'pending'
        ), judged AS (
            SELECT n.wf, n.name,
                   n.condition IS NULL AND n.sub_wf IS NULL AND n.members > 0
                   AND (n.wait_signal IS NULL
                        OR EXISTS (SELECT 1 FROM drover.workflow_signals AS g
                                   WHERE g.wf = n.wf AND g.name = n.wait_signal)) AS plain,
                   (SELECT CASE WHEN x.state = 'cancelled' THEN coalesce(x.cause, x.name) ELSE x.name END
                    FROM drover.workflow_nodes AS x
                    WHERE x.wf = n.wf AND x.name = ANY (n.deps)
                      AND (x.state = 'cancelled' OR (x.state = 'failed' AND x.on_failure = 'cancel'))
                    ORDER BY x.position LIMIT 1) AS blocker,
                   NOT EXISTS (SELECT 1 FROM drover.workflow_nodes AS x
                               WHERE x.wf = n.wf AND x.name = ANY (n.deps)
                                 AND NOT (x.state IN ('completed', 'skipped')
                                          OR (x.state = 'failed' AND x.on_failure = 'continue'))) AS ready,
                   n.position
            FROM candidates AS c JOIN drover.workflow_nodes AS n ON n.wf = c.wf AND n.name = c.name
        ), released AS (
            UPDATE drover.workflow_nodes AS x
            SET state = 'running', released_at = now(),
                due_at = clock_timestamp() + make_interval(secs => coalesce(x.wait_secs, 0))
            FROM judged AS j
            WHERE x.wf = j.wf AND x.name = j.name AND j.plain AND j.ready AND j.blocker IS NULL
            RETURNING x.wf, x.name, x.due_at
        ), queued AS (
            UPDATE drover.workflow_steps AS st SET state = 'queued', queued_at = clock_timestamp()
            FROM released AS r
            WHERE st.wf = r.wf AND st.node = r.name AND st.state = 'pending'
            RETURNING st.id, st.queue, st.priority, st.payload, st.max_attempts, st.wf, r.due_at
        ), inserted AS (
            INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, created_at, wf)
            SELECT id, queue, priority, payload, max_attempts, due_at, clock_timestamp(), wf FROM queued
        )
        SELECT j.wf, j.name, j.blocker, j.ready FROM judged AS j
        WHERE j.blocker IS NOT NULL OR (j.ready AND NOT j.plain)
        ORDER BY j.wf, j.position
    LOOP
        IF d.blocker IS NOT NULL THEN
            PERFORM drover.wf_cancel_from(d.wf, d.name, d.blocker);
        ELSE
            PERFORM drover.wf_release(d.wf, d.name);
        END IF;
    END LOOP;
    FOR v_wf IN SELECT id FROM drover.workflows
                WHERE id = ANY (p_wfs) AND state = 'running' AND nodes_left <= 0 LOOP
        PERFORM drover.wf_finish_if_done(v_wf);
    END LOOP;
END $$;

-- Node p_node of p_wf has ended: drover.wf_nodes_ended for one node.
CREATE FUNCTION drover.wf_node_ended(p_wf bigint, p_node text) RETURNS void LANGUAGE sql AS $$
    SELECT drover.wf_nodes_ended(ARRAY[p_wf], ARRAY[p_node])
$$;

-- Cancels node p_node of p_wf (not yet running) and, through its own end, every node that
-- depends on it; p_cause names the node whose failure did it. The caller holds p_wf's lock.
CREATE FUNCTION drover.wf_cancel_from(p_wf bigint, p_node text, p_cause text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n drover.workflow_nodes;
BEGIN
    UPDATE drover.workflow_nodes SET state = 'cancelled', cause = p_cause, ended_at = now()
    WHERE wf = p_wf AND name = p_node AND state IN ('pending', 'waiting')
    RETURNING * INTO n;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE drover.workflow_steps SET state = 'cancelled', ended_at = now(),
        error = 'cancelled: ' || p_cause || CASE WHEN p_cause = 'cancelled' THEN '' ELSE ' failed' END
    WHERE wf = p_wf AND node = p_node AND state = 'pending';
    IF n.sub_wf IS NOT NULL THEN
        UPDATE drover.workflows SET state = 'cancelled', finished_at = now()
        WHERE id = n.sub_wf AND state = 'pending';
    END IF;
    PERFORM drover.wf_node_ended(p_wf, p_node);
END $$;

-- Releases node p_node of p_wf (running), whose dependencies are all satisfied: skipped when its
-- condition is false; waiting when it waits for a signal not yet sent; else its steps go to
-- drover.jobs (available after its wait) or its sub-workflow starts. A node no longer pending or
-- waiting is left as it is. (The plain nodes a step's end makes ready are released together by
-- drover.wf_nodes_ended's wave; this is the rest, the first nodes and those a signal releases.)
-- The caller holds p_wf's row lock.
CREATE FUNCTION drover.wf_release(p_wf bigint, p_node text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n drover.workflow_nodes;
BEGIN
    SELECT * INTO n FROM drover.workflow_nodes WHERE wf = p_wf AND name = p_node;
    IF n.state NOT IN ('pending', 'waiting') THEN
        RETURN;
    END IF;
    IF n.condition IS NOT NULL AND NOT drover.wf_condition_holds(n) THEN
        UPDATE drover.workflow_nodes SET state = 'skipped', cause = 'condition', ended_at = now()
        WHERE wf = p_wf AND name = p_node;
        UPDATE drover.workflow_steps SET state = 'skipped', ended_at = now()
        WHERE wf = p_wf AND node = p_node AND state = 'pending';
        IF n.sub_wf IS NOT NULL THEN
            UPDATE drover.workflows SET state = 'cancelled', finished_at = now()
            WHERE id = n.sub_wf AND state = 'pending';
        END IF;
        PERFORM drover.wf_node_ended(p_wf, p_node);
        RETURN;
    END IF;
    IF n.wait_signal IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM drover.workflow_signals WHERE wf = p_wf AND name = n.wait_signal) THEN
        UPDATE drover.workflow_nodes SET state = 'waiting' WHERE wf = p_wf AND name = p_node;
        RETURN;
    END IF;
    UPDATE drover.workflow_nodes AS x
    SET state = 'running', released_at = now(),
        due_at = clock_timestamp() + make_interval(secs => coalesce(x.wait_secs, 0))
    WHERE x.wf = p_wf AND x.name = p_node
    RETURNING * INTO n;
    IF n.sub_wf IS NOT NULL THEN
        PERFORM 1 FROM drover.workflows WHERE id = n.sub_wf FOR UPDATE;
        PERFORM drover.wf_start(n.sub_wf);
        RETURN;
    END IF;
    IF n.members = 0 THEN
        UPDATE drover.workflow_nodes SET state = 'completed', ended_at = now()
        WHERE wf = p_wf AND name = p_node;
        PERFORM drover.wf_node_ended(p_wf, p_node);
        RETURN;
    END IF;
    WITH s AS (
        UPDATE drover.workflow_steps SET state = 'queued', queued_at = clock_timestamp()
        WHERE wf = p_wf AND node = p_node AND state = 'pending'
        RETURNING id, queue, priority, payload, max_attempts
    )
    INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, created_at, wf)
    SELECT id, queue, priority, payload, max_attempts, n.due_at, clock_timestamp(), p_wf FROM s;
END $$;

-- Starts workflow p_wf (pending): its nodes without dependencies are released. The caller holds
-- its row lock.
CREATE FUNCTION drover.wf_start(p_wf bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_node text;
BEGIN
    UPDATE drover.workflows SET state = 'running', started_at = now()
    WHERE id = p_wf AND state = 'pending';
    IF NOT FOUND THEN
        RETURN;
    END IF;
    FOR v_node IN SELECT name FROM drover.workflow_nodes
                  WHERE wf = p_wf AND deps = '{}' AND state = 'pending' ORDER BY position LOOP
        PERFORM drover.wf_release(p_wf, v_node);
    END LOOP;
    PERFORM drover.wf_finish_if_done(p_wf);
END $$;

-- A sub-workflow p_child of p_wf ended with p_outcome: its node in p_wf ends with it. The
-- caller holds p_wf's row lock.
CREATE FUNCTION drover.wf_child_ended(p_wf bigint, p_child bigint, p_outcome text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_node text;
BEGIN
    SELECT parent_node INTO v_node FROM drover.workflows WHERE id = p_child AND parent = p_wf;
    IF v_node IS NULL OR (SELECT state FROM drover.workflows WHERE id = p_wf) <> 'running' THEN
        RETURN;
    END IF;
    UPDATE drover.workflow_nodes
    SET members_left = 0, failed_members = CASE p_outcome WHEN 'completed' THEN 0 ELSE 1 END,
        state = CASE p_outcome WHEN 'completed' THEN 'completed' ELSE 'failed' END, ended_at = now()
    WHERE wf = p_wf AND name = v_node AND state = 'running';
    IF FOUND THEN
        PERFORM drover.wf_node_ended(p_wf, v_node);
    END IF;
END $$;

-- Steps p_steps of workflows p_wfs left drover.jobs with p_outcomes (completed, failed,
-- deleted) and p_errors, element by element — for many workflows at once, set-based: each
-- step's row takes its end state once (a step already ended is not counted again), every node
-- is charged its ended steps in one statement, and only the nodes left with none go on, one by
-- one, to end (drover.wf_node_ended). A workflow that is no longer running (cancelled) records
-- its steps' and nodes' ends and moves no further. The caller holds every p_wfs' row lock.
CREATE FUNCTION drover.wf_steps_ended(p_wfs bigint[], p_steps bigint[], p_outcomes text[], p_errors text[])
RETURNS void LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        WITH moved AS (
            UPDATE drover.workflow_steps AS s
            SET state = CASE ev.outcome WHEN 'completed' THEN 'completed' WHEN 'failed' THEN 'failed'
                                        ELSE 'cancelled' END,
                error = ev.error, ended_at = now()
            FROM unnest(p_wfs, p_steps, p_outcomes, p_errors) AS ev(wf, step, outcome, error)
            WHERE s.id = ev.step AND s.wf = ev.wf AND s.state = 'queued'
            RETURNING s.wf, s.node, ev.outcome
        ), counted AS (
            SELECT wf, node, count(*)::integer AS k,
                   (count(*) FILTER (WHERE outcome <> 'completed'))::integer AS f,
                   (count(*) FILTER (WHERE outcome = 'deleted'))::integer AS d
            FROM moved GROUP BY wf, node
        ), charged AS (
            -- A node left with no step ends here, in the same update: failed when one failed, or
            -- (in a cancelled workflow, which moves no further) cancelled when the cancel deleted
            -- its waiting steps.
            UPDATE drover.workflow_nodes AS n
            SET members_left = greatest(n.members_left - c.k, 0), failed_members = n.failed_members + c.f,
                state = CASE WHEN n.members_left - c.k > 0 THEN n.state
                             WHEN w.state <> 'running' AND c.d > 0 THEN 'cancelled'
                             WHEN n.failed_members + c.f > 0 THEN 'failed' ELSE 'completed' END,
                cause = CASE WHEN n.members_left - c.k <= 0 AND w.state <> 'running' AND c.d > 0
                             THEN 'cancelled' ELSE n.cause END,
                ended_at = CASE WHEN n.members_left - c.k > 0 THEN n.ended_at ELSE now() END
            FROM counted AS c, drover.workflows AS w
            WHERE n.wf = c.wf AND n.name = c.node AND n.state = 'running' AND w.id = c.wf
            RETURNING n.wf, n.name, n.members_left, w.state = 'running' AS running
        )
        SELECT array_agg(wf ORDER BY wf, name) AS wfs, array_agg(name ORDER BY wf, name) AS names
        FROM charged WHERE members_left = 0 AND running
    LOOP
        IF r.wfs IS NOT NULL THEN
            PERFORM drover.wf_nodes_ended(r.wfs, r.names);
        END IF;
    END LOOP;
END $$;

-- Sub-workflow p_child of p_wf ended with p_outcome: applied now if p_wf's row lock is free (or
-- already this transaction's), else noted for drover.workflows_catch_up(). Never waits.
CREATE FUNCTION drover.wf_event(p_wf bigint, p_step bigint, p_child bigint, p_outcome text, p_error text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM drover.workflows WHERE id = p_wf FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        PERFORM drover.wf_child_ended(p_wf, p_child, p_outcome);
    ELSIF EXISTS (SELECT 1 FROM drover.workflows WHERE id = p_wf) THEN
        INSERT INTO drover.workflow_events (wf, step, child, outcome, error)
        VALUES (p_wf, p_step, p_child, p_outcome, p_error);
    END IF;
END $$;

-- Steps' jobs left drover.jobs, by whatever path (see the top of this file): once per deleting
-- statement, with the rows it deleted, so a settle of a hundred steps moves their workflows in
-- a few set-based statements, not a hundred times. The workflows whose lock is free are locked
-- (SKIP LOCKED) and moved now; the others' ends are noted for drover.workflows_catch_up(). A
-- statement that deleted no step (every plain ack) returns after one look at its rows.
CREATE FUNCTION drover.workflow_steps_left() RETURNS trigger LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_wfs bigint[];
    v_locked bigint[];
    r record;
BEGIN
    v_wfs := ARRAY(SELECT DISTINCT wf FROM gone WHERE wf IS NOT NULL);
    IF cardinality(v_wfs) = 0 THEN
        RETURN NULL;
    END IF;
    v_locked := ARRAY(SELECT id FROM drover.workflows WHERE id = ANY (v_wfs) ORDER BY id FOR UPDATE SKIP LOCKED);
    WITH marks AS (
        DELETE FROM drover.step_failures AS f USING gone AS g WHERE f.job = g.id AND g.wf IS NOT NULL
        RETURNING f.job, f.outcome, f.error
    ), ended AS (
        SELECT g.wf, g.id, coalesce(m.outcome, 'completed') AS outcome, m.error
        FROM gone AS g LEFT JOIN marks AS m ON m.job = g.id
        WHERE g.wf IS NOT NULL
    ), noted AS (
        INSERT INTO drover.workflow_events (wf, step, outcome, error)
        SELECT e.wf, e.id, e.outcome, e.error FROM ended AS e
        WHERE NOT (e.wf = ANY (v_locked))
          AND EXISTS (SELECT 1 FROM drover.workflows WHERE id = e.wf)
    )
    SELECT array_agg(wf) AS wfs, array_agg(id) AS steps, array_agg(outcome) AS outcomes,
           array_agg(error) AS errors
    INTO r FROM ended WHERE wf = ANY (v_locked);
    IF r.wfs IS NOT NULL THEN
        PERFORM drover.wf_steps_ended(r.wfs, r.steps, r.outcomes, r.errors);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_workflow_steps_left AFTER DELETE ON drover.jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION drover.workflow_steps_left();

-- Applies the ends noted while their workflow's lock was held, for each workflow whose lock is
-- free now, in the order they were noted; events of a workflow that no longer exists are
-- dropped. Returns how many it applied. Never waits for a lock; nearly free when none is noted.
CREATE FUNCTION drover.workflows_catch_up() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_wf bigint;
    r record;
    e drover.workflow_events;
    n integer := 0;
BEGIN
    FOR v_wf IN SELECT DISTINCT wf FROM drover.workflow_events LOOP
        PERFORM 1 FROM drover.workflows WHERE id = v_wf FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            IF NOT EXISTS (SELECT 1 FROM drover.workflows WHERE id = v_wf) THEN
                DELETE FROM drover.workflow_events WHERE wf = v_wf;
            END IF;
            CONTINUE;
        END IF;
        WITH taken AS (
            DELETE FROM drover.workflow_events WHERE wf = v_wf AND step IS NOT NULL RETURNING *
        )
        SELECT array_agg(step ORDER BY seq) AS steps, array_agg(outcome ORDER BY seq) AS outcomes,
               array_agg(error ORDER BY seq) AS errors, count(*)::integer AS k
        INTO r FROM taken;
        IF r.k > 0 THEN
            PERFORM drover.wf_steps_ended(array_fill(v_wf, ARRAY[r.k]), r.steps, r.outcomes, r.errors);
            n := n + r.k;
        END IF;
        FOR e IN DELETE FROM drover.workflow_events WHERE wf = v_wf AND child IS NOT NULL RETURNING * LOOP
            PERFORM drover.wf_child_ended(v_wf, e.child, e.outcome);
            n := n + 1;
        END LOOP;
    END LOOP;
    RETURN n;
END $$;

-- ---------------------------------------------------------------------------------------------
-- What the application calls (SECURITY DEFINER, granted to drover_producer and drover_operator;
-- the application's role may not write drover's tables itself).

-- Creates a workflow, pending, with its nodes (p_nodes: a JSON array of {name, deps,
-- on_failure, wait_secs, wait_signal, condition}, in declaration order); a sub-workflow names its
-- parent and the parent's node it stands for. Refuses (SQLSTATE DRW01) a unique name while a
-- workflow of that name has not ended, and (22023) a graph with an unknown dependency or a cycle.
CREATE FUNCTION drover.workflow_create(p_name text, p_unique boolean, p_nodes jsonb,
                                       p_parent bigint DEFAULT NULL, p_parent_node text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id bigint;
    v_count integer;
    v_done text[] := '{}';
    v_more text[];
    v_missing text;
BEGIN
    IF jsonb_typeof(p_nodes) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'drover.workflow_create: the nodes must be a JSON array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        INSERT INTO drover.workflows (name, unique_name, parent, parent_node)
        VALUES (p_name, coalesce(p_unique, false), p_parent, p_parent_node)
        RETURNING id INTO v_id;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'drover: workflow "%" is already running (its name is unique); dispatch it again once it ended, or cancel it', p_name
            USING ERRCODE = 'DRW01';
    END;
    INSERT INTO drover.workflow_nodes (wf, name, position, deps, on_failure, wait_secs, wait_signal, condition)
    SELECT v_id, x ->> 'name', ord::integer,
           coalesce(ARRAY(SELECT jsonb_array_elements_text(x -> 'deps')), '{}'),
           coalesce(x ->> 'on_failure', 'cancel'), (x ->> 'wait_secs')::float8, x ->> 'wait_signal',
           CASE WHEN jsonb_typeof(x -> 'condition') = 'object' THEN x -> 'condition' END
    FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS t(x, ord);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    SELECT dep INTO v_missing FROM drover.workflow_nodes AS n, unnest(n.deps) AS dep
    WHERE n.wf = v_id AND NOT EXISTS (SELECT 1 FROM drover.workflow_nodes WHERE wf = v_id AND name = dep)
    LIMIT 1;
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'drover: workflow "%" has a step after "%", which it does not have', p_name, v_missing
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Kahn's algorithm: every node must be reachable by ending the ones before it.
    LOOP
        v_more := ARRAY(SELECT name FROM drover.workflow_nodes
                        WHERE wf = v_id AND NOT (name = ANY (v_done)) AND deps <@ v_done);
        EXIT WHEN cardinality(v_more) = 0;
        v_done := v_done || v_more;
    END LOOP;
    IF cardinality(v_done) < v_count THEN
        RAISE EXCEPTION 'drover: workflow "%" has a cycle among its steps (%)', p_name,
            (SELECT string_agg(name, ', ' ORDER BY position) FROM drover.workflow_nodes
             WHERE wf = v_id AND NOT (name = ANY (v_done)))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE drover.workflows SET nodes = v_count, nodes_left = v_count WHERE id = v_id;
    IF p_parent IS NOT NULL THEN
        UPDATE drover.workflow_nodes SET sub_wf = v_id, members = 1, members_left = 1
        WHERE wf = p_parent AND name = p_parent_node;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'drover: workflow % has no node "%" for a sub-workflow', p_parent, p_parent_node
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    RETURN v_id;
END $$;

-- Adds steps (jobs) to nodes of a pending workflow, one array element per step; returns their
-- job ids in order. Called in batches by a large dispatch.
CREATE FUNCTION drover.workflow_add_steps(p_wf bigint, p_nodes text[], p_queues text[], p_payloads text[],
                                          p_priorities smallint[], p_max_attempts integer[])
RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ids bigint[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM drover.workflows WHERE id = p_wf AND state = 'pending') THEN
        RAISE EXCEPTION 'drover: workflow % is not being dispatched (steps are added before it starts)', p_wf
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH s AS (
        SELECT t.node, t.queue, t.payload, coalesce(t.priority, 0::smallint) AS priority, t.max_attempts, t.ord,
               nextval('drover.jobs_id_seq') AS id
        FROM unnest(p_nodes, p_queues, p_payloads, p_priorities, p_max_attempts)
             WITH ORDINALITY AS t(node, queue, payload, priority, max_attempts, ord)
    ), counted AS (
        UPDATE drover.workflow_nodes AS n
        SET members = n.members + c.k, members_left = n.members_left + c.k
        FROM (SELECT node, count(*)::integer AS k FROM s GROUP BY node) AS c
        WHERE n.wf = p_wf AND n.name = c.node AND n.sub_wf IS NULL
        RETURNING n.name, n.members - c.k AS first_member
    ), ins AS (
        INSERT INTO drover.workflow_steps (id, wf, node, member, queue, priority, max_attempts, payload, uuid)
        SELECT s.id, p_wf, s.node,
               c.first_member + (row_number() OVER (PARTITION BY s.node ORDER BY s.ord))::integer - 1,
               s.queue, s.priority, s.max_attempts, s.payload, drover.payload_uuid(s.payload)
        FROM s JOIN counted AS c ON c.name = s.node
        RETURNING id
    )
    SELECT array_agg(s.id ORDER BY s.ord) INTO v_ids FROM s;
    IF (SELECT count(*) FROM drover.workflow_steps WHERE id = ANY (v_ids)) <> coalesce(cardinality(v_ids), 0) THEN
        RAISE EXCEPTION 'drover: workflow % has no node for some of these steps (%)', p_wf,
            (SELECT string_agg(DISTINCT x, ', ') FROM unnest(p_nodes) AS x
             WHERE NOT EXISTS (SELECT 1 FROM drover.workflow_nodes WHERE wf = p_wf AND name = x AND sub_wf IS NULL))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE drover.workflows SET steps = steps + coalesce(cardinality(v_ids), 0) WHERE id = p_wf;
    RETURN coalesce(v_ids, '{}');
END $$;

-- Starts a top-level workflow once all its nodes and steps are in: its first steps go to
-- drover.jobs, visible to the masters when the caller's transaction commits.
CREATE FUNCTION drover.workflow_start(p_wf bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM drover.workflows WHERE id = p_wf AND parent IS NULL AND state = 'pending' FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'drover: workflow % is not a top-level workflow being dispatched', p_wf
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM drover.wf_start(p_wf);
END $$;

-- Sends signal p_signal with p_data to the workflows named p_name that have not ended (or to
-- workflow p_name's id, given as digits): kept, and every node waiting for it released. Returns
-- how many workflows took it (0: none of that name is running; a signal already sent is kept as
-- it was and counts as taken).
CREATE FUNCTION drover.workflow_signal(p_name text, p_signal text, p_data text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_wf bigint;
    v_node text;
    n integer := 0;
BEGIN
    FOR v_wf IN SELECT id FROM drover.workflows
                WHERE (name = p_name OR (p_name ~ '^[0-9]{1,18}$' AND id = p_name::bigint))
                  AND state IN ('pending', 'running')
                ORDER BY id FOR UPDATE LOOP
        INSERT INTO drover.workflow_signals (wf, name, data) VALUES (v_wf, p_signal, p_data)
        ON CONFLICT (wf, name) DO NOTHING;
        FOR v_node IN SELECT n.name FROM drover.workflow_nodes AS n JOIN drover.workflows AS w ON w.id = n.wf
                      WHERE n.wf = v_wf AND w.state = 'running' AND n.state = 'waiting' AND n.wait_signal = p_signal
                      ORDER BY n.position LOOP
            PERFORM drover.wf_release(v_wf, v_node);
        END LOOP;
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- Records a step's result, fenced by its lease: only while job p_job holds lease p_token (so a
-- holder whose lease was taken back records nothing). Inside a job's own transaction, the result
-- commits with its effects and its completion. Returns whether it was recorded.
CREATE FUNCTION drover.workflow_record_result(p_job bigint, p_token bigint, p_result text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE drover.workflow_steps SET result = p_result
    WHERE id = p_job AND state = 'queued'
      AND EXISTS (SELECT 1 FROM drover.jobs WHERE id = p_job AND lease_token = p_token);
    RETURN FOUND;
END $$;

-- The workflow a job is a step of: its id, name, node and index in the node; no row for a job
-- that is not a step.
CREATE FUNCTION drover.workflow_of(p_job bigint)
RETURNS TABLE (wf bigint, name text, node text, member integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.wf, w.name, s.node, s.member
    FROM drover.workflow_steps AS s JOIN drover.workflows AS w ON w.id = s.wf
    WHERE s.id = p_job
$$;

-- The results recorded by node p_node's steps of workflow p_wf (a sub-workflow node: by every
-- step of its sub-workflow), in member order.
CREATE FUNCTION drover.workflow_results(p_wf bigint, p_node text)
RETURNS TABLE (node text, member integer, result text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.node, s.member, s.result FROM drover.workflow_steps AS s
    WHERE s.wf = p_wf AND s.node = p_node AND s.result IS NOT NULL
    UNION ALL
    SELECT s.node, s.member, s.result
    FROM drover.workflow_nodes AS n JOIN drover.workflow_steps AS s ON s.wf = n.sub_wf
    WHERE n.wf = p_wf AND n.name = p_node AND s.result IS NOT NULL
    ORDER BY 1, 2
$$;

-- The data of signal p_signal sent to workflow p_wf; NULL when not sent.
CREATE FUNCTION drover.workflow_signal_data(p_wf bigint, p_signal text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT data FROM drover.workflow_signals WHERE wf = p_wf AND name = p_signal
$$;

-- Records a running job's progress, fenced by its lease, at most once a second per job (a 100 %
-- or a first report always): returns whether it was written.
CREATE FUNCTION drover.job_progress(p_job bigint, p_token bigint, p_percent integer, p_note text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_percent IS NULL OR p_percent < 0 OR p_percent > 100 THEN
        RAISE EXCEPTION 'drover: progress must be a percentage from 0 to 100, not %', p_percent
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO drover.job_progress AS p (job_id, percent, note, at)
    SELECT p_job, p_percent, left(p_note, 500), clock_timestamp()
    WHERE EXISTS (SELECT 1 FROM drover.jobs WHERE id = p_job AND lease_token = p_token)
    ON CONFLICT (job_id) DO UPDATE SET percent = excluded.percent, note = excluded.note, at = excluded.at
    WHERE p.at < clock_timestamp() - interval '1 second' OR excluded.percent = 100;
    RETURN FOUND;
END $$;

-- ---------------------------------------------------------------------------------------------
-- What an operator calls (the console's actions, `drover:workflow`; granted to drover_operator).

-- Notes that jobs about to be deleted by an operator (queue:clear, the console's delete) were
-- deleted, not completed: call it in the deleting transaction, before the delete.
CREATE FUNCTION drover.workflow_steps_deleted(p_ids bigint[], p_reason text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n integer;
BEGIN
    INSERT INTO drover.step_failures (job, outcome, error)
    SELECT j.id, 'deleted', coalesce(p_reason, 'deleted by an operator')
    FROM drover.jobs AS j WHERE j.id = ANY (p_ids) AND j.wf IS NOT NULL
    ON CONFLICT (job) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- Cancels workflow p_wf and its sub-workflows: nodes not yet running are cancelled, steps waiting
-- in drover.jobs unleased are deleted; running steps finish and release nothing. Returns whether
-- it was running.
CREATE FUNCTION drover.workflow_cancel(p_wf bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_child bigint;
BEGIN
    PERFORM 1 FROM drover.workflows WHERE id = p_wf AND state IN ('pending', 'running') FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE drover.workflows SET state = 'cancelled', finished_at = now() WHERE id = p_wf;
    UPDATE drover.workflow_nodes SET state = 'cancelled', cause = 'cancelled', ended_at = now()
    WHERE wf = p_wf AND state IN ('pending', 'waiting');
    UPDATE drover.workflow_steps SET state = 'cancelled', error = 'cancelled', ended_at = now()
    WHERE wf = p_wf AND state = 'pending';
    INSERT INTO drover.step_failures (job, outcome, error)
    SELECT j.id, 'deleted', 'cancelled with its workflow'
    FROM drover.workflow_steps AS s JOIN drover.jobs AS j ON j.id = s.id
    WHERE s.wf = p_wf AND s.state = 'queued' AND j.lease_token IS NULL
    ON CONFLICT (job) DO NOTHING;
    DELETE FROM drover.jobs AS j USING drover.workflow_steps AS s
    WHERE s.wf = p_wf AND s.state = 'queued' AND j.id = s.id AND j.lease_token IS NULL;
    FOR v_child IN SELECT id FROM drover.workflows WHERE parent = p_wf AND state IN ('pending', 'running') LOOP
        PERFORM drover.workflow_cancel(v_child);
    END LOOP;
    -- A sub-workflow cancelled on its own fails its node in its parent (which cancels what
    -- depends on it there, or goes on under `continue`).
    PERFORM drover.wf_event(w.parent, NULL, p_wf, 'failed', 'sub-workflow ' || w.name || ' cancelled')
    FROM drover.workflows AS w WHERE w.id = p_wf AND w.parent IS NOT NULL;
    RETURN true;
END $$;

-- Node p_node of p_wf runs again (a step of it is retried): if it had failed, it is running
-- again, the nodes its failure cancelled (and their sub-workflows, never started) wait for it
-- again, and — when p_wf is a sub-workflow whose failure failed its node in its parent — that
-- node reopens the same way, up to the top. p_wf is running again. Takes the row locks it needs,
-- waiting (an operator's call).
CREATE FUNCTION drover.wf_reopen(p_wf bigint, p_node text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    w drover.workflows;
    v_reopened integer;
BEGIN
    SELECT * INTO w FROM drover.workflows WHERE id = p_wf FOR UPDATE;
    UPDATE drover.workflows SET state = 'running', finished_at = NULL WHERE id = p_wf;
    IF (SELECT state FROM drover.workflow_nodes WHERE wf = p_wf AND name = p_node) <> 'failed' THEN
        RETURN;
    END IF;
    UPDATE drover.workflow_nodes SET state = 'pending', cause = NULL, ended_at = NULL
    WHERE wf = p_wf AND state = 'cancelled' AND cause = p_node;
    GET DIAGNOSTICS v_reopened = ROW_COUNT;
    UPDATE drover.workflow_steps AS x SET state = 'pending', error = NULL, ended_at = NULL
    FROM drover.workflow_nodes AS o
    WHERE o.wf = p_wf AND o.state = 'pending' AND x.wf = p_wf AND x.node = o.name AND x.state = 'cancelled';
    UPDATE drover.workflows SET state = 'pending', finished_at = NULL
    WHERE id IN (SELECT sub_wf FROM drover.workflow_nodes WHERE wf = p_wf AND state = 'pending' AND sub_wf IS NOT NULL)
      AND state = 'cancelled' AND started_at IS NULL;
    UPDATE drover.workflow_nodes SET state = 'running', ended_at = NULL WHERE wf = p_wf AND name = p_node;
    UPDATE drover.workflows SET nodes_left = nodes_left + 1 + v_reopened WHERE id = p_wf;
    IF w.state = 'failed' AND w.parent IS NOT NULL THEN
        PERFORM drover.wf_reopen(w.parent, w.parent_node);
        UPDATE drover.workflow_nodes SET members_left = 1, failed_members = 0
        WHERE wf = w.parent AND name = w.parent_node AND state = 'running';
    END IF;
END $$;

-- Retries failed step p_step: it goes back to drover.jobs (a fresh attempt count), its node runs
-- again, and the nodes its failure cancelled wait for it again; a failed workflow (and a parent
-- its failure failed) runs again. p_payload, when given, replaces the step's payload (Laravel's
-- `queue:retry` resets a payload's attempts and retry-until before pushing it back). Returns
-- whether the step had failed (and its workflow was not cancelled). Callable by the application
-- too: it only ever re-runs a step that failed, as `queue:retry` re-runs any failed job.
CREATE FUNCTION drover.workflow_retry_step(p_step bigint, p_payload text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s drover.workflow_steps;
BEGIN
    SELECT * INTO s FROM drover.workflow_steps WHERE id = p_step;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM 1 FROM drover.workflows WHERE id = s.wf AND state IN ('running', 'failed') FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM drover.workflows_catch_up();
    SELECT * INTO s FROM drover.workflow_steps WHERE id = p_step;
    IF s.state <> 'failed' OR EXISTS (SELECT 1 FROM drover.jobs WHERE id = p_step) THEN
        RETURN false;
    END IF;
    PERFORM drover.wf_reopen(s.wf, s.node);
    UPDATE drover.workflow_nodes
    SET members_left = members_left + 1, failed_members = greatest(failed_members - 1, 0)
    WHERE wf = s.wf AND name = s.node;
    UPDATE drover.workflow_steps
    SET state = 'queued', error = NULL, ended_at = NULL, queued_at = clock_timestamp(),
        payload = coalesce(p_payload, payload)
    WHERE id = p_step
    RETURNING * INTO s;
    DELETE FROM drover.failed_jobs WHERE id = p_step;
    INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, created_at, wf)
    VALUES (s.id, s.queue, s.priority, s.payload, s.max_attempts, clock_timestamp(), clock_timestamp(), s.wf);
    RETURN true;
END $$;

-- The failed step whose Laravel payload this is (its uuid), retried with it (Laravel's
-- `queue:retry` of a step's failed_jobs record, pushed back through the drover queue driver):
-- its id, or NULL when the payload is no failed step's (then the driver enqueues it as any job).
CREATE FUNCTION drover.workflow_retry_payload(p_payload text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_step bigint;
BEGIN
    SELECT id INTO v_step FROM drover.workflow_steps
    WHERE uuid = drover.payload_uuid(p_payload) AND state = 'failed'
    ORDER BY id DESC LIMIT 1;
    IF v_step IS NULL OR NOT drover.workflow_retry_step(v_step, p_payload) THEN
        RETURN NULL;
    END IF;
    RETURN v_step;
END $$;

REVOKE EXECUTE ON FUNCTION drover.workflow_create(text, boolean, jsonb, bigint, text),
    drover.workflow_add_steps(bigint, text[], text[], text[], smallint[], integer[]),
    drover.workflow_start(bigint), drover.workflow_signal(text, text, text),
    drover.workflow_record_result(bigint, bigint, text), drover.workflow_of(bigint),
    drover.workflow_results(bigint, text), drover.workflow_signal_data(bigint, text),
    drover.job_progress(bigint, bigint, integer, text), drover.workflow_steps_deleted(bigint[], text),
    drover.workflow_cancel(bigint), drover.workflow_retry_step(bigint, text),
    drover.workflow_retry_payload(text) FROM PUBLIC;
