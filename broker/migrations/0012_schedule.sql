-- oldest reader: 7
-- (Expand-only: a table no binary of schema 7-11 reads or needs. docs/upgrading.md, "Schema".)
--
-- The application's schedule, run by the masters (issue 39, docs/schedule.md): one row per due
-- time of a task that a master claimed, started and ended, or found missed. The row is the
-- claim: a task of `onOneServer()` has one row per due time across every master of the database
-- (scope ''), any other one per due time and host (scope: the host name), as cron on each host
-- would run it. A master inserts its claim before it starts the run; the one whose insert
-- conflicts leaves that due time to the other.
CREATE TABLE drover.schedule_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The task's key: Laravel's mutex name of the event (`#2`… on events sharing one).
    task        text NOT NULL,
    -- What `schedule:list` shows for it, when it ran (the key alone says little).
    summary     text NOT NULL,
    due_at      timestamptz NOT NULL,
    -- '' for a task of onOneServer(); else the host name.
    scope       text NOT NULL,
    -- The master that claimed it (drover.nodes.id; the row outlives it) and its host.
    node        bigint,
    host        text NOT NULL,
    -- requested: asked for now ("run now", from the dashboard or drover:schedule-run-now), for
    -- the first master that runs the task to take; running: claimed, its process out;
    -- succeeded / failed: ended so; skipped: Laravel's rules said no at run time (filters,
    -- environment, maintenance, overlapping) or the task is paused; started: handed to the
    -- background (runInBackground); missed: no master could start it in time; lost: its master
    -- died while it ran.
    status      text NOT NULL CHECK (status IN ('requested', 'running', 'succeeded', 'failed', 'skipped', 'started', 'missed', 'lost')),
    -- Why it was skipped, missed, lost or failed, in words.
    reason      text,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    ended_at    timestamptz,
    exit_code   integer,
    pid         integer,
    -- The end of its output (at most a few KiB).
    output_tail text,
    -- Who asked for it now ("run now"); null for a due time of the task's schedule.
    asked_by    text,
    UNIQUE (task, due_at, scope)
);
-- A task's runs by due time (its last due time, status pages) go through the unique index.
-- Runs still out, by master (a dead master's are lost).
CREATE INDEX schedule_runs_running ON drover.schedule_runs (node) WHERE status = 'running';
-- Retention, oldest first.
CREATE INDEX schedule_runs_due ON drover.schedule_runs (due_at);
-- A task's latest run that went by Laravel's rules (succeeded, skipped, handed to the
-- background), its latest success, and its failures since: status and alerts
-- (broker/queries/schedule_results.sql), without walking a task's whole history.
CREATE INDEX schedule_runs_ok ON drover.schedule_runs (task, due_at) WHERE status IN ('succeeded', 'skipped', 'started');
CREATE INDEX schedule_runs_succeeded ON drover.schedule_runs (task, due_at) WHERE status = 'succeeded';
CREATE INDEX schedule_runs_failed ON drover.schedule_runs (task, due_at) WHERE status = 'failed';
-- Runs asked for now, oldest first (each master looks for them every few seconds).
CREATE INDEX schedule_runs_requested ON drover.schedule_runs (due_at) WHERE status = 'requested';

-- Tasks paused (the dashboard's Schedule page, drover:schedule-pause): every master records a
-- paused task's due times as skipped instead of running them, until it is resumed. A run asked
-- for now still runs.
CREATE TABLE drover.schedule_pauses (
    task      text PRIMARY KEY,
    -- What schedule:list shows for it, for the pages.
    summary   text NOT NULL,
    paused_at timestamptz NOT NULL DEFAULT now(),
    -- Who paused it, in words (the dashboard's user, or the command's host).
    paused_by text
);

-- When each task last raised an alert (it keeps failing, or is overdue): of several masters one
-- alerts, once per cooldown (broker/queries/schedule_alert_notice.sql), as drover.long_waits
-- does for queues.
CREATE TABLE drover.schedule_alerts (
    task       text PRIMARY KEY,
    alerted_at timestamptz NOT NULL
);
