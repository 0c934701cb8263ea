//! What `drover run` is told to do: either command-line flags (one pool) or a versioned JSON file
//! (`--config FILE`), which is what `php artisan drover` writes from `config/drover.php`.
//! Unknown keys are rejected with their name; every other problem is collected and reported at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::policy::PoolPolicy;
use crate::MasterError;

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
    /// The OS user workers (and the reload command) run as when the master is started as root,
    /// e.g. `www-data`. `null`: the master's own user (a root master logs a warning). Default
    /// `null`.
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
    /// e.g. `127.0.0.1:9187`. `null`: no listener. Default `null`.
    #[serde(default)]
    pub metrics_listen: Option<String>,
    /// Long-wait alerts, as Horizon's `waits`: when a queue's oldest available job has waited
    /// longer than its threshold (docs/metrics.md, "Long-wait alerts"). Default: none.
    #[serde(default)]
    pub long_waits: LongWaits,
    /// The worker pools. Empty: the master runs no workers (an environment with no entry in
    /// `drover.environments`, as Horizon does); a reload can add them.
    pub pools: Vec<PoolSpec>,
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpawnMode {
    /// Each worker is a fresh process running `command`.
    #[default]
    Exec,
    /// Workers are forked from a zygote; the pool falls back to `exec` if the zygote cannot boot.
    Fork,
}

/// How a pool's workers are spread over its queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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

/// The longest duration any setting may have: a year. Durations become clocks' deadlines, and
/// a value beyond what a clock can hold must be refused by name rather than panic.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;
/// The most worker processes one pool may have.
pub const MAX_PROCESSES: usize = 4096;
/// The largest memory limit, MiB (1 TiB).
pub const MAX_MEMORY_MIB: u64 = 1 << 20;
/// The longest frame a worker may be allowed to send (64 MiB).
pub const MAX_FRAME_BYTES: usize = 64 << 20;
/// The shortest lease, seconds. A worker's deadline lies lease/10 before its lease ends and
/// moves when a renewal (every lease/3) succeeds, so between renewals a healthy worker's nearest
/// deadline is 17/30 of the lease away: at 3 s, 1.7 s, which leaves a renewal its full client
/// deadline (lease/3) and a prefetched job the 1 s the worker wants before starting it
/// (docs/leases.md, "Margins"). Shorter leases stop healthy workers.
pub const MIN_LEASE_SECS: f64 = 3.0;

/// The longest failed-job retention, days (ten years).
pub const MAX_RETENTION_DAYS: u64 = 3650;

/// A duration setting: finite, positive (or 0 where `zero_ok`), at most [`MAX_SECONDS`]. A
/// positive one must stay positive as a [`Duration`] (at least 1 ns): a timer of zero panics.
fn check_seconds(problems: &mut Vec<String>, name: &str, secs: f64, zero_ok: bool) {
    let low_ok = if zero_ok { secs >= 0.0 } else { secs > 0.0 };
    if !(secs.is_finite()
        && low_ok
        && secs <= MAX_SECONDS
        && (zero_ok || !Duration::from_secs_f64(secs).is_zero()))
    {
        problems.push(format!(
            "{name} must be a number of seconds {} and at most {MAX_SECONDS} (a year), got {secs}",
            if zero_ok {
                "from 0"
            } else {
                "above 0 (1 ns at least)"
            }
        ));
    }
}

/// The key whose value a parse error stands at (serde_json's messages give only the line and
/// column): the error is reported right after a scalar value, or at the start of an array or
/// object, so the key is the string before the `:` before it. `None` elsewhere (an array's
/// element, an unknown key, which serde names itself).
fn key_at(text: &str, line: usize, column: usize) -> Option<String> {
    let b = text.as_bytes();
    let line_start = match line {
        0 | 1 => 0,
        n => text.match_indices('\n').nth(n - 2)?.0 + 1,
    };
    let mut i = (line_start + column).min(b.len());
    let skip_space = |i: &mut usize| {
        while *i > 0 && b[*i - 1].is_ascii_whitespace() {
            *i -= 1;
        }
    };
    // Where the string whose closing quote is at `end - 1` opens: the nearest unescaped quote.
    let string_start = |end: usize| -> Option<usize> {
        (0..end - 1).rev().find(|&j| {
            b[j] == b'"' && b[..j].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 0
        })
    };
    skip_space(&mut i);
    if i > 0 && b[i - 1] == b'"' {
        i = string_start(i)?;
    } else {
        while i > 0 && (b[i - 1].is_ascii_alphanumeric() || b"+-.".contains(&b[i - 1])) {
            i -= 1;
        }
    }
    skip_space(&mut i);
    if i == 0 || b[i - 1] != b':' {
        return None;
    }
    i -= 1;
    skip_space(&mut i);
    if i == 0 || b[i - 1] != b'"' {
        return None;
    }
    serde_json::from_str(&text[string_start(i)?..i]).ok()
}

/// The state directory of a master given none, for the binary and the Laravel package alike.
pub const DEFAULT_STATE_DIR: &str = "storage/drover";

fn default_state_dir() -> PathBuf {
    PathBuf::from(DEFAULT_STATE_DIR)
}
fn default_metrics_trim() -> u64 {
    1440
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
        }
    }
}

impl RunConfig {
    /// Reads and validates a config file.
    pub fn from_file(path: &Path) -> Result<RunConfig, MasterError> {
        let text = std::fs::read_to_string(path).map_err(|source| MasterError::Io {
            about: format!("reading the config file {}", path.display()),
            source,
        })?;
        Self::from_json(&text).map_err(|problems| MasterError::Config {
            source_name: path.display().to_string(),
            problems,
        })
    }

    /// Parses and validates; every problem is returned together.
    pub fn from_json(text: &str) -> Result<RunConfig, Vec<String>> {
        // Check the version first, so an old or new file gets that message, not a field error.
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
            match v.get("version").and_then(|v| v.as_u64()) {
                Some(n) if n == CONFIG_VERSION as u64 => {}
                Some(n) => {
                    return Err(vec![format!(
                        "version {n} is not supported; this drover reads version {CONFIG_VERSION} (upgrade drover or the drover/laravel package so they match)"
                    )])
                }
                None => return Err(vec!["\"version\" is missing; expected 1".to_string()]),
            }
        }
        let config: RunConfig = serde_json::from_str(text).map_err(|e| {
            vec![match key_at(text, e.line(), e.column()) {
                Some(key) => format!("{key}: {e}"),
                None => e.to_string(),
            }]
        })?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        for (name, secs) in [
            ("lease", self.lease),
            ("shutdown_grace", self.shutdown_grace),
            ("poll_interval", self.poll_interval),
            ("restart_pause", self.restart_pause),
        ] {
            check_seconds(&mut problems, name, secs, false);
        }
        if self.max_frame_bytes == 0 || self.max_frame_bytes > MAX_FRAME_BYTES {
            problems.push(format!(
                "max_frame_bytes must be between 1 and {MAX_FRAME_BYTES}, got {}",
                self.max_frame_bytes
            ));
        }
        if self.failed_retention_days > MAX_RETENTION_DAYS {
            problems.push(format!(
                "failed_retention_days must be at most {MAX_RETENTION_DAYS} (0 keeps failed jobs forever), got {}",
                self.failed_retention_days
            ));
        }
        if self.metrics_trim > MAX_RETENTION_DAYS * 1440 {
            problems.push(format!(
                "metrics_trim must be at most {} minutes (0 keeps metrics forever), got {}",
                MAX_RETENTION_DAYS * 1440,
                self.metrics_trim
            ));
        }
        check_seconds(
            &mut problems,
            "long_waits.cooldown",
            self.long_waits.cooldown,
            false,
        );
        for (queue, secs) in &self.long_waits.thresholds {
            if *secs as f64 > MAX_SECONDS {
                problems.push(format!(
                    "long_waits.thresholds.{queue} must be at most {MAX_SECONDS} seconds (a year; 0 turns the alert off), got {secs}"
                ));
            }
        }
        if self
            .long_waits
            .command
            .as_ref()
            .is_some_and(|c| c.is_empty() || c[0].is_empty())
        {
            problems.push("long_waits.command must name a program (or be null)".to_string());
        }
        if self.history_minutes > MAX_RETENTION_DAYS * 1440 {
            problems.push(format!(
                "history_minutes must be at most {} (0 keeps no history), got {}",
                MAX_RETENTION_DAYS * 1440,
                self.history_minutes
            ));
        }
        if let Some(addr) = &self.metrics_listen {
            if addr.parse::<std::net::SocketAddr>().is_err() {
                problems.push(format!(
                    "metrics_listen must be an address and port such as 127.0.0.1:9187 (or null for none), got {addr:?}"
                ));
            }
        }
        if self.lease < MIN_LEASE_SECS {
            problems.push(format!(
                "lease must be at least {MIN_LEASE_SECS} s (a shorter one leaves renewals too little time before the lease guard stops a healthy worker), got {}",
                self.lease
            ));
        }
        if self.restart_failures == 0 {
            problems.push("restart_failures must be at least 1".to_string());
        }
        if self
            .reload_command
            .as_ref()
            .is_some_and(|c| c.is_empty() || c[0].is_empty())
        {
            problems.push("reload_command is empty; leave it out or give a program".to_string());
        }
        if self.user.as_ref().is_some_and(|u| u.trim().is_empty()) {
            problems.push("user is empty; leave it out or name an OS user".to_string());
        }
        let mut names = std::collections::HashSet::new();
        for pool in &self.pools {
            let p = &pool.name;
            if !names.insert(p.as_str()) {
                problems.push(format!("pool {p:?} is defined twice"));
            }
            if p.is_empty() || p.contains(':') {
                problems.push(format!(
                    "pool {p:?}: a pool name must be non-empty and without ':' (balanced pools name their queues' workers pool:queue)"
                ));
            }
            if pool.queues.is_empty() || pool.queues.iter().any(|q| q.trim().is_empty()) {
                problems.push(format!(
                    "pool {p:?}: queues must list at least one non-empty queue name"
                ));
            }
            if pool.processes == 0 || pool.processes > MAX_PROCESSES {
                problems.push(format!(
                    "pool {p:?}: processes must be between 1 and {MAX_PROCESSES}, got {}",
                    pool.processes
                ));
            }
            if pool.max_processes.is_some_and(|m| m > MAX_PROCESSES) {
                problems.push(format!(
                    "pool {p:?}: max_processes must be at most {MAX_PROCESSES}"
                ));
            }
            if pool.timeout > crate::policy::MAX_JOB_TIMEOUT_SECS {
                problems.push(format!(
                    "pool {p:?}: timeout must be at most {} seconds (a year; 0 = no limit), got {}",
                    crate::policy::MAX_JOB_TIMEOUT_SECS,
                    pool.timeout
                ));
            }
            if pool.memory > MAX_MEMORY_MIB {
                problems.push(format!(
                    "pool {p:?}: memory must be at most {MAX_MEMORY_MIB} MiB (0 = no limit), got {}",
                    pool.memory
                ));
            }
            check_seconds(
                &mut problems,
                &format!("pool {p:?}: boot_timeout"),
                pool.boot_timeout,
                false,
            );
            check_seconds(
                &mut problems,
                &format!("pool {p:?}: balance_cooldown"),
                pool.balance_cooldown,
                false,
            );
            check_seconds(
                &mut problems,
                &format!("pool {p:?}: scale_down_delay"),
                pool.scale_down_delay,
                true,
            );
            if pool.prefetch == 0 || pool.prefetch > crate::ledger::MAX_PREFETCH {
                problems.push(format!(
                    "pool {p:?}: prefetch must be between 1 and {}",
                    crate::ledger::MAX_PREFETCH
                ));
            }
            if pool.command.is_empty() {
                problems.push(format!("pool {p:?}: command is empty"));
            }
            if pool.zygote_command.as_ref().is_some_and(|c| c.is_empty()) {
                problems.push(format!(
                    "pool {p:?}: zygote_command is empty; leave it out (the zygote then runs command) or give a program"
                ));
            }
            if !(-20..=19).contains(&pool.nice) {
                problems.push(format!(
                    "pool {p:?}: nice must be between -20 and 19, got {}",
                    pool.nice
                ));
            }
            match pool.balance {
                Balance::Off => {}
                Balance::Simple => {
                    if pool.processes < pool.queues.len() {
                        problems.push(format!(
                            "pool {p:?}: balance simple splits processes between the queues; {} processes cannot serve {} queues",
                            pool.processes,
                            pool.queues.len()
                        ));
                    }
                }
                Balance::Auto => {
                    if pool.min_processes == 0 {
                        problems.push(format!("pool {p:?}: min_processes must be at least 1"));
                    }
                    if pool.min_processes.saturating_mul(pool.queues.len()) > pool.max_processes() {
                        problems.push(format!(
                            "pool {p:?}: max_processes ({}) is below min_processes ({}) times the {} queues",
                            pool.max_processes(),
                            pool.min_processes,
                            pool.queues.len()
                        ));
                    }
                    if pool.balance_max_shift == 0 {
                        problems.push(format!("pool {p:?}: balance_max_shift must be at least 1"));
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The settings that differ in `new` and that a running master cannot take over (a reload
    /// applies the pools; these wait for the next start).
    pub fn changes_needing_a_restart(&self, new: &RunConfig) -> Vec<&'static str> {
        [
            // The file leaves the URL out when it comes from the environment (as `php artisan
            // drover` exports it): only a URL written in the file is a change.
            (
                "database_url",
                new.database_url.is_some() && new.database_url != self.database_url,
            ),
            ("state_dir", new.state_dir != self.state_dir),
            ("lease", new.lease != self.lease),
            ("shutdown_grace", new.shutdown_grace != self.shutdown_grace),
            ("poll_interval", new.poll_interval != self.poll_interval),
            ("user", new.user != self.user),
            ("postgres_user", new.postgres_user != self.postgres_user),
            ("metrics_listen", new.metrics_listen != self.metrics_listen),
            ("record_metrics", new.record_metrics != self.record_metrics),
            ("metrics_trim", new.metrics_trim != self.metrics_trim),
            (
                "history_minutes",
                new.history_minutes != self.history_minutes,
            ),
        ]
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect()
    }

    pub fn lease(&self) -> Duration {
        Duration::from_secs_f64(self.lease)
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
