-- drover's four group roles (docs/postgres-roles.md): NOLOGIN, so nobody connects as one; a
-- login role is given the one it needs (`GRANT drover_master TO queue_master`). Roles belong to
-- the whole cluster, so this creates each only if it is missing, and needs CREATEROLE (or a
-- superuser). Then grants.sql gives them their rights on drover's schema in this database.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['drover_master', 'drover_producer', 'drover_reader', 'drover_operator'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
    -- The dashboard's actions look before they act.
    IF NOT pg_catalog.pg_has_role('drover_operator', 'drover_reader', 'MEMBER') THEN
        GRANT drover_reader TO drover_operator;
    END IF;
    -- Without it PostgreSQL hides other roles' snapshots, and `drover status` may not see the
    -- one that holds the vacuum horizon back (docs/operations.md). Optional: granting it needs a
    -- superuser, or a role with ADMIN on pg_read_all_stats.
    IF NOT pg_catalog.pg_has_role('drover_master', 'pg_read_all_stats', 'MEMBER') THEN
        BEGIN
            GRANT pg_read_all_stats TO drover_master;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'drover: drover_master was not given pg_read_all_stats (this role may not grant it): drover status will not see other roles'' snapshots. A superuser can: GRANT pg_read_all_stats TO drover_master';
        END;
    END IF;
END $$;
