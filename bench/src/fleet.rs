//! Shape 8: a fleet, three masters on one database, as three application hosts run them (here
//! three `php artisan drover` processes on this machine, each with its own state directory and
//! `BENCH_HOST`, the same app and database).
//!
//! (a) **Split**: the same workers on one master or split over three: a shape-2 backlog of no-op
//! jobs (jobs/s) and shape-3 paced jobs (pickup), with the claim statement's calls, rows per call
//! and time from pg_stat_statements (every master's claims together).
//!
//! (b) **Outages**: the three masters under load — a steady open-loop producer of short jobs and,
//! on every master, two long "API" jobs started just before the outage — while the primary is
//! stopped (fast shutdown) for each outage length, with each `outage_grace`. Every execution of
//! every job is read back from the records `Bench\FleetJob` (bench/fleet/FleetJob.php) appends.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::engines::Engine;
use crate::measure::{percentiles, Percentiles};
use crate::sampler::load_average_1m;
use crate::stack::Stack;

/// The masters of a fleet.
pub const HOSTS: usize = 3;

/// What shape 8 runs (`--fleet-*`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetSizes {
    /// Which parts: "a" (split), "b" (outages), "c" (a standby promoted).
    pub parts: Vec<String>,
    /// (a): workers in all, on one master or split evenly over [`HOSTS`].
    pub workers: usize,
    /// (a): the backlog of no-op jobs (shape 2's).
    pub backlog_jobs: i64,
    /// (a): paced jobs and their rate (shape 3's).
    pub paced_jobs: i64,
    pub paced_rate: u32,
    /// (a): drover's prefetch for the backlog (shape 2's; the paced jobs use 1, as shape 3).
    pub prefetch: usize,
    /// (b), (c): outage lengths (in (c), until the standby is promoted), seconds.
    pub outages: Vec<f64>,
    /// (b), (c): each pool's `outage_grace`, seconds.
    pub graces: Vec<f64>,
    /// (b): the lease, seconds.
    pub lease: f64,
    /// (b): the long jobs' length, ms; two per master.
    pub long_ms: u64,
    /// (b): the producer's short jobs, per second, and their length (ms).
    pub rate: f64,
    pub short_ms: u64,
    /// (b): short-job workers per master (beside the two of the `api` pool).
    pub short_workers: usize,
}

impl FleetSizes {
    pub fn full() -> FleetSizes {
        FleetSizes {
            parts: vec!["a".into(), "b".into()],
            workers: 6,
            backlog_jobs: 20_000,
            paced_jobs: 500,
            paced_rate: 50,
            prefetch: 8,
            outages: vec![30.0, 60.0, 120.0],
            graces: vec![0.0, 120.0],
            lease: 30.0,
            long_ms: 40_000,
            rate: 10.0,
            short_ms: 50,
            short_workers: 2,
        }
    }

    /// The smoke configuration: a 10 s outage against 3 s leases, grace 0 and 15.
    pub fn quick() -> FleetSizes {
        FleetSizes {
            backlog_jobs: 2000,
            paced_jobs: 100,
            outages: vec![10.0],
            graces: vec![0.0, 15.0],
            lease: 3.0,
            long_ms: 15_000,
            ..FleetSizes::full()
        }
    }
}

/// (a): one run of one variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SplitRun {
    /// "backlog" or "paced".
    pub kind: String,
    pub masters: usize,
    pub workers_each: usize,
    pub jobs: i64,
    pub valid: bool,
    pub problems: Vec<String>,
    #[serde(deserialize_with = "crate::measure::nan_if_null")]
    pub jobs_per_s: f64,
    pub pickup: Percentiles,
    /// pg_stat_statements over the run, every master's claims together.
    #[serde(deserialize_with = "crate::measure::nan_if_null")]
    pub claim_calls: f64,
    #[serde(deserialize_with = "crate::measure::nan_if_null")]
    pub claim_rows: f64,
    #[serde(deserialize_with = "crate::measure::nan_if_null")]
    pub claim_ms: f64,
    /// The masters' own counts, summed (`master stopped`).
    pub claimed: u64,
    pub returned_unstarted: u64,
    /// The 1-minute load average at the run's end.
    #[serde(deserialize_with = "crate::measure::nan_if_null")]
    pub load: f64,
}

/// (b): one outage.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OutageRun {
    pub outage_s: f64,
    pub grace_s: f64,
    pub lease_s: f64,
    pub long_ms: u64,
    /// From the SIGINT to the server accepting connections again.
    #[serde(deserialize_with = "crate::measure::nan_if_null")]
    pub measured_outage_s: f64,
    /// Long jobs, and how many each host started before the outage.
    pub long_jobs: usize,
    pub long_per_host: Vec<usize>,
    /// Ran once, through the outage.
    pub long_once: usize,
    /// Killed (an execution that began and never ended) and then run again to its end.
    pub long_killed_rerun: usize,
    /// Never finished by the run's end.
    pub long_lost: usize,
    /// Finished more than once.
    pub long_doubled: usize,
    /// Two executions of one job at the same time.
    pub long_overlapping: usize,
    /// Seconds into the outage at which each killed execution's last record was written.
    #[serde(deserialize_with = "nans_if_null")]
    pub killed_at_s: Vec<f64>,
    /// Seconds after the database's return at which each re-run began.
    #[serde(deserialize_with = "nans_if_null")]
    pub rerun_after_return_s: Vec<f64>,
    /// Short jobs: committed, never run, run more than once, and run although the dispatch
    /// reported failure.
    pub short_committed: usize,
    pub short_lost: usize,
    pub short_doubled: usize,
    pub short_ran_unreported: usize,
    /// Short jobs dispatched after the return: from the dispatch's start (the producer's wall
    /// clock) to `handle()`, and how many there were.
    #[serde(default = "unmeasured")]
    pub pickup_after_return: Percentiles,
    #[serde(default)]
    pub short_after_return: usize,
    /// The producer's dispatches from the outage's start to the server's return, and failed.
    pub dispatch_in_outage: usize,
    pub dispatch_failed_in_outage: usize,
    /// The dispatches of that window that succeeded: when each began, seconds after the outage's
    /// start (the one in flight at the stop, or one that reached the server back before the
    /// harness saw it back). Not recorded before (c) was added.
    #[serde(default, deserialize_with = "nans_if_null")]
    pub dispatch_ok_in_outage_at_s: Vec<f64>,
    /// Failed over the whole run.
    pub dispatch_failed: usize,
    /// Per host: seconds from the server's return to the first job it started (None: never).
    pub serving_after_s: Vec<Option<f64>>,
    /// Per host: the master log's lines on leases it could not renew and workers its lease
    /// guard stopped.
    pub renew_failed_lines: Vec<usize>,
    pub guard_kill_lines: Vec<usize>,
    /// 1-minute load average at the outage's start, at the return, at the run's end.
    #[serde(deserialize_with = "nans_if_null")]
    pub load: Vec<f64>,
    pub problems: Vec<String>,
    /// (c): the standby's promotion (None in (b)). In (c) "the return" above is the promotion's
    /// end: the new primary taking writes.
    #[serde(default)]
    pub failover: Option<Failover>,
}

/// (c): what the promotion did, beside what [`OutageRun`] counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Failover {
    /// The primary's WAL the standby had not replayed just before the primary was killed, bytes
    /// (`pg_stat_replication`; -1: no standby connected).
    pub lag_bytes: i64,
    /// `pg_ctl promote`, from its start to a writable connection, seconds.
    #[serde(deserialize_with = "crate::measure::nan_if_null")]
    pub promote_s: f64,
    /// The old primary's WAL past the new timeline's fork: what the promotion lost.
    pub lost: crate::standby::LostWal,
    /// Per host: the master's log lines saying it connected to a host after passing over
    /// another (the dead primary, or the standby before its promotion).
    pub passed_over_lines: Vec<usize>,
    /// Per host, seconds from the promotion's end to the master's log saying its statements'
    /// connection was back (`reconnected to PostgreSQL`) and its LISTEN connection was
    /// (`LISTEN connection restored`), the first of each after the kill (None: no such line).
    #[serde(default)]
    pub store_back_s: Vec<Option<f64>>,
    #[serde(default)]
    pub listen_back_s: Vec<Option<f64>>,
}

/// A master log line's timestamp ("2026-12-04T18:08:03.170600Z ..."), as Unix seconds.
fn log_time(line: &str) -> Option<f64> {
    let stamp = line.split_whitespace().next()?.strip_suffix('Z')?;
    let (date, time) = stamp.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = t.next()?.parse().ok()?;
    // Days from 1970-01-01 to the civil date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + min * 60) as f64 + sec)
}

/// The first line of `log` after `after` (Unix seconds) containing `needle`: its time − `from`.
fn first_after(log: &str, needle: &str, after: f64, from: f64) -> Option<f64> {
    log.lines()
        .filter(|l| l.contains(needle))
        .filter_map(log_time)
        .find(|t| *t > after)
        .map(|t| t - from)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetFigures {
    pub sizes: FleetSizes,
    /// The invocation's conditions (commit, machine, ...), for the shape's own section.
    pub conditions: Vec<String>,
    pub split: Vec<SplitRun>,
    pub outages: Vec<OutageRun>,
    /// (c): the standby promoted.
    #[serde(default)]
    pub failovers: Vec<OutageRun>,
}

/// serde_json writes NaN as null; read a list of them back as NaN.
fn nans_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Ok(Vec::<Option<f64>>::deserialize(d)?
        .into_iter()
        .map(|v| v.unwrap_or(f64::NAN))
        .collect())
}

/// Percentiles of a run made before they were measured.
fn unmeasured() -> Percentiles {
    percentiles(Vec::new())
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A running fleet: one `php artisan drover` per host.
struct Fleet {
    masters: Vec<Child>,
    logs: Vec<String>,
    states: Vec<std::path::PathBuf>,
}

impl Fleet {
    /// `hosts` masters with `env` each (plus its host name and state directory); waits until
    /// each has `serving` workers serving.
    async fn start(
        stack: &Stack,
        hosts: usize,
        env: &[(&str, String)],
        serving: usize,
    ) -> anyhow::Result<Fleet> {
        let mut fleet = Fleet {
            masters: Vec::new(),
            logs: Vec::new(),
            states: Vec::new(),
        };
        for h in 0..hosts {
            let host = format!("h{}", h + 1);
            let state = stack.dir.path().join(format!("state-fleet-{host}"));
            let _ = std::fs::remove_dir_all(&state);
            let mut all: Vec<(&str, String)> = env.to_vec();
            all.push(("BENCH_HOST", host.clone()));
            all.push(("DROVER_STATE_DIR", state.display().to_string()));
            all.push(("DROVER_SPAWN", "fork".into()));
            all.push(("DROVER_MAX_JOBS", "0".into()));
            let log = format!("fleet-{host}.log");
            fleet
                .masters
                .push(stack.spawn_logged(&all, &["drover"], &log)?);
            fleet.logs.push(log);
            fleet.states.push(state);
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        for state in &fleet.states {
            loop {
                let out = std::process::Command::new(stack.drover())
                    .args(["status", "--json", "--state-dir"])
                    .arg(state)
                    .output()?;
                if out.status.success() {
                    let s: serde_json::Value = serde_json::from_slice(&out.stdout)?;
                    let n: u64 = s["pools"]
                        .as_array()
                        .map(|p| p.iter().filter_map(|p| p["serving"].as_u64()).sum())
                        .unwrap_or(0);
                    if n as usize >= serving {
                        break;
                    }
                }
                if Instant::now() > deadline {
                    let logs = fleet.stop(stack).await.unwrap_or_default();
                    let tail: Vec<&str> =
                        logs.iter().flat_map(|l| l.lines().rev().take(6)).collect();
                    bail!(
                        "a fleet master did not get {serving} workers serving in 90 s; the masters' last log lines:\n{}",
                        tail.join("\n")
                    );
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(fleet)
    }

    /// SIGTERM to every master at once; each one's log.
    async fn stop(mut self, stack: &Stack) -> anyhow::Result<Vec<String>> {
        for m in &self.masters {
            let _ = kill(Pid::from_raw(m.id() as i32), Signal::SIGTERM);
        }
        for m in &mut self.masters {
            m.wait()?;
        }
        Ok(self
            .logs
            .iter()
            .map(|l| std::fs::read_to_string(stack.log_path(l)).unwrap_or_default())
            .collect())
    }
}

/// pg_stat_statements' claim statement, every master's: (calls, rows, total ms).
async fn claim_stats(stack: &Stack) -> anyhow::Result<(f64, f64, f64)> {
    if !stack.stat_statements {
        return Ok((f64::NAN, f64::NAN, f64::NAN));
    }
    let row = stack
        .client
        .query_one(
            "SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(rows), 0)::float8,
                    coalesce(sum(total_exec_time), 0)::float8
             FROM pg_stat_statements
             WHERE query LIKE '%FOR UPDATE SKIP LOCKED%leased AS (%SET lease_token%'
               AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .await?;
    Ok((row.get(0), row.get(1), row.get(2)))
}

/// Shape 8, the parts `sizes.parts` names; `runs` runs of each (a) variant.
pub async fn run(
    stack: &mut Stack,
    sizes: &FleetSizes,
    runs: usize,
    conditions: Vec<String>,
) -> anyhow::Result<FleetFigures> {
    if stack.laravel != 12 {
        bail!("shape 8 runs on the bench's Laravel 12 app (its job is loaded by the bench's providers): drop --laravel 8");
    }
    let mut figures = FleetFigures {
        sizes: sizes.clone(),
        conditions,
        split: Vec::new(),
        outages: Vec::new(),
        failovers: Vec::new(),
    };
    if sizes.parts.iter().any(|p| p == "a") {
        for run in 0..runs {
            let mut order = [(1, sizes.workers), (HOSTS, sizes.workers / HOSTS)];
            if run % 2 == 1 {
                order.reverse();
            }
            for kind in ["backlog", "paced"] {
                for (masters, each) in order {
                    eprintln!(
                        "bench: shape 8 (a) run {} of {runs}: {kind}, {masters} master(s) × {each} workers",
                        run + 1
                    );
                    match split_run(stack, sizes, kind, masters, each).await {
                        Ok(r) => {
                            eprintln!(
                                "bench:   {:.0} jobs/s, pickup p50 {:.1} ms p99 {:.1} ms, {:.0} claims, {:.2} jobs per claim, valid: {}{}",
                                r.jobs_per_s, r.pickup.p50_ms, r.pickup.p99_ms, r.claim_calls,
                                r.claimed as f64 / r.claim_calls, r.valid,
                                if r.valid { String::new() } else { format!(" ({})", r.problems.join("; ")) }
                            );
                            figures.split.push(r);
                        }
                        Err(e) => eprintln!("bench:   run failed: {e:#}"),
                    }
                }
            }
        }
    }
    for part in ["b", "c"] {
        if !sizes.parts.iter().any(|p| p == part) {
            continue;
        }
        for outage in &sizes.outages {
            for grace in &sizes.graces {
                let what = if part == "b" {
                    format!("a {outage} s outage")
                } else {
                    format!("the primary killed, its standby promoted {outage} s later")
                };
                eprintln!(
                    "bench: shape 8 ({part}): {what}, outage_grace {grace} s, lease {} s",
                    sizes.lease
                );
                let run = if part == "b" {
                    outage_run(stack, sizes, *outage, *grace).await
                } else {
                    failover_run(stack, sizes, *outage, *grace).await
                };
                match run {
                    Ok(r) => {
                        eprintln!(
                            "bench:   long jobs: {} once, {} killed and re-run, {} lost, {} doubled, {} overlapping; short jobs after the return: pickup p50 {:.1} ms p99 {:.1} ms; dispatches in the outage {} ({} failed); serving again after {:?} s; load {:?}{}{}",
                            r.long_once, r.long_killed_rerun, r.long_lost, r.long_doubled, r.long_overlapping,
                            r.pickup_after_return.p50_ms, r.pickup_after_return.p99_ms,
                            r.dispatch_in_outage, r.dispatch_failed_in_outage, r.serving_after_s, r.load,
                            r.failover.as_ref().map(|f| format!("; promotion: lag {} B, promote {:.2} s, lost WAL {:?}, passed-over lines {:?}", f.lag_bytes, f.promote_s, f.lost, f.passed_over_lines)).unwrap_or_default(),
                            if r.problems.is_empty() { String::new() } else { format!("; problems: {}", r.problems.join("; ")) }
                        );
                        if part == "b" {
                            figures.outages.push(r);
                        } else {
                            figures.failovers.push(r);
                        }
                    }
                    Err(e) => {
                        eprintln!("bench:   run failed: {e:#}");
                        // A run that failed with the database down must not leave it down.
                        if stack.pg.pid().is_none()
                            || !stack.pg.data_dir().join("postmaster.pid").exists()
                        {
                            stack.start_pg().await?;
                        }
                    }
                }
            }
        }
    }
    Ok(figures)
}

/// (a): one variant of one kind.
async fn split_run(
    stack: &Stack,
    sizes: &FleetSizes,
    kind: &str,
    masters: usize,
    each: usize,
) -> anyhow::Result<SplitRun> {
    stack.reset().await?;
    if stack.stat_statements {
        stack
            .client
            .batch_execute("SELECT pg_stat_statements_reset()")
            .await?;
    }
    let backlog = kind == "backlog";
    let prefetch = if backlog { sizes.prefetch } else { 1 };
    let env = [
        ("DROVER_PROCESSES", each.to_string()),
        ("DROVER_PREFETCH_JOBS", prefetch.to_string()),
    ];
    let n = if backlog {
        sizes.backlog_jobs
    } else {
        sizes.paced_jobs
    };
    let (fleet, first) = if backlog {
        crate::measure::first_dispatch(crate::measure::dispatch(
            stack,
            Engine::Drover,
            n,
            0,
            &["--bulk"],
        )?)?;
        (Fleet::start(stack, masters, &env, each).await?, None)
    } else {
        let fleet = Fleet::start(stack, masters, &env, each).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rate = format!("--rate={}", sizes.paced_rate);
        let producer = crate::measure::dispatch(stack, Engine::Drover, n, 0, &[&rate])?;
        (fleet, Some(producer))
    };
    let deadline = Instant::now() + Duration::from_secs(900);
    while stack.completed()? < n {
        if Instant::now() > deadline {
            let _ = fleet.stop(stack).await;
            bail!("only {} of {n} jobs completed in 900 s", stack.completed()?);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let first = match first {
        Some(p) => Some(crate::measure::first_dispatch(p)?),
        None => None,
    };
    let r = stack.runs()?;
    let problems = crate::measure::validate(stack, Engine::Drover, n, &r).await?;
    let (calls, rows, ms) = claim_stats(stack).await?;
    let load = load_average_1m();
    let logs = fleet.stop(stack).await?;
    let tallies: Vec<_> = logs
        .iter()
        .filter_map(|l| crate::engines::ClaimTally::from_log(l))
        .collect();
    let last = r.finished.iter().cloned().fold(f64::MIN, f64::max);
    let start = first.unwrap_or_else(|| r.started.iter().cloned().fold(f64::MAX, f64::min));
    let pickup = if backlog {
        // A backlog queued before the masters started has no commit-to-start latency.
        percentiles(Vec::new())
    } else {
        let commits = crate::measure::committed(stack, n).await?;
        let mut p = Vec::new();
        for i in 0..r.seq.len() {
            if let Some(c) = commits
                .get(r.seq[i] as usize)
                .copied()
                .filter(|c| c.is_finite())
            {
                p.push(r.started[i] - c);
            }
        }
        percentiles(p)
    };
    Ok(SplitRun {
        kind: kind.into(),
        masters,
        workers_each: each,
        jobs: n,
        valid: problems.is_empty(),
        problems,
        jobs_per_s: r.seq.len() as f64 / (last - start),
        pickup,
        claim_calls: calls,
        claim_rows: rows,
        claim_ms: if calls > 0.0 { ms / calls } else { f64::NAN },
        claimed: tallies.iter().map(|t| t.claimed).sum(),
        returned_unstarted: tallies.iter().map(|t| t.returned_unstarted).sum(),
        load,
    })
}

/// FleetJob's payload as `DroverQueue` writes it, with its seq and uuid put in per job.
#[derive(Clone)]
struct Payload {
    text: String,
}

const SENTINEL_SEQ: &str = "987654321";
const SENTINEL_UUID: &str = "00000000-0000-4000-8000-00000000beef";

impl Payload {
    fn fetch(stack: &Stack, ms: u64) -> anyhow::Result<Payload> {
        let code = format!(
            "$q = Queue::connection('drover'); \
             $f = \\Closure::bind(fn ($job) => $this->createPayload($job, $this->getQueue(null), ''), $q, get_class($q)); \
             return $f(new \\Bench\\FleetJob({SENTINEL_SEQ}, {ms}));"
        );
        let text = stack.artisan(&["app:eval", &code])?;
        let text = text.trim();
        anyhow::ensure!(
            text.starts_with('{') && text.contains(&format!("i:{SENTINEL_SEQ};")),
            "FleetJob's payload is not what was expected: {text}"
        );
        let v: serde_json::Value = serde_json::from_str(text)?;
        let uuid = v["uuid"].as_str().context("no uuid in the payload")?;
        Ok(Payload {
            text: text.replace(uuid, SENTINEL_UUID),
        })
    }

    fn of(&self, seq: u64) -> String {
        self.text
            .replace(&format!("i:{SENTINEL_SEQ};"), &format!("i:{seq};"))
            .replace(
                SENTINEL_UUID,
                &format!("00000000-0000-4000-8000-{seq:012x}"),
            )
    }
}

/// The plain INSERT `DroverQueue` makes for an ungrouped job; the database's clock at its end.
const INSERT_SQL: &str = "INSERT INTO drover.jobs (queue, payload, available_at) VALUES ($1, $2, clock_timestamp()) RETURNING extract(epoch FROM clock_timestamp())::float8";

/// One dispatch attempt of the producer.
#[derive(Debug, Clone)]
struct Attempt {
    seq: u64,
    /// Wall clock when it was begun.
    at: f64,
    ok: bool,
}

/// An open-loop producer of short jobs at `rate`/s on a thread of its own: each job its own
/// statement and commit; a failure (no server, a broken connection, 2 s without an answer) is
/// recorded and the connection opened again for the next job. Seqs from 1.
fn producer(
    url: String,
    payload: Payload,
    rate: f64,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Attempt>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the producer");
        rt.block_on(async move {
            let mut out = Vec::new();
            let mut client: Option<tokio_postgres::Client> = None;
            let t0 = tokio::time::Instant::now();
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                tokio::time::sleep_until(t0 + Duration::from_secs_f64((seq - 1) as f64 / rate))
                    .await;
                let at = now_s();
                let body = payload.of(seq);
                let attempt = async {
                    if client.is_none() {
                        client = Some(drover_broker::connect::connect_once(&url).await?);
                    }
                    let c = client.as_ref().context("connected")?;
                    c.query_one(INSERT_SQL, &[&"default", &body]).await?;
                    anyhow::Ok(())
                };
                let ok = matches!(
                    tokio::time::timeout(Duration::from_secs(2), attempt).await,
                    Ok(Ok(()))
                );
                if !ok {
                    client = None;
                }
                out.push(Attempt { seq, at, ok });
            }
            out
        })
    })
}

/// One execution of a job, from the records.
#[derive(Debug, Clone)]
struct Execution {
    seq: u64,
    host: String,
    started: f64,
    /// The last record it wrote (its end, or its last heartbeat).
    last: f64,
    ended: bool,
}

/// Every execution in the fleet's record directory, by (seq, attempt, pid).
fn executions(dir: &Path) -> anyhow::Result<Vec<Execution>> {
    let mut by: BTreeMap<(u64, u32, i32), Execution> = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let text = std::fs::read_to_string(entry?.path())?;
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() != 6 {
                continue; // a line being written
            }
            let (seq, attempt, pid): (u64, u32, i32) =
                (f[1].parse()?, f[2].parse()?, f[3].parse()?);
            let t: f64 = f[5].parse()?;
            let e = by.entry((seq, attempt, pid)).or_insert(Execution {
                seq,
                host: f[4].to_string(),
                started: t,
                last: t,
                ended: false,
            });
            if f[0] == "S" {
                e.started = t;
            }
            e.last = e.last.max(t);
            if f[0] == "E" {
                e.ended = true;
            }
        }
    }
    Ok(by.into_values().collect())
}

/// The long jobs' seqs start here, apart from the producer's.
const LONG_SEQ: u64 = 1_000_000;

/// (b): one outage of `outage` seconds with every pool's `outage_grace` at `grace`: the primary
/// stopped (fast shutdown) and started again.
async fn outage_run(
    stack: &mut Stack,
    sizes: &FleetSizes,
    outage: f64,
    grace: f64,
) -> anyhow::Result<OutageRun> {
    let loaded = Loaded::start(stack, sizes, grace, &[], stack.pg.url().to_string()).await?;
    let load0 = load_average_1m();
    let down = now_s();
    let down_at = Instant::now();
    stack.stop_pg().await?;
    tokio::time::sleep_until((down_at + Duration::from_secs_f64(outage)).into()).await;
    stack.start_pg().await?;
    let up = now_s();
    let load = vec![load0, load_average_1m(), f64::NAN];
    loaded
        .judge(stack, sizes, outage, grace, down, up, load, "b")
        .await
}

/// (c): the managed failover. The primary has a streaming standby (asynchronous,
/// [`crate::standby`]); the masters and the producer are given both hosts as the docs say a team
/// configures a failover (docs/postgres-topologies.md: `DB_HOST=primary,standby` and
/// `PGTARGETSESSIONATTRS=read-write` for the application, which `php artisan drover` hands the
/// master as its failover list; the producer's URL lists both with
/// `target_session_attrs=read-write`). The primary dies (immediate shutdown) and the standby is
/// promoted `outage` seconds later; the run is judged as (b)'s, "the return" being the
/// promotion's end. Then the old primary's WAL past the fork is read (what the promotion lost),
/// the standby is removed and the old primary started again for the next run.
async fn failover_run(
    stack: &mut Stack,
    sizes: &FleetSizes,
    outage: f64,
    grace: f64,
) -> anyhow::Result<OutageRun> {
    stack.reset().await?;
    let standby = crate::standby::Standby::start(stack).await?;
    let primary = stack.pg.data_dir().to_path_buf();
    let hosts = format!("{},{}", primary.display(), standby.data.display());
    let db_env = [
        ("DB_HOST", hosts.clone()),
        ("PGTARGETSESSIONATTRS", "read-write".to_string()),
    ];
    let producer_url =
        format!("host={hosts} port=5432 user=drover dbname=drover target_session_attrs=read-write");
    let loaded = Loaded::start(stack, sizes, grace, &db_env, producer_url).await?;
    let lag_bytes = crate::standby::Standby::lag_bytes(stack).await?;
    let load0 = load_average_1m();
    let down = now_s();
    let down_at = Instant::now();
    stack.kill_pg().await?;
    tokio::time::sleep_until((down_at + Duration::from_secs_f64(outage)).into()).await;
    let promoting = Instant::now();
    if let Err(e) = standby.promote().await {
        loaded.abandon(stack).await;
        return Err(e);
    }
    let up = now_s();
    let promote_s = promoting.elapsed().as_secs_f64();
    let load = vec![load0, load_average_1m(), f64::NAN];
    // The harness's own queries go to the new primary now.
    stack.client = drover_broker::connect::connect_once(&standby.url()).await?;
    let judged = loaded
        .judge(stack, sizes, outage, grace, down, up, load, "c")
        .await;
    let lost = standby
        .fork_point()
        .and_then(|fork| standby.lost_wal(&primary, &fork));
    standby.remove();
    stack.start_pg().await?;
    let mut r = judged?;
    let logs: Vec<String> = (1..=HOSTS)
        .map(|h| {
            std::fs::read_to_string(stack.log_path(&format!("fleet-h{h}.log"))).unwrap_or_default()
        })
        .collect();
    // What the promotion lost is reported beside the run, never instead of it.
    let lost = lost.unwrap_or_else(|e| crate::standby::LostWal {
        note: format!("not read: {e:#}"),
        ..Default::default()
    });
    if lost.commits > 0 {
        r.problems.push(format!(
            "the promotion lost {} commit(s) of the old primary ({} WAL records, {} bytes past the fork)",
            lost.commits, lost.records, lost.bytes
        ));
    }
    r.failover = Some(Failover {
        lag_bytes,
        promote_s,
        lost,
        passed_over_lines: logs
            .iter()
            .map(|l| l.lines().filter(|l| l.contains("passed over")).count())
            .collect(),
        store_back_s: logs
            .iter()
            .map(|l| first_after(l, "reconnected to PostgreSQL", down, up))
            .collect(),
        listen_back_s: logs
            .iter()
            .map(|l| first_after(l, "LISTEN connection restored", down, up))
            .collect(),
    });
    Ok(r)
}

/// (b) and (c): the fleet under load, its long jobs running, ready for the database to go.
struct Loaded {
    fleet: Fleet,
    /// The jobs' records.
    dir: std::path::PathBuf,
    stop: Arc<AtomicBool>,
    producing: std::thread::JoinHandle<Vec<Attempt>>,
    long_jobs: usize,
    long_per_host: Vec<usize>,
}

impl Loaded {
    /// Starts the masters (`db_env` on top of the bench's environment: the database the masters
    /// reach) and the producer (on `producer_url`), enqueues the long jobs and returns 2 s after
    /// every one has started.
    async fn start(
        stack: &Stack,
        sizes: &FleetSizes,
        grace: f64,
        db_env: &[(&str, String)],
        producer_url: String,
    ) -> anyhow::Result<Loaded> {
        stack.reset().await?;
        let dir = stack.dir.path().join("fleet-records");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let short = Payload::fetch(stack, sizes.short_ms)?;
        let long = Payload::fetch(stack, sizes.long_ms)?;
        let env = [
            ("BENCH_FLEET", "1".to_string()),
            ("BENCH_FLEET_DIR", dir.display().to_string()),
            ("BENCH_API_PROCESSES", "2".to_string()),
            ("DROVER_PROCESSES", sizes.short_workers.to_string()),
            ("DROVER_PREFETCH_JOBS", "1".to_string()),
            ("DROVER_LEASE", sizes.lease.to_string()),
            ("DROVER_OUTAGE_GRACE", grace.to_string()),
        ];
        let mut env = env.to_vec();
        env.extend(db_env.iter().cloned());
        let fleet = Fleet::start(stack, HOSTS, &env, sizes.short_workers + 2).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let producing = producer(producer_url, short.clone(), sizes.rate, stop.clone());
        tokio::time::sleep(Duration::from_secs(3)).await;
        // The long jobs: two per master (each master's `api` pool has two workers, prefetch 1).
        let long_jobs = 2 * HOSTS;
        for k in 1..=long_jobs as u64 {
            stack
                .client
                .query_one(INSERT_SQL, &[&"api", &long.of(LONG_SEQ + k)])
                .await?;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let started_long = loop {
            let ex = executions(&dir)?;
            let long_started: Vec<Execution> =
                ex.into_iter().filter(|e| e.seq > LONG_SEQ).collect();
            if long_started.len() >= long_jobs {
                break long_started;
            }
            if Instant::now() > deadline {
                stop.store(true, Ordering::Relaxed);
                let _ = producing.join();
                let _ = fleet.stop(stack).await;
                bail!(
                    "only {} of {long_jobs} long jobs started in 30 s",
                    long_started.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let mut long_per_host = vec![0usize; HOSTS];
        for e in &started_long {
            if let Some(h) = e
                .host
                .strip_prefix('h')
                .and_then(|h| h.parse::<usize>().ok())
            {
                if (1..=HOSTS).contains(&h) {
                    long_per_host[h - 1] += 1;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(Loaded {
            fleet,
            dir,
            stop,
            producing,
            long_jobs,
            long_per_host,
        })
    }

    /// Stops the producer and the masters of a run that cannot go on.
    async fn abandon(self, stack: &Stack) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.producing.join();
        let _ = self.fleet.stop(stack).await;
    }

    /// After the database went at `down` (wall clock) and took writes again at `up`: waits
    /// until the long jobs have ended and every master serves, stops the producer, lets what it
    /// committed drain, stops the masters and reads every execution back. `load`: the load
    /// averages at `down` and `up` (the third is set here). `part` names the run's kept records.
    #[allow(clippy::too_many_arguments)]
    async fn judge(
        self,
        stack: &Stack,
        sizes: &FleetSizes,
        outage: f64,
        grace: f64,
        down: f64,
        up: f64,
        mut load: Vec<f64>,
        part: &str,
    ) -> anyhow::Result<OutageRun> {
        let Loaded {
            fleet,
            dir,
            stop,
            producing,
            long_jobs,
            long_per_host,
        } = self;
        // Until every long job has ended (a re-run included), every host has started a job since the
        // return, and a lease and its grace have passed; then the producer stops and what it
        // committed drains.
        let hard = Instant::now()
            + Duration::from_secs_f64(
                sizes.long_ms as f64 / 1000.0 + 3.0 * sizes.lease + grace + 120.0,
            );
        // Once no long job is left in drover.jobs none can run again: its ack is written.
        let settle = Instant::now() + Duration::from_secs(5);
        loop {
            let ex = executions(&dir)?;
            let long_done =
                (1..=long_jobs as u64).all(|k| ex.iter().any(|e| e.seq == LONG_SEQ + k && e.ended));
            let hosts_served = (1..=HOSTS).all(|h| {
                ex.iter()
                    .any(|e| e.host == format!("h{h}") && e.started > up)
            });
            let long_left = match stack
                .client
                .query_one("SELECT count(*) FROM drover.jobs WHERE queue = 'api'", &[])
                .await
            {
                Ok(row) => row.get::<_, i64>(0),
                Err(_) => -1,
            };
            if (long_done && hosts_served && long_left == 0 && Instant::now() > settle)
                || Instant::now() > hard
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let attempts = producing
            .join()
            .map_err(|_| anyhow::anyhow!("the producer panicked"))?;
        let committed: Vec<u64> = attempts.iter().filter(|a| a.ok).map(|a| a.seq).collect();
        let drain = Instant::now() + Duration::from_secs(60);
        loop {
            let left = stack.scalar_i64("SELECT count(*) FROM drover.jobs").await?;
            if left == 0 || Instant::now() > drain {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        load[2] = load_average_1m();
        let logs = fleet.stop(stack).await?;

        let ex = executions(&dir)?;
        let mut r = OutageRun {
            outage_s: outage,
            grace_s: grace,
            lease_s: sizes.lease,
            long_ms: sizes.long_ms,
            measured_outage_s: up - down,
            long_jobs,
            long_per_host,
            load,
            ..Default::default()
        };
        let mut by_seq: HashMap<u64, Vec<&Execution>> = HashMap::new();
        for e in &ex {
            by_seq.entry(e.seq).or_default().push(e);
        }
        for k in 1..=long_jobs as u64 {
            let mut runs = by_seq.remove(&(LONG_SEQ + k)).unwrap_or_default();
            runs.sort_by(|a, b| a.started.total_cmp(&b.started));
            let ended = runs.iter().filter(|e| e.ended).count();
            let killed: Vec<&&Execution> = runs.iter().filter(|e| !e.ended).collect();
            match (ended, killed.len()) {
                (0, _) => r.long_lost += 1,
                (1, 0) => r.long_once += 1,
                (1, _) => r.long_killed_rerun += 1,
                _ => r.long_doubled += 1,
            }
            for e in &killed {
                r.killed_at_s.push(e.last - down);
            }
            for e in runs.iter().skip(1) {
                r.rerun_after_return_s.push(e.started - up);
            }
            // A killed execution ended at most a second after its last record (heartbeats are 1 s
            // apart): counted as running until then.
            let overlap = runs.windows(2).any(|w| {
                let end = if w[0].ended {
                    w[0].last
                } else {
                    w[0].last + 1.0
                };
                w[1].started < end
            });
            if overlap {
                r.long_overlapping += 1;
            }
        }
        let ok: std::collections::HashSet<u64> = committed.iter().copied().collect();
        r.short_committed = committed.len();
        for seq in &committed {
            let ended = by_seq
                .get(seq)
                .map(|v| v.iter().filter(|e| e.ended).count())
                .unwrap_or(0);
            match ended {
                0 => r.short_lost += 1,
                1 => {}
                _ => r.short_doubled += 1,
            }
        }
        r.short_ran_unreported = by_seq
            .keys()
            .filter(|s| **s < LONG_SEQ && !ok.contains(s))
            .count();
        let mut after = Vec::new();
        for a in attempts.iter().filter(|a| a.ok && a.at > up) {
            if let Some(first) = by_seq
                .get(&a.seq)
                .and_then(|v| v.iter().map(|e| e.started).min_by(|x, y| x.total_cmp(y)))
            {
                after.push(first - a.at);
            }
            r.short_after_return += 1;
        }
        r.pickup_after_return = percentiles(after);
        for a in &attempts {
            if a.at >= down && a.at <= up {
                r.dispatch_in_outage += 1;
                if !a.ok {
                    r.dispatch_failed_in_outage += 1;
                } else {
                    r.dispatch_ok_in_outage_at_s.push(a.at - down);
                }
            }
            if !a.ok {
                r.dispatch_failed += 1;
            }
        }
        for h in 1..=HOSTS {
            let host = format!("h{h}");
            r.serving_after_s.push(
                ex.iter()
                    .filter(|e| e.host == host && e.started > up)
                    .map(|e| e.started - up)
                    .min_by(|a, b| a.total_cmp(b)),
            );
        }
        for log in &logs {
            r.renew_failed_lines.push(
                log.lines()
                    .filter(|l| l.contains("could not be renewed"))
                    .count(),
            );
            r.guard_kill_lines.push(
                log.lines()
                    .filter(|l| l.contains("lease guard: worker pid"))
                    .count(),
            );
        }
        if r.long_lost + r.long_doubled + r.long_overlapping > 0 {
            r.problems.push(format!(
                "long jobs: {} lost, {} doubled, {} overlapping",
                r.long_lost, r.long_doubled, r.long_overlapping
            ));
        }
        if r.short_lost + r.short_doubled > 0 {
            r.problems.push(format!(
                "short jobs: {} lost, {} run twice",
                r.short_lost, r.short_doubled
            ));
        }
        if r.serving_after_s.iter().any(Option::is_none) {
            r.problems
                .push("a master started no job after the database returned".into());
        }
        let left = stack.scalar_i64("SELECT count(*) FROM drover.jobs").await?;
        if !r.problems.is_empty() || left != 0 {
            // What to look at afterwards: the records and the masters' logs.
            let keep = std::env::temp_dir().join(format!(
                "drover-bench-fleet-{part}-{}s-grace{}s-{}",
                outage,
                grace,
                std::process::id()
            ));
            let _ = std::fs::create_dir_all(&keep);
            let _ = std::process::Command::new("cp")
                .arg("-r")
                .arg(&dir)
                .arg(&keep)
                .status();
            for (h, log) in logs.iter().enumerate() {
                let _ = std::fs::write(keep.join(format!("h{}.log", h + 1)), log);
            }
            r.problems
                .push(format!("records and logs kept in {}", keep.display()));
        }
        if left != 0 {
            r.problems.push(format!("{left} jobs left in drover.jobs"));
        }
        let failed = stack
        .scalar_i64("SELECT (SELECT count(*) FROM drover.failed_jobs) + (SELECT count(*) FROM public.failed_jobs)")
        .await?;
        if failed != 0 {
            r.problems.push(format!("{failed} failed jobs"));
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_master_log_timestamp_reads_as_unix_seconds() {
        let t =
            super::log_time("2026-12-04T18:08:03.170600Z  INFO drover_broker::broker: x").unwrap();
        // date -u -d 2026-12-04T18:08:03Z +%s
        assert!((t - 1_796_407_683.170_6).abs() < 1e-3, "{t}");
        assert_eq!(super::log_time("not a line"), None);
    }
}
