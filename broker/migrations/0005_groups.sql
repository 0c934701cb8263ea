-- Ordered groups and deduplication (Laravel's onGroup / messageGroup and withDeduplicator /
-- deduplicationId; docs/ordered-groups.md).
--
-- A group (queue, name) runs one job at a time, in commit order of the enqueues. Only its head —
-- the oldest job not yet settled for good — is in drover.jobs, where the claim sees it like any
-- other job; the jobs behind it wait in drover.group_jobs, where no claim looks. When the head
-- leaves drover.jobs (completed, deleted, failed for good), the trigger below moves the next one
-- in. So the claim's one index scan never walks past a blocked job, the head is decided at
-- enqueue and at settle, and a released, retried, timed-out or taken-back head stays the head
-- (it never left drover.jobs). A group costs nothing until used: its row is made by its first
-- enqueue and deleted with its last settle.

-- The job's group, NULL for an ungrouped job; and whether its failure for good holds the group.
ALTER TABLE drover.jobs ADD COLUMN grp text, ADD COLUMN grp_hold boolean;

CREATE TABLE drover.groups (
    queue      text        NOT NULL,
    name       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    -- The group's job in drover.jobs; NULL only while the group is held.
    head       bigint,
    -- The last position given to a job of the group. An enqueue holds this row's lock until its
    -- transaction ends, so positions follow commit order, the order every master agrees on.
    tail       bigint      NOT NULL DEFAULT 0,
    -- Jobs waiting behind the head (in drover.group_jobs), for status.
    waiting    bigint      NOT NULL DEFAULT 0,
    -- When the head became the head: the age of the group's wait.
    head_since timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- A job that failed for good under `hold`: the group waits until it is retried (an enqueue of
    -- the same Laravel uuid goes first) or forgotten (drover.forget_held). held_uuid is the
    -- payload's uuid, or the job's id as text when the payload has none.
    held_by    bigint,
    held_uuid  text,
    held_at    timestamptz,
    held_error text,
    PRIMARY KEY (queue, name),
    CHECK (head IS NOT NULL OR held_by IS NOT NULL)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02);

-- Held groups, oldest first, for status and the dashboard (broker/queries/held_groups.sql).
CREATE INDEX groups_held ON drover.groups (held_at) WHERE head IS NULL;

CREATE TABLE drover.group_jobs (
    queue        text        NOT NULL,
    grp          text        NOT NULL,
    position     bigint      NOT NULL,
    -- Taken from drover.jobs' own sequence at enqueue and kept when the job moves there.
    id           bigint      NOT NULL,
    priority     smallint    NOT NULL DEFAULT 0,
    payload      text        NOT NULL,
    max_attempts integer     CHECK (max_attempts IS NULL OR max_attempts > 0),
    -- By the database's clock at enqueue: a delayed job waits its delay from its dispatch, and
    -- holds the jobs behind it while it waits.
    available_at timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    grp_hold     boolean,
    PRIMARY KEY (queue, grp, position)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02);
-- A waiting job by its id, for the dashboard's job page.
CREATE UNIQUE INDEX group_jobs_id ON drover.group_jobs (id);
-- The job that has waited longest behind its group's head, per queue, for long-wait alerts
-- (broker/queries/oldest_group_wait.sql).
CREATE INDEX group_jobs_due ON drover.group_jobs (queue, available_at);

-- Deduplication ids seen per queue, each until its window ends (counted from the first enqueue,
-- kept after the job completed, as SQS FIFO does). Written in the enqueuing transaction: a
-- rolled-back dispatch reserves nothing, and a concurrent one with the same id waits for it.
CREATE TABLE drover.dedup (
    queue      text        NOT NULL,
    id         text        NOT NULL CHECK (length(id) BETWEEN 1 AND 128),
    job        bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (queue, id)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);
-- The master's retention deletes expired ids in batches (broker/queries/purge_dedup.sql).
CREATE INDEX dedup_expires_at ON drover.dedup (expires_at);

-- A Laravel payload's uuid, without parsing it as JSON (a payload that is not JSON must not make a
-- settle fail): the one that a retry of a held job carries again.
CREATE FUNCTION drover.payload_uuid(payload text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT substring(payload FROM '"uuid":"([0-9a-fA-F-]{36})"')
$$;

-- The next job of a group becomes its head (moved from drover.group_jobs into drover.jobs);
-- a group with none left is deleted. The caller holds the group's row lock.
CREATE FUNCTION drover.group_advance(p_queue text, p_name text) RETURNS void LANGUAGE plpgsql AS $$
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
    INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, created_at, grp, grp_hold)
    VALUES (n.id, n.queue, n.priority, n.payload, n.max_attempts, n.available_at, n.created_at, n.grp, n.grp_hold);
    UPDATE drover.groups
    SET head = n.id, waiting = greatest(waiting - 1, 0), head_since = clock_timestamp(),
        held_by = NULL, held_uuid = NULL, held_at = NULL, held_error = NULL
    WHERE queue = p_queue AND name = p_name;
END
$$;

-- A head that failed for good under `hold`: written by the statement that failed it
-- (ack_failed.sql, fail.sql, reap_expired.sql) in a CTE — an INSERT into a table of its
-- own, which never waits for a lock — and read by the trigger below, which runs at the end of
-- that statement and sees it.
CREATE TABLE drover.group_failures (
    job   bigint      PRIMARY KEY,
    uuid  text        NOT NULL,
    error text        NOT NULL,
    at    timestamptz NOT NULL
);

-- Groups whose head left drover.jobs while a producer held the group's row lock (its enqueue,
-- in a transaction not yet committed). The settle does not wait for an application's
-- transaction: it notes the group here and goes on; drover.groups_catch_up() finishes the move
-- once the lock is free (the producer's own enqueue, each settle batch, each reap tick).
CREATE TABLE drover.group_pending (
    queue text NOT NULL,
    name  text NOT NULL,
    PRIMARY KEY (queue, name)
);

-- The group's head (job p_job) has left drover.jobs: the group is held if the job failed under
-- hold (drover.group_failures), else its next job becomes the head. The caller holds the row
-- lock of g. A job that was not the head changes nothing.
CREATE FUNCTION drover.group_head_gone(g drover.groups, p_job bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    f drover.group_failures;
BEGIN
    DELETE FROM drover.group_failures WHERE job = p_job RETURNING * INTO f;
    IF g.head IS DISTINCT FROM p_job THEN
        RETURN;
    END IF;
    IF f.job IS NOT NULL THEN
        UPDATE drover.groups
        SET head = NULL, held_by = f.job, held_uuid = f.uuid, held_at = f.at, held_error = f.error
        WHERE queue = g.queue AND name = g.name;
        RETURN;
    END IF;
    PERFORM drover.group_advance(g.queue, g.name);
END
$$;

-- A grouped job left drover.jobs: completed, deleted or failed for good, by whatever path (the
-- master's settles, the reap of an expired lease, queue:clear). If it was its group's head, the
-- group goes on or is held (drover.group_head_gone). The group's row is locked with SKIP LOCKED:
-- when a producer holds it, the group is noted in drover.group_pending instead, so that no settle
-- ever waits for an application's transaction.
CREATE FUNCTION drover.group_head_left() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    g drover.groups;
BEGIN
    SELECT * INTO g FROM drover.groups WHERE queue = OLD.queue AND name = OLD.grp
    FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        PERFORM drover.group_head_gone(g, OLD.id);
    ELSIF EXISTS (SELECT 1 FROM drover.groups WHERE queue = OLD.queue AND name = OLD.grp) THEN
        INSERT INTO drover.group_pending (queue, name) VALUES (OLD.queue, OLD.grp)
        ON CONFLICT DO NOTHING;
    ELSE
        DELETE FROM drover.group_failures WHERE job = OLD.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_group_head_left AFTER DELETE ON drover.jobs
    FOR EACH ROW WHEN (OLD.grp IS NOT NULL) EXECUTE FUNCTION drover.group_head_left();

-- Finishes the moves drover.group_head_left deferred: for each noted group whose lock is free now,
-- if its head is no longer in drover.jobs, the group goes on or is held. Groups still locked stay
-- noted for the next call. Returns how many it finished. Cheap when nothing is noted.
CREATE FUNCTION drover.groups_catch_up() RETURNS integer LANGUAGE plpgsql AS $$
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
        ELSIF g.head IS NOT NULL AND NOT EXISTS (SELECT 1 FROM drover.jobs WHERE id = g.head) THEN
            PERFORM drover.group_head_gone(g, g.head);
            n := n + 1;
        END IF;
        DELETE FROM drover.group_pending WHERE queue = p.queue AND name = p.name;
    END LOOP;
    RETURN n;
END
$$;

-- Enqueues one job that has a group, a deduplication id or both (an ungrouped job without one
-- is a plain INSERT into drover.jobs, as before). Returns its id, or NULL when the deduplication
-- id was already enqueued on this queue within its window (the job is dropped, as SQS drops it).
-- available_at and the window are by the database's clock.
CREATE FUNCTION drover.enqueue(
    p_queue text, p_payload text, p_delay_secs float8, p_group text, p_hold boolean,
    p_dedup text, p_dedup_window_secs float8, p_priority smallint, p_max_attempts integer
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint := nextval('drover.jobs_id_seq');
    v_at timestamptz := clock_timestamp() + make_interval(secs => greatest(p_delay_secs, 0));
    g drover.groups;
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
    IF p_group IS NOT NULL THEN
        LOOP
            INSERT INTO drover.groups (queue, name, head) VALUES (p_queue, p_group, v_id)
            ON CONFLICT (queue, name) DO NOTHING;
            EXIT WHEN FOUND;
            SELECT * INTO g FROM drover.groups WHERE queue = p_queue AND name = p_group FOR UPDATE;
            IF FOUND AND g.head IS NOT NULL
               AND EXISTS (SELECT 1 FROM drover.group_pending WHERE queue = p_queue AND name = p_group)
               AND NOT EXISTS (SELECT 1 FROM drover.jobs WHERE id = g.head) THEN
                -- Its head settled while another producer held the lock: finish that move first.
                PERFORM drover.group_head_gone(g, g.head);
                DELETE FROM drover.group_pending WHERE queue = p_queue AND name = p_group;
                CONTINUE;
            END IF;
            IF FOUND THEN
                IF g.head IS NULL AND g.held_uuid = drover.payload_uuid(p_payload) THEN
                    -- The retry of the job that holds the group: it goes first, and the group goes on.
                    UPDATE drover.groups
                    SET head = v_id, head_since = clock_timestamp(),
                        held_by = NULL, held_uuid = NULL, held_at = NULL, held_error = NULL
                    WHERE queue = p_queue AND name = p_group;
                    EXIT;
                END IF;
                UPDATE drover.groups SET tail = tail + 1, waiting = waiting + 1
                WHERE queue = p_queue AND name = p_group
                RETURNING * INTO g;
                INSERT INTO drover.group_jobs (queue, grp, position, id, priority, payload, max_attempts, available_at, created_at, grp_hold)
                VALUES (p_queue, p_group, g.tail, v_id, p_priority, p_payload, p_max_attempts, v_at, clock_timestamp(), p_hold);
                RETURN v_id;
            END IF;
            -- The group's last job settled between the two statements: try again.
        END LOOP;
    END IF;
    INSERT INTO drover.jobs (id, queue, priority, payload, max_attempts, available_at, grp, grp_hold)
    VALUES (v_id, p_queue, p_priority, p_payload, p_max_attempts, v_at, p_group, p_hold);
    RETURN v_id;
END
$$;

-- A held group whose holding job was forgotten (queue:forget, the dashboard; NULL for all of them:
-- queue:flush) goes on. The holding job is named by its Laravel uuid, or by its id for a payload
-- that has none. Returns how many groups it let go.
CREATE FUNCTION drover.forget_held(p_uuid text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    g record;
    n integer := 0;
BEGIN
    FOR g IN SELECT queue, name FROM drover.groups
             WHERE head IS NULL AND (p_uuid IS NULL OR held_uuid = p_uuid)
             ORDER BY queue, name FOR UPDATE LOOP
        PERFORM drover.group_advance(g.queue, g.name);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;
