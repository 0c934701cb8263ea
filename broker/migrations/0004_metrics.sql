-- What each master's workers did, per minute, queue and job class (docs/metrics.md). Every master
-- writes its own rows (node, hostname), so a fleet shows as one by summing over nodes. A row is
-- written whole again while its minute is open: the counts and distributions are the node's totals
-- for that minute, so a write retried after a lost connection changes nothing.
--
-- Each distribution is a JSON object: {"n", "sum", "max", "p50", "p95", "buckets": [[upper, n], ...]}
-- with log-scale buckets (8 per doubling) so rows of several nodes or minutes can be merged
-- exactly to bucket resolution. Times are in milliseconds, memory in KiB.
CREATE TABLE drover.metrics (
    minute    timestamptz NOT NULL,
    node      bigint      NOT NULL,
    hostname  text        NOT NULL,
    queue     text        NOT NULL,
    -- The payload's displayName (empty when it has none); a master names at most 500 classes,
    -- later ones are counted as '(other)'.
    class     text        NOT NULL,
    completed bigint      NOT NULL,
    failed    bigint      NOT NULL,
    released  bigint      NOT NULL,
    -- From the worker's `started` to its done, release or fail.
    runtime   jsonb       NOT NULL,
    -- From when the job was available (available_at, the database's clock) to its start.
    wait      jsonb       NOT NULL,
    -- CPU time of the worker process while it ran the job (/proc/<pid>/schedstat).
    cpu       jsonb       NOT NULL,
    -- The worker's peak resident set while it ran the job (VmHWM, reset at start).
    memory    jsonb       NOT NULL,
    PRIMARY KEY (minute, node, queue, class)
);
-- The job class page and the charts read one class over time.
CREATE INDEX metrics_class_minute ON drover.metrics (class, minute);

-- Each master's status (pools, workers, circuits, generation, PSS), kept fresh with its heartbeat,
-- so a dashboard or another host sees every node without its control socket.
ALTER TABLE drover.nodes ADD COLUMN status jsonb, ADD COLUMN status_at timestamptz;

-- Long-wait alerts: when each queue's last alert fired, fleet-wide, so that of several masters
-- watching one queue only one alerts per cooldown (broker/queries/long_wait_notice.sql).
CREATE TABLE drover.long_waits (
    queue       text        PRIMARY KEY,
    notified_at timestamptz NOT NULL,
    -- How long the oldest job had waited then.
    seconds     double precision NOT NULL
);

-- Completed-job history, when `metrics.history` is on (minutes kept; docs/metrics.md): each
-- completed job as its master saw it, for the dashboard's "recently completed" page. Written in
-- batches by the master's recorder, trimmed by age.
CREATE TABLE drover.recent_jobs (
    id          bigint           NOT NULL,
    -- The attempt that completed it (its attempts count then).
    attempt     integer          NOT NULL,
    queue       text             NOT NULL,
    class       text             NOT NULL,
    payload     text             NOT NULL,
    node        bigint           NOT NULL,
    hostname    text             NOT NULL,
    worker_pid  integer          NOT NULL,
    -- By the database's clock, as its master placed them.
    started_at  timestamptz      NOT NULL,
    finished_at timestamptz      NOT NULL,
    runtime_ms  double precision NOT NULL,
    wait_ms     double precision,
    cpu_ms      double precision,
    memory_kib  bigint,
    PRIMARY KEY (id, attempt)
);
CREATE INDEX recent_jobs_finished_at ON drover.recent_jobs (finished_at);
