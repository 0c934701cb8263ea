-- drover's job store. One narrow hot table; a lease is (lease_token, lease_owner, lease_expires_at).
CREATE TABLE drover.nodes (
    id           bigserial PRIMARY KEY,
    hostname     text        NOT NULL,
    pid          integer     NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);

-- Fencing tokens: every claim takes a fresh, larger number.
CREATE SEQUENCE drover.lease_tokens;

CREATE TABLE drover.jobs (
    id               bigserial   PRIMARY KEY,
    queue            text        NOT NULL DEFAULT 'default',
    priority         smallint    NOT NULL DEFAULT 0,
    payload          text        NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     CHECK (max_attempts IS NULL OR max_attempts > 0),
    available_at     timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    lease_token      bigint,
    lease_owner      bigint,
    lease_expires_at timestamptz,
    CHECK ((lease_token IS NULL) = (lease_owner IS NULL) AND (lease_token IS NULL) = (lease_expires_at IS NULL))
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02);

-- Fetch order within a queue; only jobs nobody holds.
CREATE INDEX jobs_ready ON drover.jobs (queue, priority DESC, available_at, id) WHERE lease_token IS NULL;
-- The next due time of delayed jobs, for the master's wake-up timer.
CREATE INDEX jobs_due ON drover.jobs (queue, available_at) WHERE lease_token IS NULL;
-- Expired leases, for taking back the jobs of a dead master.
CREATE INDEX jobs_leased ON drover.jobs (lease_expires_at) WHERE lease_token IS NOT NULL;

CREATE TABLE drover.failed_jobs (
    id        bigint      PRIMARY KEY,
    queue     text        NOT NULL,
    payload   text        NOT NULL,
    attempts  integer     NOT NULL,
    error     text        NOT NULL,
    failed_at timestamptz NOT NULL
);

-- Wake the masters when jobs are enqueued. NOTIFY is delivered on commit and dropped on rollback,
-- and one notification per statement is enough: the master claims everything it has credit for.
CREATE FUNCTION drover.notify_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_jobs', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_notify_enqueue AFTER INSERT ON drover.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION drover.notify_enqueue();
