-- oldest reader: 7
-- (A binary of schema 7, drover 0.1, runs correctly with this applied: it ignores the new columns
-- and functions. docs/upgrading.md, "Schema".)
-- A queue pause holds from the moment it returns, for every master of the database
-- (docs/laravel-compatibility.md, "Pausing a queue"):
--   1. every claim checks the pause itself (claim.sql, through drover.queue_paused), so a pause
--      committed before a claim began is never crossed by it, whatever the master knows;
--   2. a pause or a resume is signalled to every master at once (NOTIFY drover_pauses);
--   3. whoever paused waits until every master that may still hand out jobs has confirmed the
--      pause (drover.pause_unconfirmed): it told its workers to give back the prefetched jobs of
--      that queue they have not started (each reads that before it starts another job), and no
--      claim it began before it knew of the pause hands out more.
-- One definition of each rule, here, for the binary and the Laravel package alike.

-- Each pause is a version: a queue paused again (pauseFor again, or a pause over a pauseFor) is
-- a new pause, confirmed anew.
CREATE SEQUENCE drover.pause_versions;
ALTER TABLE drover.paused_queues
    ADD COLUMN version bigint NOT NULL DEFAULT nextval('drover.pause_versions');

-- What a master confirmed: the versions of the pauses it holds. And its lease, because a master
-- that stopped answering may still hand out the jobs it holds until its leases end: it is waited
-- for until it has been silent for two of them (drover.pause_unconfirmed).
ALTER TABLE drover.nodes
    ADD COLUMN lease_secs float8 NOT NULL DEFAULT 30 CHECK (lease_secs > 0),
    ADD COLUMN pauses_held bigint[] NOT NULL DEFAULT '{}';

-- The drover release of each master ('0.2.0'); NULL for a master of 0.1, which does not write it.
-- Such a master never confirms a pause: a pause does not wait for it (drover.pause_unconfirmed);
-- it honours a pause by reading drover.paused_queues each second, as it always did
-- (docs/upgrading.md). Its reap ignores an outage grace too (migrations/0009_outage_grace.sql).
ALTER TABLE drover.nodes ADD COLUMN release text;

-- Whether queue q is paused at `at` (the database's now unless a test's clock gives a time).
-- The claim's test, run once per claim statement; a pause with a TTL (pauseFor) ends by itself
-- at `until`. PL/pgSQL because it keeps its plan for the session: a SQL function that is not
-- inlined (a subquery never is) is planned anew at every call, 34 µs against 5 µs.
CREATE FUNCTION drover.queue_paused(q text, at timestamptz DEFAULT now()) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM drover.paused_queues AS p
        WHERE p.queue = q AND (p.until IS NULL OR p.until > at));
END
$$;

-- The queues paused at `at`, each with the seconds its pause has left (NULL: until resumed) and
-- its version: what the masters, drover:status and the dashboard read.
CREATE FUNCTION drover.queues_paused(at timestamptz DEFAULT now())
RETURNS TABLE (queue text, left_secs float8, version bigint)
LANGUAGE sql STABLE AS $$
    SELECT p.queue, extract(epoch FROM p.until - at)::float8, p.version
    FROM drover.paused_queues AS p
    WHERE drover.queue_paused(p.queue, at)
    ORDER BY p.queue
$$;

-- Pauses queue q until resumed (secs NULL) or for secs seconds, by the database's clock.
-- Returns the pause's version, or NULL when secs is under a millisecond: a pause already over is
-- a resume, as Laravel's cache forgets a key whose TTL has passed. A pause longer than a century
-- is refused by name (pause until resumed instead).
CREATE FUNCTION drover.pause_queue(q text, secs float8 DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v bigint;
BEGIN
    IF q IS NULL OR q = '' THEN
        RAISE EXCEPTION 'drover.pause_queue: name the queue to pause'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- NaN sorts above every number in PostgreSQL: tested first.
    IF secs = 'NaN'::float8 OR secs > 3153600000 THEN
        RAISE EXCEPTION 'drover.pause_queue: a pause of % seconds is longer than a century; pause the queue until it is resumed instead (no duration)', secs
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF secs < 0.001 THEN
        DELETE FROM drover.paused_queues WHERE queue = q;
        RETURN NULL;
    END IF;
    INSERT INTO drover.paused_queues AS p (queue, until)
    VALUES (q, now() + make_interval(secs => secs))
    ON CONFLICT (queue) DO UPDATE
        SET paused_at = now(), until = excluded.until, version = nextval('drover.pause_versions')
    RETURNING p.version INTO v;
    RETURN v;
END
$$;

-- Resumes queue q; true if it was paused.
CREATE FUNCTION drover.resume_queue(q text) RETURNS boolean
LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM drover.paused_queues WHERE queue = q RETURNING 1)
    SELECT count(*) > 0 FROM gone
$$;

-- The masters that have not yet confirmed the pause of q now in force, with how long each has
-- been silent and its lease: none once every master has, or when q is not paused (any more). A
-- master silent for two of its leases is not waited for: its leases ended and its lease guard
-- stopped any worker still holding one, so it can hand out nothing (docs/leases.md); one silent
-- for less than a lease still answers the database.
CREATE FUNCTION drover.pause_unconfirmed(q text)
RETURNS TABLE (node bigint, hostname text, pid integer, silent_secs float8, lease_secs float8)
LANGUAGE sql STABLE AS $$
    SELECT n.id, n.hostname, n.pid, extract(epoch FROM now() - n.heartbeat_at)::float8, n.lease_secs
    FROM drover.paused_queues AS p
    JOIN drover.nodes AS n ON NOT (p.version = ANY (n.pauses_held))
    WHERE p.queue = q AND drover.queue_paused(q)
      AND n.release IS NOT NULL
      AND n.heartbeat_at > now() - make_interval(secs => 2 * n.lease_secs)
    ORDER BY n.id
$$;

-- Wake every master when a pause is made, changed or lifted: on commit, once per statement.
CREATE FUNCTION drover.notify_pauses() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_pauses', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER paused_queues_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON drover.paused_queues
    FOR EACH STATEMENT EXECUTE FUNCTION drover.notify_pauses();
