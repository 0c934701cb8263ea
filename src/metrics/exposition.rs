//! Prometheus / OpenMetrics text for `GET /metrics`: job counters and histograms kept since the
//! master started (fed by the recorder as jobs start and finish), and the state of the master read
//! at each scrape from its status (workers per state, restarts, circuits, queue depth and oldest
//! wait, workflows, the running jobs' progress, how long the database has been unreachable, the
//! master's PSS). Every series is listed in
//! docs/metrics.md.

use crate::status_document::{Circuit, ReadOrWhy, Status};
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::minutes::{Observation, Outcome};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    queue: String,
    /// The job's class. Not `job`: Prometheus sets `job` on every target it scrapes and would
    /// rename ours to `exported_job`.
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

/// The OpenTelemetry messaging conventions' attributes, as Prometheus labels (dots made
/// underscores, as OpenTelemetry's Prometheus exporters write them).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MessagingLabels {
    messaging_system: &'static str,
    messaging_destination_name: String,
    messaging_operation_name: &'static str,
    /// Why the processing failed (`failed`, `released`), empty when it did not.
    error_type: &'static str,
}

impl MessagingLabels {
    fn process(queue: &str, error_type: &'static str) -> MessagingLabels {
        MessagingLabels {
            messaging_system: "drover",
            messaging_destination_name: queue.to_string(),
            messaging_operation_name: "process",
            error_type,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    /// A limit's key: the 20 most waited for only, so the series stay few.
    key: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    /// The task's key in the history (Laravel's mutex name: unique, a hash of its expression and
    /// command). Not its summary: that is the command line, which can carry a password or a
    /// token (`--password=…`, a URL's), and a label is read by whoever reads the series.
    task: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabels {
    pool: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OneWorkerLabels {
    pool: String,
    /// The worker's id in its pool (`drover status`'s `worker`): a few per pool, not its PID.
    worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkflowStateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WaitLabels {
    /// What the nodes wait for: `signal` or `time`.
    r#for: &'static str,
}

/// Seconds: from a millisecond to an hour.
const TIME_BUCKETS: [f64; 18] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0, 3600.0,
];

type HistogramFamily = Family<JobLabels, Histogram, fn() -> Histogram>;

fn time_histogram() -> Histogram {
    Histogram::new(TIME_BUCKETS)
}

/// The series kept since start. Shared (`Arc`) by the recorder, which feeds it, and the HTTP
/// server, which renders it.
#[derive(Debug)]
pub struct Exposition {
    registry: Registry,
    completed: Family<JobLabels, Counter>,
    failed: Family<JobLabels, Counter>,
    released: Family<JobLabels, Counter>,
    runtime: HistogramFamily,
    wait: HistogramFamily,
    cpu: Family<JobLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// `messaging.process.duration`: each attempt's run time, by the messaging conventions.
    process_duration: Family<MessagingLabels, Histogram, fn() -> Histogram>,
    /// `messaging.client.consumed.messages`: jobs handed to the application (a worker started
    /// them), by the messaging conventions.
    consumed: Family<MessagingLabels, Counter>,
}

impl Default for Exposition {
    fn default() -> Self {
        Exposition::new()
    }
}

impl Exposition {
    pub fn new() -> Exposition {
        let mut registry = Registry::default();
        let completed = Family::<JobLabels, Counter>::default();
        let failed = Family::<JobLabels, Counter>::default();
        let released = Family::<JobLabels, Counter>::default();
        let runtime: HistogramFamily = Family::new_with_constructor(time_histogram);
        let wait: HistogramFamily = Family::new_with_constructor(time_histogram);
        let cpu = Family::<JobLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "drover_jobs_completed",
            "Jobs whose worker reported done",
            completed.clone(),
        );
        registry.register(
            "drover_jobs_failed",
            "Job attempts that failed for good (the application's failer or drover's)",
            failed.clone(),
        );
        registry.register(
            "drover_jobs_released",
            "Job attempts released to run again (by the job, or taken back from a worker that died)",
            released.clone(),
        );
        registry.register(
            "drover_job_runtime_seconds",
            "Time from a worker's start of a job to its report",
            runtime.clone(),
        );
        registry.register(
            "drover_job_wait_seconds",
            "Time from a job's availability to its start",
            wait.clone(),
        );
        registry.register(
            "drover_job_cpu_seconds",
            "CPU time workers spent running jobs (from /proc)",
            cpu.clone(),
        );
        let process_duration: Family<MessagingLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(time_histogram);
        let consumed = Family::<MessagingLabels, Counter>::default();
        registry.register(
            "messaging_process_duration_seconds",
            "OpenTelemetry's messaging.process.duration: the duration of processing a job (an attempt), error_type set when it failed or was released",
            process_duration.clone(),
        );
        registry.register(
            "messaging_client_consumed_messages",
            "OpenTelemetry's messaging.client.consumed.messages: jobs delivered to the application (a worker started them)",
            consumed.clone(),
        );
        Exposition {
            registry,
            completed,
            failed,
            released,
            runtime,
            wait,
            cpu,
            process_duration,
            consumed,
        }
    }

    /// Counts one observation (the same ones the minute book gets, its class already admitted
    /// by the recorder's [`super::classes::ClassGate`]).
    pub fn observe(&self, observation: &Observation) {
        match observation {
            Observation::Started { queue, class, wait } => {
                let labels = JobLabels {
                    queue: queue.clone(),
                    class: class.clone(),
                };
                self.wait.get_or_create(&labels).observe(wait.as_secs_f64());
                self.consumed
                    .get_or_create(&MessagingLabels::process(queue, ""))
                    .inc();
            }
            Observation::Finished {
                queue,
                class,
                outcome,
                runtime,
                usage,
                ..
            } => {
                let labels = JobLabels {
                    queue: queue.clone(),
                    class: class.clone(),
                };
                let counter = match outcome {
                    Outcome::Completed => &self.completed,
                    Outcome::Failed => &self.failed,
                    Outcome::Released => &self.released,
                };
                counter.get_or_create(&labels).inc();
                self.runtime
                    .get_or_create(&labels)
                    .observe(runtime.as_secs_f64());
                let error_type = match outcome {
                    Outcome::Completed => "",
                    Outcome::Failed => "failed",
                    Outcome::Released => "released",
                };
                self.process_duration
                    .get_or_create(&MessagingLabels::process(queue, error_type))
                    .observe(runtime.as_secs_f64());
                if let Some(usage) = usage {
                    self.cpu
                        .get_or_create(&labels)
                        .inc_by(usage.cpu.as_secs_f64());
                }
            }
        }
    }

    /// The whole exposition: the job series, then the master's state from `status` (the control
    /// socket's status answer, with `backlog` and `oldest_wait_secs`) and its own PSS.
    pub fn render(&self, status: &Status, master_pss_kib: Option<u64>) -> String {
        let mut text = String::new();
        let _ = encode_registry(&mut text, &self.registry);
        let _ = encode_registry(&mut text, &state_registry(status, master_pss_kib));
        let _ = encode_eof(&mut text);
        text
    }
}

/// The worker states `drover_workers` counts, as status names them.
const WORKER_STATES: [&str; 7] = [
    "starting",
    "idle",
    "busy",
    "paused",
    "retiring",
    "fenced",
    "timed_out",
];

/// Series read from the status at scrape time, in a registry of their own built per scrape:
/// per family of series, in the order they are exposed.
fn state_registry(status: &Status, master_pss_kib: Option<u64>) -> Registry {
    let mut registry = Registry::default();
    let unreachable = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    unreachable.set(status.database_unreachable_secs.unwrap_or(0.0));
    registry.register(
        "drover_database_unreachable_seconds",
        "Seconds since the master's database calls began failing for a lost connection (0 while it reaches its database)",
        unreachable,
    );
    let within = Counter::<u64>::default();
    within.inc_by(status.totals.completed_within);
    registry.register(
        "drover_jobs_completed_within",
        "Jobs whose completion was written inside their own transaction with their effects (docs/exactly-once.md), of those counted done, since the master started",
        within,
    );
    register_queue_pauses(&mut registry, status);
    register_queue_backlog(&mut registry, status);
    register_groups(&mut registry, status);
    register_limits(&mut registry, status);
    register_schedule(&mut registry, status);
    register_pools(&mut registry, status);
    register_horizon(&mut registry, status);
    register_workflows(&mut registry, status);
    register_job_progress(&mut registry, status);
    if let Some(kib) = master_pss_kib {
        let pss = Gauge::<i64>::default();
        pss.set(i64::try_from(kib.saturating_mul(1024)).unwrap_or(i64::MAX));
        registry.register(
            "drover_master_pss_bytes",
            "Proportional set size of the master process",
            pss,
        );
    }
    registry
}

/// 1 for a queue paused by name (`queue:pause`), 0 for the other queues this master serves.
fn register_queue_pauses(registry: &mut Registry, status: &Status) {
    let paused = Family::<QueueLabels, Gauge>::default();
    for queue in status.pools.iter().flat_map(|p| &p.queues) {
        let _ = paused.get_or_create(&QueueLabels {
            queue: queue.to_string(),
        });
    }
    for queue in status.paused_queues.keys() {
        paused
            .get_or_create(&QueueLabels {
                queue: queue.clone(),
            })
            .set(1);
    }
    registry.register(
        "drover_queue_paused",
        "1 while the queue is paused by name (queue:pause, for every master), else 0",
        paused,
    );
}

/// Per queue, its jobs waiting and its oldest one's wait (when the status could read them).
fn register_queue_backlog(registry: &mut Registry, status: &Status) {
    let depth = Family::<QueueLabels, Gauge>::default();
    let oldest = Family::<QueueLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    if let Some(ReadOrWhy::Read(backlog)) = &status.backlog {
        for (queue, n) in backlog {
            depth
                .get_or_create(&QueueLabels {
                    queue: queue.clone(),
                })
                .set(*n);
        }
    }
    if let Some(ReadOrWhy::Read(waits)) = &status.oldest_wait_secs {
        for (queue, secs) in waits {
            oldest
                .get_or_create(&QueueLabels {
                    queue: queue.clone(),
                })
                .set(*secs);
        }
    }
    registry.register(
        "drover_queue_depth",
        "Jobs available now and not leased, per queue (counted up to 100000)",
        depth,
    );
    registry.register(
        "drover_queue_oldest_age_seconds",
        "How long the oldest available job of the queue has waited",
        oldest,
    );
}

/// Per queue, its ordered groups: how many, how many held, the jobs behind their heads and the
/// oldest head's age.
fn register_groups(registry: &mut Registry, status: &Status) {
    let groups = Family::<QueueLabels, Gauge>::default();
    let held = Family::<QueueLabels, Gauge>::default();
    let waiting = Family::<QueueLabels, Gauge>::default();
    let oldest_head = Family::<QueueLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let queue_groups = match &status.groups {
        Some(ReadOrWhy::Read(g)) => Some(&g.queues),
        _ => None,
    };
    for (queue, g) in queue_groups.into_iter().flatten() {
        let labels = QueueLabels {
            queue: queue.clone(),
        };
        groups.get_or_create(&labels).set(g.groups);
        held.get_or_create(&labels).set(g.held);
        waiting.get_or_create(&labels).set(g.waiting);
        oldest_head
            .get_or_create(&labels)
            .set(g.oldest_head_secs.unwrap_or(0.0));
    }
    registry.register(
        "drover_groups",
        "Ordered groups that have jobs, per queue (counted up to 100000)",
        groups,
    );
    registry.register(
        "drover_groups_held",
        "Ordered groups held by a job that failed for good, per queue",
        held,
    );
    registry.register(
        "drover_group_jobs_waiting",
        "Jobs waiting behind their group's head, per queue",
        waiting,
    );
    registry.register(
        "drover_group_oldest_head_seconds",
        "How long the oldest group head of the queue has been its group's head (0: none)",
        oldest_head,
    );
}

/// The keys jobs wait for, most waited for first (the status's 20): the jobs in each key's
/// line, its slots held, the starts used in its rate's window and its oldest wait.
fn register_limits(registry: &mut Registry, status: &Status) {
    type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;
    let waiting = Family::<LimitLabels, Gauge>::default();
    let held = Family::<LimitLabels, Gauge>::default();
    let rate_used = Family::<LimitLabels, Gauge>::default();
    let oldest = Family::<LimitLabels, FloatGauge>::default();
    let keys = match &status.limits {
        Some(ReadOrWhy::Read(keys)) => Some(keys),
        _ => None,
    };
    for k in keys.into_iter().flatten() {
        let labels = LimitLabels { key: k.key.clone() };
        waiting.get_or_create(&labels).set(k.waiting);
        held.get_or_create(&labels).set(k.held);
        rate_used
            .get_or_create(&labels)
            .set(k.rate_used.unwrap_or(0));
        oldest
            .get_or_create(&labels)
            .set(k.oldest_wait_secs.unwrap_or(0.0));
    }
    registry.register(
        "drover_limit_jobs_waiting",
        "Jobs waiting for a limit's key, for the 20 keys most waited for",
        waiting,
    );
    registry.register(
        "drover_limit_slots_held",
        "Concurrency slots held under the key",
        held,
    );
    registry.register(
        "drover_limit_rate_used",
        "Starts used in the key's open rate window (0: none open)",
        rate_used,
    );
    registry.register(
        "drover_limit_oldest_wait_seconds",
        "How long the oldest due job waiting for the key has been due (0: none)",
        oldest,
    );
}

/// Per scheduled task: how long since its latest success, and its failures in a row (an alert on
/// either finds a task that stopped running or keeps failing). A task without a success on
/// record has no age series.
fn register_schedule(registry: &mut Registry, status: &Status) {
    type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;
    let Some(ReadOrWhy::Read(tasks)) = &status.schedule else {
        return;
    };
    let age = Family::<TaskLabels, FloatGauge>::default();
    let failed = Family::<TaskLabels, Gauge>::default();
    for t in tasks {
        let labels = TaskLabels {
            task: t.key.clone(),
        };
        if let Some(secs) = t.last_success_age_secs {
            age.get_or_create(&labels).set(secs);
        }
        failed.get_or_create(&labels).set(t.failed_in_a_row);
    }
    registry.register(
        "drover_schedule_last_success_age_seconds",
        "Seconds since the due time of the scheduled task's latest successful run",
        age,
    );
    registry.register(
        "drover_schedule_failed_in_a_row",
        "Runs of the scheduled task that failed in a row (since its latest that succeeded, was skipped or went to the background)",
        failed,
    );
}

/// What holds the vacuum horizon back (docs/operations.md, "A held snapshot"): how long the
/// oldest snapshot's transaction has been open (0 when none, or when its holder — a standby, a
/// slot — does not say), how many transaction ids old it is, and the dead tuples in
/// `drover.jobs`.
fn register_horizon(registry: &mut Registry, status: &Status) {
    let Some(ReadOrWhy::Read(h)) = &status.horizon else {
        return;
    };
    let open = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    let xids = Gauge::<i64>::default();
    if let Some(o) = &h.oldest {
        open.set(o.open_secs.unwrap_or(0.0));
        xids.set(o.xid_age);
    }
    registry.register(
        "drover_oldest_snapshot_seconds",
        "How long the transaction of the oldest snapshot holding the vacuum horizon back has been open",
        open,
    );
    registry.register(
        "drover_oldest_snapshot_xid_age",
        "Transaction ids since the oldest snapshot holding the vacuum horizon back (a session, standby, replication slot or prepared transaction)",
        xids,
    );
    if let Some(n) = h.jobs_dead_tuples {
        let dead = Gauge::<i64>::default();
        dead.set(n);
        registry.register(
            "drover_jobs_dead_tuples",
            "Dead tuples in drover.jobs, as PostgreSQL's statistics count them",
            dead,
        );
    }
    let visible = Gauge::<i64>::default();
    visible.set(i64::from(h.sees_all_sessions));
    registry.register(
        "drover_horizon_sees_all_sessions",
        "1 when the master's role sees every session's snapshot (pg_read_all_stats), else 0",
        visible,
    );
}

/// The database's workflows (docs/workflows.md), as the status answer read them: pending and
/// running, their nodes waiting for a signal or a time, and those that failed in the last hour.
/// Fleet-wide: every master exposes the same figures.
fn register_workflows(registry: &mut Registry, status: &Status) {
    let Some(ReadOrWhy::Read(w)) = &status.workflows else {
        return;
    };
    let states = Family::<WorkflowStateLabels, Gauge>::default();
    for (state, n) in [("pending", w.pending), ("running", w.running)] {
        states.get_or_create(&WorkflowStateLabels { state }).set(n);
    }
    registry.register(
        "drover_workflows",
        "Workflows not ended, by state (sub-workflows included; counted up to 100000), in the whole database",
        states,
    );
    let waiting = Family::<WaitLabels, Gauge>::default();
    for (what, n) in [
        ("signal", w.nodes_waiting_for_signal),
        ("time", w.nodes_waiting_for_time),
    ] {
        waiting.get_or_create(&WaitLabels { r#for: what }).set(n);
    }
    registry.register(
        "drover_workflow_nodes_waiting",
        "Workflow nodes waiting, holding no worker, for a signal or for their time (among the nodes of the 10000 newest running workflows)",
        waiting,
    );
    let failed = Gauge::<i64>::default();
    failed.set(w.failed_last_hour);
    registry.register(
        "drover_workflows_failed_last_hour",
        "Workflows that ended failed in the last hour",
        failed,
    );
}

/// Per worker running a job that reported its progress, that progress (the status answer reads
/// it from the database for the jobs this master's workers run).
fn register_job_progress(registry: &mut Registry, status: &Status) {
    let Some(ReadOrWhy::Read(progress)) = &status.progress else {
        return;
    };
    let percent = Family::<OneWorkerLabels, Gauge>::default();
    for pool in &status.pools {
        for w in &pool.workers {
            let Some(report) = w.running.and_then(|j| progress.get(&j.to_string())) else {
                continue;
            };
            percent
                .get_or_create(&OneWorkerLabels {
                    pool: pool.name.clone(),
                    worker: w.id.to_string(),
                })
                .set(i64::from(report.percent));
        }
    }
    registry.register(
        "drover_worker_job_progress_percent",
        "The progress the job the worker runs last reported ($this->progress()); no series while it reported none",
        percent,
    );
}

/// Per pool, its workers by state, its restarts and whether its restart circuit is open.
fn register_pools(registry: &mut Registry, status: &Status) {
    let workers = Family::<WorkerLabels, Gauge>::default();
    let restarts = Family::<PoolLabels, Counter>::default();
    let circuit = Family::<PoolLabels, Gauge>::default();
    for pool in &status.pools {
        let name = pool.name.clone();
        for state in WORKER_STATES {
            let n = pool.workers.iter().filter(|w| w.state == state).count();
            workers
                .get_or_create(&WorkerLabels {
                    pool: name.clone(),
                    state: state.to_string(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        restarts
            .get_or_create(&PoolLabels { pool: name.clone() })
            .inc_by(pool.restarts);
        circuit
            .get_or_create(&PoolLabels { pool: name })
            .set(i64::from(matches!(pool.circuit, Circuit::Open { .. })));
    }
    registry.register(
        "drover_workers",
        "Worker processes of this master by pool and state",
        workers,
    );
    registry.register(
        "drover_worker_restarts",
        "Workers replaced after they exited unasked, per pool, since the master started",
        restarts,
    );
    registry.register(
        "drover_circuit_open",
        "1 while the pool's restart circuit is open (no worker is started)",
        circuit,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status_document::Totals;

    #[test]
    fn the_snapshot_holding_the_horizon_back_is_exposed_with_the_dead_tuples() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "pid": 1, "master_pss_kib": null, "node": 1, "health": "serving", "exit_code": 0,
            "problems": [], "phase": "running", "paused": false, "paused_queues": {},
            "reloading": false, "pools": [], "totals": Totals::default(),
            "horizon": {"oldest": {"kind": "session", "pid": 7, "name": "report", "role": null,
                "state": "idle in transaction", "xid_age": 1200, "open_secs": 95.5, "query": null},
                "jobs_dead_tuples": 48000, "sees_all_sessions": false},
        }))
        .unwrap();
        let text = Exposition::new().render(&status, None);
        for line in [
            "drover_oldest_snapshot_seconds 95.5",
            "drover_oldest_snapshot_xid_age 1200",
            "drover_jobs_dead_tuples 48000",
            "drover_horizon_sees_all_sessions 0",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
    }

    #[test]
    fn how_long_the_database_has_been_unreachable_is_exposed_and_0_while_it_is_reachable() {
        let mut status: Status = serde_json::from_value(serde_json::json!({
            "pid": 1, "master_pss_kib": null, "node": 1, "health": "degraded", "exit_code": 5,
            "problems": ["database unreachable for 12 s: ..."], "database_unreachable_secs": 12.5,
            "phase": "running", "paused": false, "paused_queues": {}, "reloading": false,
            "pools": [], "totals": Totals::default(),
        }))
        .unwrap();
        let text = Exposition::new().render(&status, None);
        assert!(
            text.contains("\ndrover_database_unreachable_seconds 12.5\n"),
            "{text}"
        );
        status.database_unreachable_secs = None;
        let text = Exposition::new().render(&status, None);
        assert!(
            text.contains("\ndrover_database_unreachable_seconds 0.0\n"),
            "{text}"
        );
    }

    #[test]
    fn ordered_groups_are_exposed_per_queue_from_the_status() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "pid": 1, "master_pss_kib": null, "node": 1, "health": "serving", "exit_code": 0,
            "problems": [], "phase": "running", "paused": false, "paused_queues": {},
            "reloading": false, "pools": [], "totals": Totals::default(),
            "groups": {"queues": {"default": {"groups": 3, "held": 1, "waiting": 7, "oldest_head_secs": 2.5}}, "held": []},
        }))
        .unwrap();
        let text = Exposition::new().render(&status, None);
        for line in [
            "drover_groups{queue=\"default\"} 3",
            "drover_groups_held{queue=\"default\"} 1",
            "drover_group_jobs_waiting{queue=\"default\"} 7",
            "drover_group_oldest_head_seconds{queue=\"default\"} 2.5",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
    }

    #[test]
    fn each_scheduled_task_exposes_the_age_of_its_last_success_and_its_failures_since() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "pid": 1, "master_pss_kib": null, "node": 1, "health": "serving", "exit_code": 0,
            "problems": [], "phase": "running", "paused": false, "paused_queues": {},
            "reloading": false, "pools": [], "totals": Totals::default(),
            "schedule": [
                {"key": "framework/schedule-a", "summary": "php artisan report --password=hunter2", "expression": "0 * * * *",
                 "timezone": "UTC", "repeat_seconds": null, "one_server": true,
                 "next_due": null, "next_due_in_secs": null, "latest": null,
                 "last_success_age_secs": 8400.0, "failed_in_a_row": 2},
                {"key": "framework/schedule-b", "summary": "never", "expression": "* * * * *",
                 "timezone": "UTC", "repeat_seconds": null, "one_server": false,
                 "next_due": null, "next_due_in_secs": null, "latest": null,
                 "last_success_age_secs": null, "failed_in_a_row": 0}
            ],
        }))
        .unwrap();
        let text = Exposition::new().render(&status, None);
        for line in [
            "drover_schedule_last_success_age_seconds{task=\"framework/schedule-a\"} 8400.0",
            "drover_schedule_failed_in_a_row{task=\"framework/schedule-a\"} 2",
            "drover_schedule_failed_in_a_row{task=\"framework/schedule-b\"} 0",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        assert!(
            !text.contains("hunter2") && !text.contains("summary"),
            "a task's command line is no label: {text}"
        );
        assert!(
            !text
                .contains("drover_schedule_last_success_age_seconds{task=\"framework/schedule-b\""),
            "a task never succeeded has no age: {text}"
        );
    }

    #[test]
    fn workflows_and_the_progress_of_running_jobs_are_exposed_from_the_status() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "pid": 1, "master_pss_kib": null, "node": 1, "health": "serving", "exit_code": 0,
            "problems": [], "phase": "running", "paused": false, "paused_queues": {},
            "reloading": false, "totals": Totals::default(),
            "pools": [{"name": "default", "queues": ["default"], "processes": 2, "serving": 2,
                "generation": 1, "memory_limit_kib": null, "circuit": {"state": "closed"},
                "failures_in_a_row": 0, "restarts": 0, "retired": false, "paused": false,
                "autoscaling": null, "spawn": {"mode": "exec"},
                "workers": [
                    {"id": 1, "pid": 10, "state": "busy", "generation": 1, "held": 1, "running": 981,
                     "finished": 0, "pss_kib": null, "forked": false, "uptime_secs": 5},
                    {"id": 2, "pid": 11, "state": "busy", "generation": 1, "held": 1, "running": 982,
                     "finished": 0, "pss_kib": null, "forked": false, "uptime_secs": 5}]}],
            "progress": {"981": {"percent": 41, "note": "parsed 4,000 rows", "reported_secs_ago": 0.5}},
            "workflows": {"pending": 2, "running": 14, "nodes_waiting_for_signal": 3,
                          "nodes_waiting_for_time": 5, "failed_last_hour": 1},
        }))
        .unwrap();
        let text = Exposition::new().render(&status, None);
        for line in [
            "drover_workflows{state=\"pending\"} 2",
            "drover_workflows{state=\"running\"} 14",
            "drover_workflow_nodes_waiting{for=\"signal\"} 3",
            "drover_workflow_nodes_waiting{for=\"time\"} 5",
            "drover_workflows_failed_last_hour 1",
            "drover_worker_job_progress_percent{pool=\"default\",worker=\"1\"} 41",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        assert!(
            !text.contains("worker=\"2\""),
            "a job that reported no progress has no series: {text}"
        );
    }

    #[test]
    fn the_keys_jobs_wait_for_are_exposed_from_the_status() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "pid": 1, "master_pss_kib": null, "node": 1, "health": "serving", "exit_code": 0,
            "problems": [], "phase": "running", "paused": false, "paused_queues": {},
            "reloading": false, "pools": [], "totals": Totals::default(),
            "limits": [{"key": "tenant:7", "waiting": 120, "held": 2, "rate_used": null,
                        "window_ends_in_secs": null, "oldest_wait_secs": 42.5}],
        }))
        .unwrap();
        let text = Exposition::new().render(&status, None);
        for line in [
            "drover_limit_jobs_waiting{key=\"tenant:7\"} 120",
            "drover_limit_slots_held{key=\"tenant:7\"} 2",
            "drover_limit_rate_used{key=\"tenant:7\"} 0",
            "drover_limit_oldest_wait_seconds{key=\"tenant:7\"} 42.5",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
    }
}
