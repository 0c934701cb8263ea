-- What holds this database's vacuum horizon back: the oldest of the snapshots and transaction
-- ids that keep VACUUM from removing the dead rows settled jobs leave (docs/decisions/0010).
-- Four kinds can: a session of this database with a snapshot or a transaction id (a report in
-- REPEATABLE READ, a pg_dump, a request idle in its transaction), a standby whose
-- hot_standby_feedback its walsender carries, a replication slot's xmin (a slot whose standby is
-- gone holds it for ever), and a prepared transaction. Sessions of other databases do not hold
-- this one's tables back (PostgreSQL 14 and later), so they are not read; this statement's own
-- session is left out. "Age" is in transaction ids, as age() counts them; `secs` is how long
-- the holder's transaction has been open, where PostgreSQL knows it (sessions and prepared
-- transactions; a walsender or a slot does not say since when); `xmin` is the transaction id it
-- holds the horizon at, which with its kind, pid and name tells one holding from the next.
-- One row, always: the oldest holder (NULLs when none), the dead tuples the statistics count in
-- drover.jobs, and whether this role sees other roles' snapshots: without pg_read_all_stats
-- (or pg_monitor, or superuser) PostgreSQL hides them, and the oldest may be missed.
WITH holders AS (
    SELECT CASE WHEN a.backend_type = 'walsender' THEN 'standby' ELSE 'session' END AS kind,
        a.pid,
        coalesce(nullif(a.application_name, ''), a.backend_type) AS name,
        a.usename::text AS role,
        a.state,
        greatest(age(a.backend_xmin), age(a.backend_xid)) AS xid_age,
        CASE WHEN a.backend_type = 'walsender' THEN NULL
            ELSE extract(epoch FROM now() - a.xact_start)::float8 END AS secs,
        left(a.query, 200) AS query,
        coalesce(a.backend_xmin, a.backend_xid)::text::int8 AS xmin
    FROM pg_stat_activity AS a
    WHERE a.pid <> pg_backend_pid()
      AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
      AND (a.datname = current_database() OR a.backend_type = 'walsender')
    UNION ALL
    SELECT 'replication_slot', s.active_pid, s.slot_name::text, NULL,
        CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
        age(s.xmin), NULL, NULL, s.xmin::text::int8
    FROM pg_replication_slots AS s
    WHERE s.xmin IS NOT NULL
    UNION ALL
    SELECT 'prepared_transaction', NULL, p.gid, p.owner::text, 'prepared',
        age(p.transaction), extract(epoch FROM now() - p.prepared)::float8, NULL,
        p.transaction::text::int8
    FROM pg_prepared_xacts AS p
    WHERE p.database = current_database()
), oldest AS (
    SELECT * FROM holders ORDER BY xid_age DESC NULLS LAST LIMIT 1
)
SELECT o.kind, o.pid, o.name, o.role, o.state, o.xid_age::int8, o.secs, o.query, o.xmin,
    (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'drover.jobs'::regclass) AS dead,
    pg_has_role('pg_read_all_stats', 'USAGE') AS sees_all
FROM (SELECT 1) AS one
LEFT JOIN oldest AS o ON true
