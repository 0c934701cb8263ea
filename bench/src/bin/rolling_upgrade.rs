//! rolling_upgrade: the upgrade of a fleet of three masters on one PostgreSQL from the previous
//! release (the newest one `RELEASES` records, 0.2.0) to this tree, host by host, under a steady
//! load. By default (`--laravel both`) the whole sequence runs once per Laravel, 8.83 and 12.67,
//! with real Laravel applications: each host deploys the fixture application of each release's
//! tree (the previous one with that release's drover/laravel, the new one with this tree's) as a
//! team deploys it, and the jobs are a Laravel queued job dispatched on the `drover` connection
//! (`rolling_upgrade/laravel.rs` says how). `--laravel none` runs the plain PHP worker of each
//! release instead (`php-client/bin/drover-worker tests/fixtures/handler.php`). Either way every
//! job records its start, beats and finish in `public.runs`.
//!
//! The previous release is built from the commit `RELEASES` names for it (never a tag: tags do not
//! travel with every clone): a git worktree under `target/rolling-upgrade/vX.Y.Z` built with its
//! own target directory (`target/rolling-upgrade/vX.Y.Z-target`). This tree is built from a
//! worktree of `HEAD` (`target/rolling-upgrade/head`, `target/rolling-upgrade/head-target`; or
//! `--new-bin`), so that files being edited in the working tree do not reach a worker mid-run.
//!
//! - Plain worker: each host runs `drover run --config FILE` (the versioned JSON contract, as
//!   `php artisan drover` writes it); upgrading a host's package rewrites the file to name the new
//!   release's worker command, then SIGHUP (a reload).
//! - Laravel: each host's master is `php site/current/artisan drover` (the unit's ExecStart), its
//!   binary `bin/drover` (`DROVER_BINARY`); upgrading its package deploys a new release directory
//!   (`ln -sfn` to `current`, `php current/artisan migrate --force`), then
//!   `php current/artisan drover:restart` (a reload).
//!
//! Upgrading a host's binary is `systemctl restart` with the new binary: SIGTERM (a graceful
//! drain), then the new binary on the same state directory (for Laravel: `bin/drover` replaced,
//! then `php current/artisan drover` again).
//!
//! The load: every `--group-every`-th job belongs to one of `--groups` ordered groups, and the
//! queue has a fleet-wide budget (`--budget`), so ordered groups and budgets are served by
//! masters of both releases at once. The steps, each after `--service` seconds of service, the
//! producer (an application on the previous package, never upgraded) dispatching throughout:
//!
//! 0. A, B and C on the previous release (binary and package); its schema (migrated by the
//!    previous binary, or by the first host's `php artisan migrate` with the previous package).
//! 1. host A binary first: new binary, previous package; it migrates the schema at start.
//! 2. host B package first: the previous master's workers reloaded onto the new package.
//! 3. host B binary: SIGTERM; the previous binary started again on the migrated schema must serve
//!    (the window: docs/upgrading.md), and serves `--service` seconds; then it is SIGKILLed (a
//!    crash: its workers die with it, and the other masters — of both releases — reap its leases
//!    and run its jobs again); then the new binary starts, with an `outage_grace`, which is given
//!    while a master of the previous release has a row (it honours it). Then a queue pause
//!    (`drover.pause_queue`) with masters of both releases: every master confirms it, and none
//!    starts a job of the queue after that.
//! 4. host C binary and package at once (with an `outage_grace`).
//! 5. host A package: its new master reloaded onto the new package (and an `outage_grace`).
//!
//! Then the producer stops, the queue drains, the masters stop, and the harness asserts over
//! `public.runs`, `drover.jobs` and `drover.failed_jobs` (`rolling_upgrade/report.rs`): every
//! enqueued job finished exactly once (none lost, none doubled, none failed), no two executions of
//! one job overlapped, each group's jobs ran in order one at a time, the budget was never
//! exceeded, no worker was refused for its protocol, every master served after its step, every
//! master stopped cleanly (but the one killed). It writes the report to
//! `bench/results/rolling_upgrade_from_X.Y.Z.md` (one section per Laravel; `…_plain.md` with
//! `--laravel none`; the runs from 0.1.0, by this binary's earlier version, are
//! `rolling_upgrade.md` and `rolling_upgrade_plain.md`) and exits 1 if an assertion failed.
//!
//! ```sh
//! cargo run --release -p drover-bench --bin rolling_upgrade                  # both Laravels
//! cargo run --release -p drover-bench --bin rolling_upgrade -- --laravel 12 --service 10 --rate 12
//! cargo run --release -p drover-bench --bin rolling_upgrade -- --laravel none  # the plain worker
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Parser;
use drover_broker::{connect, EmbeddedConfig, EmbeddedPostgres};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use tokio_postgres::Client;

#[path = "rolling_upgrade/laravel.rs"]
mod laravel;
#[path = "rolling_upgrade/report.rs"]
mod report;

use report::report;

#[derive(Parser, Clone)]
#[command(
    about = "A rolling upgrade from the previous release (RELEASES) to this tree: three masters, under load"
)]
struct Args {
    /// Seconds of service before each step (and after the last one).
    #[arg(long, default_value_t = 10.0)]
    service: f64,
    /// Jobs enqueued per second by the producer, throughout.
    #[arg(long, default_value_t = 12.0)]
    rate: f64,
    /// Every n-th job runs 3 s (beating every 100 ms); the others 50-500 ms, uniformly.
    #[arg(long, default_value_t = 25)]
    long_every: u64,
    /// Every n-th job belongs to an ordered group (0: none).
    #[arg(long, default_value_t = 4)]
    group_every: u64,
    /// How many ordered groups those jobs are spread over, in turn.
    #[arg(long, default_value_t = 3)]
    groups: u64,
    /// The queue's fleet-wide budget: at most this many of its jobs leased at once across every
    /// master (0: none). Leases held by a worker to run next count.
    #[arg(long, default_value_t = 8)]
    budget: u32,
    /// Lease of every master, seconds.
    #[arg(long, default_value_t = 6.0)]
    lease: f64,
    /// Workers per master.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Jobs each worker may hold.
    #[arg(long, default_value_t = 2)]
    prefetch: u32,
    /// `outage_grace` (seconds) of the pools of a host once it runs the new binary and package.
    #[arg(long, default_value_t = 10.0)]
    outage_grace: f64,
    /// Attempts each job is enqueued with.
    #[arg(long, default_value_t = 3)]
    max_attempts: i32,
    /// Skip the queue-pause check after step 3.
    #[arg(long)]
    no_pause: bool,
    /// The previous release, a version `RELEASES` records (default: its newest).
    #[arg(long)]
    from: Option<String>,
    /// The commit of this release to build and run (binary and PHP package), checked out in the
    /// worktree target/rolling-upgrade/head: the working tree's uncommitted edits do not reach the
    /// run.
    #[arg(long, default_value = "HEAD")]
    new_rev: String,
    /// Run this binary as the new release instead of the one built from `--new-rev` (its PHP
    /// package still comes from the worktree), e.g. target/release/drover.
    #[arg(long)]
    new_bin: Option<PathBuf>,
    /// Do not build (the binaries and worktrees must exist).
    #[arg(long)]
    no_build: bool,
    /// Keep the run's directory (logs, state directories, the cluster) instead of deleting it.
    #[arg(long)]
    keep: bool,
    /// The workers: Laravel applications on Laravel 8.83, on 12.67, on each in turn (`both`), or
    /// the plain PHP worker (`none`: `php-client/bin/drover-worker` and the tests' handler).
    #[arg(long, default_value = "both", value_parser = ["8", "12", "both", "none"])]
    laravel: String,
    /// How the Laravel pools start their workers: `fork` (the default of `config/drover.php`) or
    /// `exec`. The plain worker is always exec'd.
    #[arg(long, default_value = "fork", value_parser = ["fork", "exec"])]
    spawn: String,
    /// Where the report goes (relative to the repository's root); by default
    /// bench/results/rolling_upgrade_from_X.Y.Z.md (the previous release's version), or
    /// rolling_upgrade_from_X.Y.Z_plain.md with `--laravel none`.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// What the masters run: the plain PHP worker, or a Laravel application (8 or 12).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Plain,
    Laravel(u8),
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Release {
    Old,
    New,
}

/// The previous release's version (from `RELEASES`), once `prepare` read it.
static PREVIOUS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

impl Release {
    /// How the report names it: the previous release's version, or "head" (this tree).
    fn label(self) -> &'static str {
        match self {
            Release::Old => PREVIOUS.get().map_or("previous", String::as_str),
            Release::New => "head",
        }
    }

    /// How a release directory names the package it holds (`N-drover-prev`, `N-drover-head`).
    fn tag(self) -> &'static str {
        match self {
            Release::Old => "prev",
            Release::New => "head",
        }
    }
}

/// Where each release's binary and PHP package are.
#[derive(Clone)]
struct Releases {
    root: PathBuf,
    /// The previous release as `RELEASES` records it.
    old_release: drover_bench::releases::Release,
    old_tree: PathBuf,
    old_bin: PathBuf,
    new_tree: PathBuf,
    new_bin: PathBuf,
}

impl Releases {
    fn bin(&self, r: Release) -> &Path {
        match r {
            Release::Old => &self.old_bin,
            Release::New => &self.new_bin,
        }
    }
    fn tree(&self, r: Release) -> &Path {
        match r {
            Release::Old => &self.old_tree,
            Release::New => &self.new_tree,
        }
    }
    fn worker_command(&self, r: Release) -> Vec<String> {
        let tree = self.tree(r);
        vec![
            "php".into(),
            tree.join("php-client/bin/drover-worker")
                .display()
                .to_string(),
            tree.join("tests/fixtures/handler.php")
                .display()
                .to_string(),
        ]
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// One `drover run` process of one host: a host has one per (re)start.
#[derive(Clone)]
struct Incarnation {
    host: &'static str,
    n: usize,
    bin: Release,
    pid: i32,
    log: PathBuf,
    started: f64,
    serving_at: Option<f64>,
    term_at: Option<f64>,
    exited_at: Option<f64>,
    exit: Option<String>,
    exit_ok: bool,
    /// SIGKILLed by the run (a crash), at this time.
    killed_at: Option<f64>,
}

/// What the pid tracker saw of a worker process.
#[derive(Clone, Debug)]
struct WorkerSeen {
    host: &'static str,
    master_pid: i32,
    bin: Release,
    worker: Release,
    last_seen: f64,
    /// DROVER_PROTOCOL in its environment: what its master told it it speaks.
    told: Option<String>,
}

#[derive(Default)]
struct Tracker {
    /// Running masters: pid -> (host, binary release).
    masters: BTreeMap<i32, (&'static str, Release)>,
    workers: BTreeMap<i32, WorkerSeen>,
    /// A worker pid seen under two masters (pid reuse): it could not be attributed.
    ambiguous: BTreeSet<i32>,
    /// Laravel in fork mode: DROVER_PROTOCOL in the environment of each master's zygote (the
    /// master starts it with what it tells its workers; a forked worker's own
    /// `/proc/PID/environ` does not show it).
    zygote_told: BTreeMap<i32, Option<String>>,
}

/// The children (and their children) of `pid`, from /proc/PID/task/*/children: (pid, parent).
fn descendants(pid: i32, depth: usize, out: &mut Vec<(i32, i32)>) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            out.push((child, pid));
            if depth > 0 {
                descendants(child, depth - 1, out);
            }
        }
    }
}

/// Every 50 ms: the worker processes of each running master, and which release's worker each
/// runs: the plain worker's from its command line (the tree its drover-worker is in), a Laravel
/// worker's from its working directory (the release directory it runs in).
///
/// A Laravel pool that forks (`spawn: fork`) has a zygote, which is not a worker (its title ends
/// with "(drover zygote)" once it booted), and what the master told a forked worker is in the
/// zygote's environment as it booted (the master execs the zygote with it; once the zygote set its
/// title, over the memory of its environment, neither its `/proc/PID/environ` nor a forked
/// worker's shows it). Forked workers are the master's children, as exec'd
/// ones are.
fn track(
    tracker: Arc<Mutex<Tracker>>,
    old_tree: String,
    new_tree: String,
    laravel: bool,
    fork: bool,
) {
    loop {
        let masters: Vec<(i32, &'static str, Release)> = tracker
            .lock()
            .unwrap()
            .masters
            .iter()
            .map(|(p, (h, r))| (*p, *h, *r))
            .collect();
        let t = now();
        for (mpid, host, bin) in masters {
            let mut kids = Vec::new();
            descendants(mpid, 2, &mut kids);
            for (pid, _parent) in kids {
                let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                    continue;
                };
                let args: Vec<String> = cmdline
                    .split(|b| *b == 0)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                let worker = if laravel {
                    let line = args.join(" ");
                    if laravel::is_zygote(&line) {
                        // Not a worker (it may have been taken for one while it booted, before
                        // its title); what it was told is what its master tells the workers it
                        // forks.
                        // Read when it was first seen, before its title: PHP's
                        // cli_set_process_title writes the title over the environment's
                        // memory, which /proc/PID/environ then shows.
                        let mut tr = tracker.lock().unwrap();
                        let told = tr
                            .workers
                            .remove(&pid)
                            .and_then(|w| w.told)
                            .or_else(|| told(pid));
                        if told.is_some() {
                            tr.zygote_told.insert(mpid, told);
                        }
                        continue;
                    }
                    if !laravel::is_worker(&line) {
                        continue;
                    }
                    let Some(worker) = std::fs::read_link(format!("/proc/{pid}/cwd"))
                        .ok()
                        .and_then(|cwd| laravel::release_of(&cwd))
                    else {
                        continue;
                    };
                    worker
                } else {
                    let Some(script) = args.iter().find(|a| a.ends_with("drover-worker")) else {
                        continue;
                    };
                    if script.starts_with(&old_tree) {
                        Release::Old
                    } else if script.starts_with(&new_tree) {
                        Release::New
                    } else {
                        continue;
                    }
                };
                let mut tr = tracker.lock().unwrap();
                match tr.workers.get_mut(&pid) {
                    Some(seen) if seen.master_pid == mpid => seen.last_seen = t,
                    Some(_) => {
                        tr.ambiguous.insert(pid);
                    }
                    None => {
                        let told = if fork {
                            tr.zygote_told.get(&mpid).cloned().flatten()
                        } else {
                            told(pid)
                        };
                        tr.workers.insert(
                            pid,
                            WorkerSeen {
                                host,
                                master_pid: mpid,
                                bin,
                                worker,
                                last_seen: t,
                                told,
                            },
                        );
                    }
                }
            }
        }
        if fork {
            // A worker forked before its zygote was seen with its title.
            let mut tr = tracker.lock().unwrap();
            let zygote_told = tr.zygote_told.clone();
            for w in tr.workers.values_mut() {
                if w.told.is_none() {
                    w.told = zygote_told.get(&w.master_pid).cloned().flatten();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// DROVER_PROTOCOL in the environment process `pid` was started with.
fn told(pid: i32) -> Option<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .ok()
        .and_then(|env| {
            env.split(|b| *b == 0)
                .find_map(|kv| kv.strip_prefix(b"DROVER_PROTOCOL="))
                .map(|v| String::from_utf8_lossy(v).into_owned())
        })
}

/// One host: a state directory, a configuration file and its current master.
struct Host {
    name: &'static str,
    dir: PathBuf,
    state: PathBuf,
    config: PathBuf,
    child: Option<tokio::process::Child>,
    current: Option<usize>,
    bin: Release,
    worker: Release,
    /// With a Laravel application: the deploy layout (`releases/`, `current`).
    site: Option<laravel::Site>,
    /// With a Laravel application: the host's environment (`/etc/drover/APP.env`).
    env: Vec<(String, String)>,
}

/// A master the run SIGKILLed: when, its pid, and the jobs it held leased then.
struct Crash {
    at: f64,
    pid: i32,
    leased: Vec<i64>,
}

/// A sample of the nodes and leases, every 200 ms.
#[derive(Clone, Debug)]
struct Sample {
    at: f64,
    /// Node rows heard from within a minute: (pid, release).
    nodes: Vec<(i32, Option<String>)>,
    leased: i64,
    /// Leases with an outage grace (`lease_grace`, schema 9).
    graced: Option<i64>,
    backlog: i64,
}

struct Run {
    args: Args,
    mode: Mode,
    /// Each release's application, with a Laravel application.
    apps: Option<laravel::Apps>,
    /// PostgreSQL's socket directory (`DB_HOST` of the Laravel applications).
    db_host: String,
    rel: Releases,
    url: String,
    dsn: String,
    dir: PathBuf,
    db: Client,
    hosts: Vec<Host>,
    incarnations: Vec<Incarnation>,
    tracker: Arc<Mutex<Tracker>>,
    samples: Arc<Mutex<Vec<Sample>>>,
    /// (time, what): the timeline.
    events: Vec<(f64, String)>,
    /// Each step: (name, host index, began, done).
    steps: Vec<(String, usize, f64, f64)>,
    notes: Vec<String>,
    /// The producer's exit, when it was not a success (with its stderr).
    producer_failed: Option<String>,
    /// The master the run SIGKILLed, if it did.
    crash: Option<Crash>,
    statuses: Vec<(String, String)>,
    t0: f64,
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Run {
    fn rel_t(&self, t: f64) -> String {
        format!("{:.1} s", t - self.t0)
    }

    fn event(&mut self, what: impl Into<String>) {
        let what = what.into();
        let t = now();
        println!("[{:7.1} s] {what}", t - self.t0);
        self.events.push((t, what));
    }

    /// Gives host `h` the `worker` release's package with `grace`: the plain run writes the
    /// contract's file; a Laravel host deploys a new release (ship, `ln -sfn` to `current`,
    /// `php current/artisan migrate --force`). Neither tells the master: see [`Run::reload`].
    fn configure(&mut self, h: usize, worker: Release, grace: f64) -> anyhow::Result<()> {
        if self.mode == Mode::Plain {
            return self.write_config(h, worker, grace);
        }
        let pool = laravel::Pool {
            processes: self.args.workers,
            prefetch: self.args.prefetch,
            lease: self.args.lease,
            tries: self.args.max_attempts,
            spawn: self.args.spawn.clone(),
            grace,
            budget: self.args.budget,
        };
        let apps = self.apps.as_ref().unwrap();
        let site = self.hosts[h].site.as_mut().unwrap();
        let name = site.ship(apps, worker, &pool)?;
        site.switch_to(&name)?;
        let current = site.current();
        let (ok, out) = laravel::artisan(
            &current,
            &self.hosts[h].env,
            &["migrate", "--force", "--no-ansi"],
        );
        let host = self.hosts[h].name;
        let said = out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" / ");
        if !ok {
            bail!("host {host}: php current/artisan migrate --force failed: {out}");
        }
        self.event(format!(
            "host {host}: deployed releases/{name} (the {} package{}), current -> it; php current/artisan migrate --force: {said}",
            worker.label(),
            if grace > 0.0 { format!(", outage_grace {grace} s") } else { String::new() }
        ));
        Ok(())
    }

    fn write_config(&self, h: usize, worker: Release, grace: f64) -> anyhow::Result<()> {
        let host = &self.hosts[h];
        let mut pool = json!({
            "name": "default",
            "queues": ["default"],
            "processes": self.args.workers,
            "prefetch": self.args.prefetch,
            "spawn": "exec",
            "command": self.rel.worker_command(worker),
        });
        if grace > 0.0 {
            pool["outage_grace"] = json!(grace);
        }
        let mut config = json!({
            "version": 1,
            "database_url": self.url,
            "state_dir": host.state,
            "lease": self.args.lease,
            "auto_migrate": true,
            "pools": [pool],
        });
        if self.args.budget > 0 {
            config["queue_budgets"] = json!({ "default": self.args.budget });
        }
        // Written whole, then renamed: a reload never reads half a file.
        let tmp = host.config.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&config)?)?;
        std::fs::rename(&tmp, &host.config)?;
        Ok(())
    }

    /// `drover run --config` of host `h` with binary `bin`; returns the incarnation's index.
    fn start_master(&mut self, h: usize, bin: Release) -> anyhow::Result<usize> {
        let n = self
            .incarnations
            .iter()
            .filter(|i| i.host == self.hosts[h].name)
            .count()
            + 1;
        let host = &self.hosts[h];
        let log = host
            .dir
            .join(format!("master-{n}-{}.log", bin.label().replace('.', "")));
        let out = File::create(&log)?;
        let mut cmd = if let Some(site) = &host.site {
            // The binary as the package manager left it, then the unit's ExecStart:
            // `php /site/current/artisan drover`, which execs the binary in its place.
            laravel::replace_link(&host.dir.join("bin/drover"), self.rel.bin(bin))?;
            let mut cmd = tokio::process::Command::new("php");
            cmd.arg(site.current().join("artisan")).arg("drover");
            for k in [
                "DATABASE_URL",
                "DROVER_DATABASE_URL",
                "DROVER_PROTOCOL",
                "DB_CONNECTION",
                "APP_BASE_PATH",
            ] {
                cmd.env_remove(k);
            }
            cmd.envs(host.env.iter().map(|(k, v)| (k, v)));
            cmd
        } else {
            let mut cmd = tokio::process::Command::new(self.rel.bin(bin));
            cmd.arg("run")
                .arg("--config")
                .arg(&host.config)
                .env("DROVER_PDO_DSN", &self.dsn)
                .env("DROVER_LOG", "info")
                .env_remove("DATABASE_URL")
                .env_remove("DROVER_DATABASE_URL")
                .env_remove("DROVER_STATE_DIR")
                .env_remove("DROVER_PROTOCOL");
            cmd
        };
        cmd.current_dir(&host.dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true);
        let child = cmd.spawn().context("starting drover run")?;
        let pid = child.id().unwrap() as i32;
        let name = host.name;
        self.incarnations.push(Incarnation {
            host: name,
            n,
            bin,
            pid,
            log,
            started: now(),
            serving_at: None,
            term_at: None,
            exited_at: None,
            exit: None,
            exit_ok: false,
            killed_at: None,
        });
        let idx = self.incarnations.len() - 1;
        self.tracker
            .lock()
            .unwrap()
            .masters
            .insert(pid, (name, bin));
        let host = &mut self.hosts[h];
        host.child = Some(child);
        host.current = Some(idx);
        host.bin = bin;
        self.event(format!(
            "host {name}: started the {} binary (pid {pid})",
            bin.label()
        ));
        Ok(idx)
    }

    /// `drover status --json` of host `h` with its current binary: (exit code, JSON).
    async fn status(&self, h: usize) -> (i32, Value) {
        let host = &self.hosts[h];
        let out = tokio::process::Command::new(self.rel.bin(host.bin))
            .args(["status", "--json", "--state-dir"])
            .arg(&host.state)
            .output()
            .await;
        match out {
            Ok(out) => (
                out.status.code().unwrap_or(-1),
                serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
            ),
            Err(_) => (-1, Value::Null),
        }
    }

    /// The host's workers, as the tracker sees them now: (pid, worker release).
    fn live_workers(&self, h: usize) -> Vec<(i32, Release)> {
        let Some(idx) = self.hosts[h].current else {
            return vec![];
        };
        let mpid = self.incarnations[idx].pid;
        let t = now();
        self.tracker
            .lock()
            .unwrap()
            .workers
            .iter()
            .filter(|(_, w)| w.master_pid == mpid && t - w.last_seen < 0.3)
            .map(|(p, w)| (*p, w.worker))
            .collect()
    }

    /// Waits until host `h`'s master reports every worker serving and the tracker sees all of
    /// them running `worker`.
    async fn wait_serving(&mut self, h: usize, worker: Release) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(90);
        let idx = self.hosts[h].current.unwrap();
        loop {
            let (code, st) = self.status(h).await;
            let serving: u64 = st["pools"]
                .as_array()
                .map(|ps| ps.iter().filter_map(|p| p["serving"].as_u64()).sum())
                .unwrap_or(0);
            let live = self.live_workers(h);
            if code == 0
                && serving as usize >= self.args.workers
                && live.len() == self.args.workers
                && live.iter().all(|(_, r)| *r == worker)
            {
                self.incarnations[idx].serving_at.get_or_insert(now());
                let name = self.hosts[h].name;
                self.event(format!(
                    "host {name}: serving, {} workers of the {} package: pids {:?}",
                    live.len(),
                    worker.label(),
                    live.iter().map(|(p, _)| *p).collect::<Vec<_>>()
                ));
                return Ok(());
            }
            if let Some(child) = self.hosts[h].child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "host {}'s master exited ({status}) before serving:\n{}",
                        self.hosts[h].name,
                        log_tail(&self.incarnations[idx].log, 40)
                    );
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "host {} not serving with {} workers of {} within 90 s (status exit {code}, serving {serving}, live {live:?}):\n{}",
                    self.hosts[h].name,
                    self.args.workers,
                    worker.label(),
                    log_tail(&self.incarnations[idx].log, 40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM to host `h`'s master, and its exit (a graceful drain).
    async fn stop_master(&mut self, h: usize) -> anyhow::Result<ExitStatus> {
        let idx = self.hosts[h].current.take().unwrap();
        let pid = self.incarnations[idx].pid;
        let t = now();
        self.incarnations[idx].term_at = Some(t);
        kill(Pid::from_raw(pid), Signal::SIGTERM)?;
        let mut child = self.hosts[h].child.take().unwrap();
        let status = tokio::time::timeout(Duration::from_secs(90), child.wait())
            .await
            .context("the master did not exit within 90 s of SIGTERM")??;
        let done = now();
        self.tracker.lock().unwrap().masters.remove(&pid);
        let inc = &mut self.incarnations[idx];
        inc.exited_at = Some(done);
        inc.exit = Some(status.to_string());
        inc.exit_ok = status.success();
        let bin = inc.bin;
        let name = self.hosts[h].name;
        self.event(format!(
            "host {name}: the {} master (pid {pid}) drained and exited in {:.2} s: {status}",
            bin.label(),
            done - t
        ));
        Ok(status)
    }

    /// Waits (up to 20 s) until host `h`'s master holds the lease of a job one of its workers has
    /// started and not finished, so that a crash takes a running job with it.
    async fn wait_running_job(&mut self, h: usize) -> anyhow::Result<()> {
        let pid = self.incarnations[self.hosts[h].current.unwrap()].pid;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let running: i64 = self
                .db
                .query_one(
                    "SELECT count(*) FROM drover.jobs AS j JOIN drover.nodes AS n ON n.id = j.lease_owner
                     WHERE n.pid = $1
                       AND EXISTS (SELECT 1 FROM public.runs AS r WHERE r.job_id = j.id AND r.event = 'start')
                       AND NOT EXISTS (SELECT 1 FROM public.runs AS r WHERE r.job_id = j.id AND r.event = 'finish')",
                    &[&pid],
                )
                .await?
                .get(0);
            if running > 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.notes.push(format!(
                    "Host {}'s master (pid {pid}) ran no job for 20 s before the crash.",
                    self.hosts[h].name
                ));
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL to host `h`'s master (a crash: its workers die with it by their parent-death
    /// signal; its leases stay until they end and another master reaps them).
    async fn kill_master(&mut self, h: usize) -> anyhow::Result<()> {
        let idx = self.hosts[h].current.take().unwrap();
        let pid = self.incarnations[idx].pid;
        let t = now();
        kill(Pid::from_raw(pid), Signal::SIGKILL)?;
        let mut child = self.hosts[h].child.take().unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .context("the master did not die within 10 s of SIGKILL")??;
        self.tracker.lock().unwrap().masters.remove(&pid);
        let inc = &mut self.incarnations[idx];
        inc.killed_at = Some(t);
        inc.exited_at = Some(now());
        inc.exit = Some(status.to_string());
        inc.exit_ok = std::os::unix::process::ExitStatusExt::signal(&status) == Some(9);
        let bin = inc.bin;
        let name = self.hosts[h].name;
        let leased: Vec<i64> = self
            .db
            .query(
                "SELECT j.id FROM drover.jobs AS j JOIN drover.nodes AS n ON n.id = j.lease_owner
                 WHERE n.pid = $1 ORDER BY j.id",
                &[&pid],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        self.event(format!(
            "host {name}: the {} master (pid {pid}) SIGKILLed with {} job(s) leased {leased:?} ({status}): a crash; the other masters reap its leases when they end",
            bin.label(),
            leased.len()
        ));
        self.crash = Some(Crash { at: t, pid, leased });
        Ok(())
    }

    /// Step `name` of `host` began at `began` and has just ended (its host serves again).
    fn step_done(&mut self, name: &str, host: usize, began: f64) {
        self.steps.push((name.to_string(), host, began, now()));
    }

    async fn service(&mut self) {
        let secs = self.args.service;
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    }

    async fn snapshot_status(&mut self, label: &str) {
        for h in 0..self.hosts.len() {
            if self.hosts[h].current.is_none() {
                continue;
            }
            let (code, st) = self.status(h).await;
            let pools: Vec<String> = st["pools"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|p| {
                    format!(
                        "pool {}: serving {}/{}{}",
                        p["name"].as_str().unwrap_or("?"),
                        p["serving"],
                        p["processes"],
                        if p["outage"].is_object() {
                            format!(
                                ", outage grace {} s in force: {}",
                                p["outage"]["grace_secs"], p["outage"]["in_force"]
                            )
                        } else {
                            String::new()
                        }
                    )
                })
                .collect();
            let name = self.hosts[h].name;
            let line = format!(
                "host {name} ({} binary, {} package): status exit {code}, health {}, {}",
                self.hosts[h].bin.label(),
                self.hosts[h].worker.label(),
                st["health"],
                pools.join("; ")
            );
            println!("    {label}: {line}");
            self.statuses.push((label.to_string(), line));
        }
    }

    /// Host `h`'s package to `worker` under its running master, and waits until every worker
    /// runs it: the plain run rewrites the contract's file and sends SIGHUP; a Laravel host
    /// deploys a release and runs `php current/artisan drover:restart`, as docs/deploy.md's
    /// deploy hooks do (what `systemctl reload` does by SIGHUP).
    async fn reload(&mut self, h: usize, worker: Release, grace: f64) -> anyhow::Result<()> {
        self.configure(h, worker, grace)?;
        let idx = self.hosts[h].current.unwrap();
        self.hosts[h].worker = worker;
        let name = self.hosts[h].name;
        let master = self.incarnations[idx].bin.label();
        if let Some(site) = &self.hosts[h].site {
            let (ok, out) = laravel::artisan(
                &site.current(),
                &self.hosts[h].env,
                &["drover:restart", "--no-ansi"],
            );
            let said = out.lines().collect::<Vec<_>>().join(" / ");
            self.event(format!(
                "host {name}: php current/artisan drover:restart (the {} package, to the {master} master): {}{said}",
                worker.label(),
                if ok { "" } else { "FAILED: " }
            ));
            if !ok {
                bail!("host {name}: php artisan drover:restart failed: {out}");
            }
        } else {
            kill(Pid::from_raw(self.incarnations[idx].pid), Signal::SIGHUP)?;
            self.event(format!(
                "host {name}: configuration names the {} worker; SIGHUP to the {master} master",
                worker.label(),
            ));
        }
        self.wait_serving(h, worker).await
    }
}

/// The producer, in PHP with the previous package's Drover\Producer: one job per enqueue at
/// `rate` per second until `stop` exists, every `group_every`-th one in an ordered group
/// ([`group_of`]); prints "id seq ms enqueue_ms epoch" per job.
const PRODUCER: &str = r#"
require $argv[1];
$pdo = new PDO($argv[2]);
$pdo->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
$producer = new Drover\Producer($pdo);
[$rate, $stop, $longEvery, $maxAttempts] = [(float) $argv[3], $argv[4], (int) $argv[5], (int) $argv[6]];
[$groupEvery, $groups] = [(int) $argv[8], (int) $argv[9]];
mt_srand((int) $argv[7]);
$start = microtime(true);
for ($n = 1; !file_exists($stop); $n++) {
    $long = $longEvery > 0 && $n % $longEvery === 0;
    $ms = $long ? 3000 : mt_rand(50, 500);
    $payload = json_encode(['seq' => $n, 'ms' => $ms, 'beat_ms' => $long ? 100 : 0]);
    $group = ($groupEvery > 0 && $n % $groupEvery === 0) ? 'g' . (intdiv($n, $groupEvery) % $groups) : null;
    $t = microtime(true);
    $id = $group === null
        ? $producer->enqueue($payload, 'default', 0, $maxAttempts)
        : $producer->enqueueGrouped($payload, $group, 'default', 0, $maxAttempts);
    $took = (microtime(true) - $t) * 1000;
    fwrite(STDOUT, sprintf("%d %d %d %.1f %.3f\n", $id, $n, $ms, $took, $t));
    fflush(STDOUT);
    $sleep = $start + $n / $rate - microtime(true);
    if ($sleep > 0) {
        usleep((int) ($sleep * 1e6));
    }
}
"#;

/// The ordered group of job `seq`, as both producers choose it: every `every`-th job, in turn
/// over `groups` groups (`g0`, `g1`, ...).
fn group_of(seq: i64, every: u64, groups: u64) -> Option<String> {
    let (every, groups) = (every as i64, groups.max(1) as i64);
    (every > 0 && seq % every == 0).then(|| format!("g{}", (seq / every) % groups))
}

fn git(root: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git").current_dir(root).args(args).output()?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn run_cmd(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    println!("$ {what}");
    let status = cmd.status().with_context(|| what.to_string())?;
    if !status.success() {
        bail!("{what}: {status}");
    }
    Ok(())
}

/// Worktrees and binaries of both releases, built unless `--no-build`: the previous release
/// from the commit `RELEASES` names for it, this one from `--new-rev`.
fn prepare(args: &Args) -> anyhow::Result<Releases> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let recorded = drover_bench::releases::read(&root)?;
    let old_release = drover_bench::releases::pick(&recorded, args.from.as_deref())?.clone();
    // The checks are written for a previous release that registers its release, confirms queue
    // pauses, honours an outage grace and speaks worker protocol 2: 0.2.0 or later.
    if drover_bench::releases::version_parts(&old_release.version) < Some((0, 2, 0)) {
        bail!(
            "--from {}: this run upgrades from 0.2.0 or later (its checks assume a previous release that confirms pauses and honours outage_grace); the run from 0.1.0 is bench/results/rolling_upgrade.md at 399c796",
            old_release.version
        );
    }
    let _ = PREVIOUS.set(old_release.version.clone());
    let dir = root.join("target/rolling-upgrade");
    std::fs::create_dir_all(&dir)?;
    let old_tree = dir.join(format!("v{}", old_release.version));
    let old_target = dir.join(format!("v{}-target", old_release.version));
    let new_tree = dir.join("head");
    let new_target = dir.join("head-target");
    let rel = Releases {
        old_bin: old_target.join("release/drover"),
        new_bin: args
            .new_bin
            .as_ref()
            .map(|b| root.join(b))
            .unwrap_or_else(|| new_target.join("release/drover")),
        root: root.clone(),
        old_release: old_release.clone(),
        old_tree,
        new_tree,
    };
    for (tree, rev) in [
        (&rel.old_tree, old_release.commit.clone()),
        (&rel.new_tree, git(&root, &["rev-parse", &args.new_rev])?),
    ] {
        let shown = tree
            .strip_prefix(&root)
            .unwrap_or(tree)
            .display()
            .to_string();
        if !tree.exists() {
            run_cmd(
                Command::new("git")
                    .current_dir(&root)
                    .args(["worktree", "add", "--detach"])
                    .arg(tree)
                    .arg(&rev),
                &format!("git worktree add --detach {shown} {rev}"),
            )?;
        }
        run_cmd(
            Command::new("git")
                .current_dir(tree)
                .args(["checkout", "-q", "--detach", &rev]),
            &format!("git checkout --detach {rev} (in {shown})"),
        )?;
    }
    // What RELEASES says of the previous release's commit, checked again where it is built.
    let toml = std::fs::read_to_string(rel.old_tree.join("Cargo.toml"))?;
    if drover_bench::releases::cargo_version(&toml) != Some(old_release.version.as_str()) {
        bail!(
            "{}'s Cargo.toml does not say version {}: RELEASES names the wrong commit",
            rel.old_tree.display(),
            old_release.version
        );
    }
    if !args.no_build {
        let mut builds = vec![(&rel.old_tree, &old_target)];
        if args.new_bin.is_none() {
            builds.push((&rel.new_tree, &new_target));
        }
        for (tree, target) in builds {
            run_cmd(
                Command::new("cargo")
                    .current_dir(tree)
                    .env("CARGO_TARGET_DIR", target)
                    .args(["build", "--release", "--bin", "drover"]),
                &format!(
                    "cargo build --release --bin drover (in {}, CARGO_TARGET_DIR={})",
                    tree.strip_prefix(&root).unwrap_or(tree).display(),
                    target.strip_prefix(&root).unwrap_or(target).display()
                ),
            )?;
        }
    }
    for bin in [&rel.old_bin, &rel.new_bin] {
        if !bin.exists() {
            bail!("{} is missing: run without --no-build", bin.display());
        }
    }
    Ok(rel)
}

/// The schema a drover binary needs (`drover version --json`); -1 when it cannot say.
fn binary_schema(bin: &Path) -> i32 {
    Command::new(bin)
        .args(["version", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .and_then(|v| v["schema"].as_i64())
        .map_or(-1, |n| n as i32)
}

async fn schema(db: &Client) -> i32 {
    db.query_one(
        "SELECT max(version)::int FROM drover.schema_migrations",
        &[],
    )
    .await
    .map(|r| r.get::<_, i32>(0))
    .unwrap_or(-1)
}

fn version_line(bin: &Path) -> String {
    Command::new(bin)
        .arg("version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("({e})"))
}

/// The sampler: nodes and leases every 200 ms, on its own connection.
async fn sample(url: String, samples: Arc<Mutex<Vec<Sample>>>) {
    let Ok(db) = connect::connect_once(&url).await else {
        return;
    };
    loop {
        let at = now();
        let nodes: Vec<(i32, Option<String>)> = match db
            .query(
                "SELECT pid, to_jsonb(n)->>'release' FROM drover.nodes AS n
                 WHERE heartbeat_at > now() - interval '1 minute' ORDER BY id",
                &[],
            )
            .await
        {
            Ok(rows) => rows.iter().map(|r| (r.get(0), r.get(1))).collect(),
            Err(_) => vec![],
        };
        let counts = db
            .query_one(
                "SELECT count(*) FILTER (WHERE lease_token IS NOT NULL),
                        count(*) FILTER (WHERE lease_token IS NULL)
                 FROM drover.jobs",
                &[],
            )
            .await;
        let graced = db
            .query_one(
                "SELECT count(*) FROM drover.jobs WHERE lease_token IS NOT NULL AND lease_grace IS NOT NULL",
                &[],
            )
            .await
            .ok()
            .map(|r| r.get::<_, i64>(0));
        if let Ok(c) = counts {
            samples.lock().unwrap().push(Sample {
                at,
                nodes,
                leased: c.get(0),
                graced,
                backlog: c.get(1),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rel = prepare(&args)?;
    let root = rel.root.clone();
    let modes = match args.laravel.as_str() {
        "8" => vec![Mode::Laravel(8)],
        "12" => vec![Mode::Laravel(12)],
        "both" => vec![Mode::Laravel(8), Mode::Laravel(12)],
        _ => vec![Mode::Plain],
    };
    let out = root.join(args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "bench/results/rolling_upgrade_from_{}{}.md",
            rel.old_release.version,
            if modes == [Mode::Plain] { "_plain" } else { "" }
        ))
    }));
    let command = format!(
        "cargo run --release -p drover-bench --bin rolling_upgrade{}",
        std::env::args()
            .skip(1)
            .map(|s| format!(" {s}"))
            .collect::<String>()
    );
    // (mode, its report or why it did not finish, whether every assertion held)
    let mut sections: Vec<(Mode, String, bool)> = vec![];
    for mode in modes.iter().copied() {
        let outcome = run_mode(&args, &rel, mode).await;
        let done = match outcome {
            Ok((report, ok)) => (mode, report, ok),
            Err(e) => {
                eprintln!("rolling upgrade ({mode:?}) did not finish: {e:#}");
                (
                    mode,
                    format!("# (did not finish)\n\nThe run stopped before its report: {e:#}\n"),
                    false,
                )
            }
        };
        sections.push(done);
        let md = combine(&command, &sections, &modes);
        std::fs::write(&out, &md)?;
        println!("\nwrote {}", out.display());
    }
    if sections.iter().any(|(_, _, ok)| !ok) {
        eprintln!("rolling upgrade: an assertion failed or a run did not finish (see the report)");
        std::process::exit(1);
    }
    Ok(())
}

/// One whole run (every step) with `mode`'s workers, on a PostgreSQL of its own.
async fn run_mode(args: &Args, rel: &Releases, mode: Mode) -> anyhow::Result<(String, bool)> {
    let apps = match mode {
        Mode::Plain => None,
        Mode::Laravel(v) => Some(laravel::Apps::prepare(rel, v)?),
    };
    let dir = tempfile::Builder::new()
        .prefix("drover-rolling-upgrade-")
        .tempdir_in("/tmp")?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    }
    let mut pg_config = EmbeddedConfig::new(dir.path().join("db"));
    pg_config.settings.push(("fsync".into(), "off".into()));
    pg_config
        .settings
        .push(("max_connections".into(), "200".into()));
    let pg = EmbeddedPostgres::start(&pg_config).await?;
    let db = Db {
        url: pg.url().to_string(),
        dsn: pg.pdo_dsn().to_string(),
        host: pg.data_dir().display().to_string(),
    };
    let outcome = run(
        args.clone(),
        mode,
        apps,
        rel.clone(),
        db,
        dir.path().to_path_buf(),
    )
    .await;
    pg.stop().await;
    if args.keep {
        let kept = dir.keep();
        println!("kept {}", kept.display());
    }
    outcome
}

/// The file: one run's report as it is (the plain worker), or one section per Laravel.
fn combine(command: &str, sections: &[(Mode, String, bool)], modes: &[Mode]) -> String {
    if modes == [Mode::Plain] {
        return sections
            .first()
            .map(|(_, md, _)| md.clone())
            .unwrap_or_default();
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Rolling upgrade {} → this tree: three masters under load, Laravel applications\n",
        Release::Old.label()
    );
    let _ = writeln!(
        md,
        "Written by `{command}` (bench/src/bin/rolling_upgrade.rs, which says what each step does; the Laravel deploys are bench/src/bin/rolling_upgrade/laravel.rs). One whole run per Laravel, one after the other, each on a PostgreSQL of its own.\n"
    );
    for (mode, _, ok) in sections {
        let Mode::Laravel(v) = mode else { continue };
        let _ = writeln!(
            md,
            "- Laravel {v}: **{}**",
            if *ok {
                "every assertion held"
            } else {
                "an assertion FAILED, or the run did not finish"
            }
        );
    }
    for mode in modes {
        if !sections.iter().any(|(m, _, _)| m == mode) {
            let _ = writeln!(md, "- {mode:?}: not run (yet)");
        }
    }
    for (_, section, _) in sections {
        // The run's own title becomes the section's; every other heading goes one level down.
        let mut fenced = false;
        let mut first = true;
        md.push('\n');
        for line in section.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            if !fenced && line.starts_with('#') {
                if first {
                    first = false;
                    let _ = writeln!(md, "#{}", line.trim_start_matches('#'));
                } else {
                    let _ = writeln!(md, "#{line}");
                }
            } else {
                let _ = writeln!(md, "{line}");
            }
        }
    }
    md
}

/// The run's PostgreSQL: its URL, PDO DSN and socket directory.
struct Db {
    url: String,
    dsn: String,
    host: String,
}

async fn run(
    args: Args,
    mode: Mode,
    apps: Option<laravel::Apps>,
    rel: Releases,
    pg: Db,
    dir: PathBuf,
) -> anyhow::Result<(String, bool)> {
    let t0 = now();
    let Db {
        url,
        dsn,
        host: db_host,
    } = pg;
    let db = connect::connect_once(&url).await?;
    let migrated_by = if mode == Mode::Plain {
        // The previous release's schema, as its binary migrates it.
        let out = Command::new(&rel.old_bin)
            .args(["migrate", "--database-url", &url])
            .output()?;
        if !out.status.success() {
            bail!(
                "{} drover migrate: {}",
                Release::Old.label(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        "the previous binary's drover migrate"
    } else {
        "host A's first deploy: php artisan migrate with the previous package"
    };
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS public.runs (job_id bigint, seq int, attempt int, pid int, event text,
         at timestamptz NOT NULL DEFAULT clock_timestamp())",
    )
    .await?;

    let tracker = Arc::new(Mutex::new(Tracker::default()));
    {
        let tracker = tracker.clone();
        let old = rel.old_tree.display().to_string() + "/";
        let new = rel.new_tree.display().to_string() + "/";
        let laravel = mode != Mode::Plain;
        let fork = laravel && args.spawn == "fork";
        std::thread::spawn(move || track(tracker, old, new, laravel, fork));
    }
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sampler = tokio::spawn(sample(url.clone(), samples.clone()));

    let mut hosts = Vec::new();
    for name in ["A", "B", "C"] {
        let hdir = dir.join(format!("host{name}"));
        std::fs::create_dir_all(&hdir)?;
        let (site, env) = if mode == Mode::Plain {
            (None, vec![])
        } else {
            laravel::make_host_dirs(&hdir)?;
            (
                Some(laravel::Site::new(hdir.join("site"))?),
                laravel::host_env(&db_host, &hdir),
            )
        };
        hosts.push(Host {
            name,
            state: hdir.join("state"),
            config: hdir.join("drover.json"),
            dir: hdir,
            child: None,
            current: None,
            bin: Release::Old,
            worker: Release::Old,
            site,
            env,
        });
    }
    let mut r = Run {
        args: args.clone(),
        mode,
        apps,
        db_host,
        rel,
        url: url.clone(),
        dsn: dsn.clone(),
        dir: dir.clone(),
        db,
        hosts,
        incarnations: vec![],
        tracker,
        samples,
        events: vec![],
        steps: vec![],
        notes: vec![],
        producer_failed: None,
        crash: None,
        statuses: vec![],
        t0,
    };
    // Every host on the previous release: the contract's file, or the application's first release.
    let mut ready = Ok(());
    for h in 0..3 {
        ready = r.configure(h, Release::Old, 0.0);
        if ready.is_err() {
            break;
        }
    }
    let schema_at_start = schema(&r.db).await;
    r.event(format!(
        "PostgreSQL up, schema {schema_at_start} ({migrated_by})"
    ));

    let result = match ready {
        Ok(()) => scenario(&mut r).await,
        Err(e) => Err(e),
    };
    sampler.abort();
    // Whatever happened: no master or producer outlives the run.
    for h in 0..r.hosts.len() {
        if let Some(mut child) = r.hosts[h].child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
    let (producer_lines, pause) = result?;
    let schema_at_end = schema(&r.db).await;
    // What each release's binary needs, from the binaries: the run migrates from the one to the
    // other, whatever their numbers.
    let schemas = (binary_schema(&r.rel.old_bin), binary_schema(&r.rel.new_bin));
    report(
        &mut r,
        producer_lines,
        pause,
        (schema_at_start, schema_at_end),
        schemas,
    )
    .await
}

/// The queue pause: (paused at, confirmed at, resumed at, nodes it waited for, unconfirmed
/// nodes at the first look).
struct Pause {
    paused: f64,
    confirmed: Option<f64>,
    resumed: f64,
    first_unconfirmed: Vec<String>,
    /// (pid, release, whether its row holds the pause's version) once confirmed.
    held: Vec<(i32, Option<String>, bool)>,
    nodes: Vec<(i32, Option<String>)>,
}

async fn scenario(r: &mut Run) -> anyhow::Result<(Vec<String>, Option<Pause>)> {
    let (old, new) = (Release::Old.label(), Release::New.label());
    // Step 0: all on the previous release (configured by `run`).
    for h in 0..3 {
        r.start_master(h, Release::Old)?;
    }
    for h in 0..3 {
        r.wait_serving(h, Release::Old).await?;
    }
    let stop = r.dir.join("producer.stop");
    let producer_out = r.dir.join("producer.out");
    let mut producer = if let Some(apps) = &r.apps {
        // The application that dispatches: a host of its own on the previous package throughout
        // (a web tier not yet deployed), running the producer in `php artisan app:eval`.
        let pdir = r.dir.join("producer");
        laravel::make_host_dirs(&pdir)?;
        let mut site = laravel::Site::new(pdir.join("site"))?;
        let pool = laravel::Pool {
            processes: r.args.workers,
            prefetch: r.args.prefetch,
            lease: r.args.lease,
            tries: r.args.max_attempts,
            spawn: r.args.spawn.clone(),
            grace: 0.0,
            budget: r.args.budget,
        };
        let name = site.ship(apps, Release::Old, &pool)?;
        site.switch_to(&name)?;
        let mut cmd = tokio::process::Command::new("php");
        cmd.arg(site.current().join("artisan"))
            .arg("app:eval")
            .arg(laravel::PRODUCER_PHP)
            .current_dir(site.current());
        for k in ["DATABASE_URL", "DB_CONNECTION", "APP_BASE_PATH"] {
            cmd.env_remove(k);
        }
        cmd.envs(laravel::host_env(&r.db_host, &pdir))
            .env("RU_RATE", r.args.rate.to_string())
            .env("RU_STOP", &stop)
            .env("RU_LONG_EVERY", r.args.long_every.to_string())
            .env("RU_TRIES", r.args.max_attempts.to_string())
            .env("RU_GROUP_EVERY", r.args.group_every.to_string())
            .env("RU_GROUPS", r.args.groups.to_string())
            .env("RU_SEED", "20250101");
        cmd
    } else {
        let mut cmd = tokio::process::Command::new("php");
        cmd.arg("-r")
            .arg(PRODUCER)
            .arg("--")
            .arg(r.rel.old_tree.join("php-client/autoload.php"))
            .arg(&r.dsn)
            .arg(r.args.rate.to_string())
            .arg(&stop)
            .arg(r.args.long_every.to_string())
            .arg(r.args.max_attempts.to_string())
            .arg("20250101")
            .arg(r.args.group_every.to_string())
            .arg(r.args.groups.to_string());
        cmd
    };
    let mut producer = producer
        .stdout(File::create(&producer_out)?)
        .stderr(File::create(r.dir.join("producer.err"))?)
        .kill_on_drop(true)
        .spawn()?;
    r.event("producer started");
    let begin = now();
    r.steps.push((
        format!("0: A, B, C on {old} (binary and package)"),
        9,
        begin,
        begin,
    ));
    r.service().await;
    r.snapshot_status("before step 1").await;

    // Step 1: host A, binary first.
    let began = now();
    r.stop_master(0).await?;
    r.start_master(0, Release::New)?;
    r.wait_serving(0, Release::Old).await?;
    r.step_done(
        &format!("1: host A binary first ({new} binary, {old} package; migrates the schema)"),
        0,
        began,
    );
    r.service().await;
    r.snapshot_status("before step 2").await;

    // Step 2: host B, package first, under its running master of the previous release.
    let began = now();
    r.reload(1, Release::New, 0.0).await?;
    let how = if r.mode == Mode::Plain {
        "by SIGHUP"
    } else {
        "a deploy, then drover:restart"
    };
    r.step_done(
        &format!("2: host B package first ({old} binary, {new} package, {how})"),
        1,
        began,
    );
    r.service().await;
    r.snapshot_status("before step 3").await;

    // Step 3: host B binary. First what an operator gets who restarts before upgrading it: the
    // previous binary on the migrated schema, which must serve (the window).
    let began = now();
    r.stop_master(1).await?;
    let again = r.start_master(1, Release::Old)?;
    r.wait_serving(1, Release::New).await?;
    let log = strip_ansi(&std::fs::read_to_string(&r.incarnations[again].log)?);
    let said = log
        .lines()
        .find(|l| l.contains("newer than this drover"))
        .unwrap_or("(no line about the newer schema)")
        .to_string();
    r.event(format!(
        "host B: the {old} binary started again on the migrated schema serves, {:.2} s after its start: {said}",
        now() - r.incarnations[again].started
    ));
    r.step_done(
        &format!("3a: host B restarted on its {old} binary (the migrated schema; {new} package)"),
        1,
        began,
    );
    r.service().await;
    // Then it crashes, running a job: its leases are reaped by the others, of both releases.
    r.wait_running_job(1).await?;
    let began = now();
    r.kill_master(1).await?;
    r.configure(1, Release::New, r.args.outage_grace)?;
    r.start_master(1, Release::New)?;
    r.wait_serving(1, Release::New).await?;
    r.step_done(
        &format!("3b: host B's {old} master SIGKILLed, then its binary upgraded ({new}, {new}, outage_grace)"),
        1,
        began,
    );
    r.snapshot_status("after step 3").await;

    // A queue pause with masters of both releases: A (new binary, previous package), B (new,
    // new) and C (previous, previous).
    let pause = if r.args.no_pause {
        None
    } else {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let nodes = r.samples.lock().unwrap().last().map(|s| s.nodes.clone());
        let paused_row = r
            .db
            .query_one(
                "SELECT extract(epoch FROM clock_timestamp())::float8, drover.pause_queue('default')",
                &[],
            )
            .await?;
        let paused: f64 = paused_row.get(0);
        let mut first_unconfirmed = None;
        let deadline = Instant::now() + Duration::from_secs(15);
        let confirmed = loop {
            let rows =
                r.db.query(
                    "SELECT node, pid, extract(epoch FROM clock_timestamp())::float8
                     FROM drover.pause_unconfirmed('default')
                     UNION ALL SELECT NULL, NULL, extract(epoch FROM clock_timestamp())::float8",
                    &[],
                )
                .await?;
            let waiting: Vec<String> = rows
                .iter()
                .filter_map(|row| {
                    row.get::<_, Option<i64>>(0)
                        .map(|n| format!("node {n} (pid {})", row.get::<_, i32>(1)))
                })
                .collect();
            let at: f64 = rows.last().unwrap().get(2);
            first_unconfirmed.get_or_insert_with(|| waiting.clone());
            if waiting.is_empty() {
                break Some(at);
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        r.events
            .push((paused, "SELECT drover.pause_queue('default')".into()));
        // Which rows hold the pause's version once it is confirmed: every master's.
        let held =
            r.db.query(
                "SELECT n.pid, n.release, p.version = ANY (n.pauses_held)
                 FROM drover.nodes AS n, drover.paused_queues AS p
                 WHERE p.queue = 'default' ORDER BY n.id",
                &[],
            )
            .await?
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect();
        match confirmed {
            Some(at) => r.event(format!(
                "pause confirmed by every master, {:.0} ms after it was made",
                (at - paused) * 1000.0
            )),
            None => r.event("pause NOT confirmed within 15 s"),
        }
        tokio::time::sleep(Duration::from_secs(4)).await;
        let resumed: f64 = r
            .db
            .query_one(
                "SELECT extract(epoch FROM clock_timestamp())::float8 FROM drover.resume_queue('default')",
                &[],
            )
            .await?
            .get(0);
        r.event("SELECT drover.resume_queue('default')");
        Some(Pause {
            paused,
            confirmed,
            resumed,
            first_unconfirmed: first_unconfirmed.unwrap_or_default(),
            held,
            nodes: nodes.unwrap_or_default(),
        })
    };
    r.service().await;
    r.snapshot_status("before step 4").await;

    // Step 4: host C, binary and package at once.
    let began = now();
    r.stop_master(2).await?;
    r.configure(2, Release::New, r.args.outage_grace)?;
    r.hosts[2].worker = Release::New;
    r.start_master(2, Release::New)?;
    r.wait_serving(2, Release::New).await?;
    r.step_done(
        &format!("4: host C binary and package at once ({new}, {new}, outage_grace)"),
        2,
        began,
    );
    r.service().await;
    r.snapshot_status("before step 5").await;

    // Step 5: host A's package.
    let began = now();
    r.reload(0, Release::New, r.args.outage_grace).await?;
    r.step_done(
        &format!("5: host A package ({new} package, outage_grace, {how})"),
        0,
        began,
    );
    r.service().await;
    r.snapshot_status("after step 5").await;

    // The producer stops; the queue drains; the masters stop.
    File::create(&stop)?;
    let status = tokio::time::timeout(Duration::from_secs(10), producer.wait()).await??;
    r.event(format!("producer stopped ({status})"));
    if !status.success() {
        r.producer_failed = Some(format!(
            "{status}: {}",
            std::fs::read_to_string(r.dir.join("producer.err")).unwrap_or_default()
        ));
    }
    let drain_began = now();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let left: i64 =
            r.db.query_one(
                "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.group_jobs)",
                &[],
            )
            .await?
            .get(0);
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            r.notes.push(format!(
                "The queue still held {left} jobs 180 s after the producer stopped."
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    r.event(format!("drained in {:.1} s", now() - drain_began));
    let end = now();
    r.steps
        .push(("drain (producer stopped)".into(), 9, drain_began, end));
    for h in 0..3 {
        r.stop_master(h).await?;
    }
    let lines = std::fs::read_to_string(&producer_out)?
        .lines()
        .map(String::from)
        .collect();
    Ok((lines, pause))
}
