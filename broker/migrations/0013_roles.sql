-- oldest reader: 10
-- (Expand-only for every master since 0.2.0 (schema 10), the oldest release that reads this line:
-- a master calls none of the three enqueue functions, whose rights change here, and a 0.2.0
-- master compacts with REINDEX as it did, as the schema's owner it runs as; the new functions are
-- not called by it. The rolling upgrade from 0.2.0 runs 0.2.0 masters on it, started after it was
-- applied (bench/results/rolling_upgrade.md). This line said 12 until issue 57, which refused a
-- 0.2.0 master on any database this migration reached: the migrators lower a recorded 12 to what
-- this line says (broker/src/migrate.rs, stale_readers; Drover\Schema\SchemaMigrator). A producer
-- of any release whose role is not the schema's owner needs drover_producer from here on.)
-- Least-privilege roles (docs/postgres-roles.md). The roles themselves, and their grants, are not
-- a migration: roles belong to the cluster, and `drover migrate --create-roles` (or a DBA, from
-- `drover migrate --print-roles`) creates them. This migration makes the schema fit them.
--
-- A producer may only enqueue: it holds EXECUTE on the three entry points and INSERT on a few
-- columns of drover.jobs, never the tables a grouped, deduplicated, limited or fair job passes
-- through (groups, dedup, limit_*, fair_keys). So the entry points run with their owner's rights,
-- with a search path nobody else can put objects on (every name inside is schema-qualified), and
-- only the roles granted them may call them (not PUBLIC, which includes a read-only dashboard's
-- role). A later migration that replaces one of them (CREATE OR REPLACE resets these attributes)
-- must say them again; tests/roles.rs checks every SECURITY DEFINER function's search path.
ALTER FUNCTION drover.enqueue SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION drover.enqueue_limited SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION drover.enqueue_fair SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION drover.enqueue, drover.enqueue_limited, drover.enqueue_fair FROM PUBLIC;

-- Forgetting a failed job that holds its ordered group lets the group go on (Laravel's
-- queue:forget, queue:flush, queue:prune-failed, through the application's failer and so its
-- role): which uuids hold groups, and the release of one — never of all (forget_held(NULL)) —
-- with the owner's rights, for a producer that may not read or change drover.groups.
CREATE FUNCTION drover.held_uuids() RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT DISTINCT held_uuid FROM drover.groups WHERE head IS NULL AND held_uuid IS NOT NULL
$$;
CREATE FUNCTION drover.release_held(p_uuid text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_uuid IS NULL THEN
        RAISE EXCEPTION 'drover.release_held needs the uuid of the failed job that holds its group'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN drover.forget_held(p_uuid);
END $$;
REVOKE EXECUTE ON FUNCTION drover.held_uuids(), drover.release_held(text) FROM PUBLIC;

-- Compaction (broker/src/compact.rs) rebuilds the indexes of a drained table, and REINDEX needs
-- the table's owner, which the master's role is not. This function is the one REINDEX it may
-- run: one of the three tables compaction looks after, only while it is empty, under a SHARE lock
-- taken within 200 ms or not at all ('busy', as when REINDEX itself waits longer for an index),
-- emptiness checked again under that lock so a backlog that arrived meanwhile is never rebuilt
-- over ('not_empty'). Only drover_master (and the owner) may execute it.
CREATE FUNCTION drover.reindex_drained(t regclass) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '200ms' AS $$
DECLARE
    empty boolean;
BEGIN
    IF t NOT IN ('drover.jobs'::regclass, 'drover.limit_waiting'::regclass, 'drover.group_jobs'::regclass) THEN
        RAISE EXCEPTION 'drover.reindex_drained compacts drover.jobs, drover.limit_waiting and drover.group_jobs only, not %', t
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        EXECUTE format('LOCK TABLE %s IN SHARE MODE', t);
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s)', t) INTO empty;
        IF NOT empty THEN
            RETURN 'not_empty';
        END IF;
        EXECUTE format('REINDEX TABLE %s', t);
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'busy';
    END;
    RETURN 'compacted';
END $$;
REVOKE EXECUTE ON FUNCTION drover.reindex_drained(regclass) FROM PUBLIC;
