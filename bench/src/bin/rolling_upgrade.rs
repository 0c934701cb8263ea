//! rolling_upgrade: the upgrade from drover 0.1.0 to 0.2.0 of a fleet of three masters on one
//! PostgreSQL, host by host, under a steady load, with the plain PHP worker of each release
//! (`php-client/bin/drover-worker tests/fixtures/handler.php`, which records the start and the
//! finish of every job in `public.runs`).
//!
//! The previous release is built from its tag: a git worktree of `v0.1.0` under `target/v010`
//! built with its own target directory (`target/v010-target`). The current release is this
//! repository's `target/release/drover` (`cargo build --release`), and its PHP package is read from a
//! worktree of `HEAD` (`target/v020-tree`), so that files being edited in the working tree do not
//! reach a worker mid-run. Each host runs `drover run --config FILE` (the versioned JSON contract,
//! as `php artisan drover` writes it), so upgrading a host's package is what a deploy does: the
//! file names the new release's worker command, then SIGHUP (a reload). Upgrading a host's binary
//! is `systemctl restart` with the new binary: SIGTERM (a graceful drain), then the new binary on
//! the same state directory.
//!
//! The steps, each after `--service` seconds of service, the producer enqueueing throughout:
//!
//! 0. A, B and C on 0.1 (binary and worker); schema 7 (migrated by the 0.1 binary).
//! 1. host A binary first: 0.2 binary, 0.1 worker; it migrates the schema to 9 at start.
//! 2. host B package first: the 0.1 master's workers reloaded onto the 0.2 worker (SIGHUP).
//! 3. host B binary: SIGTERM; the 0.1 binary started again is refused (schema 9, the documented
//!    limitation: it must be checked to say so and leave nothing behind); the 0.2 binary starts,
//!    with an `outage_grace`, which it must not give while a 0.1 master has a row. Then a queue
//!    pause (`drover.pause_queue`) with masters of both releases: it must be confirmed without
//!    waiting for the 0.1 master, and no 0.2 master may start a job after that.
//! 4. host C binary and package at once (0.2 with an `outage_grace`): no 0.1 master is left, so
//!    the grace must now be given.
//! 5. host A package: its 0.2 master reloaded onto the 0.2 worker (and an `outage_grace`).
//!
//! Then the producer stops, the queue drains, the masters stop, and the harness asserts over
//! `public.runs`, `drover.jobs` and `drover.failed_jobs`: every enqueued job finished exactly once
//! (none lost, none doubled, none failed), no two executions of one job overlapped, no worker was
//! refused for its protocol, every master served after its step, every master stopped cleanly.
//! It writes the report to `bench/results/rolling_upgrade.md` and exits 1 if an assertion failed.
//!
//! ```sh
//! cargo build --release && cargo run --release -p drover-bench --bin rolling_upgrade
//! cargo run --release -p drover-bench --bin rolling_upgrade -- --service 10 --rate 12
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

#[derive(Parser, Clone)]
#[command(about = "A rolling upgrade from drover 0.1.0 to this release: three masters, under load")]
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
    /// Lease of every master, seconds.
    #[arg(long, default_value_t = 6.0)]
    lease: f64,
    /// Workers per master.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Jobs each worker may hold (a protocol-1 worker under a 0.2 master holds one).
    #[arg(long, default_value_t = 2)]
    prefetch: u32,
    /// `outage_grace` (seconds) of the pools of a host once it runs 0.2 binary and package.
    #[arg(long, default_value_t = 10.0)]
    outage_grace: f64,
    /// Attempts each job is enqueued with.
    #[arg(long, default_value_t = 3)]
    max_attempts: i32,
    /// Skip the queue-pause check after step 3.
    #[arg(long)]
    no_pause: bool,
    /// The commit of this release to build and run (binary and PHP package), checked out in the
    /// worktree target/v020-tree: the working tree's uncommitted edits do not reach the run.
    #[arg(long, default_value = "HEAD")]
    new_rev: String,
    /// Run this 0.2 binary instead of the one built from `--new-rev` (its PHP package still comes
    /// from the worktree), e.g. target/release/drover.
    #[arg(long)]
    new_bin: Option<PathBuf>,
    /// Do not build (the binaries and worktrees must exist).
    #[arg(long)]
    no_build: bool,
    /// Keep the run's directory (logs, state directories, the cluster) instead of deleting it.
    #[arg(long)]
    keep: bool,
    /// Where the report goes (relative to the repository's root).
    #[arg(long, default_value = "bench/results/rolling_upgrade.md")]
    out: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Release {
    Old,
    New,
}

impl Release {
    fn label(self) -> &'static str {
        match self {
            Release::Old => "0.1",
            Release::New => "0.2",
        }
    }
}

/// Where each release's binary and PHP package are.
struct Releases {
    root: PathBuf,
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
}

/// The children (and their children) of `pid`, from /proc/PID/task/*/children.
fn descendants(pid: i32, depth: usize, out: &mut Vec<i32>) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            out.push(child);
            if depth > 0 {
                descendants(child, depth - 1, out);
            }
        }
    }
}

/// Every 50 ms: the worker processes of each running master, and which release's worker each
/// runs (from its command line: the tree its drover-worker is in).
fn track(tracker: Arc<Mutex<Tracker>>, old_tree: String, new_tree: String) {
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
            for pid in kids {
                let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                    continue;
                };
                let args: Vec<String> = cmdline
                    .split(|b| *b == 0)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                let Some(script) = args.iter().find(|a| a.ends_with("drover-worker")) else {
                    continue;
                };
                let worker = if script.starts_with(&old_tree) {
                    Release::Old
                } else if script.starts_with(&new_tree) {
                    Release::New
                } else {
                    continue;
                };
                let mut tr = tracker.lock().unwrap();
                match tr.workers.get_mut(&pid) {
                    Some(seen) if seen.master_pid == mpid => seen.last_seen = t,
                    Some(_) => {
                        tr.ambiguous.insert(pid);
                    }
                    None => {
                        let told =
                            std::fs::read(format!("/proc/{pid}/environ"))
                                .ok()
                                .and_then(|env| {
                                    env.split(|b| *b == 0)
                                        .find_map(|kv| kv.strip_prefix(b"DROVER_PROTOCOL="))
                                        .map(|v| String::from_utf8_lossy(v).into_owned())
                                });
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
        std::thread::sleep(Duration::from_millis(50));
    }
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
}

/// A sample of the nodes and leases, every 200 ms.
#[derive(Clone, Debug)]
struct Sample {
    at: f64,
    /// Node rows with release NULL (masters of 0.1), heard from within a minute.
    old_nodes: i64,
    nodes: Vec<(i32, Option<String>)>,
    leased: i64,
    /// Leases with an outage grace (`lease_grace`, schema 9).
    graced: Option<i64>,
    backlog: i64,
}

struct Run {
    args: Args,
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
            // A key 0.2 added: only a 0.2 binary reads it (docs/upgrading.md, "Contract").
            pool["outage_grace"] = json!(grace);
        }
        let config = json!({
            "version": 1,
            "database_url": self.url,
            "state_dir": host.state,
            "lease": self.args.lease,
            "auto_migrate": true,
            "pools": [pool],
        });
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
        let mut cmd = tokio::process::Command::new(self.rel.bin(bin));
        cmd.arg("run")
            .arg("--config")
            .arg(&host.config)
            .current_dir(&host.dir)
            .env("DROVER_PDO_DSN", &self.dsn)
            .env("DROVER_LOG", "info")
            .env_remove("DATABASE_URL")
            .env_remove("DROVER_DATABASE_URL")
            .env_remove("DROVER_STATE_DIR")
            .env_remove("DROVER_PROTOCOL")
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

    /// SIGHUP to host `h`'s master after its configuration names `worker`; waits until every
    /// worker runs it.
    async fn reload(&mut self, h: usize, worker: Release, grace: f64) -> anyhow::Result<()> {
        self.write_config(h, worker, grace)?;
        let idx = self.hosts[h].current.unwrap();
        kill(Pid::from_raw(self.incarnations[idx].pid), Signal::SIGHUP)?;
        self.hosts[h].worker = worker;
        let name = self.hosts[h].name;
        self.event(format!(
            "host {name}: configuration names the {} worker; SIGHUP to the {} master",
            worker.label(),
            self.incarnations[idx].bin.label()
        ));
        self.wait_serving(h, worker).await
    }
}

/// The producer, in PHP with the 0.1 package's Drover\Producer: one job per enqueue at `rate`
/// per second until `stop` exists; prints "id seq ms enqueue_ms epoch" per job.
const PRODUCER: &str = r#"
require $argv[1];
$pdo = new PDO($argv[2]);
$pdo->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
$producer = new Drover\Producer($pdo);
[$rate, $stop, $longEvery, $maxAttempts] = [(float) $argv[3], $argv[4], (int) $argv[5], (int) $argv[6]];
mt_srand((int) $argv[7]);
$start = microtime(true);
for ($n = 1; !file_exists($stop); $n++) {
    $long = $longEvery > 0 && $n % $longEvery === 0;
    $ms = $long ? 3000 : mt_rand(50, 500);
    $payload = json_encode(['seq' => $n, 'ms' => $ms, 'beat_ms' => $long ? 100 : 0]);
    $t = microtime(true);
    $id = $producer->enqueue($payload, 'default', 0, $maxAttempts);
    $took = (microtime(true) - $t) * 1000;
    fwrite(STDOUT, sprintf("%d %d %d %.1f %.3f\n", $id, $n, $ms, $took, $t));
    fflush(STDOUT);
    $sleep = $start + $n / $rate - microtime(true);
    if ($sleep > 0) {
        usleep((int) ($sleep * 1e6));
    }
}
"#;

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

/// Worktrees and binaries of both releases, built unless `--no-build`.
fn prepare(args: &Args) -> anyhow::Result<Releases> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let old_tree = root.join("target/v010");
    let new_tree = root.join("target/v020-tree");
    let old_target = root.join("target/v010-target");
    let new_target = root.join("target/v020-target");
    let rel = Releases {
        old_bin: old_target.join("release/drover"),
        new_bin: args
            .new_bin
            .as_ref()
            .map(|b| root.join(b))
            .unwrap_or_else(|| new_target.join("release/drover")),
        root: root.clone(),
        old_tree,
        new_tree,
    };
    if !rel.old_tree.exists() {
        // The tag, or in a clone without tags the commit CHANGELOG.md names for it.
        let tagged = Command::new("git")
            .current_dir(&root)
            .args(["rev-parse", "--verify", "--quiet", "v0.1.0^{commit}"])
            .output()
            .is_ok_and(|o| o.status.success());
        let old_rev = if tagged { "v0.1.0" } else { "019efd3" };
        run_cmd(
            Command::new("git")
                .current_dir(&root)
                .args(["worktree", "add", "--detach"])
                .arg(&rel.old_tree)
                .arg(old_rev),
            &format!("git worktree add target/v010 {old_rev}"),
        )?;
    }
    if !rel.new_tree.exists() {
        run_cmd(
            Command::new("git")
                .current_dir(&root)
                .args(["worktree", "add", "--detach"])
                .arg(&rel.new_tree)
                .arg("HEAD"),
            "git worktree add target/v020-tree HEAD",
        )?;
    }
    let rev = git(&root, &["rev-parse", &args.new_rev])?;
    run_cmd(
        Command::new("git")
            .current_dir(&rel.new_tree)
            .args(["checkout", "-q", "--detach", &rev]),
        &format!("git checkout --detach {rev} (in target/v020-tree)"),
    )?;
    if !args.no_build {
        run_cmd(
            Command::new("cargo")
                .current_dir(&rel.old_tree)
                .env("CARGO_TARGET_DIR", &old_target)
                .args(["build", "--release", "--bin", "drover"]),
            "cargo build --release --bin drover (in target/v010, CARGO_TARGET_DIR=target/v010-target)",
        )?;
        if args.new_bin.is_none() {
            run_cmd(
                Command::new("cargo")
                    .current_dir(&rel.new_tree)
                    .env("CARGO_TARGET_DIR", &new_target)
                    .args(["build", "--release", "--bin", "drover"]),
                "cargo build --release --bin drover (in target/v020-tree, CARGO_TARGET_DIR=target/v020-target)",
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
                old_nodes: nodes.iter().filter(|(_, r)| r.is_none()).count() as i64,
                nodes,
                leased: c.get(0),
                graced,
                backlog: c.get(1),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One execution of one job, from `public.runs`.
#[derive(Debug, Clone)]
struct Execution {
    job: i64,
    pid: i32,
    attempt: i32,
    start: f64,
    last: f64,
    finish: Option<f64>,
}

struct Check {
    name: String,
    ok: bool,
    detail: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rel = prepare(&args)?;
    let root = rel.root.clone();
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
    let url = pg.url().to_string();
    let dsn = pg.pdo_dsn().to_string();
    let outcome = run(args.clone(), rel, url, dsn, dir.path().to_path_buf()).await;
    pg.stop().await;
    if args.keep {
        let kept = dir.keep();
        println!("kept {}", kept.display());
    }
    match outcome {
        Ok((report, ok)) => {
            let out = root.join(&args.out);
            std::fs::write(&out, &report)?;
            println!("\nwrote {}", out.display());
            if !ok {
                eprintln!("rolling upgrade: an assertion failed (see the report)");
                std::process::exit(1);
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

async fn run(
    args: Args,
    rel: Releases,
    url: String,
    dsn: String,
    dir: PathBuf,
) -> anyhow::Result<(String, bool)> {
    let t0 = now();
    // Schema 7, as 0.1 migrates it.
    let out = Command::new(&rel.old_bin)
        .args(["migrate", "--database-url", &url])
        .output()?;
    if !out.status.success() {
        bail!(
            "0.1 drover migrate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let db = connect::connect_once(&url).await?;
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS public.runs (job_id bigint, seq int, attempt int, pid int, event text,
         at timestamptz NOT NULL DEFAULT clock_timestamp())",
    )
    .await?;
    let schema_at_start = schema(&db).await;

    let tracker = Arc::new(Mutex::new(Tracker::default()));
    {
        let tracker = tracker.clone();
        let old = rel.old_tree.display().to_string() + "/";
        let new = rel.new_tree.display().to_string() + "/";
        std::thread::spawn(move || track(tracker, old, new));
    }
    let samples = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn(sample(url.clone(), samples.clone()));

    let mut hosts = Vec::new();
    for name in ["A", "B", "C"] {
        let hdir = dir.join(format!("host{name}"));
        std::fs::create_dir_all(&hdir)?;
        hosts.push(Host {
            name,
            state: hdir.join("state"),
            config: hdir.join("drover.json"),
            dir: hdir,
            child: None,
            current: None,
            bin: Release::Old,
            worker: Release::Old,
        });
    }
    let mut r = Run {
        args: args.clone(),
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
        statuses: vec![],
        t0,
    };
    r.event(format!(
        "PostgreSQL up, schema {schema_at_start} (0.1 drover migrate)"
    ));

    let result = scenario(&mut r).await;
    // Whatever happened: no master or producer outlives the run.
    for h in 0..r.hosts.len() {
        if let Some(mut child) = r.hosts[h].child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
    let (producer_lines, pause) = result?;
    let schema_at_end = schema(&r.db).await;
    report(
        &mut r,
        producer_lines,
        pause,
        schema_at_start,
        schema_at_end,
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
    // Step 0: all on 0.1.
    for h in 0..3 {
        r.write_config(h, Release::Old, 0.0)?;
        r.start_master(h, Release::Old)?;
    }
    for h in 0..3 {
        r.wait_serving(h, Release::Old).await?;
    }
    let stop = r.dir.join("producer.stop");
    let producer_out = r.dir.join("producer.out");
    let mut producer = tokio::process::Command::new("php")
        .arg("-r")
        .arg(PRODUCER)
        .arg("--")
        .arg(r.rel.old_tree.join("php-client/autoload.php"))
        .arg(&r.dsn)
        .arg(r.args.rate.to_string())
        .arg(&stop)
        .arg(r.args.long_every.to_string())
        .arg(r.args.max_attempts.to_string())
        .arg("20250101")
        .stdout(File::create(&producer_out)?)
        .stderr(File::create(r.dir.join("producer.err"))?)
        .kill_on_drop(true)
        .spawn()?;
    r.event("producer started");
    let begin = now();
    r.steps.push((
        "0: A, B, C on 0.1 (binary and worker)".into(),
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
        "1: host A binary first (0.2 binary, 0.1 worker; migrates 7 -> 9)",
        0,
        began,
    );
    r.service().await;
    r.snapshot_status("before step 2").await;

    // Step 2: host B, package first, under its running 0.1 master.
    let began = now();
    r.reload(1, Release::New, 0.0).await?;
    r.step_done(
        "2: host B package first (0.1 binary, 0.2 worker, by SIGHUP)",
        1,
        began,
    );
    r.service().await;
    r.snapshot_status("before step 3").await;

    // Step 3: host B binary. First what an operator gets who restarts before upgrading it.
    let began = now();
    r.stop_master(1).await?;
    let probe = r.start_master(1, Release::Old)?;
    let mut child = r.hosts[1].child.take().unwrap();
    let probe_pid = r.incarnations[probe].pid;
    let probe_exit = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    r.tracker.lock().unwrap().masters.remove(&probe_pid);
    r.hosts[1].current = None;
    let probe_log = strip_ansi(&std::fs::read_to_string(&r.incarnations[probe].log)?);
    match probe_exit {
        Ok(Ok(status)) => {
            let inc = &mut r.incarnations[probe];
            inc.exited_at = Some(now());
            inc.exit = Some(status.to_string());
            // The expected outcome is a refusal: "ok" for this incarnation means it refused.
            inc.exit_ok = !status.success() && probe_log.contains("newer than this drover");
            let line = probe_log
                .lines()
                .find(|l| l.contains("newer than this drover"))
                .unwrap_or("(no line naming the newer schema)")
                .to_string();
            r.event(format!(
                "host B: the 0.1 binary started on schema 9 exited ({status}) after {:.2} s: {line}",
                now() - r.incarnations[probe].started
            ));
        }
        _ => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            r.incarnations[probe].exit = Some("still running after 30 s: killed".into());
            r.event("host B: the 0.1 binary started on schema 9 did NOT exit within 30 s");
        }
    }
    let left: i64 =
        r.db.query_one(
            "SELECT count(*) FROM drover.nodes WHERE pid = $1",
            &[&probe_pid],
        )
        .await?
        .get(0);
    r.notes.push(format!(
        "The refused 0.1 start (pid {probe_pid}) left {left} row(s) in drover.nodes."
    ));
    r.write_config(1, Release::New, r.args.outage_grace)?;
    r.start_master(1, Release::New)?;
    r.wait_serving(1, Release::New).await?;
    r.step_done(
        "3: host B binary (0.2 binary, 0.2 worker, outage_grace; after the refused 0.1 start)",
        1,
        began,
    );
    r.snapshot_status("after step 3").await;

    // A queue pause with masters of both releases: A (0.2 binary, 0.1 workers), B (0.2, 0.2)
    // and C (0.1, 0.1).
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
        // Which rows hold the pause's version once it is confirmed: a 0.1 master's never does.
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
                "pause confirmed by every master that confirms, {:.0} ms after it was made",
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
    r.write_config(2, Release::New, r.args.outage_grace)?;
    r.hosts[2].worker = Release::New;
    r.start_master(2, Release::New)?;
    r.wait_serving(2, Release::New).await?;
    r.step_done(
        "4: host C binary and package at once (0.2, 0.2, outage_grace)",
        2,
        began,
    );
    r.service().await;
    r.snapshot_status("before step 5").await;

    // Step 5: host A's package.
    let began = now();
    r.reload(0, Release::New, r.args.outage_grace).await?;
    r.step_done(
        "5: host A package (0.2 worker, outage_grace, by SIGHUP)",
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
            r.db.query_one("SELECT count(*) FROM drover.jobs", &[])
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

fn interesting(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    [
        "schema",
        "migrat",
        "protocol",
        "release",
        "grace",
        "reload",
        "newer",
        "refus",
        "error",
        "warn",
        "panic",
        "paus",
        "drover 0.",
    ]
    .iter()
    .any(|k| l.contains(k))
}

async fn report(
    r: &mut Run,
    producer: Vec<String>,
    pause: Option<Pause>,
    schema_at_start: i32,
    schema_at_end: i32,
) -> anyhow::Result<(String, bool)> {
    let mut checks: Vec<Check> = vec![];
    let mut check = |name: &str, ok: bool, detail: String| {
        println!("{} {name}: {detail}", if ok { "PASS" } else { "FAIL" });
        checks.push(Check {
            name: name.to_string(),
            ok,
            detail,
        });
    };

    // What was enqueued.
    let mut enqueued: BTreeMap<i64, (i64, i64)> = BTreeMap::new(); // id -> (seq, ms)
    let mut enqueue_at: Vec<(f64, f64)> = vec![]; // (time, ms the enqueue took)
    for line in &producer {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 5 {
            enqueued.insert(f[0].parse()?, (f[1].parse()?, f[2].parse()?));
            enqueue_at.push((f[4].parse()?, f[3].parse()?));
        }
    }
    let longs = enqueued.values().filter(|(_, ms)| *ms >= 3000).count();
    // The producer enqueued throughout: no enqueue failed or waited long (the migration at
    // step 1 takes locks on drover.jobs).
    let longest_gap = enqueue_at
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .fold(0.0, f64::max);
    let slowest = enqueue_at.iter().map(|(_, ms)| *ms).fold(0.0, f64::max);
    check(
        "the producer enqueued throughout",
        r.producer_failed.is_none() && longest_gap < 1.0,
        format!(
            "{}; {} enqueues, the longest took {slowest:.1} ms, the longest gap between two {:.0} ms (the pace is {:.0} ms)",
            r.producer_failed
                .as_ref()
                .map(|e| format!("it exited {e}"))
                .unwrap_or("it exited 0".into()),
            enqueue_at.len(),
            longest_gap * 1000.0,
            1000.0 / r.args.rate
        ),
    );

    // What ran.
    let execs: Vec<Execution> =
        r.db.query(
            "SELECT job_id, pid, attempt,
                    extract(epoch FROM min(at) FILTER (WHERE event = 'start'))::float8,
                    extract(epoch FROM max(at))::float8,
                    extract(epoch FROM min(at) FILTER (WHERE event = 'finish'))::float8
             FROM runs GROUP BY job_id, pid, attempt
             HAVING count(*) FILTER (WHERE event = 'start') > 0
             ORDER BY job_id, 4",
            &[],
        )
        .await?
        .iter()
        .map(|row| Execution {
            job: row.get(0),
            pid: row.get(1),
            attempt: row.get(2),
            start: row.get(3),
            last: row.get(4),
            finish: row.get(5),
        })
        .collect();
    let finishes_per_exec: Vec<(i64, i64)> =
        r.db.query(
            "SELECT job_id, count(*) FROM runs WHERE event = 'finish' GROUP BY job_id",
            &[],
        )
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let failed: Vec<(i64, String)> =
        r.db.query("SELECT id, error FROM drover.failed_jobs ORDER BY id", &[])
            .await?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
    let left: i64 =
        r.db.query_one("SELECT count(*) FROM drover.jobs", &[])
            .await?
            .get(0);

    let finished: BTreeMap<i64, i64> = finishes_per_exec.iter().copied().collect();
    let failed_ids: BTreeSet<i64> = failed.iter().map(|(id, _)| *id).collect();
    let lost: Vec<i64> = enqueued
        .keys()
        .filter(|id| !finished.contains_key(id) && !failed_ids.contains(id))
        .copied()
        .collect();
    let doubled: Vec<(i64, i64)> = finished
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, n)| (*id, *n))
        .collect();
    let strangers: Vec<i64> = finished
        .keys()
        .filter(|id| !enqueued.contains_key(id))
        .copied()
        .collect();
    check(
        "nothing lost",
        lost.is_empty() && left == 0,
        format!(
            "{} enqueued, {} finished, {} in drover.failed_jobs, {} never finished nor failed{}, {} left in drover.jobs",
            enqueued.len(),
            finished.len(),
            failed.len(),
            lost.len(),
            if lost.is_empty() { String::new() } else { format!(" (first: {:?})", &lost[..lost.len().min(10)]) },
            left
        ),
    );
    check(
        "nothing failed",
        failed.is_empty(),
        if failed.is_empty() {
            "drover.failed_jobs is empty".into()
        } else {
            format!(
                "{} failed: {:?}",
                failed.len(),
                &failed[..failed.len().min(5)]
            )
        },
    );
    check(
        "nothing doubled",
        doubled.is_empty() && strangers.is_empty(),
        format!(
            "{} jobs finished more than once{}; {} finished jobs never enqueued",
            doubled.len(),
            if doubled.is_empty() {
                String::new()
            } else {
                format!(" {:?}", &doubled[..doubled.len().min(10)])
            },
            strangers.len()
        ),
    );

    // Overlap: an execution ended at its finish; one without a finish within its run time
    // after its start (or two beats after its last record, for a long job).
    let mut overlaps = vec![];
    let mut reruns = 0;
    let mut by_job: BTreeMap<i64, Vec<&Execution>> = BTreeMap::new();
    for e in &execs {
        by_job.entry(e.job).or_default().push(e);
    }
    for (job, runs) in &by_job {
        reruns += usize::from(runs.len() > 1);
        for pair in runs.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let ms = enqueued.get(job).map_or(3000, |(_, ms)| *ms) as f64 / 1000.0;
            let ended = a
                .finish
                .unwrap_or_else(|| (a.start + ms + 0.1).max(a.last + 0.2));
            if ended >= b.start {
                overlaps.push(format!(
                    "job {job}: pid {} (attempt {}) ran until {:.3}, pid {} (attempt {}) started at {:.3}",
                    a.pid, a.attempt, ended, b.pid, b.attempt, b.start
                ));
            }
        }
    }
    let unfinished = execs.iter().filter(|e| e.finish.is_none()).count();
    let max_attempt = execs.iter().map(|e| e.attempt).max().unwrap_or(0);
    check(
        "no overlapping executions",
        overlaps.is_empty(),
        format!(
            "{} executions of {} jobs; {} jobs ran more than once, {} executions never finished, highest attempt {}{}",
            execs.len(),
            by_job.len(),
            reruns,
            unfinished,
            max_attempt,
            if overlaps.is_empty() { String::new() } else { format!(": {:?}", &overlaps[..overlaps.len().min(5)]) }
        ),
    );

    // Attribution of every execution to a master and a worker release.
    let (workers, ambiguous) = {
        let tr = r.tracker.lock().unwrap();
        (tr.workers.clone(), tr.ambiguous.clone())
    };
    let unattributed: BTreeSet<i32> = execs
        .iter()
        .filter(|e| !workers.contains_key(&e.pid) || ambiguous.contains(&e.pid))
        .map(|e| e.pid)
        .collect();
    check(
        "every execution attributed to a master",
        unattributed.is_empty(),
        format!(
            "{} worker processes seen under the masters; {} pids of executions not attributed {:?}",
            workers.len(),
            unattributed.len(),
            unattributed
        ),
    );

    // Protocol refusals, in every master's log.
    let mut refusals = vec![];
    for inc in &r.incarnations {
        let text = strip_ansi(&std::fs::read_to_string(&inc.log).unwrap_or_default());
        for line in text
            .lines()
            .filter(|l| l.contains("speaks protocol version"))
        {
            refusals.push(format!("host {} #{}: {line}", inc.host, inc.n));
        }
    }
    check(
        "no worker refused for its protocol",
        refusals.is_empty(),
        if refusals.is_empty() {
            format!(
                "no \"speaks protocol version\" in the {} masters' logs",
                r.incarnations.len()
            )
        } else {
            refusals[..refusals.len().min(5)].join("; ")
        },
    );

    // Every master served after its step: finishes by its workers, per step interval.
    let step_ends: Vec<f64> = r
        .steps
        .iter()
        .skip(1)
        .map(|s| s.2)
        .chain([f64::INFINITY])
        .collect();
    let mut per_step: Vec<BTreeMap<String, usize>> = vec![BTreeMap::new(); r.steps.len()];
    let combo = |w: &WorkerSeen| {
        format!(
            "{} ({} bin / {} worker)",
            w.host,
            w.bin.label(),
            w.worker.label()
        )
    };
    for e in &execs {
        let (Some(f), Some(w)) = (e.finish, workers.get(&e.pid)) else {
            continue;
        };
        if let Some(i) = r
            .steps
            .iter()
            .zip(&step_ends)
            .position(|(s, end)| f >= s.2 && f < *end)
        {
            *per_step[i].entry(combo(w)).or_default() += 1;
        }
    }
    let mut not_served = vec![];
    for (i, (name, h, _began, done)) in r.steps.iter().enumerate() {
        if *h > 2 {
            continue;
        }
        let host = ["A", "B", "C"][*h];
        // Finishes by the upgraded master after the step was done, before the next step.
        let served = execs
            .iter()
            .filter(|e| {
                e.finish.is_some_and(|f| f >= *done && f < step_ends[i])
                    && workers.get(&e.pid).is_some_and(|w| w.host == host)
            })
            .count();
        if served == 0 {
            not_served.push(format!("{name}: host {host} finished nothing after it"));
        }
    }
    for inc in &r.incarnations {
        let pids: BTreeSet<i32> = workers
            .iter()
            .filter(|(_, w)| w.master_pid == inc.pid)
            .map(|(p, _)| *p)
            .collect();
        let n = execs
            .iter()
            .filter(|e| e.finish.is_some() && pids.contains(&e.pid))
            .count();
        let refused_probe = inc.bin == Release::Old && inc.host == "B" && inc.n == 2;
        if n == 0 && !refused_probe {
            not_served.push(format!(
                "host {} #{} ({} binary, pid {}) finished no job",
                inc.host,
                inc.n,
                inc.bin.label(),
                inc.pid
            ));
        }
    }
    check(
        "every master served after its step",
        not_served.is_empty(),
        if not_served.is_empty() {
            "each upgraded host finished jobs after its step, and every master that ran finished jobs".into()
        } else {
            not_served.join("; ")
        },
    );

    let clean: Vec<String> = r
        .incarnations
        .iter()
        .filter(|i| !i.exit_ok)
        .map(|i| {
            format!(
                "host {} #{} ({}): {}",
                i.host,
                i.n,
                i.bin.label(),
                i.exit.clone().unwrap_or("never stopped".into())
            )
        })
        .collect();
    check(
        "every master stopped cleanly; the 0.1 start on schema 9 refused it by name",
        clean.is_empty(),
        if clean.is_empty() {
            "each drained master exited 0; the 0.1 binary started on schema 9 exited non-zero naming the newer schema".into()
        } else {
            clean.join("; ")
        },
    );
    check(
        "schema migrated 7 -> 9",
        schema_at_start == 7 && schema_at_end == 9,
        format!("schema {schema_at_start} at the start, {schema_at_end} at the end"),
    );

    // Outage grace: none given while a 0.1 master has a row; given once none has.
    let samples = r.samples.lock().unwrap().clone();
    let violations: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.old_nodes > 0 && s.graced.unwrap_or(0) > 0)
        .collect();
    let last_old = samples
        .iter()
        .filter(|s| s.old_nodes > 0)
        .map(|s| s.at)
        .fold(f64::NAN, f64::max);
    let graced_after = samples
        .iter()
        .filter(|s| s.at > last_old && s.graced.unwrap_or(0) > 0)
        .count();
    let graced_total = samples.iter().filter(|s| s.graced.unwrap_or(0) > 0).count();
    check(
        "no outage grace while a 0.1 master has a row; given once none has",
        violations.is_empty() && graced_after > 0,
        format!(
            "{} samples (every 200 ms); {} with a graced lease while a 0.1 row existed{}; the last 0.1 row seen at {}; {} samples after it held graced leases ({} in all)",
            samples.len(),
            violations.len(),
            violations
                .first()
                .map(|s| format!(" (first at {}: {:?})", r.rel_t(s.at), s))
                .unwrap_or_default(),
            r.rel_t(last_old),
            graced_after,
            graced_total
        ),
    );

    // The pause: confirmed without the 0.1 master; no 0.2 master started a job after it.
    let mut pause_md = String::new();
    if let Some(p) = &pause {
        // (seconds after the confirmation, worker, job) of each job started while paused.
        let starts_after: Vec<(f64, WorkerSeen, i64)> = match p.confirmed {
            Some(c) => execs
                .iter()
                .filter(|e| e.start > c && e.start < p.resumed)
                .filter_map(|e| workers.get(&e.pid).map(|w| (e.start - c, w.clone(), e.job)))
                .collect(),
            None => vec![],
        };
        let new_starts: Vec<String> = starts_after
            .iter()
            .filter(|(_, w, _)| w.bin == Release::New)
            .map(|(d, w, j)| format!("job {j} on {} +{:.3} s", combo(w), d))
            .collect();
        let mut old_deltas: Vec<f64> = starts_after
            .iter()
            .filter(|(_, w, _)| w.bin == Release::Old)
            .map(|(d, _, _)| *d)
            .collect();
        old_deltas.sort_by(f64::total_cmp);
        let old_latest = old_deltas.last().copied().unwrap_or(0.0);
        let (before, during): (Vec<f64>, Vec<f64>) = {
            // Starts per second in the 4 s before the pause and while it held, fleet-wide.
            let c = p.confirmed.unwrap_or(p.paused);
            let n = |a: f64, b: f64| {
                execs.iter().filter(|e| e.start >= a && e.start < b).count() as f64
            };
            (
                vec![n(p.paused - 4.0, p.paused) / 4.0],
                vec![n(c, p.resumed) / (p.resumed - c)],
            )
        };
        let _ = writeln!(
            pause_md,
            "`SELECT drover.pause_queue('default')` at {}, with the masters' rows (pid, release) {:?}. The first look at `drover.pause_unconfirmed('default')` listed {:?}; it was empty {} (the pause returns then). The rows holding the pause's version then (pid, release, held): {:?}: the 0.1 master never confirms, and was not waited for. Resumed at {}.\n",
            r.rel_t(p.paused),
            p.nodes
                .iter()
                .map(|(pid, rel)| format!("{pid} {}", rel.as_deref().unwrap_or("0.1")))
                .collect::<Vec<_>>(),
            p.first_unconfirmed,
            p.confirmed
                .map(|c| format!("{:.0} ms after the pause", (c - p.paused) * 1000.0))
                .unwrap_or("never".into()),
            p.held,
            r.rel_t(p.resumed),
        );
        let _ = writeln!(
            pause_md,
            "Jobs started per second, fleet-wide: {:.1} in the 4 s before the pause, {:.1} while it held. Started after the confirmation and before the resume: {} by masters of 0.2 (binary 0.2 with 0.1 or 0.2 workers){}; {} by the 0.1 master, at +{} s after the confirmation (the 0.1 master reads `drover.paused_queues` each second and stops claiming; jobs its workers already held still start after their running job ends).",
            before[0],
            during[0],
            new_starts.len(),
            if new_starts.is_empty() {
                String::new()
            } else {
                format!(": {new_starts:?}")
            },
            old_deltas.len(),
            old_deltas
                .iter()
                .map(|d| format!("{d:.3}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        check(
            "queue pause with mixed masters",
            p.confirmed.is_some() && new_starts.is_empty(),
            format!(
                "confirmed in {} without the 0.1 master; {} jobs started by 0.2 masters after it{}; {} by the 0.1 master (the last {:.3} s after it, not asserted)",
                p.confirmed
                    .map(|c| format!("{:.0} ms", (c - p.paused) * 1000.0))
                    .unwrap_or("never".into()),
                new_starts.len(),
                if new_starts.is_empty() {
                    String::new()
                } else {
                    format!(" {new_starts:?}")
                },
                old_deltas.len(),
                old_latest
            ),
        );
    }

    // Each worker process: which release, under which master, and what it was told.
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for w in workers.values() {
        *kinds
            .entry(format!(
                "{} worker under a {} master: DROVER_PROTOCOL={}",
                w.worker.label(),
                w.bin.label(),
                w.told.as_deref().unwrap_or("(unset)")
            ))
            .or_default() += 1;
    }
    let told_wrong: Vec<String> = workers
        .iter()
        .filter(|(_, w)| {
            (w.bin == Release::Old && w.told.is_some())
                || (w.bin == Release::New && w.told.as_deref() != Some("2"))
        })
        .map(|(p, w)| format!("pid {p} under {}: {:?}", combo(w), w.told))
        .collect();
    check(
        "each master tells its workers its protocol (0.1: nothing, 0.2: 2)",
        told_wrong.is_empty(),
        kinds
            .iter()
            .map(|(k, n)| format!("{n} x {k}"))
            .collect::<Vec<_>>()
            .join("; "),
    );
    let ok = checks.iter().all(|c| c.ok);

    // The report.
    let a = &r.args;
    let mut md = String::new();
    let tree_head = git(&r.rel.new_tree, &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let old_head = git(&r.rel.old_tree, &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let tree_dirty = git(&r.rel.new_tree, &["status", "--porcelain"]).unwrap_or_default();
    let _ = writeln!(
        md,
        "# Rolling upgrade 0.1.0 → 0.2.0: three masters under load\n"
    );
    let _ = writeln!(
        md,
        "Written by `cargo run --release -p drover-bench --bin rolling_upgrade{}` (bench/src/bin/rolling_upgrade.rs, which says what each step does). Verdict: **{}**.\n",
        std::env::args().skip(1).map(|s| format!(" {s}")).collect::<String>(),
        if ok { "every assertion held" } else { "an assertion FAILED" }
    );
    let _ = writeln!(md, "## Conditions\n");
    let _ = writeln!(
        md,
        "- 0.1: `{}` built from a worktree of tag v0.1.0 (commit {old_head}): `{}`; its worker `php-client/bin/drover-worker` and `tests/fixtures/handler.php` from the same worktree.",
        r.rel.old_bin.strip_prefix(&r.rel.root).unwrap_or(&r.rel.old_bin).display(),
        version_line(&r.rel.old_bin)
    );
    let _ = writeln!(
        md,
        "- 0.2: `{}` {} (this repository's `{}` when the run began; the working tree's uncommitted edits are not in it{}): `{}`; its worker and handler from the same worktree.",
        r.rel.new_bin.strip_prefix(&r.rel.root).unwrap_or(&r.rel.new_bin).display(),
        if a.new_bin.is_some() {
            format!("(given with --new-bin), the PHP package from a worktree of {tree_head}")
        } else {
            format!("built from a worktree of commit {tree_head}")
        },
        a.new_rev,
        if tree_dirty.is_empty() { String::new() } else { format!("; the worktree differs from its commit: {}", tree_dirty.replace('\n', ", ")) },
        version_line(&r.rel.new_bin)
    );
    let _ = writeln!(
        md,
        "- One PostgreSQL 15 (private cluster, fsync off); three masters (hosts A, B, C: one state directory each, `drover run --config FILE`), lease {} s, {} workers each (`spawn: exec`), prefetch {}; `outage_grace` {} s on a host once it runs the 0.2 binary and package.",
        a.lease, a.workers, a.prefetch, a.outage_grace
    );
    let _ = writeln!(
        md,
        "- Producer: the 0.1 package's `Drover\\Producer` (PHP, one INSERT per job, autocommit), {} jobs/s throughout, max {} attempts; every {}th job runs 3 s (beating every 100 ms), the others 50-500 ms (uniform). {} jobs enqueued, {} of them 3 s long; the longest enqueue took {:.1} ms (at {}).",
        a.rate,
        a.max_attempts,
        a.long_every,
        enqueued.len(),
        longs,
        enqueue_at.iter().map(|(_, ms)| *ms).fold(0.0, f64::max),
        enqueue_at
            .iter()
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(t, _)| r.rel_t(*t))
            .unwrap_or_default()
    );
    let _ = writeln!(
        md,
        "- {} s of service before each step and after the last. Times below are seconds since the cluster started.\n",
        a.service
    );

    let _ = writeln!(md, "## Assertions\n");
    let _ = writeln!(md, "| assertion | result | figures |\n|---|---|---|");
    for c in &checks {
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            c.name,
            if c.ok { "pass" } else { "**FAIL**" },
            c.detail.replace('|', "\\|")
        );
    }

    let _ = writeln!(md, "\n## Steps\n");
    let _ = writeln!(
        md,
        "Jobs finished in each interval (from the step's start to the next step's), by the host and the releases of its master's binary and worker that finished them.\n"
    );
    let _ = writeln!(
        md,
        "| step | began | serving again | jobs finished, by host (binary / worker) |\n|---|---|---|---|"
    );
    for (i, (name, h, began, done)) in r.steps.iter().enumerate() {
        let total: usize = per_step[i].values().sum();
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {total}: {} |",
            r.rel_t(*began),
            if *h > 2 {
                "-".to_string()
            } else {
                format!("{} (+{:.2} s)", r.rel_t(*done), done - began)
            },
            per_step[i]
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !pause_md.is_empty() {
        let _ = writeln!(md, "\n## Queue pause with mixed masters\n\n{pause_md}");
    }
    let _ = writeln!(md, "\n## Masters\n");
    let _ = writeln!(
        md,
        "| host | # | binary | pid | started | serving | SIGTERM | exited | exit | jobs finished by its workers |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for inc in &r.incarnations {
        let pids: BTreeSet<i32> = workers
            .iter()
            .filter(|(_, w)| w.master_pid == inc.pid)
            .map(|(p, _)| *p)
            .collect();
        let n = execs
            .iter()
            .filter(|e| e.finish.is_some() && pids.contains(&e.pid))
            .count();
        let t = |x: Option<f64>| x.map(|x| r.rel_t(x)).unwrap_or("-".into());
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            inc.host,
            inc.n,
            inc.bin.label(),
            inc.pid,
            r.rel_t(inc.started),
            t(inc.serving_at),
            t(inc.term_at),
            t(inc.exited_at),
            inc.exit.clone().unwrap_or_default(),
            n
        );
    }
    let _ = writeln!(md, "\n## What each master's log said\n");
    let _ = writeln!(
        md,
        "Lines about the schema, migrations, protocol, release, grace, reloads and pauses, and every warning or error (log level info; `host B #2` is the 0.1 binary started on schema 9).\n"
    );
    for inc in &r.incarnations {
        let text = strip_ansi(&std::fs::read_to_string(&inc.log).unwrap_or_default());
        let lines: Vec<&str> = text.lines().filter(|l| interesting(l)).collect();
        let warns = text
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .count();
        let _ = writeln!(
            md,
            "**host {} #{} ({} binary, pid {})**: {} lines, {} at WARN or ERROR.\n",
            inc.host,
            inc.n,
            inc.bin.label(),
            inc.pid,
            text.lines().count(),
            warns
        );
        if !lines.is_empty() {
            let _ = writeln!(md, "```");
            for l in lines.iter().take(25) {
                let l: String = l.chars().take(400).collect();
                let _ = writeln!(md, "{l}");
            }
            if lines.len() > 25 {
                let _ = writeln!(md, "... {} more", lines.len() - 25);
            }
            let _ = writeln!(md, "```\n");
        }
    }
    let _ = writeln!(md, "## Status at each step\n");
    for (label, line) in &r.statuses {
        let _ = writeln!(md, "- {label}: {line}");
    }
    let _ = writeln!(md, "\n## Timeline\n\n```");
    for (t, what) in &r.events {
        let _ = writeln!(md, "{:>8} {what}", r.rel_t(*t));
    }
    let _ = writeln!(md, "```");
    if !r.notes.is_empty() {
        let _ = writeln!(md, "\n## Notes\n");
        for n in &r.notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    // Node rows and leases over time, coarsely.
    let _ = writeln!(md, "\n## Node rows (every 5 s of samples)\n\n```");
    let mut next = 0.0;
    for s in &samples {
        if s.at >= next {
            let _ = writeln!(
                md,
                "{:>8} nodes {:?} leased {} graced {} ready/delayed {}",
                r.rel_t(s.at),
                s.nodes
                    .iter()
                    .map(|(p, rel)| format!("{p}:{}", rel.as_deref().unwrap_or("0.1")))
                    .collect::<Vec<_>>(),
                s.leased,
                s.graced.map(|g| g.to_string()).unwrap_or("-".into()),
                s.backlog
            );
            next = s.at + 5.0;
        }
    }
    let _ = writeln!(md, "```");
    println!("\n{md}");
    Ok((md, ok))
}
