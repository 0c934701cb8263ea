//! The workload shapes 1–4 and 7, each run once per call against one engine, and the figures
//! they give (shape 5, forking, is `crate::forking`; shape 6, ordered groups, is
//! `crate::groups`).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engines::{ClaimTally, Engine, Running, WorkerSettings};
use crate::measure::{
    claim_gaps, committed, db_size, dispatch, drain, first_dispatch, nan_if_null, percentiles,
    produced, validate, Percentiles,
};
use crate::records::Runs;
use crate::sampler::{Sampler, Usage};
use crate::sizes::{Sizes, BURST_EVERY, BURST_JOBS};
use crate::stack::Stack;

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
