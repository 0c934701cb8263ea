-- oldest reader: 7
-- (Expand-only: a nullable column with no default, tables, functions and a trigger, none of
-- which a binary of schema 7-10 reads or needs. A job dispatched under a limit waits until a
-- master of schema 11 admits it, or a job holding one of its keys settles. docs/upgrading.md,
-- "Schema".)
--
-- Limits decided at admission (docs/limits.md, docs/decisions/0009): a job dispatched under
-- limits waits in drover.limit_waiting, which no claim reads, until it has taken each of them;
-- then it moves into drover.jobs, where the claim sees it like any other. The claim stays one
-- ordered scan of jobs_ready (docs/decisions/0003): a million jobs waiting on a held key cost it
-- nothing, and an unlimited job costs one test of a NULL column in a trigger's WHEN.
--
-- Two kinds of limit, each under a key (a text of up to 255 characters, across every queue):
-- - a concurrency limit of N: at most N jobs hold the key at once. A job holds it from the step
--   that gave it the key until it leaves drover.jobs for good (completed, deleted, failed for
--   good): a row of drover.limit_holders, deleted with the job by the trigger below, whatever
--   deleted it (a settle, the reap, queue:clear). A release, a take-back from a dead worker and
--   the reap of an expired lease keep the row, and with it the slot. So a worker killed, a
--   master frozen or partitioned, a `pg_ctl restart` cannot leak a slot nor let N + 1 run.
--   Laravel's `WithoutOverlapping` is a limit of 1 under its lock key.
-- - a rate of R per window of W milliseconds: at most R jobs take the key in a window, and the
--   next window opens only once every job of this one has started and W has passed since the
--   first of them started. So the starts are bounded, not only the admissions: jobs admitted
--   together but started apart (the workers were busy) never let a later window's jobs start
--   among them. (For Laravel's `RateLimited`, which still runs when the job starts and
--   opens its own window at its first hit, a little after the admission, the package asks for a
--   window a little longer than the limiter's — docs/limits.md — so the worker's limiter never
--   sees more than R in its window.)
--
-- A job with several limits takes them one at a time, in one order for every job — concurrency
-- keys before rates, each kind by key — waiting in line at each and holding the slots it has
-- taken meanwhile. Since every job takes keys in the same order, no two jobs can each hold what
-- the other waits for. A rate is taken last, just before the job enters drover.jobs, so a start
-- counted in a window happens in it. Each line is ordered by due time, then enqueue: a job
-- delayed by its dispatch takes nothing until it is due.
--
-- Who admits: producers never lock anything of a key (an application's transaction may stay
-- open for long; nothing of the broker may wait for it). A producer parks the job and leaves a
-- note (drover.limit_wakes), whose NOTIFY drover_limits wakes the masters, which admit under the
-- key's lock (drover.limit_pass). A settle that frees a slot admits the next jobs in its own
-- transaction when it gets the key's lock at once, else leaves a note too: whoever holds the
-- lock could not see this settle's delete, so a pass after its commit admits. A key that must
-- wait for a time — its rate's next window, the due time of the job at the head of its line —
-- keeps it in drover.limit_keys.wake_at, and the masters' passes take it up then.

-- The job holds concurrency slots (rows of drover.limit_holders); NULL: none. Set by admission.
-- `rated`: it took a rate and has not started yet (rows of drover.limit_pending); cleared by its
-- first lease.
ALTER TABLE drover.jobs ADD COLUMN limited boolean, ADD COLUMN rated boolean;

-- Jobs still taking their limits.
CREATE TABLE drover.limit_waiting (
    -- Taken from drover.jobs' own sequence at enqueue and kept when the job is admitted.
    id           bigint      PRIMARY KEY,
    queue        text        NOT NULL,
    priority     smallint    NOT NULL DEFAULT 0,
    payload      text        NOT NULL,
    max_attempts integer     CHECK (max_attempts IS NULL OR max_attempts > 0),
    -- By the database's clock at enqueue.
    available_at timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    -- The job's limits in the order it takes them: per limit its key, its cap (N or R) and its
    -- window in milliseconds (0 for a concurrency limit).
    keys         text[]      NOT NULL,
    caps         integer[]   NOT NULL,
    windows      integer[]   NOT NULL,
    -- The limit it waits for now (1-based), and its key, by which its line is read.
    step         integer     NOT NULL DEFAULT 1,
    waits_on     text        NOT NULL,
    -- On a fair queue, its key and weight there: it is tagged when admitted (where service is
    -- then, not where it was at its enqueue; drover.fair_tag_nowait, below). NULL elsewhere.
    fair_key     text,
    fair_weight  float8,
    -- A grouped job's group and hold, when it is its group's head (drover.group_advance): it
    -- takes its limits as the head, and carries them into drover.jobs. NULL for an ungrouped job.
    grp          text,
    grp_hold     boolean,
    CHECK (cardinality(keys) BETWEEN 1 AND 8 AND cardinality(caps) = cardinality(keys)
           AND cardinality(windows) = cardinality(keys)),
    CHECK (step BETWEEN 1 AND cardinality(keys) AND waits_on = keys[step])
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02);
-- A key's line: the next job to admit.
CREATE INDEX limit_waiting_line ON drover.limit_waiting (waits_on, available_at, id);
-- The jobs waiting per queue, for size, status and `queue:clear`, and the one due longest, for
-- long-wait alerts (broker/queries/oldest_held_wait.sql).
CREATE INDEX limit_waiting_due ON drover.limit_waiting (queue, available_at);

-- Who holds a concurrency key's slots: a job in drover.jobs, or one still taking later limits.
CREATE TABLE drover.limit_holders (
    key text   NOT NULL,
    job bigint NOT NULL,
    PRIMARY KEY (key, job)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);
CREATE INDEX limit_holders_job ON drover.limit_holders (job);

-- Jobs that took a rate and have not started yet, per key, with the window they took: the key's
-- window cannot end before they start. Deleted by the job's first lease (or its deletion).
CREATE TABLE drover.limit_pending (
    job        bigint  NOT NULL,
    key        text    NOT NULL,
    window_ms  integer NOT NULL,
    PRIMARY KEY (job, key)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);
CREATE INDEX limit_pending_key ON drover.limit_pending (key);

-- What a key must remember between admissions: its rate's window, and when it must be looked
-- at again. A row exists only while it means something: the purge deletes it once its window
-- is over and nothing waits for a time (drover.limit_purge), so a million keys leave nothing.
CREATE TABLE drover.limit_keys (
    key          text        PRIMARY KEY,
    -- The rate's window: opened by its first admission, `used` admissions in it; ends_at is its
    -- first start and the window's length (NULL until a job of it started). It is over once
    -- ends_at has passed and none of its jobs is still to start.
    window_start timestamptz,
    used         integer     NOT NULL DEFAULT 0,
    ends_at      timestamptz,
    -- The key must be admitted again at this time (its window ends, the head of its line falls
    -- due); NULL: on events only.
    wake_at      timestamptz
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);
CREATE INDEX limit_keys_wake ON drover.limit_keys (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX limit_keys_ends ON drover.limit_keys (ends_at);

-- Keys that may be able to admit: written by an enqueue, a step taken, and a settle that could
-- not take the key's lock; consumed by drover.limit_pass. Insert-only for writers, so no writer
-- ever waits for another.
CREATE TABLE drover.limit_wakes (
    key text NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);

-- A note wakes the masters on commit (dropped on rollback, as the enqueue it comes with).
CREATE FUNCTION drover.notify_limits() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_limits', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER limit_wakes_notify AFTER INSERT ON drover.limit_wakes
    FOR EACH STATEMENT EXECUTE FUNCTION drover.notify_limits();

-- A key's advisory lock is the two-key form, class 0x646c696d "dlim", and hashtext(key): whoever
-- holds it may count the key's holders, move its window and admit from its line. It is held
-- until that transaction ends. Two keys of one hash share a lock, which only serialises them.

-- Admits from key k's line while k lets it: each job takes k (a slot, or a start in the rate's
-- window) and goes on to its next limit's line, or into drover.jobs after its last. Returns how
-- many entered drover.jobs. The caller holds k's lock. Each statement of this VOLATILE function
-- takes its own snapshot, so the counts see every admission committed before the lock was taken,
-- and the caller's own deletes. Rows a concurrent `queue:clear` holds are skipped, never waited
-- for. At most 500 jobs per call (a transaction stays short); a note asks for the rest.
CREATE FUNCTION drover.limit_admit_locked(k text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    w drover.limit_waiting;
    now_ timestamptz := clock_timestamp();
    held bigint;
    kr drover.limit_keys;
    pending boolean;
    cap integer;
    win integer;
    n integer := 0;
    seen integer := 0;
    stopped boolean := false;
BEGIN
    -- A wake-up that has come is spent: a stop below for a time sets the next one, a stop for a
    -- full key needs none (the slot's release wakes it).
    UPDATE drover.limit_keys SET wake_at = NULL WHERE key = k AND wake_at <= now_;
    FOR w IN SELECT * FROM drover.limit_waiting WHERE waits_on = k
             ORDER BY available_at, id LIMIT 500 FOR UPDATE SKIP LOCKED LOOP
        seen := seen + 1;
        cap := w.caps[w.step];
        win := w.windows[w.step];
        -- Whether the key has room, then whether the job is due: a full key needs no wake-up (the
        -- slot's release wakes it), a spent rate one at its window's end, a job not yet due one
        -- at its due time (and nothing behind it in the line is due either).
        IF win = 0 THEN
            IF held IS NULL THEN
                SELECT count(*) INTO held FROM drover.limit_holders WHERE key = k;
            END IF;
            IF held >= cap THEN
                stopped := true;
                EXIT;
            END IF;
        ELSE
            SELECT * INTO kr FROM drover.limit_keys WHERE key = k;
            pending := EXISTS (SELECT 1 FROM drover.limit_pending WHERE key = k);
            -- Over: none of its jobs is still to start, and its first start was a window ago (or
            -- none started: they were deleted unstarted).
            IF kr.window_start IS NULL OR (NOT pending AND (kr.ends_at IS NULL OR now_ >= kr.ends_at)) THEN
                INSERT INTO drover.limit_keys AS x (key, window_start, used, ends_at)
                VALUES (k, now_, 0, NULL)
                ON CONFLICT (key) DO UPDATE
                    SET window_start = excluded.window_start, used = 0, ends_at = NULL
                RETURNING * INTO kr;
            END IF;
            IF kr.used >= cap THEN
                -- Spent: it ends at ends_at once its jobs have started; until then the last one's
                -- start leaves a note (drover.limit_rate_started).
                IF NOT pending AND kr.ends_at IS NOT NULL THEN
                    UPDATE drover.limit_keys SET wake_at = kr.ends_at WHERE key = k;
                END IF;
                stopped := true;
                EXIT;
            END IF;
        END IF;
        IF w.available_at > now_ THEN
            INSERT INTO drover.limit_keys AS x (key, wake_at) VALUES (k, w.available_at)
            ON CONFLICT (key) DO UPDATE SET wake_at = least(coalesce(x.wake_at, excluded.wake_at), excluded.wake_at);
            stopped := true;
            EXIT;
        END IF;
        IF win = 0 THEN
            INSERT INTO drover.limit_holders (key, job) VALUES (k, w.id);
            held := held + 1;
        ELSE
            UPDATE drover.limit_keys SET used = used + 1 WHERE key = k;
            INSERT INTO drover.limit_pending (job, key, window_ms) VALUES (w.id, k, win);
            pending := true;
        END IF;
        IF w.step < cardinality(w.keys) THEN
            UPDATE drover.limit_waiting SET step = step + 1, waits_on = keys[step + 1] WHERE id = w.id;
            INSERT INTO drover.limit_wakes (key) VALUES (w.keys[w.step + 1]);
        ELSE
            DELETE FROM drover.limit_waiting WHERE id = w.id;
            INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, created_at, grp, grp_hold, limited, rated, fair_tag)
            VALUES (w.id, w.queue, w.priority, w.payload, w.max_attempts, w.available_at, w.created_at, w.grp, w.grp_hold,
                    CASE WHEN 0 = ANY (w.windows) THEN true END,
                    CASE WHEN EXISTS (SELECT 1 FROM unnest(w.windows) AS x WHERE x > 0) THEN true END,
                    CASE WHEN w.fair_key IS NOT NULL THEN drover.fair_tag_nowait(w.queue, w.fair_key, w.fair_weight) END);
            n := n + 1;
        END IF;
    END LOOP;
    IF NOT stopped THEN
        -- The line is empty (or skipped rows a clear holds): no wake-up is pending for it.
        UPDATE drover.limit_keys SET wake_at = NULL WHERE key = k AND wake_at IS NOT NULL;
        IF seen = 500 THEN
            INSERT INTO drover.limit_wakes (key) VALUES (k);
        END IF;
    END IF;
    RETURN n;
END
$$;

-- A pass: admits from the lines of every noted key and every key whose wake-up time has come.
-- Returns how many jobs entered drover.jobs, and in how many seconds the next key's wake-up
-- falls (NULL: none; 0 when a batch of 10,000 was full and more wait), for the master's timer. The notes are taken with SKIP LOCKED (a pass beside
-- it keeps its own) and the keys locked one by one in their order, waiting for each: a key's lock
-- is only ever held by a pass or a settle, never by a producer, and a settle never waits for
-- one (it tries), so the wait is short and two passes cannot deadlock. Cheap when nothing is
-- noted or due: two probes.
CREATE FUNCTION drover.limit_pass(OUT admitted integer, OUT next_wake_secs float8)
LANGUAGE plpgsql AS $$
DECLARE
    keys text[];
    k text;
    more boolean;
BEGIN
    admitted := 0;
    WITH taken AS (
        DELETE FROM drover.limit_wakes
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM drover.limit_wakes LIMIT 10000 FOR UPDATE SKIP LOCKED))
        RETURNING key
    ), due AS (
        SELECT key FROM drover.limit_keys WHERE wake_at <= clock_timestamp() LIMIT 10000
    )
    SELECT (SELECT array_agg(DISTINCT key ORDER BY key) FROM (SELECT key FROM taken UNION SELECT key FROM due) AS both_),
           (SELECT count(*) FROM taken) = 10000 OR (SELECT count(*) FROM due) = 10000
    INTO keys, more;
    IF keys IS NOT NULL THEN
        FOREACH k IN ARRAY keys LOOP
            PERFORM pg_advisory_xact_lock(x'646c696d'::int, hashtext(k));
            admitted := admitted + drover.limit_admit_locked(k);
        END LOOP;
    END IF;
    IF more THEN
        -- A batch was full: notes or due keys are left (after a burst of enqueues, no NOTIFY
        -- would come for them), so the next pass is now.
        next_wake_secs := 0;
    ELSE
        SELECT extract(epoch FROM min(wake_at) - clock_timestamp())::float8 INTO next_wake_secs
        FROM drover.limit_keys WHERE wake_at IS NOT NULL;
    END IF;
END
$$;

-- A job that held concurrency slots left drover.jobs (completed, deleted, failed for good, by
-- whatever path): its slots are free. Each key's line is admitted from in this transaction if
-- the key's lock is free now; else a note asks for a pass after commit.
CREATE FUNCTION drover.limit_slots_freed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k text;
BEGIN
    FOR k IN DELETE FROM drover.limit_holders WHERE job = OLD.id RETURNING key LOOP
        IF pg_try_advisory_xact_lock(x'646c696d'::int, hashtext(k)) THEN
            PERFORM drover.limit_admit_locked(k);
        ELSE
            INSERT INTO drover.limit_wakes (key) VALUES (k);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_limit_slots_freed AFTER DELETE ON drover.jobs
    FOR EACH ROW WHEN (OLD.limited) EXECUTE FUNCTION drover.limit_slots_freed();

-- A job that took rates started (its first lease): each key's window is timed from its first
-- start, and once the last of the window's jobs has started a note asks a pass to time the
-- next window. Deleted unstarted (queue:clear): the same, without a start. The lease's own
-- statement runs this (only for such a job: the WHEN tests one column), and clears `rated`, so
-- a later lease of the same job (a release, a take-back) counts nothing.
CREATE FUNCTION drover.limit_rate_started() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    p drover.limit_pending;
    at timestamptz := clock_timestamp();
BEGIN
    FOR p IN DELETE FROM drover.limit_pending WHERE job = OLD.id RETURNING * LOOP
        IF TG_OP = 'UPDATE' THEN
            UPDATE drover.limit_keys SET ends_at = at + make_interval(secs => p.window_ms / 1000.0)
            WHERE key = p.key AND ends_at IS NULL;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM drover.limit_pending WHERE key = p.key) THEN
            INSERT INTO drover.limit_wakes (key) VALUES (p.key);
        END IF;
    END LOOP;
    IF TG_OP = 'UPDATE' THEN
        NEW.rated := NULL;
        RETURN NEW;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_limit_rate_started BEFORE UPDATE OF lease_token ON drover.jobs
    FOR EACH ROW WHEN (OLD.rated AND OLD.lease_token IS NULL AND NEW.lease_token IS NOT NULL)
    EXECUTE FUNCTION drover.limit_rate_started();
CREATE TRIGGER jobs_limit_rate_unstarted AFTER DELETE ON drover.jobs
    FOR EACH ROW WHEN (OLD.rated) EXECUTE FUNCTION drover.limit_rate_started();

-- Reserves deduplication id p_dedup on queue p_queue for job p_job for p_window_secs, as
-- drover.enqueue does (migrations/0005_groups.sql): false when the id was taken within its
-- window (the job is to be dropped). For the enqueues of this migration.
CREATE FUNCTION drover.dedup_reserve(p_queue text, p_dedup text, p_job bigint, p_window_secs float8)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO drover.dedup AS d (queue, id, job, expires_at)
    VALUES (p_queue, p_dedup, p_job, clock_timestamp() + make_interval(secs => p_window_secs))
    ON CONFLICT (queue, id) DO UPDATE SET job = excluded.job, expires_at = excluded.expires_at
        WHERE d.expires_at <= clock_timestamp();
    RETURN FOUND;
END
$$;

-- Ordered groups under limits (docs/limits.md, "Groups and limits"): a grouped job may carry
-- limits too. The group decides when a job's turn comes (its head, one at a time, in order); the
-- limits decide when the head may run. A head with limits takes them in drover.limit_waiting as
-- any limited job does, and carries its group into drover.jobs when admitted; a job behind it
-- waits in drover.group_jobs with its limits, taking nothing. A group holds no key while its head
-- waits, so a group never waits on a key that waits on it: a head waiting for a key holds only
-- the keys before it in the one order every job takes them in.

-- A job waiting behind its group's head carries its limits (as drover.limit_waiting's columns);
-- NULL: none.
ALTER TABLE drover.group_jobs ADD COLUMN keys text[], ADD COLUMN caps integer[], ADD COLUMN windows integer[];

-- Places job p_id in group (p_queue, p_group): NULL when it is the group's head now (a group
-- made by this enqueue, or the retry of the job that holds it, which goes first), else its
-- position behind the head, where the caller inserts it into drover.group_jobs. Holds the
-- group's row lock until the caller's transaction ends, so positions follow commit order.
CREATE FUNCTION drover.group_join(p_queue text, p_group text, p_id bigint, p_payload text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    g drover.groups;
BEGIN
    LOOP
        INSERT INTO drover.groups (queue, name, head) VALUES (p_queue, p_group, p_id)
        ON CONFLICT (queue, name) DO NOTHING;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        SELECT * INTO g FROM drover.groups WHERE queue = p_queue AND name = p_group FOR UPDATE;
        IF FOUND AND g.head IS NOT NULL
           AND EXISTS (SELECT 1 FROM drover.group_pending WHERE queue = p_queue AND name = p_group)
           AND NOT EXISTS (SELECT 1 FROM drover.jobs WHERE id = g.head)
           AND NOT EXISTS (SELECT 1 FROM drover.limit_waiting WHERE id = g.head) THEN
            -- Its head settled while another producer held the lock: finish that move first.
            PERFORM drover.group_head_gone(g, g.head);
            DELETE FROM drover.group_pending WHERE queue = p_queue AND name = p_group;
            CONTINUE;
        END IF;
        IF FOUND THEN
            IF g.head IS NULL AND g.held_uuid = drover.payload_uuid(p_payload) THEN
                -- The retry of the job that holds the group: it goes first, and the group goes on.
                UPDATE drover.groups
                SET head = p_id, head_since = clock_timestamp(),
                    held_by = NULL, held_uuid = NULL, held_at = NULL, held_error = NULL
                WHERE queue = p_queue AND name = p_group;
                RETURN NULL;
            END IF;
            UPDATE drover.groups SET tail = tail + 1, waiting = waiting + 1
            WHERE queue = p_queue AND name = p_group
            RETURNING * INTO g;
            RETURN g.tail;
        END IF;
        -- The group's last job settled between the two statements: try again.
    END LOOP;
END
$$;

-- drover.enqueue (migrations/0005_groups.sql) as before, its group placed by drover.group_join,
-- which drover.enqueue_limited shares.
CREATE OR REPLACE FUNCTION drover.enqueue(
    p_queue text, p_payload text, p_delay_secs float8, p_group text, p_hold boolean,
    p_dedup text, p_dedup_window_secs float8, p_priority smallint, p_max_attempts integer
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint := nextval('drover.jobs_id_seq');
    v_at timestamptz := clock_timestamp() + make_interval(secs => greatest(p_delay_secs, 0));
    pos bigint;
BEGIN
    IF p_dedup IS NOT NULL AND NOT drover.dedup_reserve(p_queue, p_dedup, v_id, p_dedup_window_secs) THEN
        RETURN NULL;
    END IF;
    IF p_group IS NOT NULL THEN
        pos := drover.group_join(p_queue, p_group, v_id, p_payload);
        IF pos IS NOT NULL THEN
            INSERT INTO drover.group_jobs (queue, grp, position, id, priority, payload, max_attempts, available_at, created_at, grp_hold)
            VALUES (p_queue, p_group, pos, v_id, p_priority, p_payload, p_max_attempts, v_at, clock_timestamp(), p_hold);
            RETURN v_id;
        END IF;
    END IF;
    INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, grp, grp_hold)
    VALUES (v_id, p_queue, p_priority, p_payload, p_max_attempts, v_at, p_group, p_hold);
    RETURN v_id;
END
$$;

-- drover.group_advance (migrations/0005_groups.sql) as before, but a next job with limits
-- becomes the head in drover.limit_waiting, to take them, with a note for the masters' pass.
CREATE OR REPLACE FUNCTION drover.group_advance(p_queue text, p_name text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n drover.group_jobs;
BEGIN
    DELETE FROM drover.group_jobs AS gj
    WHERE gj.queue = p_queue AND gj.grp = p_name
      AND gj.position = (SELECT min(position) FROM drover.group_jobs
                         WHERE queue = p_queue AND grp = p_name)
    RETURNING gj.* INTO n;
    IF NOT FOUND THEN
        DELETE FROM drover.groups WHERE queue = p_queue AND name = p_name;
        RETURN;
    END IF;
    IF n.keys IS NULL THEN
        INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, created_at, grp, grp_hold)
        VALUES (n.id, n.queue, n.priority, n.payload, n.max_attempts, n.available_at, n.created_at, n.grp, n.grp_hold);
    ELSE
        INSERT INTO drover.limit_waiting (id, queue, priority, payload, max_attempts, available_at, created_at,
                                          keys, caps, windows, step, waits_on, grp, grp_hold)
        VALUES (n.id, n.queue, n.priority, n.payload, n.max_attempts, n.available_at, n.created_at,
                n.keys, n.caps, n.windows, 1, n.keys[1], n.grp, n.grp_hold);
        INSERT INTO drover.limit_wakes (key) VALUES (n.keys[1]);
    END IF;
    UPDATE drover.groups
    SET head = n.id, waiting = greatest(waiting - 1, 0), head_since = clock_timestamp(),
        held_by = NULL, held_uuid = NULL, held_at = NULL, held_error = NULL
    WHERE queue = p_queue AND name = p_name;
END
$$;

-- drover.groups_catch_up (migrations/0005_groups.sql) as before, but a head waiting for its
-- limits in drover.limit_waiting is still its group's head.
CREATE OR REPLACE FUNCTION drover.groups_catch_up() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    p drover.group_pending;
    g drover.groups;
    n integer := 0;
BEGIN
    FOR p IN SELECT * FROM drover.group_pending ORDER BY queue, name FOR UPDATE SKIP LOCKED LOOP
        SELECT * INTO g FROM drover.groups WHERE queue = p.queue AND name = p.name
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            IF EXISTS (SELECT 1 FROM drover.groups WHERE queue = p.queue AND name = p.name) THEN
                CONTINUE;
            END IF;
        ELSIF g.head IS NOT NULL AND NOT EXISTS (SELECT 1 FROM drover.jobs WHERE id = g.head)
              AND NOT EXISTS (SELECT 1 FROM drover.limit_waiting WHERE id = g.head) THEN
            PERFORM drover.group_head_gone(g, g.head);
            n := n + 1;
        END IF;
        DELETE FROM drover.group_pending WHERE queue = p.queue AND name = p.name;
    END LOOP;
    RETURN n;
END
$$;

-- Enqueues one job under limits (keys, caps and windows in milliseconds, in any order; a window
-- of 0 is a concurrency limit), deduplicated as drover.enqueue does when p_dedup is given; returns its
-- id, or NULL when its deduplication id dropped it. On a fair queue, p_fair_key and
-- p_fair_weight are its key and weight there (drover.fair_tag, below), its tag given at
-- admission. The job waits in drover.limit_waiting until
-- it has taken every limit; this takes no lock of any key. A bad limit is refused by name.
CREATE FUNCTION drover.enqueue_limited(
    p_queue text, p_payload text, p_delay_secs float8, p_keys text[], p_caps integer[],
    p_windows integer[], p_dedup text, p_dedup_window_secs float8, p_priority smallint,
    p_max_attempts integer, p_fair_key text DEFAULT NULL, p_fair_weight float8 DEFAULT 1,
    p_group text DEFAULT NULL, p_hold boolean DEFAULT NULL
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint := nextval('drover.jobs_id_seq');
    v_at timestamptz := clock_timestamp() + make_interval(secs => greatest(p_delay_secs, 0));
    pos bigint;
    o_keys text[];
    o_caps integer[];
    o_windows integer[];
    bad text;
BEGIN
    IF coalesce(cardinality(p_keys), 0) NOT BETWEEN 1 AND 8
       OR cardinality(p_caps) IS DISTINCT FROM cardinality(p_keys)
       OR cardinality(p_windows) IS DISTINCT FROM cardinality(p_keys) THEN
        RAISE EXCEPTION 'drover: a job takes 1 to 8 limits, each a key, a cap and a window (got % keys, % caps, % windows)',
            coalesce(cardinality(p_keys), 0), coalesce(cardinality(p_caps), 0), coalesce(cardinality(p_windows), 0)
            USING ERRCODE = '22023';
    END IF;
    SELECT string_agg(format('%L (cap %s, window %s ms)', k, c, w), ', ') INTO bad
    FROM unnest(p_keys, p_caps, p_windows) AS u(k, c, w)
    WHERE k IS NULL OR length(k) NOT BETWEEN 1 AND 255 OR c IS NULL OR c < 1 OR w IS NULL OR w < 0;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'drover: bad limits: %; a key is 1 to 255 characters, a cap at least 1, a window 0 (concurrency) or more milliseconds', bad
            USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(k ORDER BY w > 0, k), array_agg(c ORDER BY w > 0, k), array_agg(w ORDER BY w > 0, k)
    INTO o_keys, o_caps, o_windows
    FROM unnest(p_keys, p_caps, p_windows) AS u(k, c, w);
    SELECT string_agg(DISTINCT k, ', ') INTO bad
    FROM (SELECT k, w > 0 AS rate FROM unnest(o_keys, o_windows) AS u(k, w) GROUP BY 1, 2 HAVING count(*) > 1) AS d;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'drover: the limits name % twice as the same kind; give each key once', bad
            USING ERRCODE = '22023';
    END IF;
    IF p_dedup IS NOT NULL AND NOT drover.dedup_reserve(p_queue, p_dedup, v_id, p_dedup_window_secs) THEN
        RETURN NULL;
    END IF;
    IF p_fair_key IS NOT NULL AND (length(p_fair_key) > 255 OR p_fair_weight IS NULL OR NOT (p_fair_weight > 0 AND p_fair_weight <= 1000)) THEN
        RAISE EXCEPTION 'drover: a fair key is at most 255 characters and a weight above 0 and at most 1000 (got % characters, weight %)',
            length(p_fair_key), p_fair_weight USING ERRCODE = '22023';
    END IF;
    IF p_group IS NOT NULL THEN
        IF p_fair_key IS NOT NULL THEN
            RAISE EXCEPTION 'drover: a grouped job (group %) cannot take a fair share: dispatch it to a queue that is not fair, or drop its group', p_group
                USING ERRCODE = '22023';
        END IF;
        pos := drover.group_join(p_queue, p_group, v_id, p_payload);
        IF pos IS NOT NULL THEN
            INSERT INTO drover.group_jobs (queue, grp, position, id, priority, payload, max_attempts, available_at, created_at, grp_hold,
                                           keys, caps, windows)
            VALUES (p_queue, p_group, pos, v_id, p_priority, p_payload, p_max_attempts, v_at, clock_timestamp(), p_hold,
                    o_keys, o_caps, o_windows);
            RETURN v_id;
        END IF;
    END IF;
    INSERT INTO drover.limit_waiting (id, queue, priority, payload, max_attempts, available_at, created_at,
                                      keys, caps, windows, step, waits_on, fair_key, fair_weight, grp, grp_hold)
    VALUES (v_id, p_queue, p_priority, p_payload, p_max_attempts, v_at, clock_timestamp(),
            o_keys, o_caps, o_windows, 1, o_keys[1], p_fair_key, CASE WHEN p_fair_key IS NOT NULL THEN p_fair_weight END,
            p_group, p_hold);
    INSERT INTO drover.limit_wakes (key) VALUES (o_keys[1]);
    RETURN v_id;
END
$$;

-- Deletes the jobs of queue q still taking their limits (`queue:clear`), freeing the slots they
-- took (their keys are noted for a pass); returns how many. Rows an admission holds are left.
-- A group whose head was one of them goes on to its next job (`queue:clear` deletes the jobs
-- behind the heads first, so their groups end).
CREATE FUNCTION drover.limit_clear(q text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    heads text[];
    gname text;
BEGIN
    WITH gone AS (
        DELETE FROM drover.limit_waiting
        WHERE id = ANY (ARRAY(SELECT id FROM drover.limit_waiting WHERE queue = q FOR UPDATE SKIP LOCKED))
        RETURNING id, grp
    )
    SELECT array_agg(id), array_agg(DISTINCT grp ORDER BY grp) FILTER (WHERE grp IS NOT NULL) INTO ids, heads FROM gone;
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH gname IN ARRAY coalesce(heads, '{}') LOOP
        PERFORM 1 FROM drover.groups WHERE queue = q AND name = gname AND head = ANY (ids) FOR UPDATE;
        IF FOUND THEN
            PERFORM drover.group_advance(q, gname);
        END IF;
    END LOOP;
    WITH freed AS (
        DELETE FROM drover.limit_holders WHERE job = ANY (ids) RETURNING key
    ), unstarted AS (
        DELETE FROM drover.limit_pending WHERE job = ANY (ids) RETURNING key
    )
    INSERT INTO drover.limit_wakes (key)
    SELECT key FROM freed UNION SELECT key FROM unstarted;
    RETURN cardinality(ids);
END
$$;

-- Forgets up to 1000 keys whose rate window is over (or that have none), with no job still to
-- start in it, and that wait for no time: a fresh window is what a missing row means. Keys whose
-- row or lock another session holds are left for the next call. Returns how many it forgot; the
-- master calls it again while it forgets a full batch (Broker::purge_limits).
CREATE FUNCTION drover.limit_purge() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    DELETE FROM drover.limit_keys
    WHERE key = ANY (ARRAY(
        SELECT key FROM drover.limit_keys
        WHERE (ends_at < clock_timestamp() OR ends_at IS NULL) AND wake_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM drover.limit_pending AS p WHERE p.key = limit_keys.key)
        ORDER BY ends_at NULLS LAST LIMIT 1000 FOR UPDATE SKIP LOCKED))
      AND wake_at IS NULL
      AND pg_try_advisory_xact_lock(x'646c696d'::int, hashtext(key));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Fair share between the keys (tenants) of a fair queue (docs/limits.md, "Fair share"): its
-- claim takes jobs in the order of a tag given at enqueue — start-time fair queueing — instead of
-- their due time. A job's tag is the greater of its key's next tag and the queue's virtual time
-- (the smallest tag still waiting: where service is now), and the key's next tag moves one step
-- past it (a weight of w makes the step 1/w). So a key with 100,000 jobs waiting has tags far
-- ahead, and a key that just arrived is placed where service is, in front of that backlog: the
-- queue's workers take the keys in turn. Which queues are fair is the masters' configuration
-- (`fair` in config/drover.php); the claim of a fair queue is queries/claim_fair.sql.

-- The job's tag; NULL outside a fair queue (and for a job enqueued untagged: served after the
-- tagged ones, see claim_fair.sql).
ALTER TABLE drover.jobs ADD COLUMN fair_tag float8;

-- The fair claim's order. Partial: a job outside a fair queue writes no entry.
CREATE INDEX jobs_fair ON drover.jobs (queue, priority DESC, fair_tag, id)
    WHERE lease_token IS NULL AND fair_tag IS NOT NULL;

-- Each key's next tag. A row behind the queue's virtual time means nothing (a job of that key
-- would be tagged at the virtual time anyway) and is purged (drover.fair_purge): a million
-- tenants leave the table as small as the ones with jobs waiting. An enqueue holds its key's
-- row until its transaction ends: dispatches of one key are tagged in commit order, and wait
-- for one another as an ordered group's do.
CREATE TABLE drover.fair_keys (
    queue    text   NOT NULL,
    key      text   NOT NULL CHECK (length(key) <= 255),
    next_tag float8 NOT NULL,
    PRIMARY KEY (queue, key)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);
CREATE INDEX fair_keys_next ON drover.fair_keys (queue, next_tag);

-- Queue q's virtual time: the first tag in its claim's order still waiting; when none waits, the
-- furthest next tag of its keys (every key has caught up); 0 for a queue never used.
CREATE FUNCTION drover.fair_time(q text) RETURNS float8 LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT fair_tag FROM drover.jobs
         WHERE queue = q AND lease_token IS NULL AND fair_tag IS NOT NULL
         ORDER BY priority DESC, fair_tag, id LIMIT 1),
        (SELECT next_tag FROM drover.fair_keys WHERE queue = q ORDER BY next_tag DESC LIMIT 1),
        0)
$$;

-- The tag of a job of key k on fair queue q, of weight w; moves the key's next tag on.
CREATE FUNCTION drover.fair_tag(q text, k text, w float8) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    v float8 := drover.fair_time(q);
    step float8;
    t float8;
BEGIN
    IF k IS NULL OR length(k) > 255 OR w IS NULL OR NOT (w > 0 AND w <= 1000) THEN
        RAISE EXCEPTION 'drover: a fair key is at most 255 characters and a weight above 0 and at most 1000 (got % characters, weight %)',
            length(k), w USING ERRCODE = '22023';
    END IF;
    step := 1.0 / w;
    INSERT INTO drover.fair_keys AS f (queue, key, next_tag) VALUES (q, k, v + step)
    ON CONFLICT (queue, key) DO UPDATE SET next_tag = greatest(f.next_tag, v) + step
    RETURNING f.next_tag - step INTO t;
    RETURN t;
END
$$;

-- As drover.fair_tag, for the broker's admission, which never waits for a producer: when a
-- producer's transaction holds the key's row (or inserts it), the job is tagged at the virtual
-- time and the key's next tag stays as it is.
CREATE FUNCTION drover.fair_tag_nowait(q text, k text, w float8) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    v float8 := drover.fair_time(q);
    f drover.fair_keys;
BEGIN
    SELECT * INTO f FROM drover.fair_keys WHERE queue = q AND key = k FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN v;
    END IF;
    UPDATE drover.fair_keys SET next_tag = greatest(f.next_tag, v) + 1.0 / w WHERE queue = q AND key = k;
    RETURN greatest(f.next_tag, v);
END
$$;

-- Enqueues one job of key k (weight w) on fair queue q, deduplicated as drover.enqueue does when
-- p_dedup is given; returns its id, or NULL when its deduplication id dropped it.
CREATE FUNCTION drover.enqueue_fair(
    p_queue text, p_payload text, p_delay_secs float8, p_key text, p_weight float8,
    p_dedup text, p_dedup_window_secs float8, p_priority smallint, p_max_attempts integer
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint := nextval('drover.jobs_id_seq');
BEGIN
    IF p_dedup IS NOT NULL AND NOT drover.dedup_reserve(p_queue, p_dedup, v_id, p_dedup_window_secs) THEN
        RETURN NULL;
    END IF;
    INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, fair_tag)
    VALUES (v_id, p_queue, p_priority, p_payload, p_max_attempts,
            clock_timestamp() + make_interval(secs => greatest(p_delay_secs, 0)),
            drover.fair_tag(p_queue, p_key, p_weight));
    RETURN v_id;
END
$$;

-- Forgets up to 1000 keys of fair queues whose next tag is behind their queue's virtual time
-- (the furthest one of a queue with nothing waiting is kept: it is that time). Rows a producer
-- holds are left for the next call. Returns how many it forgot.
CREATE FUNCTION drover.fair_purge() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    DELETE FROM drover.fair_keys AS f
    WHERE (f.queue, f.key) IN (
        SELECT g.queue, g.key FROM drover.fair_keys AS g
        WHERE g.next_tag < drover.fair_time(g.queue)
        LIMIT 1000
        FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- The functions an application's session runs — an enqueue (drover.enqueue again: its
-- replacement above dropped the settings migration 0006 gave it), queue:clear (and the admission its
-- deletes trigger) — and the passes and purges the master runs on its side connection carry the job connection's plan settings as drover.enqueue does
-- (migrations/0006_pin_plans.sql): their statements keep their index plans however the tables
-- grew since a plan was cached, and nothing is left in the application's session. And no JIT
-- (broker/queries/pin_plans.sql): a plan that keeps a node those settings name costs past
-- `jit_above_cost`, and was compiled on every run (a pass: 81 ms with, 11 ms without).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'drover.enqueue_limited(text, text, float8, text[], integer[], integer[], text, float8, smallint, integer, text, float8, text, boolean)',
        'drover.enqueue(text, text, float8, text, boolean, text, float8, smallint, integer)',
        'drover.enqueue_fair(text, text, float8, text, float8, text, float8, smallint, integer)',
        'drover.limit_clear(text)', 'drover.limit_pass()', 'drover.limit_purge()',
        'drover.fair_purge()', 'drover.limit_slots_freed()']::regprocedure[] LOOP
        EXECUTE format('ALTER FUNCTION %s SET jit = off SET enable_seqscan = off SET enable_bitmapscan = off '
                       'SET enable_sort = off SET enable_hashjoin = off SET enable_mergejoin = off', f);
    END LOOP;
END
$$;

-- Jobs moved into drover.jobs keeping the available_at they were dispatched at — a group's next
-- job (drover.group_advance), a job admitted under its limits (drover.limit_pass) — for the claim
-- from a cursor (broker/queries/claim_from.sql, docs/decisions/0010-a-held-snapshot.md): they
-- may land before its floor, and are found here at once, without a walk past the dead entries
-- jobs_ready keeps while a snapshot is held. One more index entry per grouped or limited job.
CREATE INDEX jobs_moved_in ON drover.jobs (queue, priority DESC, available_at, id)
    WHERE lease_token IS NULL AND (grp IS NOT NULL OR limited OR rated);
