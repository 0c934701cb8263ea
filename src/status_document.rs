//! The status document: what a master says of itself — to `drover status` and `php artisan
//! drover:status` over the control socket, in its `drover.nodes` row for the dashboard, and to
//! `/healthz`. One typed description for the master that writes it and the binary that reads it;
//! `docs/status.schema.json` is its JSON schema, generated from these types and checked against
//! them by this module's tests, and PHP's tests read a document from the same types
//! (`php-client/tests/fixtures/status.json`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::rules::health::Health;

/// A master's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Status {
    /// The master's PID.
    pub pid: u32,
    /// Its PSS in KiB; absent from `/healthz`, which does not read it.
    pub master_pss_kib: Option<u64>,
    /// Its row in `drover.nodes`.
    pub node: i64,
    /// The one verdict (`crate::rules::health`).
    pub health: Health,
    /// The exit code `drover status` and `drover:status` end with: 0 serving, 1 paused, 3
    /// degraded, 5 degraded because the database is unreachable (whatever else is wrong).
    pub exit_code: i32,
    /// What makes it degraded, one sentence each; the database's first ("database unreachable
    /// for N s: ...").
    pub problems: Vec<String>,
    /// Seconds since this master's calls to its database (claims, renewals, heartbeats,
    /// settles) began failing for a lost connection; `null` while it reaches its database
    /// (`crate::rules::database_reach`). Absent before 0.3.
    #[serde(default)]
    pub database_unreachable_secs: Option<f64>,
    pub phase: Phase,
    /// Paused for every queue (`drover pause`).
    pub paused: bool,
    /// Queues paused by name (`queue:pause`): seconds each pause has left, `null` until resumed.
    pub paused_queues: BTreeMap<String, Option<f64>>,
    /// A reload is re-reading the configuration.
    pub reloading: bool,
    /// The newest fleet restart request (`drover:restart --fleet`) this master reloaded for: a
    /// status that says so was made after that reload was applied. 0: none; absent before 0.2.
    #[serde(default)]
    pub fleet_restart_answered: i64,
    /// The fleet-wide queue budgets this master enforces (`budgets` in config/drover.php): at
    /// most this many jobs of each queue leased at once across the fleet. Absent before 0.2.
    #[serde(default)]
    pub queue_budgets: BTreeMap<String, i64>,
    /// The fair queues this master claims by fair tag (`fair` in config/drover.php). Absent
    /// before 0.3.
    #[serde(default)]
    pub fair_queues: Vec<String>,
    pub pools: Vec<PoolStatus>,
    pub totals: Totals,
    /// Per queue, jobs waiting (each counted up to 100,000). Only in the control socket's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<ReadOrWhy<BTreeMap<String, i64>>>,
    /// Per queue, how long its oldest available job has waited. Only in the control socket's
    /// answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_wait_secs: Option<ReadOrWhy<BTreeMap<String, f64>>>,
    /// Ordered groups per queue, and the held ones. Only in the control socket's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<ReadOrWhy<Groups>>,
    /// The keys jobs wait for (docs/limits.md), most waited for first (at most 20). Only in
    /// the control socket's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ReadOrWhy<Vec<LimitKey>>>,
    /// The application's schedule as this master runs it (docs/schedule.md): each task with its
    /// next due time and what the history says of it. Only in the control socket's answer, and
    /// only when the master runs a schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ReadOrWhy<Vec<ScheduledTask>>>,
    /// Laravel's own scheduler still running beside the masters (a cron `schedule:run` or a
    /// `schedule:work`, docs/schedule.md, "Beside cron"): its latest run on each host in the
    /// last ten minutes, newest first. Only in the control socket's answer, and only when the
    /// master runs a schedule; absent before 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedulers_beside: Option<ReadOrWhy<Vec<SchedulerBeside>>>,
    /// What holds the database's vacuum horizon back (docs/operations.md, "A held snapshot").
    /// Only in the control socket's answer; absent before 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon: Option<ReadOrWhy<Horizon>>,
    /// The progress the jobs this master's workers run last reported (`$this->progress(40,
    /// 'parsed 4,000 rows')`, docs/workflows.md), by job id (a worker's `running`, in decimal: a
    /// JSON object's keys are strings); a job that reported none is absent. A report is the
    /// job's latest, which may be an earlier attempt's until this one reports. Only in the
    /// control socket's answer; absent before 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ReadOrWhy<BTreeMap<String, JobProgress>>>,
    /// The database's workflows (docs/workflows.md), fleet-wide: every master reads the same.
    /// Only in the control socket's answer; absent before 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows: Option<ReadOrWhy<Workflows>>,
}

/// A running job's latest progress report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct JobProgress {
    /// 0 to 100.
    pub percent: u8,
    /// What the job said with it (at most 500 characters).
    pub note: Option<String>,
    /// Seconds since it was reported, by the database's clock.
    pub reported_secs_ago: f64,
}

/// Workflows by state, and their nodes waiting without a worker. A sub-workflow counts as a
/// workflow of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Workflows {
    /// Dispatched, not started: a sub-workflow until its node in the parent is released
    /// (counted up to 100,000).
    pub pending: i64,
    /// Counted up to 100,000.
    pub running: i64,
    /// Nodes waiting for a signal not yet sent (`Drover::signal`), among those of the 10,000
    /// newest running workflows.
    pub nodes_waiting_for_signal: i64,
    /// Nodes released whose steps wait for their time (`wait:`), among the same.
    pub nodes_waiting_for_time: i64,
    /// Workflows that ended failed in the last hour (of the latest 100,000 that ended).
    pub failed_last_hour: i64,
}

/// The database's vacuum horizon: while something holds it back, the dead rows settled jobs
/// leave cannot be removed and each claim walks past more of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Horizon {
    /// The oldest holder; none when nothing holds a snapshot.
    pub oldest: Option<SnapshotHolder>,
    /// Dead tuples in `drover.jobs`, as PostgreSQL's statistics count them.
    pub jobs_dead_tuples: Option<i64>,
    /// False when the master's role may not see other roles' snapshots (it lacks
    /// `pg_read_all_stats` or `pg_monitor`): the oldest may then go unseen.
    pub sees_all_sessions: bool,
}

/// What holds the horizon back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SnapshotHolder {
    /// `session`, `standby` (its `hot_standby_feedback`), `replication_slot` or
    /// `prepared_transaction`.
    pub kind: String,
    /// Its backend's PID, to find it (or end it: `pg_terminate_backend`).
    pub pid: Option<i32>,
    /// A session's `application_name`, a slot's name, a prepared transaction's gid.
    pub name: String,
    pub role: Option<String>,
    /// A session's state (`idle in transaction` …), a slot's `active` or `inactive`.
    pub state: Option<String>,
    /// How many transaction ids old what it holds is.
    pub xid_age: i64,
    /// How long its transaction has been open, where PostgreSQL says (sessions, prepared
    /// transactions).
    pub open_secs: Option<f64>,
    /// A session's latest statement, cut at 200 characters.
    pub query: Option<String>,
}

/// A task of the schedule (`crate::scheduling::status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ScheduledTask {
    /// Its name in the history: Laravel's mutex name of the event.
    pub key: String,
    /// What `schedule:list` shows for it: the command, or the closure's description.
    pub summary: String,
    /// Its cron expression, read in `timezone`.
    pub expression: String,
    pub timezone: String,
    /// Due every so many seconds through each matching minute (`everyTenSeconds()` …).
    pub repeat_seconds: Option<u32>,
    /// `onOneServer()`: one run per due time across the fleet; else one per host.
    pub one_server: bool,
    /// Its next due time (RFC 3339); none when its expression never matches again.
    pub next_due: Option<String>,
    /// Seconds until then.
    pub next_due_in_secs: Option<f64>,
    /// Its latest run on record: the fleet's for an `onOneServer()` task, this host's otherwise
    /// (and a run asked for now, which runs once across the fleet, wherever it ran).
    pub latest: Option<LatestRun>,
    /// Seconds since the due time of its latest success; none when none is on record.
    pub last_success_age_secs: Option<f64>,
    /// Runs that failed in a row: since its latest run that succeeded, was skipped or went to
    /// the background (all on record when there is none), up to 1000.
    pub failed_in_a_row: i64,
}

/// Laravel's own scheduler on a host, by its latest run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SchedulerBeside {
    /// The host it runs on.
    pub host: String,
    /// What `schedule:list` shows of the task it ran last.
    pub task: String,
    /// The minute (or second) it ran it for (RFC 3339).
    pub at: String,
    /// How that run ended: `succeeded` or `failed`.
    pub status: String,
}

/// A task's latest run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LatestRun {
    /// `running`, `succeeded`, `failed`, `skipped`, `started`, `missed` or `lost` (a run asked
    /// for now and not yet taken, `requested`, is not shown).
    pub status: String,
    /// Its due time (RFC 3339).
    pub due_at: String,
    /// When it ended (RFC 3339), if it did.
    pub ended_at: Option<String>,
    /// Why it failed, was skipped, missed or lost.
    pub reason: Option<String>,
    /// The host that ran it.
    pub host: String,
}

/// Where the master is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Running,
    /// Graceful shutdown: running jobs finish.
    Draining,
    /// Every worker killed.
    Stopping,
}

/// A figure read from the database for the answer, or why it could not be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ReadOrWhy<T> {
    Read(T),
    Failed { error: String },
}

/// One pool (a configured pool, or a member `pool:queue` of a `balance: auto` one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PoolStatus {
    pub name: String,
    /// Queues served, highest priority first.
    pub queues: Vec<String>,
    /// Workers wanted.
    pub processes: usize,
    /// Workers ready and not retiring.
    pub serving: usize,
    /// Bumped by every reload.
    pub generation: u64,
    /// KiB of PSS above which a worker is recycled; `null`: no limit.
    pub memory_limit_kib: Option<u64>,
    pub circuit: Circuit,
    /// Failed starts in a row.
    pub failures_in_a_row: u32,
    /// Workers that exited unasked and were replaced, since start.
    pub restarts: u64,
    /// Dropped from the configuration by a reload: its workers finish and go.
    pub retired: bool,
    /// Paused on its own (`drover pause --pool`).
    pub paused: bool,
    /// Set for a member of a `balance: auto` pool.
    pub autoscaling: Option<Autoscaling>,
    pub spawn: Spawn,
    /// What a database outage does to its running jobs; absent from a master before 0.2.
    #[serde(default)]
    pub outage: Option<Outage>,
    pub workers: Vec<WorkerStatus>,
}

/// What a database outage (a failover, a restart) does to a pool's running jobs, and what a
/// lost host costs them, from its lease and outage grace (`rules::lease_deadlines`,
/// docs/leases.md "Outage grace").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Outage {
    /// The pool's `outage_grace`, seconds.
    pub grace_secs: f64,
    /// Whether the grace is in force: not while a master of drover 0.1, whose reap ignores it,
    /// has a row (the figures below are then those without it).
    pub in_force: bool,
    /// The shortest and the longest database outage a started job outlives (it depends on
    /// when, between two renewals, the outage begins); a longer one stops its worker.
    pub outlives_secs: [f64; 2],
    /// At most how long a job of a lost master (host down, cut off, frozen) waits before
    /// another master takes it back.
    pub lost_host_return_secs: f64,
}

/// The restart circuit of a pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Circuit {
    Closed,
    /// Crash loop: no restart until the probe.
    Open {
        retry_in_secs: f64,
    },
    /// One probe start is let through.
    HalfOpen,
}

/// The autoscaled pool a member belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Autoscaling {
    pub pool: String,
    pub min_processes: usize,
    pub max_processes: usize,
    /// The average run time of the member's jobs, once one ran.
    pub runtime_ms: Option<f64>,
}

/// How the pool starts its workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Spawn {
    /// `fork` or `exec`: how the next worker is started.
    pub mode: String,
    /// Fork mode's zygote (absent for a pool configured to exec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zygote: Option<Zygote>,
    /// Why a pool configured to fork starts its workers by exec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fell_back: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Zygote {
    /// `booting`, `ready`, `restarting`, `exec`, `closed`.
    pub state: String,
    pub pid: Option<u32>,
    pub pss_kib: Option<u64>,
    /// Bumped by every reload.
    pub generation: u64,
}

/// One worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct WorkerStatus {
    pub id: u64,
    /// 0 for a forked worker whose PID is not known yet.
    pub pid: u32,
    /// `starting`, `idle`, `busy`, `paused`, `retiring`, `fenced`, `timed_out`, `stopped`.
    pub state: String,
    pub generation: u64,
    /// Jobs it holds (running and prefetched).
    pub held: usize,
    /// The job it runs.
    pub running: Option<i64>,
    /// Jobs it finished.
    pub finished: u64,
    pub pss_kib: Option<u64>,
    /// Forked from a zygote (else started by exec).
    pub forked: bool,
    pub uptime_secs: u64,
}

/// Counters since the master started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Totals {
    /// Jobs leased.
    pub claimed: u64,
    pub done: u64,
    /// Attempts that ended with the job going on: released, taken back from a dead worker, or
    /// handed on to be failed by the next worker's rules.
    pub released: u64,
    pub failed: u64,
    /// Leased, never started, given back uncharged.
    pub returned_unstarted: u64,
    /// Jobs that outran their timeout.
    pub timed_out: u64,
    pub worker_exits: u64,
    /// Acks written by the claim they rode with, of `done`.
    pub acks_ridden: u64,
    /// Jobs this master's admission passes moved from waiting for their limits into the queue
    /// (settles admit others themselves). Absent from a master of 0.2.
    #[serde(default)]
    pub admitted: u64,
    /// Of `done`, the jobs that completed inside their own transaction (`drover.complete_within`,
    /// docs/exactly-once.md). Absent from a master before 0.3.
    #[serde(default)]
    pub completed_within: u64,
    /// Of `completed_within`, those whose worker died after the commit, before it could say so:
    /// learned from the database, counted completed once and never run again.
    #[serde(default)]
    pub completed_after_exit: u64,
}

/// A key jobs wait for (docs/limits.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LimitKey {
    pub key: String,
    /// Jobs in its line (of the first 100,000 waiting jobs read).
    pub waiting: i64,
    /// Concurrency slots held under it.
    pub held: i64,
    /// Starts used in its rate's open window; `null`: no window open.
    pub rate_used: Option<i64>,
    /// In how many seconds that window ends.
    pub window_ends_in_secs: Option<f64>,
    /// How long the oldest due job of its line has been due; `null`: none is due.
    pub oldest_wait_secs: Option<f64>,
}

/// Ordered groups: per queue, and the held ones, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Groups {
    pub queues: BTreeMap<String, QueueGroups>,
    pub held: Vec<HeldGroup>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct QueueGroups {
    /// Groups with jobs (counted up to 100,000).
    pub groups: i64,
    /// Groups held by a failed job.
    pub held: i64,
    /// Grouped jobs waiting behind their group's head.
    pub waiting: i64,
    /// How long the oldest head has waited.
    pub oldest_head_secs: Option<f64>,
}

/// A group held by its failed head (`on_failure: hold`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct HeldGroup {
    pub queue: String,
    pub group: String,
    /// The failed job.
    pub job: i64,
    pub uuid: Option<String>,
    pub error: Option<String>,
    /// When it failed, by the database's clock (Unix seconds).
    pub since: Option<f64>,
    /// Jobs waiting behind it.
    pub waiting: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = "docs/status.schema.json";
    const SAMPLE: &str = "php-client/tests/fixtures/status.json";

    /// A document with every part present: what PHP's tests read.
    fn sample() -> Status {
        Status {
            pid: 4242,
            master_pss_kib: Some(2816),
            node: 7,
            health: Health::Degraded,
            exit_code: 3,
            problems: vec!["pool emails: 0 of 2 workers serving; its circuit is open".into()],
            database_unreachable_secs: None,
            phase: Phase::Running,
            paused: false,
            paused_queues: BTreeMap::from([
                ("reports".into(), Some(42.5)),
                ("imports".into(), None),
            ]),
            reloading: false,
            fleet_restart_answered: 2,
            queue_budgets: BTreeMap::from([("api".into(), 10)]),
            fair_queues: vec!["tenants".into()],
            pools: vec![sample_forked_pool(), sample_autoscaled_member()],
            totals: Totals {
                claimed: 250,
                done: 238,
                released: 3,
                failed: 2,
                returned_unstarted: 4,
                timed_out: 1,
                worker_exits: 2,
                acks_ridden: 200,
                admitted: 12,
                completed_within: 20,
                completed_after_exit: 1,
            },
            backlog: Some(ReadOrWhy::Read(BTreeMap::from([
                ("default".into(), 12),
                ("high".into(), 0),
                ("mail".into(), 40),
            ]))),
            oldest_wait_secs: Some(ReadOrWhy::Failed {
                error: "the database did not answer in 2 s".into(),
            }),
            groups: Some(ReadOrWhy::Read(sample_groups())),
            limits: Some(ReadOrWhy::Read(vec![
                LimitKey {
                    key: "tenant:7".into(),
                    waiting: 120,
                    held: 2,
                    rate_used: None,
                    window_ends_in_secs: None,
                    oldest_wait_secs: Some(42.0),
                },
                LimitKey {
                    key: "stripe@1s".into(),
                    waiting: 9,
                    held: 0,
                    rate_used: Some(5),
                    window_ends_in_secs: Some(1.25),
                    oldest_wait_secs: Some(0.5),
                },
            ])),
            schedule: Some(ReadOrWhy::Read(sample_schedule())),
            schedulers_beside: Some(ReadOrWhy::Read(vec![SchedulerBeside {
                host: "web-1".into(),
                task: "artisan report:daily".into(),
                at: "2026-12-01T09:14:00Z".into(),
                status: "succeeded".into(),
            }])),
            horizon: Some(ReadOrWhy::Read(Horizon {
                oldest: Some(SnapshotHolder {
                    kind: "session".into(),
                    pid: Some(4242),
                    name: "nightly report".into(),
                    role: Some("reporting".into()),
                    state: Some("idle in transaction".into()),
                    xid_age: 18_200,
                    open_secs: Some(312.5),
                    query: Some("SELECT sum(total) FROM orders".into()),
                }),
                jobs_dead_tuples: Some(151_000),
                sees_all_sessions: true,
            })),
            progress: Some(ReadOrWhy::Read(BTreeMap::from([(
                "981".into(),
                JobProgress {
                    percent: 41,
                    note: Some("parsed 4,000 rows".into()),
                    reported_secs_ago: 0.75,
                },
            )]))),
            workflows: Some(ReadOrWhy::Read(Workflows {
                pending: 2,
                running: 14,
                nodes_waiting_for_signal: 3,
                nodes_waiting_for_time: 5,
                failed_last_hour: 1,
            })),
        }
    }

    /// The sample's schedule: a task that keeps failing, and one never run yet.
    fn sample_schedule() -> Vec<ScheduledTask> {
        vec![
            ScheduledTask {
                key: "framework/schedule-3b5c".into(),
                summary: "php artisan report:daily".into(),
                expression: "0 * * * *".into(),
                timezone: "Europe/Paris".into(),
                repeat_seconds: None,
                one_server: true,
                next_due: Some("2026-12-06T11:00:00Z".into()),
                next_due_in_secs: Some(2400.0),
                latest: Some(LatestRun {
                    status: "failed".into(),
                    due_at: "2026-12-06T10:00:00Z".into(),
                    ended_at: Some("2026-12-06T10:00:03.2Z".into()),
                    reason: Some("exit code 1".into()),
                    host: "web-1".into(),
                }),
                last_success_age_secs: Some(8400.0),
                failed_in_a_row: 2,
            },
            ScheduledTask {
                key: "framework/schedule-9f1c".into(),
                summary: "prune tokens".into(),
                expression: "* * * * *".into(),
                timezone: "UTC".into(),
                repeat_seconds: Some(10),
                one_server: false,
                next_due: Some("2026-12-06T10:20:10Z".into()),
                next_due_in_secs: Some(10.0),
                latest: None,
                last_success_age_secs: None,
                failed_in_a_row: 0,
            },
        ]
    }

    /// The sample's first pool: forked from a ready zygote, two workers (one busy, one idle).
    fn sample_forked_pool() -> PoolStatus {
        PoolStatus {
            name: "default".into(),
            queues: vec!["high".into(), "default".into()],
            processes: 2,
            serving: 2,
            generation: 1,
            memory_limit_kib: Some(131072),
            circuit: Circuit::Closed,
            failures_in_a_row: 0,
            restarts: 1,
            retired: false,
            paused: false,
            autoscaling: None,
            spawn: Spawn {
                mode: "fork".into(),
                zygote: Some(Zygote {
                    state: "ready".into(),
                    pid: Some(5000),
                    pss_kib: Some(20480),
                    generation: 1,
                }),
                fell_back: None,
            },
            outage: Some(Outage {
                grace_secs: 0.0,
                in_force: true,
                outlives_secs: [11.0, 24.0],
                lost_host_return_secs: 45.0,
            }),
            workers: vec![
                WorkerStatus {
                    id: 1,
                    pid: 5001,
                    state: "busy".into(),
                    generation: 1,
                    held: 3,
                    running: Some(981),
                    finished: 120,
                    pss_kib: Some(9216),
                    forked: true,
                    uptime_secs: 3600,
                },
                WorkerStatus {
                    id: 2,
                    pid: 5002,
                    state: "idle".into(),
                    generation: 1,
                    held: 0,
                    running: None,
                    finished: 118,
                    pss_kib: None,
                    forked: true,
                    uptime_secs: 3599,
                },
            ],
        }
    }

    /// The sample's second pool: a paused member of an autoscaled pool whose circuit is open,
    /// fallen back to exec, with no worker.
    fn sample_autoscaled_member() -> PoolStatus {
        PoolStatus {
            name: "emails:mail".into(),
            queues: vec!["mail".into()],
            processes: 2,
            serving: 0,
            generation: 1,
            memory_limit_kib: None,
            circuit: Circuit::Open { retry_in_secs: 8.5 },
            failures_in_a_row: 5,
            restarts: 0,
            retired: false,
            paused: true,
            autoscaling: Some(Autoscaling {
                pool: "emails".into(),
                min_processes: 1,
                max_processes: 4,
                runtime_ms: Some(12.5),
            }),
            spawn: Spawn {
                mode: "exec".into(),
                zygote: None,
                fell_back: Some("the zygote exited before it was ready".into()),
            },
            outage: Some(Outage {
                grace_secs: 120.0,
                in_force: false,
                outlives_secs: [11.0, 24.0],
                lost_host_return_secs: 45.0,
            }),
            workers: vec![],
        }
    }

    /// The sample's ordered groups: one queue with groups, one of them held.
    fn sample_groups() -> Groups {
        Groups {
            queues: BTreeMap::from([(
                "default".into(),
                QueueGroups {
                    groups: 3,
                    held: 1,
                    waiting: 9,
                    oldest_head_secs: Some(1.25),
                },
            )]),
            held: vec![HeldGroup {
                queue: "default".into(),
                group: "order-17".into(),
                job: 977,
                uuid: Some("9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d".into()),
                error: Some("RuntimeException: card declined".into()),
                since: Some(1_764_720_000.5),
                waiting: 4,
            }],
        }
    }

    fn check_file(file: &str, text: &str) {
        crate::contract_files::check(file, text, "status_document");
    }

    #[test]
    fn the_schema_in_docs_is_the_one_of_these_types() {
        let schema = schemars::schema_for!(Status);
        check_file(
            SCHEMA,
            &(serde_json::to_string_pretty(&schema).unwrap() + "\n"),
        );
    }

    #[test]
    fn the_sample_php_reads_is_a_document_of_these_types_and_reads_back_the_same() {
        let text = serde_json::to_string_pretty(&sample()).unwrap() + "\n";
        check_file(SAMPLE, &text);
        let back: Status = serde_json::from_str(&text).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn progress_or_workflows_that_could_not_be_read_read_back_as_their_error() {
        fn why<T>() -> ReadOrWhy<T> {
            ReadOrWhy::Failed {
                error: "the database did not answer in 2 s".into(),
            }
        }
        let mut s = sample();
        s.progress = Some(why());
        s.workflows = Some(why());
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v["progress"],
            serde_json::json!({"error": "the database did not answer in 2 s"})
        );
        let back: Status = serde_json::from_value(v).unwrap();
        assert_eq!(back.progress, Some(why()));
        assert_eq!(back.workflows, Some(why()));
    }

    #[test]
    fn an_answer_without_the_database_figures_leaves_them_out() {
        let mut s = sample();
        s.backlog = None;
        s.oldest_wait_secs = None;
        s.groups = None;
        s.limits = None;
        s.schedule = None;
        s.progress = None;
        s.workflows = None;
        let v = serde_json::to_value(&s).unwrap();
        for key in [
            "backlog",
            "oldest_wait_secs",
            "groups",
            "limits",
            "schedule",
            "progress",
            "workflows",
        ] {
            assert!(v.get(key).is_none(), "{key}");
        }
        assert_eq!(
            v["pools"][0]["circuit"],
            serde_json::json!({"state": "closed"})
        );
        assert_eq!(
            v["pools"][1]["circuit"],
            serde_json::json!({"state": "open", "retry_in_secs": 8.5})
        );
        assert_eq!(v["pools"][1]["spawn"].get("zygote"), None);
    }
}
