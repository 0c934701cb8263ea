-- oldest reader: 7
-- (Expand-only: a nullable column with no default, an index, tables, functions and a trigger,
-- none of which a binary of schema 7-10 reads or needs. A job dispatched with a concurrency key
-- waits until a master of schema 11 admits it, or a job of its key settles. docs/upgrading.md,
-- "Schema".)
--
-- Concurrency limits (docs/limits.md, docs/decisions/0009): at most N jobs of a key in
-- drover.jobs at once, across every queue, pool and master of the database — Laravel's
-- `WithoutOverlapping` (a key of cap 1, under its lock key) and drover's own `LimitConcurrency`.
--
-- A slot is held by the row's presence in drover.jobs, from its admission until it leaves for
-- good (completed, deleted, failed for good): a release, a take-back from a dead worker and the
-- reap of an expired lease keep the row, and with it the slot. So the count is a count of rows:
-- a worker killed, a master frozen or partitioned, a `pg_ctl restart`, cannot leak a slot nor
-- let N + 1 run. The jobs of a full key wait in drover.slot_waiting, which no claim reads: the
-- claim stays one ordered scan of jobs_ready (docs/decisions/0003), and a million jobs waiting
-- on a held key cost it nothing.
--
-- Who admits: producers never lock anything of a key (an application's transaction may stay
-- open for long; nothing of the broker may wait for it). A producer parks the job and leaves a
-- note (drover.slot_wakes), whose NOTIFY drover_slots wakes the masters, which admit under the
-- key's lock (drover.slot_admit_woken). A settle that frees a slot admits the next job in its
-- own transaction when it gets the key's lock at once, else leaves a note too: whoever holds
-- the lock could not see this settle's delete, so a pass after its commit admits.

-- The job's concurrency key, NULL for an unlimited job. Set only by admission.
ALTER TABLE drover.jobs ADD COLUMN slot_key text;

-- The jobs of a key holding its slots: one probe counts them.
CREATE INDEX jobs_slot_key ON drover.jobs (slot_key) WHERE slot_key IS NOT NULL;

-- Jobs whose key was full when they were enqueued, in the order they were. The cap is the
-- one the job was dispatched with; a key's cap is the one of its latest dispatch still waiting
-- (a deploy that changes a limit applies it from its first dispatch on).
CREATE TABLE drover.slot_waiting (
    -- Taken from drover.jobs' own sequence at enqueue and kept when the job is admitted.
    id           bigint      PRIMARY KEY,
    slot_key     text        NOT NULL CHECK (length(slot_key) BETWEEN 1 AND 255),
    slot_cap     integer     NOT NULL CHECK (slot_cap >= 1),
    queue        text        NOT NULL,
    priority     smallint    NOT NULL DEFAULT 0,
    payload      text        NOT NULL,
    max_attempts integer     CHECK (max_attempts IS NULL OR max_attempts > 0),
    -- By the database's clock at enqueue: an admitted job still waits out its delay.
    available_at timestamptz NOT NULL,
    created_at   timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02);
-- A key's waiting jobs in order: the next to admit, and the latest dispatch's cap.
CREATE INDEX slot_waiting_key ON drover.slot_waiting (slot_key, id);
-- The jobs waiting per queue, for status and `queue:clear`.
CREATE INDEX slot_waiting_queue ON drover.slot_waiting (queue, available_at);

-- Keys that may have room for a waiting job: written by an enqueue, and by a settle that could
-- not take the key's lock; consumed by drover.slot_admit_woken. Insert-only for writers, so no
-- writer ever waits for another.
CREATE TABLE drover.slot_wakes (
    slot_key text NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);

-- A note wakes the masters on commit (dropped on rollback, as the enqueue it comes with).
CREATE FUNCTION drover.notify_slots() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_slots', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER slot_wakes_notify AFTER INSERT ON drover.slot_wakes
    FOR EACH STATEMENT EXECUTE FUNCTION drover.notify_slots();

-- The key's advisory lock (the two-key form, class 0x64736c74 "dslt"): whoever holds it may count
-- the key's jobs and admit; it is held until that transaction ends.
CREATE FUNCTION drover.slot_lock_id(k text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT hashtext(k)
$$;

-- Moves key k's waiting jobs into drover.jobs while it has room; returns how many. The caller
-- holds the key's lock. Each statement of this VOLATILE function takes its own snapshot, so the
-- count sees every admission committed before the lock was taken, and the caller's own deletes.
CREATE FUNCTION drover.slot_admit_locked(k text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    cap integer;
    held bigint;
    n integer;
BEGIN
    SELECT slot_cap INTO cap FROM drover.slot_waiting WHERE slot_key = k ORDER BY id DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO held FROM drover.jobs WHERE slot_key = k;
    IF held >= cap THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM drover.slot_waiting AS w
        WHERE w.id = ANY (ARRAY(
            SELECT id FROM drover.slot_waiting WHERE slot_key = k ORDER BY id LIMIT cap - held))
        RETURNING w.*
    )
    INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, created_at, slot_key)
    SELECT id, queue, priority, payload, max_attempts, available_at, created_at, slot_key FROM moved;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Admits the waiting jobs of every noted key that has room; returns how many. The notes are
-- taken (SKIP LOCKED: a pass running beside it keeps its own) and the keys locked one by one in
-- their order, waiting for each: a lock is only ever held by a pass or a settle, never by a
-- producer, and a settle never waits for one (it tries), so the wait is short and two passes
-- cannot deadlock. Cheap when nothing is noted: one probe of an empty table.
CREATE FUNCTION drover.slot_admit_woken() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    keys text[];
    k text;
    n integer := 0;
BEGIN
    WITH taken AS (
        DELETE FROM drover.slot_wakes
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM drover.slot_wakes FOR UPDATE SKIP LOCKED))
        RETURNING slot_key
    )
    SELECT array_agg(DISTINCT slot_key ORDER BY slot_key) INTO keys FROM taken;
    IF keys IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH k IN ARRAY keys LOOP
        PERFORM pg_advisory_xact_lock(x'64736c74'::int, drover.slot_lock_id(k));
        n := n + drover.slot_admit_locked(k);
    END LOOP;
    RETURN n;
END
$$;

-- A job of a key left drover.jobs (completed, deleted, failed for good, by whatever path: the
-- master's settles, the reap, queue:clear): its slot is free. The next waiting job is admitted
-- in this transaction if the key's lock is free now; else a note asks for a pass after commit.
CREATE FUNCTION drover.slot_freed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_try_advisory_xact_lock(x'64736c74'::int, drover.slot_lock_id(OLD.slot_key)) THEN
        PERFORM drover.slot_admit_locked(OLD.slot_key);
    ELSE
        INSERT INTO drover.slot_wakes (slot_key) VALUES (OLD.slot_key);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_slot_freed AFTER DELETE ON drover.jobs
    FOR EACH ROW WHEN (OLD.slot_key IS NOT NULL) EXECUTE FUNCTION drover.slot_freed();

-- Enqueues one job under a concurrency key of cap p_cap, deduplicated as drover.enqueue does
-- when p_dedup is given; returns its id, or NULL when its deduplication id dropped it. The job
-- waits in drover.slot_waiting until a master or a settle admits it; it takes no lock of its key.
CREATE FUNCTION drover.enqueue_limited(
    p_queue text, p_payload text, p_delay_secs float8, p_key text, p_cap integer,
    p_dedup text, p_dedup_window_secs float8, p_priority smallint, p_max_attempts integer
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint := nextval('drover.jobs_id_seq');
BEGIN
    IF p_dedup IS NOT NULL THEN
        INSERT INTO drover.dedup AS d (queue, id, job, expires_at)
        VALUES (p_queue, p_dedup, v_id, clock_timestamp() + make_interval(secs => p_dedup_window_secs))
        ON CONFLICT (queue, id) DO UPDATE SET job = excluded.job, expires_at = excluded.expires_at
            WHERE d.expires_at <= clock_timestamp();
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    END IF;
    INSERT INTO drover.slot_waiting (id, slot_key, slot_cap, queue, priority, payload, max_attempts, available_at, created_at)
    VALUES (v_id, p_key, p_cap, p_queue, p_priority, p_payload, p_max_attempts,
            clock_timestamp() + make_interval(secs => greatest(p_delay_secs, 0)), clock_timestamp());
    INSERT INTO drover.slot_wakes (slot_key) VALUES (p_key);
    RETURN v_id;
END
$$;
