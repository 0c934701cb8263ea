-- What this session's role lacks of the rights a master needs on drover's schema (the rights
-- grants.sql gives drover_master, broker/roles/): one row per missing right, named as a GRANT
-- would name it. No row: the master may run. Read at start, before the schema check (a role that
-- may not read drover's schema is told so by name) and after it; no row while there is no schema.
SELECT what FROM (
    SELECT 1 AS k, 'USAGE on schema drover' AS what
    WHERE CASE WHEN to_regnamespace('drover') IS NULL THEN false
        ELSE NOT has_schema_privilege('drover', 'USAGE') END
    UNION ALL
    SELECT 2, p.p || ' on ' || c.oid::regclass::text
    FROM pg_class AS c
    CROSS JOIN LATERAL unnest(CASE WHEN c.relname = 'schema_migrations' THEN ARRAY['SELECT']
        ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'] END) AS p(p)
    WHERE c.relnamespace = to_regnamespace('drover') AND c.relkind IN ('r', 'p')
      AND NOT has_table_privilege(c.oid, p.p)
    UNION ALL
    SELECT 3, 'USAGE on sequence ' || c.oid::regclass::text
    FROM pg_class AS c
    WHERE c.relnamespace = to_regnamespace('drover') AND c.relkind = 'S'
      -- (guarded: the planner may test a row before its relkind)
      AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege(c.oid, 'USAGE') ELSE false END
    UNION ALL
    SELECT 4, 'EXECUTE on function ' || f.oid::regprocedure::text
    FROM pg_proc AS f
    WHERE f.pronamespace = to_regnamespace('drover') AND NOT has_function_privilege(f.oid, 'EXECUTE')
) AS missing
ORDER BY k, what
