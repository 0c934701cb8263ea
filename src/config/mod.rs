//! What `drover run` is told to do: either command-line flags (one pool) or a versioned JSON file
//! (`--config FILE`), which is what `php artisan drover` writes from `config/drover.php`.
//! Unknown keys are rejected with their name; every other problem is collected and reported at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::rules::job_policy::PoolPolicy;

mod metrics_listener;
mod parse;
#[cfg(test)]
mod php_pool_options;
#[cfg(test)]
mod php_settings;
pub(crate) mod pool_limits;
mod validate;

pub use metrics_listener::{listen_address, MetricsToken};
pub use pool_limits::{MAX_MEMORY_MIB, MAX_PROCESSES, MAX_SECONDS};
pub use validate::{MAX_BUDGET, MAX_FRAME_BYTES, MAX_RETENTION_DAYS, MIN_LEASE_SECS};

/// The contract version this binary reads.
pub const CONFIG_VERSION: u32 = 1;

/// The whole run configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Must be 1.
    pub version: u32,
    /// PostgreSQL URL. `null`: the embedded default. `DATABASE_URL` in the environment wins, so a
    /// password need not be written to the file.
    #[serde(default)]
    pub database_url: Option<String>,
    /// Where the embedded cluster, `master.json` and `control.sock` live. Default
    /// `storage/drover` (under the working directory: in a Laravel application, the package's
    /// default too, so `drover status` run there finds the service).
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// The working directory of the reload command, and of pools that name none, as given: a
    /// deploy tool's `current` symlink stays a symlink, resolved anew at every spawn, so a reload
    /// after `ln -sfn` runs the new release. Default: the master's own.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Apply missing schema migrations at start. `false`: a schema older than this binary needs
    /// is refused by name (migrate it with `php artisan migrate` or `drover migrate`). A schema
    /// newer than the binary is refused either way. Default `true`.
    #[serde(default = "yes")]
    pub auto_migrate: bool,
    /// Lease length in seconds. Default 30.
    #[serde(default = "default_lease")]
    pub lease: f64,
    /// Seconds a graceful shutdown waits for running jobs. Default 30.
    #[serde(default = "default_grace")]
    pub shutdown_grace: f64,
    /// Seconds between fallback polls. Default 5.
    #[serde(default = "default_poll")]
    pub poll_interval: f64,
    /// OS user of the embedded PostgreSQL when drover runs as root. Default `postgres`.
    #[serde(default = "default_pg_user")]
    pub postgres_user: String,
    /// The longest frame a worker may send. Default 1 MiB.
    #[serde(default = "default_max_frame")]
    pub max_frame_bytes: usize,
    /// The OS user the master serves as — and so its workers and every command it runs for the
    /// application —, e.g. `www-data`: a master started as root becomes it before it opens
    /// anything; one started as another user refuses to start. `null`: the user that started it
    /// (root only on a laptop: warned). Default `null` (docs/security.md).
    #[serde(default)]
    pub user: Option<String>,
    /// Run on a reload (SIGHUP, `drover restart`) to write this file anew before it is re-read,
    /// e.g. `["php", "artisan", "drover", "--export"]`. `null`: the file is re-read as it is.
    #[serde(default)]
    pub reload_command: Option<Vec<String>>,
    /// Early deaths in a row (a worker that died before it was healthy, or never said hello in
    /// time) after which a pool stops restarting workers for a while. Default 5.
    #[serde(default = "default_restart_failures")]
    pub restart_failures: u32,
    /// Seconds a pool's restarts stay suspended the first time; doubles for each failed probe, up
    /// to 10 times as long. Default 30.
    #[serde(default = "default_restart_pause")]
    pub restart_pause: f64,
    /// Days a failed job stays in `drover.failed_jobs` before the master deletes it; 0 keeps them
    /// forever. Default 7 (Horizon's `trim.failed` is a week too).
    #[serde(default = "default_failed_retention_days")]
    pub failed_retention_days: u64,
    /// Record per-minute metrics (per queue and job class) in `drover.metrics`. Default `true`.
    #[serde(default = "yes")]
    pub record_metrics: bool,
    /// Minutes a metrics row is kept; 0 keeps them forever. Default 1440 (a day).
    #[serde(default = "default_metrics_trim")]
    pub metrics_trim: u64,
    /// Minutes completed jobs are kept in `drover.recent_jobs` (payload, timings, worker, CPU,
    /// memory) for the dashboard; 0 keeps no history. Default 0 (bench/RESULTS.md gives its cost).
    #[serde(default)]
    pub history_minutes: u64,
    /// Where the master serves `GET /metrics` (Prometheus / OpenMetrics) and `GET /healthz`,
    /// e.g. `127.0.0.1:9187`; a port alone (`9187`, `:9187`) is on `127.0.0.1`. `null`: no
    /// listener. Default `null`.
    #[serde(default)]
    pub metrics_listen: Option<String>,
    /// OpenTelemetry traces of the jobs, exported over OTLP/HTTP (docs/traces.md). `null`: none,
    /// and no cost. Read at the master's start (a reload that changes it takes effect at the next
    /// start). Default `null`.
    #[serde(default)]
    pub traces: Option<crate::traces::TracesConfig>,
    /// The bearer token `GET /metrics` asks for (`Authorization: Bearer <token>`), which also
    /// shows `/healthz`'s problems; `null`: none, both open to whoever reaches the listener.
    /// A secret, never printed. Written to the contract only when set. Default `null`.
    #[serde(default)]
    pub metrics_token: Option<MetricsToken>,
    /// Seconds a snapshot may hold the database's vacuum horizon back (a report in REPEATABLE
    /// READ, a request idle in its transaction, a standby's feedback, a slot) before the master
    /// warns, naming it and the fix (docs/operations.md, "A held snapshot"); 0: no warning.
    /// Default 60.
    #[serde(default = "default_snapshot_alert")]
    pub snapshot_alert_secs: u64,
    /// Long-wait alerts, as Horizon's `waits`: when a queue's oldest available job has waited
    /// longer than its threshold (docs/metrics.md, "Long-wait alerts"). Default: none.
    #[serde(default)]
    pub long_waits: LongWaits,
    /// Fleet-wide budgets: queue name to the most jobs of that queue leased at once across
    /// every master of the database (running, or held by a worker to run next), enforced by the
    /// claim under a lock per queue (docs/budgets.md). Each master enforces the budgets of its
    /// own configuration, so every host should name the same. Default: none.
    #[serde(default)]
    pub queue_budgets: BTreeMap<String, i64>,
    /// Fair queues: their claims take jobs by the fair tag given at enqueue, so the keys
    /// (tenants) of a queue are taken in turn (docs/limits.md, "Fair share"). Every host should
    /// name the same, and the application the same (`fair` in config/drover.php). Default: none.
    #[serde(default)]
    pub fair_queues: BTreeSet<String>,
    /// The application's schedule, run by this master (docs/schedule.md): written by the Laravel
    /// package when the application defines a schedule and `drover.schedule` is on. `null`: no
    /// schedule here. Default `null`.
    #[serde(default)]
    pub schedule: Option<ScheduleSpec>,
    /// The worker pools. Empty: the master runs no workers (an environment with no entry in
    /// `drover.environments`, as Horizon does); a reload can add them.
    pub pools: Vec<PoolSpec>,
}

/// The application's schedule (docs/schedule.md).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// Prints the schedule as one JSON document, e.g. `["php", "artisan",
    /// "drover:schedule-export"]`; run at the master's start, as the workers' user, in `cwd`.
    pub export_command: Vec<String>,
    /// Runs one due time of a task, e.g. `["php", "artisan", "drover:schedule-run"]`, with
    /// `--task=KEY --index=N` appended; as the workers' user, in `cwd`.
    pub run_command: Vec<String>,
    /// Days the history of runs is kept (`drover.schedule_runs`). Default 7.
    #[serde(default = "default_schedule_retention_days")]
    pub retention_days: u64,
    /// The pool whose zygote forks the runs (the application booted once: a run starts within
    /// milliseconds and costs no boot); the Laravel package names the first pool in fork mode.
    /// `null`, or while that pool has no ready zygote that runs one-offs: each run is started by
    /// `run_command`. Default `null`.
    #[serde(default)]
    pub fork_from: Option<String>,
    /// When a task needs attention (it keeps failing, or has not succeeded for a few of its
    /// periods) and how that is said. Defaults: below.
    #[serde(default)]
    pub alerts: ScheduleAlerts,
}

fn default_schedule_retention_days() -> u64 {
    7
}

/// Alerts for scheduled tasks (`crate::scheduling::alerts`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleAlerts {
    /// Runs failed since the last success that make a task failing. 0: off. Default 3.
    pub failures: u32,
    /// Due times passed since the last success (each given a minute) that make a task overdue.
    /// 0: off. Default 3.
    pub overdue_periods: u32,
    /// Seconds between two alerts for one task, fleet-wide. Default 300, as the long-wait
    /// alert's.
    pub cooldown_secs: u64,
    /// The application's alert command, `--task=KEY --summary=S --failures=N [--seconds=S]`
    /// appended (`php artisan drover:long-wait`). `null`: alerts are logged only.
    pub command: Option<Vec<String>>,
}

impl Default for ScheduleAlerts {
    fn default() -> Self {
        ScheduleAlerts {
            failures: 3,
            overdue_periods: 3,
            cooldown_secs: 300,
            command: None,
        }
    }
}

/// Long-wait alerts.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LongWaits {
    /// Seconds per queue (0 turns a queue's alert off). Every queue named is watched, whether or
    /// not this master serves it: a queue nobody serves is the one that most needs an alert.
    #[serde(default)]
    pub thresholds: BTreeMap<String, u64>,
    /// Seconds between two alerts for one queue, fleet-wide (the database keeps the last one).
    /// Default 300, as Horizon's.
    #[serde(default = "default_long_wait_cooldown")]
    pub cooldown: f64,
    /// Run with `--queue=Q --seconds=S` when an alert fires, e.g. `["php", "artisan",
    /// "drover:long-wait"]` (which fires Laravel's `Drover\Events\LongWaitDetected` and sends
    /// the notifications). `null`: the alert is only logged. Runs as the workers' user, in `cwd`.
    #[serde(default)]
    pub command: Option<Vec<String>>,
}

impl Default for LongWaits {
    fn default() -> Self {
        LongWaits {
            thresholds: BTreeMap::new(),
            cooldown: default_long_wait_cooldown(),
            command: None,
        }
    }
}

fn default_long_wait_cooldown() -> f64 {
    300.0
}

impl LongWaits {
    /// The queues watched, with their thresholds (those above 0).
    pub fn watched(&self) -> Vec<(String, Duration)> {
        self.thresholds
            .iter()
            .filter(|(_, secs)| **secs > 0)
            .map(|(queue, secs)| (queue.clone(), Duration::from_secs(*secs)))
            .collect()
    }

    pub fn cooldown(&self) -> Duration {
        Duration::from_secs_f64(self.cooldown)
    }
}

/// One pool of identical workers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    pub name: String,
    /// Queues served, highest priority first.
    pub queues: Vec<String>,
    /// Worker processes.
    pub processes: usize,
    /// Jobs each worker may hold. Default 1.
    #[serde(default = "one")]
    pub prefetch: u32,
    /// Seconds a job may run (unless its payload says) before its worker is killed; 0 = no
    /// limit. Default 60.
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    /// Seconds a started job keeps running past the end of a lease its master could not renew
    /// (the database unreachable: a failover, a restart), before its worker is stopped. The
    /// reap waits as long before another master may take the job back, so it never runs in
    /// two places; what it costs is that a host lost with its jobs gives them back that much
    /// later (docs/leases.md, "Outage grace"). 0: a worker is stopped before its lease ends,
    /// as it always was. Default 0.
    #[serde(default)]
    pub outage_grace: f64,
    /// The worker command, e.g. `["php", "artisan", "drover:work", "--pool=default"]`.
    pub command: Vec<String>,
    /// Its working directory, as given (see [`RunConfig::cwd`]). Default: the configuration's
    /// `cwd`, else the master's.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Extra environment for the workers.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// MiB of memory (PSS, measured by the master from /proc) above which a worker finishes its
    /// job and is replaced; 0 = no limit. Default 0.
    #[serde(default)]
    pub memory: u64,
    /// The workers' nice value (-20 to 19; below 0 needs root). Default 0 (the master's).
    #[serde(default)]
    pub nice: i32,
    /// Seconds a new worker has to say hello before it is killed as a failed start. Default 60.
    #[serde(default = "default_boot_timeout")]
    pub boot_timeout: f64,
    /// How the workers are spread over the queues (Horizon's `balance`). Default `off`.
    #[serde(default)]
    pub balance: Balance,
    /// `auto`: the fewest workers a queue keeps, even when empty. Default 1.
    #[serde(default = "one_usize")]
    pub min_processes: usize,
    /// `auto`: the most workers of the whole pool. Default: `processes`.
    #[serde(default)]
    pub max_processes: Option<usize>,
    /// `auto`: the most workers a queue gains or loses per cooldown. Default 1.
    #[serde(default = "one_usize")]
    pub balance_max_shift: usize,
    /// `auto`: seconds between scaling decisions. Default 3.
    #[serde(default = "default_cooldown")]
    pub balance_cooldown: f64,
    /// `auto`: what a queue's share follows. Default `time`.
    #[serde(default)]
    pub autoscaling_strategy: Strategy,
    /// `auto`: seconds a queue must keep wanting fewer workers before it loses one; a burst that
    /// pauses briefly does not cost its workers. Default 10.
    #[serde(default = "default_scale_down_delay")]
    pub scale_down_delay: f64,
    /// How the workers are started: `exec`, each its own process that boots the application, or
    /// `fork`, forked from a zygote that booted it once (docs/decisions/0001). Default `exec`
    /// (the Laravel package's `config/drover.php` defaults to `fork`).
    #[serde(default)]
    pub spawn: SpawnMode,
    /// The zygote's command in `fork` mode; default `command`. It runs with the workers'
    /// environment, directory and user, plus `DROVER_ZYGOTE=1`, which makes drover's worker
    /// commands (`php artisan drover:work`, `drover-worker`) boot and then fork on request.
    #[serde(default)]
    pub zygote_command: Option<Vec<String>>,
}

/// How a pool's workers are started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpawnMode {
    /// Each worker is a fresh process running `command`.
    #[default]
    Exec,
    /// Workers are forked from a zygote; the pool falls back to `exec` if the zygote cannot boot.
    Fork,
}

/// How a pool's workers are spread over its queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// One set of workers serves every queue, in priority order.
    #[default]
    Off,
    /// `processes` split evenly: each queue gets its own workers.
    Simple,
    /// Each queue gets its own workers, as many as its backlog calls for, between
    /// `min_processes` each and `max_processes` in all.
    Auto,
}

/// What an `auto` pool's queues get their share by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Backlog × average run time: the time each queue needs to clear.
    #[default]
    Time,
    /// Backlog alone.
    Size,
}

/// One set of workers of a pool: the whole pool (`balance: off`) or one queue of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `pool`, or `pool:queue` for a balanced pool.
    pub name: String,
    pub queues: Vec<String>,
    /// Workers at start.
    pub processes: usize,
}

/// The state directory of a master given none, for the binary and the Laravel package alike.
pub const DEFAULT_STATE_DIR: &str = "storage/drover";

fn default_state_dir() -> PathBuf {
    PathBuf::from(DEFAULT_STATE_DIR)
}
fn default_metrics_trim() -> u64 {
    1440
}

fn default_snapshot_alert() -> u64 {
    60
}
fn default_failed_retention_days() -> u64 {
    7
}
fn yes() -> bool {
    true
}
fn default_lease() -> f64 {
    30.0
}
fn default_grace() -> f64 {
    30.0
}
fn default_poll() -> f64 {
    5.0
}
fn default_pg_user() -> String {
    "postgres".to_string()
}
fn default_max_frame() -> usize {
    1 << 20
}
fn one() -> u32 {
    1
}
fn default_timeout() -> u64 {
    60
}
fn default_restart_failures() -> u32 {
    5
}
fn default_restart_pause() -> f64 {
    30.0
}
fn default_boot_timeout() -> f64 {
    60.0
}
fn one_usize() -> usize {
    1
}
fn default_cooldown() -> f64 {
    3.0
}
fn default_scale_down_delay() -> f64 {
    10.0
}

impl PoolSpec {
    /// A pool with every option at its default but these (the command line's one pool).
    pub fn defaults_with(
        name: &str,
        queues: Vec<String>,
        processes: usize,
        command: Vec<String>,
    ) -> PoolSpec {
        serde_json::from_value(serde_json::json!({
            "name": name,
            "queues": queues,
            "processes": processes,
            "command": command,
        }))
        .unwrap_or_else(|e| unreachable!("the defaults of a pool: {e}"))
    }

    /// An option's value by its name in the configuration, for the table of limits
    /// (`pool_limits::POOL_LIMITS`); null for a name that is not one of them.
    pub fn option(&self, name: &str) -> serde_json::Value {
        use serde_json::json;
        match name {
            "processes" => json!(self.processes),
            "prefetch" => json!(self.prefetch),
            "timeout" => json!(self.timeout),
            "outage_grace" => json!(self.outage_grace),
            "memory" => json!(self.memory),
            "nice" => json!(self.nice),
            "boot_timeout" => json!(self.boot_timeout),
            "spawn" => json!(self.spawn),
            "balance" => json!(self.balance),
            "min_processes" => json!(self.min_processes),
            "max_processes" => json!(self.max_processes),
            "balance_max_shift" => json!(self.balance_max_shift),
            "balance_cooldown" => json!(self.balance_cooldown),
            "autoscaling_strategy" => json!(self.autoscaling_strategy),
            "scale_down_delay" => json!(self.scale_down_delay),
            _ => serde_json::Value::Null,
        }
    }

    /// The sets of workers this pool runs as: itself, or one per queue when balanced.
    pub fn members(&self) -> Vec<Member> {
        let n = self.queues.len();
        match self.balance {
            Balance::Off => vec![Member {
                name: self.name.clone(),
                queues: self.queues.clone(),
                processes: self.processes,
            }],
            Balance::Simple => self
                .queues
                .iter()
                .enumerate()
                .map(|(i, q)| Member {
                    name: format!("{}:{q}", self.name),
                    queues: vec![q.clone()],
                    processes: self.processes / n + usize::from(i < self.processes % n),
                })
                .collect(),
            Balance::Auto => self
                .queues
                .iter()
                .map(|q| Member {
                    name: format!("{}:{q}", self.name),
                    queues: vec![q.clone()],
                    processes: self.min_processes,
                })
                .collect(),
        }
    }

    /// `auto`: the most workers in all.
    pub fn max_processes(&self) -> usize {
        self.max_processes.unwrap_or(self.processes)
    }

    pub fn policy(&self) -> PoolPolicy {
        PoolPolicy {
            timeout: Duration::from_secs(self.timeout),
            outage_grace: Duration::try_from_secs_f64(self.outage_grace).unwrap_or_default(),
        }
    }
}

impl RunConfig {
    /// Every setting at its default (the serde defaults above, the one place they are written),
    /// with these pools: what the command line's flags start from.
    pub fn defaults_with(pools: Vec<PoolSpec>) -> RunConfig {
        let mut config: RunConfig = serde_json::from_value(serde_json::json!({
            "version": CONFIG_VERSION,
            "pools": [],
        }))
        .unwrap_or_else(|e| unreachable!("the defaults of the run configuration: {e}"));
        config.pools = pools;
        config
    }

    pub fn lease(&self) -> Duration {
        Duration::from_secs_f64(self.lease)
    }

    /// The longest `outage_grace` of its pools (zero without pools): what the node row must
    /// be registered with (`drover_broker::BrokerConfig::outage_grace`).
    pub fn longest_outage_grace(&self) -> Duration {
        self.pools
            .iter()
            .map(|p| p.policy().outage_grace)
            .max()
            .unwrap_or_default()
    }
    /// The fleet-wide queue budgets, as the claim takes them (validated: each 1 to
    /// [`MAX_BUDGET`], which fits a `u32`).
    pub fn queue_budgets(&self) -> drover_broker::QueueBudgets {
        drover_broker::QueueBudgets::new(
            self.queue_budgets
                .iter()
                .map(|(q, n)| (q.clone(), u32::try_from(*n).unwrap_or(u32::MAX)))
                .collect(),
        )
    }
    /// The fair queues, as the claim takes them.
    pub fn fair_queues(&self) -> drover_broker::FairQueues {
        drover_broker::FairQueues::new(self.fair_queues.iter().cloned())
    }
    /// How long a snapshot may hold the vacuum horizon back before the master warns (zero: off).
    pub fn snapshot_alert(&self) -> Duration {
        Duration::from_secs(self.snapshot_alert_secs)
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs_f64(self.shutdown_grace)
    }
    pub fn poll_interval(&self) -> Duration {
        Duration::from_secs_f64(self.poll_interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"version":1,"state_dir":"/tmp/x","pools":[{"name":"default","queues":["high","default"],"processes":4,"command":["php","artisan","drover:work"]}]}"#;

    #[test]
    fn the_command_lines_configuration_gets_the_same_defaults_as_a_minimal_file() {
        let file = RunConfig::from_json(
            r#"{"version":1,"pools":[{"name":"default","queues":["default"],"processes":4,"command":["php","w.php"]}]}"#,
        )
        .unwrap();
        let flags = RunConfig::defaults_with(vec![PoolSpec::defaults_with(
            "default",
            vec!["default".into()],
            4,
            vec!["php".into(), "w.php".into()],
        )]);
        assert_eq!(format!("{flags:?}"), format!("{file:?}"));
    }

    #[test]
    fn a_minimal_file_gets_the_documented_defaults() {
        let c = RunConfig::from_json(GOOD).unwrap();
        assert_eq!(c.lease(), Duration::from_secs(30));
        assert_eq!(c.pools[0].prefetch, 1);
        assert_eq!(c.pools[0].policy(), PoolPolicy::default());
        assert!(c.database_url.is_none());
    }

    #[test]
    fn unknown_keys_are_named() {
        let bad = GOOD.replace("\"processes\":4", "\"processes\":4,\"proceses\":8");
        let problems = RunConfig::from_json(&bad).unwrap_err();
        assert!(
            problems[0].contains("unknown field `proceses`"),
            "{problems:?}"
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let bad = r#"{"version":1,"lease":0.1,"pools":[
            {"name":"a","queues":[],"processes":0,"prefetch":0,"command":[]},
            {"name":"a","queues":["q"],"processes":1,"command":["x"]}]}"#;
        let problems = RunConfig::from_json(bad).unwrap_err();
        assert_eq!(problems.len(), 6, "{problems:#?}");
    }

    #[test]
    fn a_queue_listed_twice_is_refused_by_name() {
        let bad = GOOD.replace(r#"["high","default"]"#, r#"["high","default","high"]"#);
        assert_ne!(bad, GOOD);
        let problems = RunConfig::from_json(&bad).unwrap_err();
        assert_eq!(
            problems,
            [
                r#"pool "default": queue "high" is listed twice; list each queue once, in priority order"#
            ]
        );
    }

    #[test]
    fn a_reload_names_the_settings_that_wait_for_a_restart() {
        let old = RunConfig::from_json(GOOD).unwrap();
        let mut new = old.clone();
        new.pools[0].processes = 9;
        assert!(old.changes_needing_a_restart(&new).is_empty());
        new.lease = 60.0;
        new.user = Some("www-data".into());
        assert_eq!(old.changes_needing_a_restart(&new), vec!["lease", "user"]);
    }

    #[test]
    fn queue_budgets_are_read_and_out_of_range_ones_refused_by_name() {
        let good = GOOD.replace(
            "\"version\":1",
            "\"version\":1,\"queue_budgets\":{\"api\":10}",
        );
        let config = RunConfig::from_json(&good).unwrap();
        assert_eq!(config.queue_budgets().of("api"), Some(10));
        assert_eq!(config.queue_budgets().of("default"), None);
        assert!(RunConfig::from_json(GOOD)
            .unwrap()
            .queue_budgets()
            .is_empty());
        let bad = GOOD.replace(
            "\"version\":1",
            "\"version\":1,\"queue_budgets\":{\"api\":0,\"\":5,\"big\":1000001}",
        );
        let all = RunConfig::from_json(&bad).unwrap_err().join("\n");
        for named in [
            "queue_budgets.api (drover.budgets in config/drover.php, or --budget) must be between 1 and 1000000 jobs",
            "queue_budgets.big (drover.budgets in config/drover.php, or --budget) must be between 1 and 1000000 jobs",
            "queue_budgets names an empty queue",
        ] {
            assert!(all.contains(named), "{named} in {all}");
        }
        // Never a panic on a negative or fractional value: refused by name by the parser.
        let negative = GOOD.replace(
            "\"version\":1",
            "\"version\":1,\"queue_budgets\":{\"api\":-1}",
        );
        assert!(RunConfig::from_json(&negative)
            .unwrap_err()
            .join("\n")
            .contains("queue_budgets"));
    }

    #[test]
    fn huge_and_invalid_durations_are_refused_by_name_not_panicked_on() {
        let bad = GOOD
            .replace("\"version\":1", "\"version\":1,\"lease\":1e300,\"restart_pause\":-1,\"shutdown_grace\":1e20")
            .replace(
                "\"processes\":4",
                "\"processes\":4,\"boot_timeout\":1e300,\"timeout\":18446744073709551615,\"memory\":18446744073709551615,\"balance_cooldown\":1e30",
            );
        let problems = RunConfig::from_json(&bad).unwrap_err();
        let all = problems.join("\n");
        for name in [
            "lease",
            "restart_pause",
            "shutdown_grace",
            "timeout",
            "memory",
            "balance_cooldown",
        ] {
            assert!(all.contains(name), "{name} not named in {all}");
        }
        // A number beyond f64 is refused by the parser, which names where it is.
        let problems =
            RunConfig::from_json(&GOOD.replace("\"version\":1", "\"version\":1,\"lease\":1e400"))
                .unwrap_err();
        assert!(problems[0].contains("number out of range"), "{problems:?}");
    }

    #[test]
    fn a_value_the_parser_refuses_is_named_by_its_key() {
        let file = "{\n  \"version\": 1,\n  \"restart_failures\" :\n    -1,\n  \"pools\": []\n}";
        let problems = RunConfig::from_json(file).unwrap_err();
        assert!(
            problems[0].starts_with("restart_failures: invalid value"),
            "{problems:?}"
        );
        for (value, key) in [
            ("\"NaN\"", "lease"),
            ("[1]", "lease"),
            ("{}", "lease"),
            ("1e400", "lease"),
            ("null", "lease"),
        ] {
            let problems = RunConfig::from_json(&format!(
                r#"{{"version":1,"state_dir":"a \"quoted\": dir","{key}":{value},"pools":[]}}"#
            ))
            .unwrap_err();
            assert!(problems[0].starts_with(&format!("{key}: ")), "{problems:?}");
        }
        // An element of an array is not a key's value: serde's own message.
        let problems = RunConfig::from_json(&GOOD.replace("\"php\",", "1,")).unwrap_err();
        assert!(
            problems[0].starts_with("invalid type: integer `1`"),
            "{problems:?}"
        );
    }

    #[test]
    fn another_version_is_refused_by_name() {
        let problems =
            RunConfig::from_json(&GOOD.replace("\"version\":1", "\"version\":2")).unwrap_err();
        assert!(
            problems[0].contains("version 2 is not supported"),
            "{problems:?}"
        );
    }
}
