-- A running job may outlive a database outage of failover length (docs/leases.md, "Outage
-- grace"): a pool's `outage_grace` lets its workers keep running their started jobs for that many
-- seconds past the end of a lease the master could not renew. Never two holders still: the reap
-- waits as long, so no other master takes such a job back while its worker may still run it.
-- An expand-only step: nullable columns with no default (no table rewrite of drover.jobs), which
-- a binary of the previous release neither reads nor needs (docs/upgrading.md).

-- The grace the claim gave this lease, seconds; NULL: none. Meaningful while the row is leased
-- (the next claim writes its own); the reap adds it to the lease's end (reap_expired.sql).
ALTER TABLE drover.jobs ADD COLUMN lease_grace float8 CHECK (lease_grace > 0);

-- The longest grace among the node's pools: its row is removed only after it has been silent
-- for longer than it may hold a job (lease + grace), so a row's absence means that node holds
-- nothing any more (the reap takes an absent holder's jobs back as soon as their leases end).
ALTER TABLE drover.nodes ADD COLUMN grace_secs float8 NOT NULL DEFAULT 0 CHECK (grace_secs >= 0);
