//! Limits and fair share (issue 38, docs/limits.md), side by side in one run, into
//! `bench/results/limits.md` (`--limits`; RESULTS.md is left alone):
//!
//! - **Limits**: jobs under Laravel's own `WithoutOverlapping` (keys × jobs, `$tries = 3`, released
//!   at once when their key is held, as the middleware's default) and under `RateLimited` (10 a
//!   second), queued before 4 workers start, through drover, `queue:work redis` and Horizon. Per
//!   engine: the time from the first start to the last finish against the ideal, jobs handled,
//!   failed, attempts used, releases, and claims (drover, from its master's count) or pops (the
//!   redis engines: one per attempt) per job run. And 10,000 jobs over 100 keys at concurrency 2
//!   (drover's `LimitConcurrency`, the redis engines' `Redis::funnel`), beside the same jobs
//!   without limits through drover: what a limit that does not bind costs.
//! - **Noisy neighbour**: one tenant's backlog queued, then twenty other tenants dispatching 5 jobs
//!   a second each for a while, 4 workers: the small tenants' pickup (the dispatch's return to
//!   `handle()`), p50 / p99, through drover with the queue fair, drover without, and
//!   `queue:work redis`; and the same small tenants on an idle fair queue, the yardstick.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::engines::{Engine, Running, WorkerSettings};
use crate::report::Conditions;
use crate::stack::Stack;

/// Workers of every engine.
const WORKERS: usize = 4;
/// drover's prefetch per worker in the limits workloads, as shapes 1, 2 and 4.
const PREFETCH: usize = 8;
/// drover's prefetch in the noisy neighbour, a latency measurement, as shape 3: a worker's
/// prefetched jobs of the big tenant are ahead of a small tenant's whatever the queue's order.
const LATENCY_PREFETCH: usize = 1;
/// Seqs of the small tenants' jobs start here (the big tenant's below).
const SMALL_SEQ: i32 = 1_000_000;

/// The workloads' sizes.
#[derive(Debug, Clone, Copy)]
pub struct LimitSizes {
    /// Overlap keys, and jobs per key.
    pub keys: usize,
    pub per_key: usize,
    /// Each overlapping job's run, ms.
    pub overlap_ms: u32,
    /// Jobs under the 10-a-second limiter.
    pub rate_jobs: usize,
    /// The concurrency-2 workload: jobs spread over keys, each job's run in ms.
    pub pair_jobs: usize,
    pub pair_keys: usize,
    pub pair_ms: u32,
    /// The big tenant's backlog.
    pub big: usize,
    /// Small tenants, each dispatching 5 jobs a second, for this many seconds.
    pub small_tenants: usize,
    pub small_seconds: u32,
}

impl LimitSizes {
    pub fn full() -> LimitSizes {
        LimitSizes {
            // Fewer keys than workers: the workers contend for them, as in the case.
            keys: 3,
            per_key: 20,
            overlap_ms: 50,
            rate_jobs: 40,
            pair_jobs: 10_000,
            pair_keys: 100,
            pair_ms: 5,
            big: 20_000,
            small_tenants: 20,
            small_seconds: 10,
        }
    }

    pub fn quick() -> LimitSizes {
        LimitSizes {
            keys: 3,
            per_key: 5,
            overlap_ms: 50,
            rate_jobs: 20,
            pair_jobs: 1_000,
            pair_keys: 20,
            pair_ms: 5,
            big: 2_000,
            small_tenants: 5,
            small_seconds: 4,
        }
    }
}

/// What one engine did with one limited workload.
struct LimitedRun {
    engine: &'static str,
    workload: &'static str,
    jobs: usize,
    handled: usize,
    failed: i64,
    attempts: i64,
    releases: i64,
    /// Claims (drover) or pops (one per attempt) per job run.
    takes_per_run: f64,
    secs: f64,
    ideal_secs: f64,
}

/// The small tenants' pickup through one variant.
struct Pickup {
    variant: &'static str,
    jobs: usize,
    p50_ms: f64,
    p99_ms: f64,
}

pub async fn run(
    root: &std::path::Path,
    stack: &Stack,
    sizes: LimitSizes,
    conditions: &Conditions,
) -> anyhow::Result<()> {
    let mut engines = vec![Engine::Drover, Engine::Redis];
    if stack.laravel == 12 {
        engines.push(Engine::Horizon);
    }
    let mut limited = Vec::new();
    for workload in ["overlap", "rate", "pairs"] {
        for engine in &engines {
            eprintln!("bench: limits, {workload} through {}", engine.name());
            limited.push(limited_run(stack, *engine, workload, sizes).await?);
        }
    }
    // drover's own LimitRate, which needs no margin for a middleware of Laravel's; and the
    // pairs' jobs without limits, the yardstick for a limit that does not bind.
    for workload in ["own rate", "no limits"] {
        eprintln!("bench: limits, {workload} through drover");
        limited.push(limited_run(stack, Engine::Drover, workload, sizes).await?);
    }
    let mut pickups = Vec::new();
    eprintln!("bench: noisy neighbour, idle fair queue (the yardstick)");
    pickups.push(
        noisy(
            stack,
            Engine::Drover,
            "drover, fair queue, idle",
            true,
            0,
            sizes,
        )
        .await?,
    );
    for (engine, variant, fair) in [
        (Engine::Drover, "drover, fair queue", true),
        (Engine::Drover, "drover, queue not fair", false),
        (Engine::Redis, "queue:work redis", false),
    ] {
        eprintln!("bench: noisy neighbour, {variant}");
        pickups.push(noisy(stack, engine, variant, fair, sizes.big, sizes).await?);
    }
    let md = report(&limited, &pickups, sizes, conditions);
    let path = root.join("bench/results/limits.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("bench: wrote {}", path.display());
    Ok(())
}

/// One limited workload through one engine, queued before its workers start.
async fn limited_run(
    stack: &Stack,
    engine: Engine,
    workload: &'static str,
    sizes: LimitSizes,
) -> anyhow::Result<LimitedRun> {
    stack.reset().await?;
    let connection = engine.connection();
    let (jobs, code, ideal_secs) = match workload {
        "overlap" => {
            let n = sizes.keys * sizes.per_key;
            let ms = sizes.overlap_ms;
            let code = format!(
                "for ($i = 0; $i < {n}; $i++) {{ dispatch((new App\\Jobs\\LimitBenchJob($i, {ms}, 'overlap', 'k' . ($i % {k})))->onConnection('{connection}')); }}",
                k = sizes.keys
            );
            // The keys run in parallel up to the workers, each key's jobs one after another.
            let ms = f64::from(ms) / 1000.0;
            let ideal = (n as f64 * ms / WORKERS as f64).max(sizes.per_key as f64 * ms);
            (n, code, ideal)
        }
        "pairs" | "no limits" => {
            let n = sizes.pair_jobs;
            // drover's LimitConcurrency; Laravel has no middleware for a concurrency above 1, so
            // the redis engines take Redis::funnel in handle(), Laravel's documented way.
            let mode = match (workload, engine) {
                ("no limits", _) => "plain",
                (_, Engine::Drover) => "pairs",
                _ => "funnel",
            };
            let code = format!(
                "for ($i = 0; $i < {n}; $i++) {{ dispatch((new App\\Jobs\\LimitBenchJob($i, {ms}, '{mode}', 'p' . ($i % {k})))->onConnection('{connection}')); }}",
                ms = sizes.pair_ms,
                k = sizes.pair_keys
            );
            // Two slots per key, more slots than workers: the workers bound it, not the keys.
            let ms = f64::from(sizes.pair_ms) / 1000.0;
            let ideal = n as f64 * ms / WORKERS.min(2 * sizes.pair_keys) as f64;
            (n, code, ideal)
        }
        _ => {
            let n = sizes.rate_jobs;
            let mode = if workload == "rate" {
                "rate"
            } else {
                "own_rate"
            };
            let code = format!(
                "for ($i = 0; $i < {n}; $i++) {{ dispatch((new App\\Jobs\\LimitBenchJob($i, 10, '{mode}', 'r'))->onConnection('{connection}')); }}"
            );
            // 10 a second: the last ten start one second after the ten before them, and so on.
            let windows = (n as f64 / 10.0).ceil() - 1.0;
            (n, code, windows + 0.01)
        }
    };
    stack.artisan(&["app:eval", &code])?;
    let mut running =
        Running::start(engine, stack, WorkerSettings::new(WORKERS, PREFETCH, 0)).await?;
    let deadline = Instant::now() + Duration::from_secs(300);
    let failed = loop {
        running.supervise(stack)?;
        let done = stack.completed()? as usize;
        let failed = stack
            .scalar_i64("SELECT count(*) FROM public.failed_jobs")
            .await?;
        if done + failed as usize >= jobs {
            break failed;
        }
        if Instant::now() > deadline {
            bail!(
                "{} did not finish the {workload} workload in 300 s: {done} done, {failed} failed",
                engine.name()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let tally = running.stop_counted(stack).await?;
    let runs = stack.runs()?;
    let handled = runs.len();
    let attempts: i64 = runs.attempt.iter().map(|a| i64::from(*a)).sum::<i64>() + 3 * failed;
    let releases = attempts - handled as i64 - failed;
    let takes = match tally {
        Some(t) => t.claimed as f64,
        None => attempts as f64,
    };
    let first = runs.started.iter().copied().fold(f64::INFINITY, f64::min);
    let last = runs
        .finished
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    Ok(LimitedRun {
        engine: engine.name(),
        workload,
        jobs,
        handled,
        failed,
        attempts,
        releases,
        takes_per_run: if handled > 0 {
            takes / handled as f64
        } else {
            0.0
        },
        secs: if handled > 0 { last - first } else { 0.0 },
        ideal_secs,
    })
}

/// The small tenants' pickup behind `big` jobs of one tenant, queued first.
async fn noisy(
    stack: &Stack,
    engine: Engine,
    variant: &'static str,
    fair: bool,
    big: usize,
    sizes: LimitSizes,
) -> anyhow::Result<Pickup> {
    stack.reset().await?;
    // The fixture's config/drover.php reads it; the bench's processes inherit it.
    std::env::set_var("DROVER_FAIR", if fair { "drover:default" } else { "" });
    let mode = if fair { "fair" } else { "tenant" };
    let connection = engine.connection();
    if big > 0 {
        stack.artisan(&[
            "app:eval",
            &format!("for ($i = 0; $i < {big}; $i++) {{ dispatch((new App\\Jobs\\LimitBenchJob($i, 5, '{mode}', 'big'))->onConnection('{connection}')); }}"),
        ])?;
    }
    let mut running = Running::start(
        engine,
        stack,
        WorkerSettings::new(WORKERS, LATENCY_PREFETCH, 0),
    )
    .await?;
    // Twenty tenants at 5 a second each: one dispatch every 1 / (5 × tenants) s, in turn; each
    // line "seq dispatched" once the dispatch returned.
    let tenants = sizes.small_tenants;
    let total = tenants * 5 * sizes.small_seconds as usize;
    let gap_us = 1_000_000 / (5 * tenants);
    let produced = stack.artisan(&[
        "app:eval",
        &format!(
            "$t0 = microtime(true); for ($i = 0; $i < {total}; $i++) {{
                $due = $t0 + $i * {gap_us} / 1e6; $wait = $due - microtime(true); if ($wait > 0) {{ usleep((int) ($wait * 1e6)); }}
                dispatch((new App\\Jobs\\LimitBenchJob({SMALL_SEQ} + $i, 5, '{mode}', 't' . ($i % {tenants})))->onConnection('{connection}'));
                echo ({SMALL_SEQ} + $i) . ' ' . sprintf('%.6f', microtime(true)) . PHP_EOL;
            }}"
        ),
    ])?;
    let dispatched: std::collections::HashMap<i32, f64> = produced
        .lines()
        .filter_map(|l| {
            let (seq, at) = l.trim().split_once(' ')?;
            Some((seq.parse().ok()?, at.parse().ok()?))
        })
        .collect();
    if dispatched.len() != total {
        bail!(
            "{variant}: the producer reported {} of {total} dispatches",
            dispatched.len()
        );
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut pickups: Vec<f64>;
    loop {
        running.supervise(stack)?;
        let runs = stack.runs()?;
        pickups = runs
            .seq
            .iter()
            .zip(&runs.started)
            .filter(|(seq, _)| **seq >= SMALL_SEQ)
            .filter_map(|(seq, started)| dispatched.get(seq).map(|at| (started - at) * 1000.0))
            .collect();
        if pickups.len() >= total {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "{variant}: {} of {total} small tenants' jobs ran in 600 s",
                pickups.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    running.stop().await?;
    std::env::remove_var("DROVER_FAIR");
    pickups.sort_by(f64::total_cmp);
    let at = |q: f64| pickups[((pickups.len() - 1) as f64 * q).round() as usize];
    Ok(Pickup {
        variant,
        jobs: pickups.len(),
        p50_ms: at(0.5),
        p99_ms: at(0.99),
    })
}

fn report(
    limited: &[LimitedRun],
    pickups: &[Pickup],
    sizes: LimitSizes,
    conditions: &Conditions,
) -> String {
    let mut md = String::from("# Limits and fair share (issue 38)\n\n");
    md += "`cargo run --release -p drover-bench -- --limits` (bench/src/limits.rs), one run of each, on this machine:\n\n";
    // The conditions that hold here (the rest describe the shapes' own settings).
    for line in conditions.lines.iter().filter(|l| {
        [
            "commit",
            "machine",
            "PostgreSQL",
            "PHP",
            "redis-server without",
        ]
        .iter()
        .any(|p| l.starts_with(p))
    }) {
        md += &format!("- {line}\n");
    }
    md += &format!("- {WORKERS} workers for every engine; drover forked (`spawn: fork`), prefetch {PREFETCH} in the limits workloads and {LATENCY_PREFETCH} in the noisy neighbour (a latency measurement, as shape 3); `queue:work redis` and Horizon with `--sleep=0`, tries from the job\n");
    md += &format!(
        "\n## Limits\n\n{WORKERS} workers, the jobs queued before they start, `$tries = 3`. **overlap**: {} keys × {} jobs of {} ms under Laravel's `WithoutOverlapping($key)` (released at once when the key is held: the middleware's default). **rate**: {} jobs of 10 ms under `RateLimited` with `Limit::perSecond(10)` (drover gives Laravel's limiter a window of 1.25 s: its margin, docs/limits.md); **own rate**: the same jobs under drover's `LimitRate::perSecond(10)` (drover alone: no margin). **pairs**: {} jobs of {} ms over {} keys, at most 2 of a key at once — drover's `LimitConcurrency($key, 2)`; Laravel has no middleware for a concurrency above 1, so the redis engines run its documented `Redis::funnel($key)->limit(2)` in `handle()` (released for 1 s when no slot frees within its default 3 s); **no limits**: the pairs' jobs without any limit (drover alone: the yardstick for a limit that does not bind). Ideal: overlap, the keys in parallel up to the workers and each key's jobs one after another; rate, one second per ten jobs after the first ten; pairs, the workers busy throughout (2 slots × the keys outnumber them). Attempts: the attempt each handled job ran on, and 3 per failed job; releases: attempts less handled and failed jobs; takes per run: claims (drover's master's count) or pops (the redis engines pop once per attempt) per handled job.\n\n",
        sizes.keys, sizes.per_key, sizes.overlap_ms, sizes.rate_jobs, sizes.pair_jobs, sizes.pair_ms, sizes.pair_keys
    );
    md += "| workload | engine | jobs | handled | failed | attempts | releases | takes per run | time s | jobs/s | ideal s | vs ideal |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for r in limited {
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.0} | {:.2} | {:+.0}% |\n",
            r.workload,
            r.engine,
            r.jobs,
            r.handled,
            r.failed,
            r.attempts,
            r.releases,
            r.takes_per_run,
            r.secs,
            jobs_per_s(r),
            r.ideal_secs,
            (r.secs / r.ideal_secs - 1.0) * 100.0
        );
    }
    md += "\nTargets (drover): takes per run ≤ 1.05, 0 releases, 0 failed, within 10% of the ideal.\n";
    for r in limited
        .iter()
        .filter(|r| r.engine.starts_with("drover") && r.workload != "no limits")
    {
        let met = r.takes_per_run <= 1.05
            && r.releases == 0
            && r.failed == 0
            && r.secs <= r.ideal_secs * 1.1;
        md += &format!(
            "- {}: takes per run {:.2}, {} releases, {} failed, {:+.0}% of the ideal: **{}**\n",
            r.workload,
            r.takes_per_run,
            r.releases,
            r.failed,
            (r.secs / r.ideal_secs - 1.0) * 100.0,
            if met { "met" } else { "not met" }
        );
    }
    let drover = |workload: &str| {
        limited
            .iter()
            .find(|r| r.engine.starts_with("drover") && r.workload == workload)
    };
    if let (Some(pairs), Some(free)) = (drover("pairs"), drover("no limits")) {
        let share = jobs_per_s(pairs) / jobs_per_s(free);
        md += &format!(
            "\nTarget: when no limit binds, ≥ 90% of the same jobs' throughput without limits: pairs {:.0} jobs/s against {:.0} without, {:.0}%: **{}**\n",
            jobs_per_s(pairs),
            jobs_per_s(free),
            share * 100.0,
            if share >= 0.9 { "met" } else { "not met" }
        );
    }
    md += &format!(
        "\n## Noisy neighbour\n\n{WORKERS} workers; one tenant's {} jobs of 5 ms queued, then {} tenants dispatching 5 jobs a second each for {} s (one dispatch every {:.1} ms, in turn). Pickup: from the dispatch's return (the producer's clock) to `handle()`'s start, over the small tenants' jobs. The yardstick: the same small tenants on an idle fair queue.\n\n",
        sizes.big, sizes.small_tenants, sizes.small_seconds, 1000.0 / (5.0 * sizes.small_tenants as f64)
    );
    md += "The big tenant's jobs busy-wait: the 4 workers keep both cores busy, so every other process (the master, PostgreSQL, the producer) shares them — the idle yardstick has them to itself.\n\n";
    md += "| variant | small tenants' jobs | pickup p50 ms | pickup p99 ms |\n|---|---|---|---|\n";
    for p in pickups {
        md += &format!(
            "| {} | {} | {:.1} | {:.1} |\n",
            p.variant, p.jobs, p.p50_ms, p.p99_ms
        );
    }
    if let (Some(idle), Some(fair)) = (pickups.first(), pickups.get(1)) {
        md += &format!(
            "\nTarget: the small tenants' p99 within 2× their pickup on an idle queue: {:.1} ms against {:.1} ms: **{}**.\n",
            fair.p99_ms, idle.p99_ms,
            if fair.p99_ms <= 2.0 * idle.p99_ms { "met" } else { "not met" }
        );
    }
    md += "\nThe scale shape (a million distinct keys, and a million jobs waiting on one held key beside unlimited ones) is in bench/results/limits-scale.md (`--limits-scale`).\n";
    md
}

/// Jobs handled per second, from the first start to the last finish.
fn jobs_per_s(r: &LimitedRun) -> f64 {
    if r.secs > 0.0 {
        r.handled as f64 / r.secs
    } else {
        0.0
    }
}
