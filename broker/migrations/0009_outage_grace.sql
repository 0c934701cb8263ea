-- oldest reader: 7
-- (Expand-only: a binary of schema 7 or 8 runs correctly with this applied; its masters register
-- no release, and while one has a row no grace is given. docs/upgrading.md, "Schema".)
-- A running job may outlive a database outage of failover length (docs/leases.md, "Outage
-- grace"): a pool's `outage_grace` lets its workers keep running their started jobs for that many
-- seconds past the end of a lease the master could not renew. Never two holders still: the reap
-- waits as long, so no other master takes such a job back while its worker may still run it.
-- An expand-only step: nullable columns with no default (no table rewrite of drover.jobs), which
-- a binary of the previous release neither reads nor needs (docs/upgrading.md).

-- The grace the claim gave this lease, seconds; NULL: none. Meaningful while the row is leased
-- (the next claim writes its own); the reap adds it to the lease's end (reap_expired.sql). The
-- check is added NOT VALID: it holds for every row written from now on, and adding it reads no
-- row, so the ACCESS EXCLUSIVE lock of this step on a queue under load lasts no longer than the
-- catalog change.
ALTER TABLE drover.jobs ADD COLUMN lease_grace float8;
ALTER TABLE drover.jobs ADD CONSTRAINT jobs_lease_grace_positive CHECK (lease_grace > 0) NOT VALID;

-- The longest grace among the node's pools: its row is removed only after it has been silent
-- for longer than it may hold a job (lease + grace), so a row's absence means that node holds
-- nothing any more (the reap takes an absent holder's jobs back as soon as their leases end).
ALTER TABLE drover.nodes ADD COLUMN grace_secs float8 NOT NULL DEFAULT 0 CHECK (grace_secs >= 0);

-- Masters of 0.1 (nodes.release NULL, migration 0008) ignore lease_grace: while one has a row, no
-- claim gives a grace (claim.sql, heartbeat.sql).

-- A restart of the whole fleet, host by host (`php artisan drover:restart --fleet`): whoever
-- restarts asks one master at a time (drover.request_reload), which reloads as `drover restart`
-- does on its host and says so in reload_done; the next is asked once this one's workers are all
-- replaced (its status document says). A master of 0.1 knows nothing of it and is named instead.
ALTER TABLE drover.nodes
    ADD COLUMN reload_requested bigint NOT NULL DEFAULT 0,
    ADD COLUMN reload_done bigint NOT NULL DEFAULT 0;

-- Asks master `n` to reload (NOTIFY drover_reloads on commit); returns the request's number, or
-- NULL when it has no row.
CREATE FUNCTION drover.request_reload(n bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    -- Past whatever the row says was answered: a row registered again starts from 0, and its
    -- master from what it knew (rules/fleet_reload.rs forgets on a new row).
    UPDATE drover.nodes SET reload_requested = greatest(reload_requested, reload_done) + 1 WHERE id = n
        RETURNING reload_requested INTO r;
    IF r IS NOT NULL THEN
        PERFORM pg_notify('drover_reloads', n::text);
    END IF;
    RETURN r;
END
$$;
