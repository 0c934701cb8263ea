//! The workload shapes 1–4 and 7, each run once per call against one engine, and the figures
//! they give (shape 5, forking, is `crate::forking`; shape 6, ordered groups, is
//! `crate::groups`).

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::engines::{Engine, Running, WorkerSettings};
use crate::records::Runs;
use crate::sampler::{Sampler, Usage};
use crate::stack::Stack;

/// Sizes; `--quick` shrinks them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Sizes {
    pub seed_jobs: i64,
    pub overhead_jobs: i64,
    pub latency_jobs: i64,
    pub latency_rate: u32,
    pub scale_jobs: i64,
    pub idle_workers: usize,
    /// drover's prefetch per worker in shapes 1, 2 and 4 (shape 3 uses 1).
    #[serde(default = "default_prefetch")]
    pub prefetch: usize,
    /// Shape 6: ordered groups.
    #[serde(default)]
    pub groups: crate::groups::GroupSizes,
    /// Shape 7: bursts of [`BURST_JOBS`] jobs, [`BURST_EVERY`] apart.
    #[serde(default = "default_bursts")]
    pub bursts: i64,
}

fn default_bursts() -> i64 {
    10
}

/// Shape 7: jobs per burst, dispatched one at a time.
pub const BURST_JOBS: i64 = 20;
/// Shape 7: from one burst's start to the next, seconds.
pub const BURST_EVERY: f64 = 1.5;

fn default_prefetch() -> usize {
    4
}

impl Sizes {
    pub fn full() -> Sizes {
        Sizes {
            seed_jobs: 2000,
            overhead_jobs: 20_000,
            latency_jobs: 500,
            latency_rate: 50,
            scale_jobs: 1_000_000,
            idle_workers: 64,
            prefetch: 8,
            groups: crate::groups::GroupSizes::full(),
            bursts: 10,
        }
    }
    pub fn quick() -> Sizes {
        Sizes {
            seed_jobs: 400,
            overhead_jobs: 2000,
            latency_jobs: 100,
            latency_rate: 50,
            scale_jobs: 20_000,
            idle_workers: 16,
            prefetch: 8,
            groups: crate::groups::GroupSizes::quick(),
            bursts: 4,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shape {
    /// 4 workers, N × 10 ms busy jobs, one producer dispatching one at a time.
    Seed,
    /// N no-op jobs already queued, 4 workers.
    Overhead,
    /// A light steady load into idle workers; latency from commit to handle().
    Latency,
    /// A large backlog enqueued in bulk, drained; then many idle workers.
    Scale,
    /// Bursts of 20 × 10 ms jobs, 1.5 s apart, into 4 workers (shape 7): what prefetch claims
    /// and hands back when work comes and goes.
    Bursts,
}

impl Shape {
    pub fn title(self) -> &'static str {
        match self {
            Shape::Seed => {
                "Shape 1: the seed benchmark (4 workers, 10 ms busy jobs, one-at-a-time producer)"
            }
            Shape::Overhead => {
                "Shape 2: overhead (no-op jobs, backlog queued before start, 4 workers)"
            }
            Shape::Latency => "Shape 3: pickup latency (steady light load into 4 idle workers)",
            Shape::Scale => "Shape 4: scale (bulk backlog drained by 4 workers; then idle workers)",
            Shape::Bursts => {
                "Shape 7: bursts (20 × 10 ms busy jobs dispatched one at a time every 1.5 s, 4 workers)"
            }
        }
    }

    /// The shape's number, as `--shapes` takes it.
    pub fn number(self) -> u8 {
        match self {
            Shape::Seed => 1,
            Shape::Overhead => 2,
            Shape::Latency => 3,
            Shape::Scale => 4,
            Shape::Bursts => 7,
        }
    }
}

/// Milliseconds; NaN (null in JSON) when not measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Percentiles {
    #[serde(deserialize_with = "nan_if_null")]
    pub p50_ms: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p95_ms: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p99_ms: f64,
}

/// serde_json writes NaN as null; read it back as NaN.
pub(crate) fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

pub(crate) fn percentiles(mut v: Vec<f64>) -> Percentiles {
    if v.is_empty() {
        // Not measured (a backlog queued before the run has no commit-to-start latency).
        return Percentiles {
            p50_ms: f64::NAN,
            p95_ms: f64::NAN,
            p99_ms: f64::NAN,
        };
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] * 1000.0;
    Percentiles {
        p50_ms: at(0.50),
        p95_ms: at(0.95),
        p99_ms: at(0.99),
    }
}

/// One run of one shape on one engine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub engine: Engine,
    pub shape: Shape,
    pub jobs: i64,
    /// Every check passed: exact job set, no duplicates, attempt 1, empty queue, nothing failed.
    pub valid: bool,
    pub problems: Vec<String>,
    pub jobs_per_s: f64,
    pub e2e: Percentiles,
    pub pickup: Percentiles,
    pub usage: Usage,
    /// Shape 4 only.
    pub scale: Option<ScaleFigures>,
    /// Sorted pickup latencies (seconds), for the latency plot (shape 3).
    #[serde(default)]
    pub pickups: Vec<f64>,
    /// Shape 1: what a dispatch costs the producer, alone and beside the busy workers.
    #[serde(default)]
    pub dispatch: Option<DispatchCost>,
    /// drover: what its master claimed against what it ran (its last log line).
    #[serde(default)]
    pub claims: Option<ClaimTally>,
}

/// A drover master's count of its claims and settles, from its `master stopped` line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClaimTally {
    /// Jobs leased.
    pub claimed: u64,
    /// Jobs completed.
    pub done: u64,
    /// Prefetched jobs handed back without starting (each a claim and a release for nothing).
    pub returned_unstarted: u64,
    /// Acks written by the claim they rode with.
    pub acks_ridden: u64,
}

impl ClaimTally {
    /// The counts of a `master stopped` log line (`name=value` fields), if the log has one.
    pub fn from_log(log: &str) -> Option<ClaimTally> {
        let line = log.lines().rev().find(|l| l.contains("master stopped"))?;
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
                .unwrap_or(0)
        };
        Some(ClaimTally {
            claimed: field("claimed"),
            done: field("done"),
            returned_unstarted: field("returned_unstarted"),
            acks_ridden: field("acks_ridden"),
        })
    }
}

/// A dispatch's cost to the process that dispatches, one job at a time, each its own commit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DispatchCost {
    /// [`DISPATCH_ALONE`] dispatches into the engine's store with no worker running.
    pub alone: ProducerCost,
    /// The shape's own dispatches, beside four workers busy with its jobs.
    pub beside_workers: ProducerCost,
}

/// What one `bench:dispatch` run's dispatches cost it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProducerCost {
    /// From `push()` called to returned.
    pub latency: Percentiles,
    /// The producer's CPU per dispatch (user + system, over its dispatch loop), µs.
    pub cpu_us: f64,
    /// PostgreSQL's own WAL sync over the same dispatches, ms per sync (`pg_stat_wal` with
    /// `track_wal_io_timing`): the commit's part of a dispatch into PostgreSQL, whichever
    /// engine wrote it.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub wal_sync_ms: f64,
}

fn nan() -> f64 {
    f64::NAN
}

/// `pg_stat_wal`'s sync count and time (ms).
async fn wal_syncs(stack: &Stack) -> anyhow::Result<(i64, f64)> {
    let row = stack
        .client
        .query_one("SELECT wal_sync, wal_sync_time FROM pg_stat_wal", &[])
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// How many dispatches shape 1 times with no worker running, before its run.
pub const DISPATCH_ALONE: i64 = 1000;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScaleFigures {
    pub enqueue_jobs_per_s: f64,
    pub db_bytes_before: i64,
    pub db_bytes_peak: i64,
    pub db_bytes_after_drain: i64,
    pub db_bytes_after_vacuum: i64,
    /// drover only: seconds from the drain's end until the master had compacted drover.jobs
    /// (60 = it had not).
    #[serde(default)]
    pub compacted_after_s: Option<f64>,
    /// Median wait of a worker between finishing one job and starting the next, per tenth of the
    /// drain (first tenth first), ms.
    pub claim_gap_ms_by_decile: Vec<f64>,
    pub idle_workers: usize,
    pub idle_master_cpu_percent: f64,
    pub idle_master_pss_kib: u64,
    pub master_pss_kib_with_4: u64,
    pub pss_growth_per_worker_kib: f64,
}

/// The cost of the dispatches recorded in bench_dispatch, `cpu_us` as the producer printed it.
async fn producer_cost(
    stack: &Stack,
    cpu_us: f64,
    wal_before: (i64, f64),
) -> anyhow::Result<ProducerCost> {
    let (syncs, ms) = wal_syncs(stack).await?;
    let wal_sync_ms = match syncs - wal_before.0 {
        n if n > 0 => (ms - wal_before.1) / n as f64,
        _ => f64::NAN,
    };
    let rows = stack
        .client
        .query(
            "SELECT took FROM public.bench_dispatch WHERE took IS NOT NULL",
            &[],
        )
        .await?;
    Ok(ProducerCost {
        latency: percentiles(rows.iter().map(|r| r.get(0)).collect()),
        cpu_us,
        wal_sync_ms,
    })
}

pub(crate) async fn committed(stack: &Stack, n: i64) -> anyhow::Result<Vec<f64>> {
    let rows = stack
        .client
        .query("SELECT seq, committed_at FROM public.bench_dispatch", &[])
        .await?;
    let mut out = vec![f64::NAN; n as usize + 1];
    for r in rows {
        let seq: i32 = r.get(0);
        if (seq as usize) < out.len() {
            out[seq as usize] = r.get(1);
        }
    }
    Ok(out)
}

/// The checks every run must pass to count.
pub(crate) async fn validate(
    stack: &Stack,
    engine: Engine,
    n: i64,
    r: &Runs,
) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut seen = vec![0u32; n as usize + 1];
    for s in &r.seq {
        match seen.get_mut(*s as usize) {
            Some(c) if *s > 0 => *c += 1,
            _ => problems.push(format!("unknown job {s}")),
        }
    }
    let missing = seen.iter().skip(1).filter(|c| **c == 0).count();
    let dupes = seen.iter().filter(|c| **c > 1).count();
    if missing > 0 {
        problems.push(format!("{missing} jobs never completed"));
    }
    if dupes > 0 {
        problems.push(format!("{dupes} jobs completed more than once"));
    }
    if r.attempt.iter().any(|a| *a != 1) {
        problems.push("some jobs ran on an attempt other than 1".into());
    }
    let backlog = engine.backlog(stack).await?;
    if backlog != 0 {
        problems.push(format!("{backlog} jobs left in the queue"));
    }
    let failed = stack
        .scalar_i64("SELECT count(*) FROM public.failed_jobs")
        .await?;
    if failed != 0 {
        problems.push(format!("{failed} failed jobs"));
    }
    Ok(problems)
}

pub(crate) fn dispatch(
    stack: &Stack,
    engine: Engine,
    n: i64,
    ms: u32,
    extra: &[&str],
) -> anyhow::Result<std::process::Child> {
    let mut args = vec![
        "bench:dispatch".to_string(),
        engine.connection().to_string(),
        n.to_string(),
        ms.to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    Ok(stack
        .with_env(&engine.app_env(), &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()?)
}

pub(crate) fn first_dispatch(child: std::process::Child) -> anyhow::Result<f64> {
    Ok(produced(child)?.0)
}

/// What `bench:dispatch` printed: the time of its first dispatch, and its CPU per dispatch (µs).
fn produced(child: std::process::Child) -> anyhow::Result<(f64, f64)> {
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "bench:dispatch failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text
        .lines()
        .last()
        .context("bench:dispatch printed nothing")?
        .trim()
        .parse()
        .context("first dispatch time")?;
    let cpu = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("cpu_per_dispatch_us="))
        .context("bench:dispatch printed no cpu_per_dispatch_us")?
        .parse()
        .context("cpu per dispatch")?;
    Ok((first, cpu))
}

/// Waits for `n` completions, supervising queue:work processes meanwhile.
pub(crate) async fn drain(
    stack: &Stack,
    running: &mut Running,
    n: i64,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        running.supervise(stack)?;
        let done = stack.completed()?;
        if done >= n {
            // Let stragglers (duplicates, if any) land before validating.
            tokio::time::sleep(Duration::from_millis(300)).await;
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {done} of {n} jobs completed within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `what`: the engine, the shape and how many jobs were expected.
fn result(
    what: (Engine, Shape, i64),
    problems: Vec<String>,
    jobs_per_s: f64,
    r: &Runs,
    commits: &[f64],
    usage: Usage,
) -> RunResult {
    let mut e2e = Vec::with_capacity(r.seq.len());
    let mut pickups = Vec::with_capacity(r.seq.len());
    for i in 0..r.seq.len() {
        if let Some(c) = commits
            .get(r.seq[i] as usize)
            .copied()
            .filter(|c| c.is_finite())
        {
            e2e.push(r.finished[i] - c);
            pickups.push(r.started[i] - c);
        }
    }
    let pickup = percentiles(pickups.clone());
    pickups.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (engine, shape, n) = what;
    RunResult {
        engine,
        shape,
        jobs: n,
        valid: problems.is_empty(),
        problems,
        jobs_per_s,
        e2e: percentiles(e2e),
        pickup,
        usage,
        scale: None,
        pickups,
        dispatch: None,
        claims: None,
    }
}

pub async fn run(
    stack: &Stack,
    engine: Engine,
    shape: Shape,
    sizes: &Sizes,
) -> anyhow::Result<RunResult> {
    stack.reset().await?;
    let four = WorkerSettings::new(4, sizes.prefetch, 0);
    match shape {
        Shape::Seed => {
            // The producer alone first: its dispatches wait in the store, then go.
            let wal = wal_syncs(stack).await?;
            let (_, cpu_us) = produced(dispatch(stack, engine, DISPATCH_ALONE, 10, &[])?)?;
            let alone = producer_cost(stack, cpu_us, wal).await?;
            stack.reset().await?;
            let running = Running::start(engine, stack, four).await?;
            let (mut r, beside_workers) =
                produced_while_running(stack, (engine, shape, sizes.seed_jobs), running, 10, &[])
                    .await?;
            r.dispatch = Some(DispatchCost {
                alone,
                beside_workers,
            });
            Ok(r)
        }
        Shape::Overhead => {
            let n = sizes.overhead_jobs;
            first_dispatch(dispatch(stack, engine, n, 0, &["--bulk"])?)?;
            let mut running = Running::start(engine, stack, four).await?;
            let sampler = Sampler::start(running.pid_source());
            drain(stack, &mut running, n, Duration::from_secs(900)).await?;
            let usage = sampler.finish().await;
            let r = stack.runs()?;
            let problems = validate(stack, engine, n, &r).await?;
            let claims = running.stop_counted(stack).await?;
            // The backlog predates the workers: rate from the first job's start to the last's end.
            let first = r.started.iter().cloned().fold(f64::MAX, f64::min);
            let last = r.finished.iter().cloned().fold(f64::MIN, f64::max);
            let mut result = result(
                (engine, shape, n),
                problems,
                r.seq.len() as f64 / (last - first),
                &r,
                &[],
                usage,
            );
            result.claims = claims;
            Ok(result)
        }
        Shape::Latency => {
            // queue:work as deployed by default: --sleep=3 between empty polls.
            let settings = WorkerSettings::new(4, 1, 3);
            let running = Running::start(engine, stack, settings).await?;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let rate = format!("--rate={}", sizes.latency_rate);
            produced_while_running(
                stack,
                (engine, shape, sizes.latency_jobs),
                running,
                0,
                &[&rate],
            )
            .await
            .map(|(r, _)| r)
        }
        Shape::Scale => scale(stack, engine, sizes).await,
        Shape::Bursts => {
            let running = Running::start(engine, stack, four).await?;
            let burst = format!("--burst={BURST_JOBS}");
            let every = format!("--burst-every={BURST_EVERY}");
            produced_while_running(
                stack,
                (engine, shape, sizes.bursts * BURST_JOBS),
                running,
                10,
                &[&burst, &every],
            )
            .await
            .map(|(r, _)| r)
        }
    }
}

/// A producer dispatches `n` jobs of `ms` into running workers; rate and latencies from the
/// first dispatch to the last completion, and what the dispatches cost the producer.
async fn produced_while_running(
    stack: &Stack,
    what: (Engine, Shape, i64),
    mut running: Running,
    ms: u32,
    producer_args: &[&str],
) -> anyhow::Result<(RunResult, ProducerCost)> {
    let (engine, _, n) = what;
    let sampler = Sampler::start(running.pid_source());
    let wal = wal_syncs(stack).await?;
    let producer = dispatch(stack, engine, n, ms, producer_args)?;
    drain(stack, &mut running, n, Duration::from_secs(600)).await?;
    let (first, cpu_us) = produced(producer)?;
    let usage = sampler.finish().await;
    let r = stack.runs()?;
    let problems = validate(stack, engine, n, &r).await?;
    let claims = running.stop_counted(stack).await?;
    let last = r.finished.iter().cloned().fold(f64::MIN, f64::max);
    let commits = committed(stack, n).await?;
    let mut result = result(
        what,
        problems,
        r.seq.len() as f64 / (last - first),
        &r,
        &commits,
        usage,
    );
    result.claims = claims;
    Ok((result, producer_cost(stack, cpu_us, wal).await?))
}

/// The database's size without the measurement's own table (the dispatch times grow with the job
/// count whatever the engine).
pub(crate) async fn db_size(stack: &Stack) -> anyhow::Result<i64> {
    stack
        .scalar_i64(
            "SELECT pg_database_size(current_database())
                    - pg_total_relation_size('public.bench_dispatch')",
        )
        .await
}

async fn scale(stack: &Stack, engine: Engine, sizes: &Sizes) -> anyhow::Result<RunResult> {
    let n = sizes.scale_jobs;
    let mut figures = ScaleFigures {
        db_bytes_before: db_size(stack).await?,
        idle_workers: sizes.idle_workers,
        ..Default::default()
    };
    let started = Instant::now();
    first_dispatch(dispatch(stack, engine, n, 0, &["--bulk"])?)?;
    figures.enqueue_jobs_per_s = n as f64 / started.elapsed().as_secs_f64();
    figures.db_bytes_peak = db_size(stack).await?;

    let four = WorkerSettings::new(4, sizes.prefetch, 0);
    let mut running = Running::start(engine, stack, four).await?;
    let sampler = Sampler::start(running.pid_source());
    let mut peak = figures.db_bytes_peak;
    let deadline = Instant::now() + Duration::from_secs(7200);
    loop {
        running.supervise(stack)?;
        if stack.completed()? >= n {
            break;
        }
        peak = peak.max(db_size(stack).await?);
        anyhow::ensure!(
            Instant::now() < deadline,
            "the {n}-job backlog did not drain in 2 hours"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let usage = sampler.finish().await;
    figures.db_bytes_peak = peak;
    figures.master_pss_kib_with_4 = usage.peak_orchestrator_kib;
    let r = stack.runs()?;
    let problems = validate(stack, engine, n, &r).await?;
    if engine.is_drover() {
        // drover compacts its drained table itself, at a reap tick (every lease/2 = 15 s) once it
        // holds no job: wait for that rather than stop the master first.
        let drained = Instant::now();
        while stack
            .scalar_i64("SELECT pg_total_relation_size('drover.jobs')")
            .await?
            > drover_broker::compact::COMPACT_ABOVE
            && drained.elapsed() < Duration::from_secs(60)
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        figures.compacted_after_s = Some(drained.elapsed().as_secs_f64());
    }
    running.stop().await?;
    figures.db_bytes_after_drain = db_size(stack).await?;
    // What autovacuum does on its own schedule, done now so the figure does not depend on timing.
    // One statement per call: several would form one implicit transaction, where VACUUM cannot run.
    stack.client.batch_execute("VACUUM drover.jobs").await?;
    stack.client.batch_execute("VACUUM public.jobs").await?;
    figures.db_bytes_after_vacuum = db_size(stack).await?;
    figures.claim_gap_ms_by_decile = claim_gaps(&r);
    let first = r.started.iter().cloned().fold(f64::MAX, f64::min);
    let last = r.finished.iter().cloned().fold(f64::MIN, f64::max);
    let mut out = result(
        (engine, Shape::Scale, n),
        problems,
        r.seq.len() as f64 / (last - first),
        &r,
        &[],
        usage,
    );

    // Many idle workers: the orchestrator's CPU and memory at rest.
    if engine.is_drover() {
        stack.reset().await?;
        let many = WorkerSettings::new(sizes.idle_workers, 1, 3);
        let running = Running::start(engine, stack, many).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let sampler = Sampler::start(running.pid_source());
        tokio::time::sleep(Duration::from_secs(10)).await;
        let idle = sampler.finish().await;
        let secs = idle.samples.last().map(|s| s.t).unwrap_or(10.0).max(1.0);
        figures.idle_master_cpu_percent = 100.0 * idle.orchestrator_cpu_s / secs;
        figures.idle_master_pss_kib = idle.peak_orchestrator_kib;
        let extra = sizes.idle_workers.saturating_sub(4).max(1) as f64;
        figures.pss_growth_per_worker_kib =
            (figures.idle_master_pss_kib as f64 - figures.master_pss_kib_with_4 as f64) / extra;
        running.stop().await?;
    }
    out.scale = Some(figures);
    Ok(out)
}

/// Per tenth of the drain (by start order), the median time a worker waited between finishing
/// a job and starting its next one — the claim-plus-delivery latency as the workers see it.
pub(crate) fn claim_gaps(r: &Runs) -> Vec<f64> {
    let mut by_pid: std::collections::HashMap<i32, Vec<(f64, f64)>> =
        std::collections::HashMap::new();
    for i in 0..r.seq.len() {
        by_pid
            .entry(r.pid[i])
            .or_default()
            .push((r.started[i], r.finished[i]));
    }
    let mut gaps: Vec<(f64, f64)> = Vec::new(); // (start time, gap)
    for runs in by_pid.values_mut() {
        runs.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        for w in runs.windows(2) {
            gaps.push((w[1].0, (w[1].0 - w[0].1).max(0.0)));
        }
    }
    gaps.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    if gaps.is_empty() {
        return Vec::new();
    }
    (0..10)
        .map(|d| {
            let slice = &gaps[d * gaps.len() / 10
                ..((d + 1) * gaps.len() / 10)
                    .max(d * gaps.len() / 10 + 1)
                    .min(gaps.len())];
            percentiles(slice.iter().map(|g| g.1).collect()).p50_ms
        })
        .collect()
}
