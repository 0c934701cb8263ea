//! drover-bench: the same Laravel workloads through drover, `queue:work` + database and
//! `queue:work` + redis on this machine, engine order rotated, several runs each, medians reported.
//!
//! The parts:
//! - [`stack`]: PostgreSQL (fsync on), redis-server and the fixture Laravel app they all use.
//! - [`engines`]: starting and stopping each engine with N workers.
//! - [`horizon`]: Laravel Horizon installed in the bench's Laravel 12 app, and its process tree.
//! - [`records`]: the per-job records the jobs append, read incrementally.
//! - [`sampler`]: PSS and CPU of the engine's processes from procfs, every 500 ms.
//! - [`sizes`]: the sizes of a run, per shape; `--quick` shrinks them.
//! - [`measure`]: what every shape measures with: the producer, the drain, the checks a run must
//!   pass, percentiles.
//! - [`shapes`]: the workloads 1–4 and 7.
//! - [`groups`]: shape 6, ordered groups: a million groups moved through a window by an
//!   open-loop producer while 4 workers drain (against shape 2 in the same run, and the same
//!   producer without groups), a verifier over the per-job records, and a hot group.
//! - [`forking`]: shape 5, workers forked from a zygote against exec and the peers: memory at 4
//!   and 32 workers, spawn-to-hello times, a 16-worker reload, where a forked worker's pages are.
//! - [`fleet`]: shape 8, three masters on one database: the same workers on one master or split
//!   over three (jobs/s, pickup, claims), and database outages of failover length under load
//!   with each `outage_grace` (which long jobs ran once, were killed and re-run, lost, doubled):
//!   the primary stopped and started again, or killed and its streaming standby promoted.
//! - [`standby`]: shape 8 (c)'s streaming standby of the bench's PostgreSQL, and what its
//!   promotion lost.
//! - [`limits`]: limits and fair share (`--limits`): Laravel's limit middleware through drover and
//!   the redis engines, and one tenant's backlog against twenty small tenants' pickup.
//! - [`limits_scale`]: limits at scale (`--limits-scale`): a million distinct keys made and left
//!   during a run, and unlimited jobs drained beside a million waiting on one held key.
//! - [`schedule`]: the schedule without cron (`--schedule`): lateness, CPU and memory of the
//!   master running a 50-task schedule against `schedule:work`.
//! - [`exactly_once`]: `--exactly-once` (issue 59): a job writing one row drained by drover with
//!   and without completing inside its own transaction, and with a transaction of its own.
//! - [`workflows`]: `--workflows` (issue 60): 10,000 concurrent workflows of 10 steps and one
//!   of 100,000 steps against the same jobs dispatched plainly (steps/s, master PSS), and the
//!   console's workflow pages over a million workflows.
//! - [`report`]: medians, `bench/RESULTS.md`, `bench/results/latest.json`, the PNG plots.
//! - [`figure`]: how one figure is written (fixed digits, a dash for NaN).
//!
//! `cargo run --release -p drover-bench -- [--quick] [--runs N] [--shapes 1,2,3,4]`

mod engines;
mod exactly_once;
mod figure;
mod fleet;
mod forking;
mod groups;
mod horizon;
mod limits;
mod limits_scale;
mod measure;
mod records;
mod report;
mod sampler;
mod schedule;
mod shapes;
mod sizes;
mod stack;
mod standby;
mod workflows;

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use engines::Engine;
use shapes::Shape;
use sizes::Sizes;

#[derive(Parser)]
#[command(
    about = "Benchmarks drover against queue:work (database and redis drivers) on this machine"
)]
struct Args {
    /// Smaller shapes and one run each: a smoke check in about two minutes.
    #[arg(long)]
    quick: bool,
    /// Runs per engine and shape (default 3; 1 with --quick).
    #[arg(long)]
    runs: Option<usize>,
    /// Which shapes (1 seed, 2 overhead, 3 latency, 4 scale, 5 forking, 6 ordered groups, 7 bursts,
    /// 8 a fleet of three masters; 6 and 8 are not in the default set: run each with
    /// `--shapes N --merge`).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1, 2, 3, 4, 5, 7])]
    shapes: Vec<u8>,
    /// Shape 6: distinct groups of the cardinality run (default 1,000,000; 5,000 with --quick).
    #[arg(long)]
    groups_total: Option<u32>,
    /// Shape 6: jobs per group (default 3).
    #[arg(long)]
    group_jobs: Option<u32>,
    /// Shape 6: groups in the producer's window; a group's jobs are window / (jobs − 1) steps
    /// apart (default jobs − 1: back to back, so each job after a group's first waits behind its
    /// head; 1,000 was the earlier default, under which none did).
    #[arg(long)]
    group_window: Option<u32>,
    /// Shape 6: the producer's target rate in jobs/s (default 0: as fast as it can).
    #[arg(long)]
    group_rate: Option<f64>,
    /// Shape 6: jobs of the hot group (default 10,000; 2,000 with --quick), beside 1,000 groups
    /// of 10 (200 with --quick).
    #[arg(long)]
    hot_jobs: Option<u32>,
    /// Shape 6: producer connections of the cardinality runs, each with its share of the groups
    /// (default 2).
    #[arg(long)]
    group_producers: Option<usize>,
    /// Shape 6: skip the ungrouped control (the same producer and jobs without groups).
    #[arg(long)]
    no_groups_control: bool,
    /// Shape 8: which parts, `a` (one master or three: throughput, pickup, claims), `b`
    /// (database outages under load) and `c` (the primary killed, a streaming standby promoted,
    /// under the same load) (default a and b).
    #[arg(long, value_delimiter = ',')]
    fleet_parts: Vec<String>,
    /// Shape 8 (b), (c): outage lengths, seconds (default 30,60,120; 10 with --quick).
    #[arg(long, value_delimiter = ',')]
    fleet_outages: Vec<f64>,
    /// Shape 8 (b), (c): the pools' `outage_grace` values, seconds (default 0,120; 0,15 with --quick).
    #[arg(long, value_delimiter = ',')]
    fleet_graces: Vec<f64>,
    /// Shape 8 (b), (c): the lease, seconds (default 30; 3 with --quick).
    #[arg(long)]
    fleet_lease: Option<f64>,
    /// Shape 8 (b), (c): the long jobs' length, ms, two per master (default 40,000; 15,000 with --quick).
    #[arg(long)]
    fleet_long_ms: Option<u64>,
    /// Shape 8 (b), (c): the producer's short jobs per second (default 10).
    #[arg(long)]
    fleet_rate: Option<f64>,
    /// Shape 8 (a): workers in all, on one master or split over three (default 6).
    #[arg(long)]
    fleet_workers: Option<usize>,
    /// Jobs in the shape-4 backlog (default 1,000,000; 20,000 with --quick).
    #[arg(long)]
    scale_jobs: Option<i64>,
    /// Engines for shape 4 (its drain is long), by connection: drover, database, redis, and
    /// horizon on Laravel 12 (default all of them; drover is its fork mode).
    #[arg(long, value_delimiter = ',')]
    scale_engines: Vec<String>,
    /// drover's prefetch per worker in shapes 1, 2 and 4 (default 8; shape 3 always uses 1).
    #[arg(long)]
    prefetch: Option<usize>,
    /// Keep the runs of the shapes not run this time from results/latest.json (to run shape 4
    /// separately from shapes 1-3, at the same commit).
    #[arg(long)]
    merge: bool,
    /// A PostgreSQL setting for the run, `name=value`, repeatable (experiments: e.g.
    /// `synchronous_commit=off` names what it risks in the conditions).
    #[arg(long = "pg-setting")]
    pg_settings: Vec<String>,
    /// Only these engines in shapes 1-3, by short name: drover, drover-exec, db, redis,
    /// horizon, drover-async, redis-aof (default: every engine the app's Laravel runs, the last
    /// two in shape 1 only). For experiments: the report then lacks the others.
    #[arg(long, value_delimiter = ',')]
    engines: Vec<String>,
    /// The fixture app's Laravel: 12 (the offline 12.67 reference tree, with Horizon as an
    /// engine) or 8 (Debian's 8.83, without Horizon).
    #[arg(long, default_value_t = 12)]
    laravel: u8,
    /// Rewrite RESULTS.md from results/latest.json (and bench/notes.md) without running anything.
    #[arg(long)]
    report_only: bool,
    /// Instead of the comparison: shape 2 through drover alone with metrics off, recorded
    /// (drover.metrics), recorded with the /metrics listener on, and recorded with the
    /// completed-job history on, `--runs` times each; jobs/s and master PSS to
    /// results/metrics_cost.md (RESULTS.md is left alone).
    #[arg(long)]
    metrics_cost: bool,
    /// Limits and fair share (issue 38) instead of the shapes: Laravel's WithoutOverlapping and
    /// RateLimited through drover, queue:work redis and Horizon, and a noisy neighbour; writes
    /// results/limits.md (RESULTS.md is left alone). `--quick` for smaller sizes.
    #[arg(long)]
    limits: bool,
    /// Limits at scale (issue 38) instead of the shapes: a million distinct keys (half
    /// concurrency, half rate) made during a run, and claims beside a million jobs waiting on
    /// one held key; writes results/limits-scale.md. `--quick` for ~20,000 jobs.
    #[arg(long)]
    limits_scale: bool,
    /// The schedule without cron (issue 39) instead of the shapes: lateness, CPU and memory of
    /// `php artisan drover` running a 50-task schedule against `schedule:work`; writes
    /// results/schedule.md. `--quick` for one-minute windows (else two).
    #[arg(long)]
    schedule: bool,
    /// --limits-scale: distinct keys (default 1,000,000; 10,000 with --quick), and the producers'
    /// rate in jobs/s (default 1,000; 500 with --quick).
    #[arg(long)]
    limits_scale_keys: Option<u32>,
    #[arg(long)]
    limits_scale_rate: Option<f64>,
    /// Exactly-once completion (issue 59) instead of the shapes: shape 2's backlog of jobs that
    /// each write one row, drained by drover as `WriteRowJob`, `WriteRowOnceJob`
    /// (CompletesInTransaction) and `WriteRowInTransactionJob` (its own DB::transaction),
    /// interleaved, `--runs` rounds (default 5; 1 with --quick); writes
    /// results/exactly_once.md (results/laravel8/ with --laravel 8). RESULTS.md is left alone.
    #[arg(long)]
    exactly_once: bool,
    /// --exactly-once: jobs in the backlog (default 20,000; 2,000 with --quick).
    #[arg(long)]
    exactly_once_jobs: Option<i64>,
    /// --exactly-once: which variants, by key: plain, within, tx (default all three).
    #[arg(long, value_delimiter = ',')]
    exactly_once_variants: Vec<String>,
    /// Durable workflows (issue 60) instead of the shapes: (a) workflows of a root, an addMany
    /// node and a fan-in, all running at once, and (b) one big workflow, each against the same
    /// BenchJobs dispatched plainly, drained by drover with 4 forked workers, interleaved,
    /// `--runs` rounds (default 5; 1 with --quick): steps/s, dispatch time, master PSS; then (c)
    /// the console's workflow pages over a million synthetic workflows. Writes
    /// results/workflows.md (results/laravel8/ with --laravel 8). RESULTS.md is left alone.
    #[arg(long)]
    workflows: bool,
    /// --workflows (a): workflows dispatched before the drain (default 10,000; 200 with --quick).
    #[arg(long)]
    workflows_count: Option<i64>,
    /// --workflows (a): steps per workflow, at least 3 (default 10: 1 root → 8 members → 1 fan-in).
    #[arg(long)]
    workflow_steps: Option<i64>,
    /// --workflows (b): steps of the one big workflow (default 100,000; 2,000 with --quick).
    #[arg(long)]
    workflow_big_steps: Option<i64>,
    /// --workflows (c): synthetic workflows the console's pages are timed over (default
    /// 1,000,000; 20,000 with --quick).
    #[arg(long)]
    workflow_rows: Option<i64>,
    /// --workflows: which parts, a, b, c (default all three).
    #[arg(long, value_delimiter = ',')]
    workflows_parts: Vec<String>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("workspace root")?
        .to_path_buf();
    if args.report_only {
        return rewrite_report(&root);
    }
    let mut sizes = if args.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    if let Some(p) = args.prefetch {
        sizes.prefetch = p;
    }
    if let Some(n) = args.scale_jobs {
        sizes.scale_jobs = n;
    }
    if let Some(n) = args.groups_total {
        sizes.groups.groups_total = n;
    }
    if let Some(n) = args.group_jobs {
        sizes.groups.jobs_per_group = n.max(1);
        sizes.groups.window = sizes::GroupSizes::back_to_back(n.max(1));
    }
    if let Some(n) = args.group_window {
        sizes.groups.window = n.max(1);
    }
    if let Some(r) = args.group_rate {
        sizes.groups.rate = r;
    }
    if let Some(n) = args.hot_jobs {
        sizes.groups.hot_jobs = n;
    }
    if let Some(p) = args.group_producers {
        sizes.groups.producers = p.max(1);
    }
    if args.no_groups_control {
        sizes.groups.control = false;
    }
    let runs = args.runs.unwrap_or(if args.quick { 1 } else { 3 });
    let shapes: Vec<Shape> = args
        .shapes
        .iter()
        .filter_map(|s| match s {
            1 => Some(Shape::Seed),
            2 => Some(Shape::Overhead),
            3 => Some(Shape::Latency),
            4 => Some(Shape::Scale),
            7 => Some(Shape::Bursts),
            _ => None,
        })
        .collect();
    let peers: Vec<Engine> = [
        Engine::Drover,
        Engine::Database,
        Engine::Redis,
        Engine::Horizon,
    ]
    .into_iter()
    .filter(|e| Engine::on(args.laravel).contains(e))
    .collect();
    // Named by connection (drover, database, redis), Horizon as horizon.
    let scale_engines: Vec<Engine> = if args.scale_engines.is_empty() {
        peers.to_vec()
    } else {
        peers
            .iter()
            .copied()
            .filter(|e| {
                let key = if *e == Engine::Horizon {
                    "horizon"
                } else {
                    e.connection()
                };
                args.scale_engines.iter().any(|n| n == key)
            })
            .collect()
    };
    let run_forking = args.shapes.contains(&5);
    let run_groups = args.shapes.contains(&6) && !args.metrics_cost;
    let run_fleet = args.shapes.contains(&8) && !args.metrics_cost;
    let mut fleet_sizes = if args.quick {
        fleet::FleetSizes::quick()
    } else {
        fleet::FleetSizes::full()
    };
    if !args.fleet_parts.is_empty() {
        fleet_sizes.parts = args.fleet_parts.clone();
    }
    if !args.fleet_outages.is_empty() {
        fleet_sizes.outages = args.fleet_outages.clone();
    }
    if !args.fleet_graces.is_empty() {
        fleet_sizes.graces = args.fleet_graces.clone();
    }
    if let Some(l) = args.fleet_lease {
        fleet_sizes.lease = l;
    }
    if let Some(ms) = args.fleet_long_ms {
        fleet_sizes.long_ms = ms;
    }
    if let Some(r) = args.fleet_rate {
        fleet_sizes.rate = r;
    }
    if let Some(w) = args.fleet_workers {
        fleet_sizes.workers = w.max(fleet::HOSTS);
    }
    fleet_sizes.prefetch = sizes.prefetch;

    eprintln!("bench: starting PostgreSQL, redis-server and the fixture app");
    let mut pg_settings = Vec::new();
    for setting in &args.pg_settings {
        let Some((name, value)) = setting.split_once('=') else {
            anyhow::bail!("--pg-setting {setting:?}: write it as name=value");
        };
        pg_settings.push((name.trim().to_string(), value.trim().to_string()));
    }
    // pg_stat_statements: shape 6 times its claims with it, shape 8 counts the fleet's claims.
    let mut stack = stack::Stack::start(
        &root,
        args.laravel,
        run_groups || run_fleet || args.limits_scale || args.exactly_once || args.workflows,
        &pg_settings,
    )
    .await?;
    let mut conditions = conditions(&root, &stack, &sizes, runs).await?;
    if !pg_settings.is_empty() {
        conditions.lines.push(format!(
            "PostgreSQL settings for this run (--pg-setting), not the defaults: {}",
            args.pg_settings.join(", ")
        ));
    }
    if run_groups {
        let g = &sizes.groups;
        conditions.lines.push(format!(
            "shape 6: {} groups × {} jobs through a window of {} groups (a group's jobs {} step(s) apart), {} producer connection(s) {}{}; {} workers; a hot group of {} jobs beside {} groups of {}; {} round(s), each with 3 shape-2 yardstick runs{}; PostgreSQL with pg_stat_statements{}, autovacuum_naptime {}",
            g.groups_total, g.jobs_per_group, g.window, g.stride(), g.producers,
            if g.rate > 0.0 { format!("at {} jobs/s", g.rate) } else { "as fast as it can".into() },
            if g.control { ", then the same ungrouped (control)" } else { "" },
            groups::WORKERS,
            g.hot_jobs, g.small_groups, g.small_jobs,
            args.runs.unwrap_or(1),
            if args.shapes.iter().any(|s| *s != 6) { " (the other shapes of this invocation ran with it loaded too)" } else { "" },
            if stack.stat_statements { "" } else { " requested but unavailable: claims timed from the records only" },
            stack.client.query_one("SHOW autovacuum_naptime", &[]).await.map(|r| r.get::<_, String>(0)).unwrap_or_default(),
        ));
    }
    if args.exactly_once {
        let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
        let command = format!("cargo run --release -p drover-bench -- {command}");
        let n = args
            .exactly_once_jobs
            .unwrap_or(if args.quick { 2000 } else { 20_000 });
        let rounds = args.runs.unwrap_or(if args.quick { 1 } else { 5 });
        let mut lines = build_conditions(&conditions, &root);
        lines.push(stat_statements_condition(stack.stat_statements));
        return exactly_once::run(
            &root,
            &stack,
            n,
            sizes.prefetch,
            rounds,
            &args.exactly_once_variants,
            &lines,
            &command,
        )
        .await;
    }
    if args.workflows {
        let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
        let command = format!("cargo run --release -p drover-bench -- {command}");
        let mut w = if args.quick {
            workflows::WorkflowSizes::quick()
        } else {
            workflows::WorkflowSizes::full()
        };
        w.count = args.workflows_count.unwrap_or(w.count);
        w.steps = args.workflow_steps.unwrap_or(w.steps);
        w.big_steps = args.workflow_big_steps.unwrap_or(w.big_steps);
        w.rows = args.workflow_rows.unwrap_or(w.rows);
        if !args.workflows_parts.is_empty() {
            w.parts = args.workflows_parts.clone();
        }
        let rounds = args.runs.unwrap_or(if args.quick { 1 } else { 5 });
        let mut lines = build_conditions(&conditions, &root);
        lines.push(format!(
            "sizes{}: (a) {} workflows × {} steps; (b) 1 workflow × {} steps; (c) {} synthetic workflows, {} timed request(s) per page; parts {}; {} round(s); {} forked workers, prefetch {}",
            if args.quick { " (--quick)" } else { "" },
            w.count, w.steps, w.big_steps, w.rows, w.repeat, w.parts.join(","), rounds, workflows::WORKERS, sizes.prefetch
        ));
        lines.push(stat_statements_condition(stack.stat_statements));
        return workflows::run(&root, &stack, &w, sizes.prefetch, rounds, &lines, &command).await;
    }
    if args.metrics_cost {
        return metrics_cost(&root, &stack, &sizes, runs, &conditions).await;
    }
    if args.limits_scale {
        let mut sizes = if args.quick {
            limits_scale::ScaleSizes::quick()
        } else {
            limits_scale::ScaleSizes::full()
        };
        sizes.keys = args.limits_scale_keys.unwrap_or(sizes.keys).max(1);
        sizes.rate = args.limits_scale_rate.unwrap_or(sizes.rate);
        let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
        let command = format!("cargo run --release -p drover-bench -- {command}");
        return limits_scale::run(&root, &stack, sizes, &conditions, &command).await;
    }
    if args.schedule {
        let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
        let command = format!("cargo run --release -p drover-bench -- {command}");
        let window = if args.quick { 60 } else { 120 };
        return schedule::run(&root, &stack, window, &conditions, &command).await;
    }
    if args.limits {
        let sizes = if args.quick {
            limits::LimitSizes::quick()
        } else {
            limits::LimitSizes::full()
        };
        return limits::run(&root, &stack, sizes, &conditions).await;
    }
    let mut results = Vec::new();
    for shape in &shapes {
        let engines: Vec<Engine> = if *shape == Shape::Scale {
            scale_engines.clone()
        } else {
            Engine::chosen(stack.laravel, &args.engines, *shape == Shape::Seed)
        };
        let shape_runs = if *shape == Shape::Scale { 1 } else { runs };
        for run in 0..shape_runs {
            // Rotate the order so no engine always goes first (warm caches, autovacuum).
            let mut order = engines.clone();
            let by = run % order.len().max(1);
            order.rotate_left(by);
            for engine in order {
                eprintln!(
                    "bench: {:?} run {} of {shape_runs}: {}",
                    shape,
                    run + 1,
                    engine.name()
                );
                match shapes::run(&stack, engine, *shape, &sizes).await {
                    Ok(r) => {
                        eprintln!(
                            "bench:   {:.0} jobs/s, pickup p50 {:.1} ms, orchestrator PSS {:.2} MiB, stack PSS {:.1} MiB, valid: {}{}",
                            r.jobs_per_s, r.pickup.p50_ms, r.usage.peak_orchestrator_kib as f64 / 1024.0, r.usage.peak_stack_kib as f64 / 1024.0,
                            r.valid, if r.valid { String::new() } else { format!(" ({})", r.problems.join("; ")) }
                        );
                        if let Some(d) = &r.dispatch {
                            eprintln!(
                                "bench:   dispatch alone p50 {:.3} ms p99 {:.3} ms, {:.0} µs CPU; beside the workers p50 {:.3} ms p99 {:.3} ms, {:.0} µs CPU",
                                d.alone.latency.p50_ms, d.alone.latency.p99_ms, d.alone.cpu_us, d.beside_workers.latency.p50_ms, d.beside_workers.latency.p99_ms, d.beside_workers.cpu_us
                            );
                        }
                        results.push(r);
                    }
                    Err(e) => eprintln!("bench:   run failed: {e:#}"),
                }
            }
        }
    }
    let mut forking = None;
    if run_forking {
        forking = Some(forking::run(&stack, &sizes, runs).await?);
    }
    let mut groups = None;
    if run_groups {
        groups = Some(groups::run(&stack, &sizes, args.runs.unwrap_or(1)).await?);
    }
    let mut fleet = None;
    if run_fleet {
        // The commit, the machine, PostgreSQL and PHP; the other lines are the other shapes'.
        let mut lines: Vec<String> = conditions.lines.iter().take(4).cloned().collect();
        let sh = |cmd: &str| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .current_dir(&root)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default()
        };
        lines.push(format!(
            "target/release/drover built {}; files changed outside bench/ against the commit when shape 8 began (others' work in progress, in the binary if it was built after them): {}",
            sh("date -u -r target/release/drover '+%Y-%m-%d %H:%M UTC'"),
            match sh("git status --porcelain -- . ':!bench' | wc -l").as_str() {
                "0" => "none".to_string(),
                n => n.to_string(),
            }
        ));
        lines.push(format!(
            "shape 8 (a): {runs} run(s) of each variant, one master and three alternating which goes first; pg_stat_statements loaded for the whole invocation"
        ));
        lines.push(format!(
            "shape 8 load average (1, 5, 15 min) when it began: {}",
            std::fs::read_to_string("/proc/loadavg")
                .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        ));
        fleet = Some(fleet::run(&mut stack, &fleet_sizes, runs, lines).await?);
    }
    let fleet_alone = run_fleet && args.shapes.iter().all(|s| *s == 8);
    let mut shapes = shapes;
    if args.merge {
        let previous: serde_json::Value = serde_json::from_slice(&std::fs::read(
            root.join("bench")
                .join(results_dir(args.laravel))
                .join("latest.json"),
        )?)?;
        let kept: Vec<shapes::RunResult> = serde_json::from_value(previous["runs"].clone())?;
        let ran = shapes.clone();
        // Keep a previous run unless this invocation ran the same shape on the same engine.
        let ran_engine = |shape: Shape, engine: Engine| {
            ran.contains(&shape) && (shape != Shape::Scale || scale_engines.contains(&engine))
        };
        let mut kept_shapes: Vec<u8> = Vec::new();
        for r in kept.into_iter().filter(|r| !ran_engine(r.shape, r.engine)) {
            if !shapes.contains(&r.shape) {
                shapes.push(r.shape);
            }
            if !kept_shapes.contains(&r.shape.number()) {
                kept_shapes.push(r.shape.number());
            }
            results.push(r);
        }
        shapes.sort_by_key(|s| *s as u8);
        // Runs kept from the previous invocation were made at its commit: say which.
        let previous_commit = previous["conditions"]
            .as_array()
            .and_then(|lines| lines.first())
            .and_then(|l| l.as_str())
            .unwrap_or("an unknown commit")
            .to_string();
        let shape_6_alone = run_groups && args.shapes.iter().all(|s| *s == 6);
        if !kept_shapes.is_empty() && !shape_6_alone && !fleet_alone {
            kept_shapes.sort_unstable();
            conditions.lines.push(format!(
                "kept with --merge from the previous invocation, at its {previous_commit}: the runs of shape(s) {}",
                kept_shapes
                    .iter()
                    .map(u8::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if forking.is_none() {
            forking = serde_json::from_value(previous["forking"].clone()).ok();
        }
        if !previous["fleet"].is_null() {
            let before: fleet::FleetFigures = serde_json::from_value(previous["fleet"].clone())
                .context("shape 8's figures in results/latest.json")?;
            match &mut fleet {
                None => fleet = Some(before),
                // A part not run this time keeps its previous figures, saying from when.
                Some(now) => {
                    // Kept once already: its line names the run it came from.
                    let at = before.conditions.first().cloned().unwrap_or_default();
                    let kept = |part: &str| {
                        let prefix = format!("part ({part}) kept with --merge");
                        before
                            .conditions
                            .iter()
                            .find(|l| l.starts_with(&prefix))
                            .cloned()
                            .unwrap_or_else(|| {
                                format!("{prefix} from the previous run of shape 8, at its {at}")
                            })
                    };
                    if now.split.is_empty() && !before.split.is_empty() {
                        now.conditions.push(kept("a"));
                        now.split = before.split;
                    }
                    if now.outages.is_empty() && !before.outages.is_empty() {
                        now.conditions.push(kept("b"));
                        now.outages = before.outages;
                    }
                    if now.failovers.is_empty() && !before.failovers.is_empty() {
                        now.conditions.push(kept("c"));
                        now.failovers = before.failovers;
                    }
                }
            }
        }
        // Shape 8 alone: it carries its own conditions; the other shapes keep theirs.
        if fleet_alone {
            if let Ok(lines) = serde_json::from_value::<Vec<String>>(previous["conditions"].clone())
            {
                conditions.lines = lines;
            }
        }
        if groups.is_none() && !previous["groups"].is_null() {
            groups = Some(
                serde_json::from_value(previous["groups"].clone())
                    .context("shape 6's figures in results/latest.json")?,
            );
        }
        // Shape 6 alone: the other shapes' conditions are the previous run's; this one's are
        // added as shape 6's.
        if run_groups && args.shapes.iter().all(|s| *s == 6) {
            if let Ok(lines) = serde_json::from_value::<Vec<String>>(previous["conditions"].clone())
            {
                let mut merged: Vec<String> = lines
                    .into_iter()
                    .filter(|l| !l.starts_with("shape 6"))
                    .collect();
                merged.push(format!(
                    "shape 6 ran later, merged with --merge: {}; {}",
                    conditions.lines.first().cloned().unwrap_or_default(),
                    conditions.lines.get(1).cloned().unwrap_or_default()
                ));
                merged.extend(
                    conditions
                        .lines
                        .iter()
                        .filter(|l| l.starts_with("shape 6:"))
                        .cloned(),
                );
                conditions.lines = merged;
            }
        }
    }
    let mut summaries = Vec::new();
    for shape in &shapes {
        for engine in Engine::ALL {
            if let Some(s) = report::summarize(&results, engine, *shape) {
                summaries.push(s);
            }
        }
    }
    let out = root.join("bench");
    let dir = out.join(results_dir(args.laravel));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("latest.json"),
        serde_json::to_vec_pretty(&serde_json::json!({
            "conditions": conditions.lines,
            "quick": args.quick,
            "sizes": sizes,
            "summaries": summaries,
            "runs": results,
            "forking": forking,
            "groups": groups,
            "fleet": fleet,
        }))?,
    )?;
    report::plots(&dir, &summaries, &results)?;
    if let Some(g) = &groups {
        report::groups_plot(&dir, g)?;
    }
    rewrite_report(&root)?;
    print!("{}", std::fs::read_to_string(out.join("RESULTS.md"))?);
    stack.stop().await;
    Ok(())
}

/// The lines of `conditions` a bench with its own report keeps (the commit, the machine,
/// PostgreSQL, PHP and Laravel; the other lines are the shapes'), and when
/// target/release/drover was built and the files changed outside bench/ against that commit.
fn build_conditions(conditions: &report::Conditions, root: &std::path::Path) -> Vec<String> {
    let mut lines: Vec<String> = conditions.lines.iter().take(4).cloned().collect();
    lines.push(format!(
        "target/release/drover built {}; files changed outside bench/ against that commit (PHP changes are live, Rust ones only if the binary was built after them): {}",
        std::process::Command::new("date").args(["-u", "-r"]).arg(root.join("target/release/drover")).arg("+%Y-%m-%d %H:%M UTC").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default(),
        std::process::Command::new("sh").arg("-c").arg("git status --porcelain --untracked-files=all -- . ':!bench' | cut -c4- | paste -sd, -").current_dir(root).output().map(|o| match String::from_utf8_lossy(&o.stdout).trim() { "" => "none".to_string(), files => files.replace(',', ", ") }).unwrap_or_default(),
    ));
    lines
}

/// Whether pg_stat_statements was loaded, as a condition line of a bench with its own report.
fn stat_statements_condition(loaded: bool) -> String {
    format!(
        "pg_stat_statements loaded{} (the same for every variant)",
        if loaded {
            ""
        } else {
            " was asked for but is unavailable: no statement table"
        }
    )
}

async fn conditions(
    root: &std::path::Path,
    stack: &stack::Stack,
    sizes: &Sizes,
    runs: usize,
) -> anyhow::Result<report::Conditions> {
    let sh = |cmd: &str| {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(root)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let setting = |name: &'static str| async move {
        stack
            .client
            .query_one(&format!("SHOW {name}"), &[])
            .await
            .map(|r| r.get::<_, String>(0))
            .unwrap_or_default()
    };
    let mut lines = vec![
        format!("commit {} ({})", sh("git rev-parse --short HEAD"), sh("git log -1 --format=%cd --date=iso")),
        format!("machine: {} cores, {} memory, {}", sh("nproc"), sh("free -h | awk '/Mem:/{print $2}'"), sh("uname -sr")),
        format!("PostgreSQL {} (fsync {}, synchronous_commit {}, shared_buffers {}, track_wal_io_timing {}), shared by every engine", setting("server_version").await, setting("fsync").await, setting("synchronous_commit").await, setting("shared_buffers").await, setting("track_wal_io_timing").await),
        format!("PHP {}, {} ({}), redis-server {}", sh("php -r 'echo PHP_VERSION;'"), stack.artisan(&["--version", "--no-ansi"]).unwrap_or_default().trim(), if stack.app.ends_with("tests/laravel-app") { "Debian's package" } else { "the offline reference tree" }, sh("redis-server --version | awk '{print $3}' | cut -d= -f2")),
        "redis-server without persistence (`--save \"\"`, `--appendonly no`), except for the runs of `queue:work redis (AOF everysec)` (`appendonly yes`, `appendfsync everysec`); `drover (lose_dispatches_on_database_crash)` dispatches with the opt-in asynchronous commit (shape 1 only, both)".to_string(),
        "drover: workers forked from a zygote (`spawn: fork`, the zygote with OPcache) and, as `drover (exec)`, started by exec; shape 4 runs drover forked".to_string(),
        format!("{runs} run(s) per engine and shape (shape 4: 1), engine order rotated between runs"),
        format!("sizes: shape 1 {} jobs × 10 ms busy-wait; shape 2 {} no-op jobs; shape 3 {} jobs at {}/s; shape 4 {} jobs, then {} idle workers; shape 7 {} bursts of {} jobs × 10 ms, {} s apart", sizes.seed_jobs, sizes.overhead_jobs, sizes.latency_jobs, sizes.latency_rate, sizes.scale_jobs, sizes.idle_workers, sizes.bursts, sizes::BURST_JOBS, sizes::BURST_EVERY),
        format!("the same job class (App\\Jobs\\BenchJob, $tries = 1) and app for every engine; 4 workers; drover with prefetch {} (shape 3: 1); queue:work --tries=1 --timeout=0 --sleep=0 (shape 3: --sleep=3, Laravel's default)", sizes.prefetch),
    ];
    lines.push("each job appends its timestamps to a file of its worker process (one write(2); the same cost for every engine); the producer records its commit times after its last dispatch".to_string());
    Ok(report::Conditions { lines })
}

/// Where a Laravel's runs are kept: Laravel 12's (the default) in `results/`, Laravel 8's in
/// `results/laravel8/`; RESULTS.md shows both.
fn results_dir(laravel: u8) -> &'static str {
    if laravel == 8 {
        "results/laravel8"
    } else {
        "results"
    }
}

/// One Laravel's runs, read back from its `latest.json`.
fn load_runs(dir: &std::path::Path) -> anyhow::Result<Option<report::Loaded>> {
    let path = dir.join("latest.json");
    if !path.exists() {
        return Ok(None);
    }
    let latest: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    let results: Vec<shapes::RunResult> = serde_json::from_value(latest["runs"].clone())
        .with_context(|| format!("the runs in {}", path.display()))?;
    let summaries: Vec<report::Summary> = [
        Shape::Seed,
        Shape::Overhead,
        Shape::Latency,
        Shape::Scale,
        Shape::Bursts,
    ]
    .iter()
    .flat_map(|shape| {
        Engine::ALL
            .iter()
            .filter_map(|e| report::summarize(&results, *e, *shape))
            .collect::<Vec<_>>()
    })
    .collect();
    let groups = if latest["groups"].is_null() {
        None
    } else {
        Some(
            serde_json::from_value(latest["groups"].clone())
                .with_context(|| format!("shape 6's figures in {}", path.display()))?,
        )
    };
    let fleet = if latest["fleet"].is_null() {
        None
    } else {
        Some(
            serde_json::from_value(latest["fleet"].clone())
                .with_context(|| format!("shape 8's figures in {}", path.display()))?,
        )
    };
    Ok(Some(report::Loaded {
        fleet,
        conditions: report::Conditions {
            lines: serde_json::from_value(latest["conditions"].clone())?,
        },
        quick: latest["quick"].as_bool().unwrap_or(false),
        forking: serde_json::from_value(latest["forking"].clone()).ok(),
        groups,
        summaries,
        results,
    }))
}

/// RESULTS.md from both Laravels' latest.json (Laravel 12's first), e.g. after a run or after
/// editing bench/notes.md.
fn rewrite_report(root: &std::path::Path) -> anyhow::Result<()> {
    let out = root.join("bench");
    let twelve = load_runs(&out.join(results_dir(12)))?;
    let eight = load_runs(&out.join(results_dir(8)))?;
    let md = match (&twelve, &eight) {
        (Some(main), other) => report::markdown(main, other.as_ref().map(|o| ("Laravel 8.83", o))),
        (None, Some(main)) => report::markdown(main, None),
        (None, None) => anyhow::bail!("no results yet: neither bench/results/latest.json nor bench/results/laravel8/latest.json exists"),
    };
    std::fs::write(out.join("RESULTS.md"), md)?;
    eprintln!("bench: wrote bench/RESULTS.md from results/latest.json (Laravel 12) and results/laravel8/latest.json (Laravel 8)");
    Ok(())
}

/// `--metrics-cost`: what metrics cost drover on shape 2 (throughput) and its master (PSS).
/// The variants take turns in each round so none always runs first.
async fn metrics_cost(
    root: &std::path::Path,
    stack: &stack::Stack,
    sizes: &Sizes,
    runs: usize,
    conditions: &report::Conditions,
) -> anyhow::Result<()> {
    // (name, DROVER_RECORD_METRICS, DROVER_METRICS_LISTEN, DROVER_HISTORY_MINUTES): the fixture
    // app's config/drover.php reads them, and the bench's processes inherit this environment.
    let variants: [(&str, &str, Option<&str>, &str); 4] = [
        ("metrics off", "false", None, "0"),
        ("drover.metrics recorded", "true", None, "0"),
        (
            "recorded + /metrics listener",
            "true",
            Some("127.0.0.1:9187"),
            "0",
        ),
        ("recorded + completed-job history", "true", None, "60"),
    ];
    let mut measured: Vec<Vec<(f64, f64)>> = vec![Vec::new(); variants.len()];
    for run in 0..runs {
        for k in 0..variants.len() {
            let i = (k + run) % variants.len();
            let (name, record, listen, history) = variants[i];
            // The bench is single-threaded: nothing reads the environment meanwhile.
            std::env::set_var("DROVER_RECORD_METRICS", record);
            std::env::set_var("DROVER_HISTORY_MINUTES", history);
            match listen {
                Some(addr) => std::env::set_var("DROVER_METRICS_LISTEN", addr),
                None => std::env::remove_var("DROVER_METRICS_LISTEN"),
            }
            eprintln!("bench: metrics cost, round {} of {runs}: {name}", run + 1);
            let r = shapes::run(stack, Engine::Drover, Shape::Overhead, sizes).await?;
            eprintln!(
                "bench:   {:.0} jobs/s, master PSS {:.2} MiB, valid: {}",
                r.jobs_per_s,
                r.usage.peak_orchestrator_kib as f64 / 1024.0,
                r.valid
            );
            if r.valid {
                measured[i].push((r.jobs_per_s, r.usage.peak_orchestrator_kib as f64 / 1024.0));
            }
        }
    }
    std::env::remove_var("DROVER_RECORD_METRICS");
    std::env::remove_var("DROVER_HISTORY_MINUTES");
    std::env::remove_var("DROVER_METRICS_LISTEN");
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let baseline = median(measured[0].iter().map(|m| m.0).collect());
    let mut md = String::from("# What metrics cost drover (shape 2)\n\n");
    md += "`cargo run --release -p drover-bench -- --metrics-cost --runs N`: shape 2 (no-op jobs, backlog queued before the workers start) through drover alone, each variant once per round, variants rotated. Median over valid runs; master PSS is the peak of the master's `smaps_rollup` sampled every 500 ms.\n\n";
    for line in &conditions.lines {
        md += &format!("- {line}\n");
    }
    md += "\n| variant | valid runs | jobs/s | vs metrics off | master PSS MiB |\n|---|---|---|---|---|\n";
    for (i, (name, _, _, _)) in variants.iter().enumerate() {
        let jobs = median(measured[i].iter().map(|m| m.0).collect());
        let pss = median(measured[i].iter().map(|m| m.1).collect());
        let ratio = match (jobs, baseline) {
            (Some(j), Some(b)) if b > 0.0 => format!("{:+.1}%", (j / b - 1.0) * 100.0),
            _ => "–".into(),
        };
        md += &format!(
            "| {name} | {} | {} | {ratio} | {} |\n",
            measured[i].len(),
            jobs.map(|j| format!("{j:.0}")).unwrap_or("–".into()),
            pss.map(|p| format!("{p:.2}")).unwrap_or("–".into()),
        );
    }
    let path = root.join("bench/results/metrics_cost.md");
    std::fs::create_dir_all(path.parent().context("results dir")?)?;
    std::fs::write(&path, &md)?;
    println!("{md}");
    Ok(())
}
