//! `--workflows` (issue 60): what running jobs as the steps of durable workflows costs against
//! the same jobs dispatched plainly, what the master holds per workflow, and the console's
//! workflow pages at a million workflows. The job is shape 2's no-op `App\Jobs\BenchJob` (`$ms`
//! 0: it appends its record and returns), drained by drover's master with 4 forked workers
//! (prefetch as shape 2), the backlog dispatched before the master starts (as `--exactly-once`):
//!
//! - (a) `count` workflows of `steps` steps each, all running at once: a root, then `steps − 2`
//!   members of one `addMany` node after it, then a fan-in after them (1 → 8 → 1 at 10 steps),
//!   dispatched one `Drover::workflow(...)->dispatch()` each (one transaction a workflow) — against
//!   the same jobs dispatched plainly, one `bulk()` push (one transaction) per workflow's worth;
//! - (b) one workflow of `big_steps` steps (root → `addMany` of `big_steps − 2` → fan-in) —
//!   against the same jobs dispatched plainly, one `bulk()` push per 1,000;
//! - (c) the console's workflow pages (`/drover/workflows`: the list, a name's prefix, a state,
//!   an age; `/drover/workflows/{id}` of the big workflow, before it ran and once it completed)
//!   over `rows` synthetic ended workflows inserted by SQL (3 nodes each, no step rows) and a
//!   real big one, each timed over HTTP from `php artisan serve`, end to end.
//!
//! (a) and (b): each variant once per round, the order rotated between rounds, `--runs` rounds.
//! Per run: steps/s (steps / first `handle()` start → last `handle()` end, from the records, as
//! shape 2's jobs/s), the dispatch's own time (measured inside the PHP process, its boot left
//! out), master PSS when its workers are ready, its peak over the drain and after the drain
//! (flat: the master holds nothing per workflow), CPU per step of the master, its PHP processes
//! and PostgreSQL, a fan-in's wait (its start − its last member's end), and the statements that
//! took the database's time. A workflow run counts only if every step ran once, on its first
//! attempt, after every step it depends on ended, and every workflow completed.
//!
//! Writes `results/workflows.md` (Laravel 12) or `results/laravel8/workflows.md`, and the runs
//! beside it as JSON; RESULTS.md is left alone.

use std::time::{Duration, Instant};

use anyhow::Context;
use drover_bench::serve;
use serde::{Deserialize, Serialize};

use crate::engines::{ClaimTally, Engine, Running, WorkerSettings};
use crate::exactly_once::CpuWindow;
use crate::figure::{f, int};
use crate::measure::{median, percentiles, statements, validate, Percentiles};
use crate::records::Runs;
use crate::report::{
    invalid_runs, rate_cells, runs_in_order, statements_tables, valid_runs, variant_run,
    variants_intro, write_variants_report,
};
use crate::sampler::{pss_kib, Sampler};
use crate::stack::Stack;

/// Workers, as shape 2.
pub const WORKERS: usize = 4;

/// The console's target for a page, ms (issue 60, "Done when").
const PAGE_TARGET_MS: f64 = 300.0;

/// Steps/s of workflow steps against the same jobs plain (issue 60, "Done when").
const RATIO_TARGET: f64 = 0.80;

/// Jobs per plain `bulk()` push of (b) (and of `--exactly-once`'s backlog).
const PLAIN_BULK: i64 = 1000;

/// The sizes of `--workflows`; `--quick` shrinks them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkflowSizes {
    /// (a): workflows, all dispatched before the master starts.
    pub count: i64,
    /// (a): steps per workflow (a root, `steps − 2` members, a fan-in; at least 3).
    pub steps: i64,
    /// (b): steps of the one big workflow (at least 3).
    pub big_steps: i64,
    /// (c): synthetic ended workflows beside the big one.
    pub rows: i64,
    /// (c): timed requests per page, after one to warm up.
    pub repeat: usize,
    /// Which parts: a, b, c.
    pub parts: Vec<String>,
}

impl WorkflowSizes {
    pub fn full() -> WorkflowSizes {
        WorkflowSizes {
            count: 10_000,
            steps: 10,
            big_steps: 100_000,
            rows: 1_000_000,
            repeat: 5,
            parts: vec!["a".into(), "b".into(), "c".into()],
        }
    }

    pub fn quick() -> WorkflowSizes {
        WorkflowSizes {
            count: 200,
            steps: 10,
            big_steps: 2_000,
            rows: 20_000,
            repeat: 3,
            parts: vec!["a".into(), "b".into(), "c".into()],
        }
    }

    fn has(&self, part: &str) -> bool {
        self.parts.iter().any(|p| p == part)
    }
}

/// Part (a) or (b).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Many,
    Big,
}

/// One variant of (a) or (b): the steps as workflows, or the same jobs plain.
#[derive(Debug, Clone, Copy)]
struct Variant {
    part: Part,
    workflow: bool,
}

impl Variant {
    fn key(self) -> &'static str {
        match (self.part, self.workflow) {
            (Part::Many, true) => "a-workflows",
            (Part::Many, false) => "a-plain",
            (Part::Big, true) => "b-workflow",
            (Part::Big, false) => "b-plain",
        }
    }

    /// (workflows, steps per workflow) of its jobs; a plain variant has the same jobs.
    fn shape(self, s: &WorkflowSizes) -> (i64, i64) {
        match self.part {
            Part::Many => (s.count, s.steps),
            Part::Big => (1, s.big_steps),
        }
    }

    fn label(self, s: &WorkflowSizes) -> String {
        let (w, k) = self.shape(s);
        match (self.part, self.workflow) {
            (Part::Many, true) => format!(
                "{} workflows × {k} steps (root → addMany {} → fan-in), one dispatch() each",
                int(w as f64),
                k - 2
            ),
            (Part::Many, false) => format!(
                "the same {} jobs plain, one bulk() push of {k} per workflow's worth",
                int((w * k) as f64)
            ),
            (Part::Big, true) => format!(
                "1 workflow × {} steps (root → addMany {} → fan-in), one dispatch()",
                int(k as f64),
                int((k - 2) as f64)
            ),
            (Part::Big, false) => format!(
                "the same {} jobs plain, one bulk() push per {}",
                int(k as f64),
                int(PLAIN_BULK as f64)
            ),
        }
    }
}

/// One run of one variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub variant: String,
    pub round: usize,
    pub workflows: i64,
    pub steps: i64,
    pub valid: bool,
    pub problems: Vec<String>,
    /// Steps / (last `handle()` end − first `handle()` start).
    pub steps_per_s: f64,
    pub drain_s: f64,
    /// The dispatch loop's wall time and its PHP process's CPU (user + system), seconds; the
    /// framework's boot left out.
    pub dispatch_s: f64,
    pub dispatch_cpu_s: f64,
    /// Master PSS, KiB: its workers ready (before the drain), the peak sampled every 500 ms over
    /// the drain, and after it (every workflow ended, 2 s idle).
    pub master_pss_ready_kib: u64,
    pub master_pss_peak_kib: u64,
    pub master_pss_after_kib: u64,
    /// The master's PSS over the drain: (seconds since its workers were ready, KiB).
    pub master_pss_samples: Vec<(f64, u64)>,
    /// CPU per step over the drain, µs: the master, its PHP processes, PostgreSQL's processes.
    pub master_cpu_us: f64,
    pub php_cpu_us: f64,
    pub postgres_cpu_us: f64,
    /// Workflows only: a fan-in's start − the end of the last member it waited for.
    pub fan_in_wait: Percentiles,
    /// Workflows only: the first member's start − the root's end.
    pub members_wait: Percentiles,
    /// Workflows only: the last workflow's `finished_at` − the last step's end, ms.
    pub completed_lag_ms: f64,
    /// Ends noted for the catch-up (drover.workflow_events) at their most, sampled with PSS.
    pub events_peak: i64,
    pub claims: Option<ClaimTally>,
    /// (calls per step, ms per step, the statement's first words).
    pub statements: Vec<(f64, f64, String)>,
    pub exec_ms_per_step: f64,
    pub load_before: f64,
    pub load_after: f64,
    /// The machine's CPU used by other processes than this run's over the drain, % of all cores.
    pub others_cpu_pct: f64,
}

variant_run!(Run, steps_per_s);

/// One page of (c).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Page {
    pub name: String,
    pub path: String,
    pub status: u16,
    pub median_ms: f64,
    pub max_ms: f64,
    pub kib: f64,
}

/// Part (c)'s figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Console {
    pub rows: i64,
    pub big_steps: i64,
    pub seed_s: f64,
    /// MiB with indexes: drover.workflows, drover.workflow_nodes, drover.workflow_steps.
    pub table_mib: (f64, f64, f64),
    pub pages: Vec<Page>,
    pub notes: Vec<String>,
}

/// `--workflows`: (a) and (b) `runs` rounds each, interleaved; then (c); the report written and
/// printed.
pub async fn run(
    root: &std::path::Path,
    stack: &Stack,
    sizes: &WorkflowSizes,
    prefetch: usize,
    runs: usize,
    conditions: &[String],
    command: &str,
) -> anyhow::Result<()> {
    for p in &sizes.parts {
        anyhow::ensure!(
            ["a", "b", "c"].contains(&p.as_str()),
            "--workflows-parts: {p:?} is none of a, b, c"
        );
    }
    anyhow::ensure!(
        sizes.steps >= 3 && sizes.big_steps >= 3,
        "--workflow-steps and --workflow-big-steps: a workflow here has a root, members and a fan-in, so at least 3 steps"
    );
    anyhow::ensure!(sizes.count >= 1, "--workflows-count: at least 1");
    let mut variants = Vec::new();
    for (key, part) in [("a", Part::Many), ("b", Part::Big)] {
        if sizes.has(key) {
            variants.push(Variant {
                part,
                workflow: true,
            });
            variants.push(Variant {
                part,
                workflow: false,
            });
        }
    }
    let mut all: Vec<Run> = Vec::new();
    for round in 0..runs {
        // Each part's two variants alternate which goes first.
        for pair in variants.chunks(2) {
            let mut order = pair.to_vec();
            let by = round % order.len();
            order.rotate_left(by);
            for v in order {
                let (w, k) = v.shape(sizes);
                eprintln!(
                    "bench: workflows round {} of {runs}: {} ({} steps)",
                    round + 1,
                    v.key(),
                    w * k
                );
                let r = one(stack, v, sizes, prefetch, round).await?;
                eprintln!(
                    "bench:   {:.0} steps/s, dispatch {:.2} s, master PSS ready {:.2} → peak {:.2} → after {:.2} MiB, CPU/step master {:.0} µs PHP {:.0} µs PostgreSQL {:.0} µs, fan-in wait p50 {:.1} ms, events peak {}, others' CPU {:.0}%, load {:.2}→{:.2}, valid: {}{}",
                    r.steps_per_s, r.dispatch_s,
                    r.master_pss_ready_kib as f64 / 1024.0, r.master_pss_peak_kib as f64 / 1024.0, r.master_pss_after_kib as f64 / 1024.0,
                    r.master_cpu_us, r.php_cpu_us, r.postgres_cpu_us, r.fan_in_wait.p50_ms, r.events_peak,
                    r.others_cpu_pct, r.load_before, r.load_after, r.valid,
                    if r.valid { String::new() } else { format!(" ({})", r.problems.join("; ")) }
                );
                all.push(r);
            }
        }
    }
    let console = if sizes.has("c") {
        Some(console(stack, sizes, prefetch).await?)
    } else {
        None
    };
    let md = report(
        &variants,
        &all,
        console.as_ref(),
        sizes,
        prefetch,
        runs,
        conditions,
        command,
        stack.laravel,
    );
    write_variants_report(
        root,
        stack.laravel,
        "workflows",
        &md,
        serde_json::json!({
            "command": command,
            "conditions": conditions,
            "sizes": sizes,
            "workers": WORKERS,
            "prefetch": prefetch,
            "runs": all,
            "console": console,
        }),
    )
}

/// Empties the workflow tables (a TRUNCATE fires no step's trigger).
async fn reset_workflows(stack: &Stack) -> anyhow::Result<()> {
    stack
        .client
        .batch_execute(
            "TRUNCATE drover.workflows, drover.workflow_nodes, drover.workflow_steps, drover.workflow_signals,
                      drover.workflow_events, drover.step_failures, drover.job_progress",
        )
        .await?;
    Ok(())
}

/// `VACUUM ANALYZE` of each table, one statement each (VACUUM runs outside a transaction block).
async fn vacuum(stack: &Stack, tables: &[&str]) -> anyhow::Result<()> {
    for t in tables {
        stack
            .client
            .batch_execute(&format!("VACUUM ANALYZE {t}"))
            .await?;
    }
    Ok(())
}

/// PHP that returns this process's CPU seconds so far (user + system).
const PHP_CPU: &str = "$cpu = function (): float { $u = getrusage(); return $u['ru_utime.tv_sec'] + $u['ru_utime.tv_usec'] / 1e6 + $u['ru_stime.tv_sec'] + $u['ru_stime.tv_usec'] / 1e6; };";

/// The PHP that dispatches `v`'s jobs and returns `{"secs": wall, "cpu": CPU}` of its loop. A
/// step's record names it by `seq`: workflow `w`'s root is `w·k + 1`, its members the next
/// `k − 2`, its fan-in `w·k + k`; the plain variant dispatches the same seqs.
fn dispatch_code(v: Variant, sizes: &WorkflowSizes) -> String {
    let (w, k) = v.shape(sizes);
    let body = if v.workflow {
        let name = match v.part {
            Part::Many => "'bench-' . $w",
            Part::Big => "'bench-big'",
        };
        format!(
            "for ($w = 0; $w < {w}; $w++) {{
                $base = $w * {k};
                $members = [];
                for ($i = 2; $i < {k}; $i++) {{ $members[] = new App\\Jobs\\BenchJob($base + $i, 0); }}
                Drover\\Drover::workflow({name})
                    ->add('root', new App\\Jobs\\BenchJob($base + 1, 0))
                    ->addMany('members', $members, after: 'root')
                    ->add('fan-in', new App\\Jobs\\BenchJob($base + {k}, 0), after: 'members')
                    ->dispatch();
            }}"
        )
    } else {
        let per = match v.part {
            Part::Many => k,
            Part::Big => PLAIN_BULK,
        };
        let n = w * k;
        format!(
            "$q = Illuminate\\Support\\Facades\\Queue::connection('drover');
             for ($from = 1; $from <= {n}; $from += {per}) {{
                $jobs = [];
                for ($seq = $from; $seq < min($from + {per}, {n} + 1); $seq++) {{ $jobs[] = new App\\Jobs\\BenchJob($seq, 0); }}
                $q->bulk($jobs);
             }}"
        )
    };
    format!(
        "{PHP_CPU} $c0 = $cpu(); $t0 = microtime(true);
         {body}
         return json_encode(['secs' => microtime(true) - $t0, 'cpu' => $cpu() - $c0]);"
    )
}

/// Dispatches `v`'s jobs through the fixture app; returns (wall s, CPU s) of the dispatch loop.
fn dispatch(stack: &Stack, v: Variant, sizes: &WorkflowSizes) -> anyhow::Result<(f64, f64)> {
    let out = stack
        .artisan(&["app:eval", &dispatch_code(v, sizes)])
        .with_context(|| format!("dispatching {}", v.key()))?;
    let last = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("the dispatch of {} printed no figures: {out}", v.key()))?;
    let said: serde_json::Value = serde_json::from_str(last.trim())?;
    Ok((
        said["secs"].as_f64().unwrap_or(f64::NAN),
        said["cpu"].as_f64().unwrap_or(f64::NAN),
    ))
}

/// Checks what the dispatch left: `n` jobs queued (plain), or `w` running workflows with `n`
/// steps, their roots queued (the bench's own, named `bench-…`: (c)'s synthetic ones are not).
async fn check_dispatched(stack: &Stack, v: Variant, w: i64, n: i64) -> anyhow::Result<()> {
    let queued = stack.scalar_i64("SELECT count(*) FROM drover.jobs").await?;
    if !v.workflow {
        anyhow::ensure!(queued == n, "{queued} jobs queued of {n}");
        return Ok(());
    }
    let row = stack
        .client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE state = 'running'), coalesce(sum(steps), 0)::bigint
               FROM drover.workflows WHERE name LIKE 'bench-%'",
            &[],
        )
        .await?;
    let (wfs, running, steps): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    anyhow::ensure!(
        wfs == w && running == w && steps == n && queued == w,
        "after the dispatch: {wfs} workflows ({running} running) with {steps} steps and {queued} jobs queued, not {w} running with {n} steps and their {w} roots queued"
    );
    Ok(())
}

/// Waits for `n` records: an error when none came for `stall` (or the run took `cap`).
async fn drain_steps(stack: &Stack, n: i64, stall: Duration, cap: Duration) -> Result<(), String> {
    let start = Instant::now();
    let (mut seen, mut moved) = (-1, Instant::now());
    loop {
        let done = stack.completed().map_err(|e| format!("{e:#}"))?;
        if done >= n {
            // Stragglers (duplicates, if any) land before validating.
            tokio::time::sleep(Duration::from_millis(300)).await;
            return Ok(());
        }
        if done != seen {
            seen = done;
            moved = Instant::now();
        }
        if moved.elapsed() > stall || start.elapsed() > cap {
            return Err(format!(
                "only {done} of {n} steps ran within {:.0} s (none for the last {:.0} s)",
                start.elapsed().as_secs_f64(),
                moved.elapsed().as_secs_f64()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits up to `timeout` for every workflow the bench dispatched (`bench-…`) to end; returns how many have not completed (ended
/// otherwise or still running) and the events still noted.
async fn wait_workflows_ended(stack: &Stack, timeout: Duration) -> anyhow::Result<(i64, i64)> {
    let deadline = Instant::now() + timeout;
    loop {
        let row = stack
            .client
            .query_one(
                "SELECT count(*) FILTER (WHERE state IN ('pending', 'running')),
                        count(*) FILTER (WHERE state <> 'completed'),
                        (SELECT count(*) FROM drover.workflow_events)
                   FROM drover.workflows WHERE name LIKE 'bench-%'",
                &[],
            )
            .await?;
        let (open, not_completed, events): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        if (open == 0 && events == 0) || Instant::now() > deadline {
            return Ok((not_completed, events));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One run: the jobs dispatched, the master and its 4 workers started, the drain measured,
/// checked.
async fn one(
    stack: &Stack,
    v: Variant,
    sizes: &WorkflowSizes,
    prefetch: usize,
    round: usize,
) -> anyhow::Result<Run> {
    let (w, k) = v.shape(sizes);
    let n = w * k;
    stack.reset().await?;
    reset_workflows(stack).await?;
    let (dispatch_s, dispatch_cpu_s) = dispatch(stack, v, sizes)?;
    check_dispatched(stack, v, w, n).await?;
    // The same plan and visibility map for every run (tables just written, else analysed by
    // autovacuum at a moment of its own).
    vacuum(
        stack,
        &[
            "drover.jobs",
            "drover.workflows",
            "drover.workflow_nodes",
            "drover.workflow_steps",
        ],
    )
    .await?;
    if stack.stat_statements {
        stack
            .client
            .batch_execute("SELECT pg_stat_statements_reset()")
            .await?;
    }
    let load_before = crate::sampler::load_average_1m();
    let running = Running::start(
        Engine::Drover,
        stack,
        WorkerSettings::new(WORKERS, prefetch, 0),
    )
    .await?;
    let master = running.master.as_ref().context("drover's master")?.id() as i32;
    let postmaster = stack.pg.pid().context("PostgreSQL's pid")? as i32;
    let master_pss_ready_kib = pss_kib(master).unwrap_or(0);
    let sampler = Sampler::start(running.pid_source());
    let cpu = CpuWindow::start(master, postmaster);
    let done0 = stack.completed()?;
    // The events noted for the catch-up, sampled beside the drain.
    let events_peak = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let watcher = if v.workflow {
        let url = stack.pg.url().to_string();
        let peak = events_peak.clone();
        Some(tokio::spawn(async move {
            let Ok(client) = drover_broker::connect::connect_once(&url).await else {
                return;
            };
            loop {
                if let Ok(row) = client
                    .query_one("SELECT count(*) FROM drover.workflow_events", &[])
                    .await
                {
                    peak.fetch_max(row.get::<_, i64>(0), std::sync::atomic::Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }))
    } else {
        None
    };
    let mut problems = Vec::new();
    let cap = Duration::from_secs((n as u64 / 20).max(900));
    if let Err(e) = drain_steps(stack, n, Duration::from_secs(120), cap).await {
        problems.push(e);
    }
    if v.workflow {
        let (not_completed, events) = wait_workflows_ended(stack, Duration::from_secs(60)).await?;
        if not_completed > 0 {
            problems.push(format!(
                "{not_completed} of {w} workflows had not completed 60 s after the drain"
            ));
        }
        if events > 0 {
            problems.push(format!("{events} ends still noted for the catch-up"));
        }
    }
    let cpu = cpu.end();
    // After: the master idle a moment with nothing left to do.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let master_pss_after_kib = pss_kib(master).unwrap_or(0);
    let usage = sampler.finish().await;
    if let Some(t) = watcher {
        t.abort();
    }
    let window = (n - done0).max(1) as f64;
    let load_after = crate::sampler::load_average_1m();
    let r = stack.runs()?;
    problems.extend(validate(stack, Engine::Drover, n, &r).await?);
    let (fan_in_wait, members_wait, order_problems) = if v.workflow {
        order(&r, w, k)
    } else {
        (percentiles(Vec::new()), percentiles(Vec::new()), Vec::new())
    };
    problems.extend(order_problems);
    let first = r.started.iter().cloned().fold(f64::MAX, f64::min);
    let last = r.finished.iter().cloned().fold(f64::MIN, f64::max);
    let mut completed_lag_ms = f64::NAN;
    if v.workflow {
        let finished: Option<f64> = stack
            .client
            .query_one(
                "SELECT extract(epoch FROM max(finished_at))::float8 FROM drover.workflows WHERE name LIKE 'bench-%'",
                &[],
            )
            .await?
            .get(0);
        if let Some(at) = finished {
            completed_lag_ms = (at - last) * 1000.0;
        }
    }
    let claims = running.stop_counted(stack).await?;
    let (statements, exec_ms_per_step) = statements(stack, n).await?;
    let per_step = |s: f64| s * 1e6 / window;
    Ok(Run {
        variant: v.key().to_string(),
        round,
        workflows: if v.workflow { w } else { 0 },
        steps: n,
        valid: problems.is_empty(),
        problems,
        steps_per_s: r.seq.len() as f64 / (last - first),
        drain_s: last - first,
        dispatch_s,
        dispatch_cpu_s,
        master_pss_ready_kib,
        master_pss_peak_kib: usage.peak_orchestrator_kib,
        master_pss_after_kib,
        master_pss_samples: usage
            .samples
            .iter()
            .map(|s| (s.t, s.orchestrator_kib))
            .collect(),
        master_cpu_us: per_step(cpu.master_s),
        php_cpu_us: per_step(cpu.php_s),
        postgres_cpu_us: per_step(cpu.postgres_s),
        fan_in_wait,
        members_wait,
        completed_lag_ms,
        events_peak: events_peak.load(std::sync::atomic::Ordering::Relaxed),
        claims,
        statements,
        exec_ms_per_step,
        load_before,
        load_after,
        others_cpu_pct: cpu.others_cpu_pct,
    })
}

/// The order the records show, `w` workflows of `k` steps numbered as [`dispatch_code`] does:
/// (a fan-in's start − its last member's end, the first member's start − the root's end, the
/// dependents that started before a step they depend on ended).
fn order(r: &Runs, w: i64, k: i64) -> (Percentiles, Percentiles, Vec<String>) {
    let n = (w * k) as usize;
    let mut at: Vec<Option<(f64, f64)>> = vec![None; n + 1];
    for i in 0..r.seq.len() {
        if let Some(slot) = at.get_mut(r.seq[i] as usize) {
            // The first run of a step (a second one is the validation's problem).
            slot.get_or_insert((r.started[i], r.finished[i]));
        }
    }
    let (mut fan_in, mut members, mut early_members, mut early_fan_ins) =
        (Vec::new(), Vec::new(), 0usize, 0usize);
    for wf in 0..w {
        let base = (wf * k) as usize;
        let root = at[base + 1];
        let fan = at[base + k as usize];
        let ms: Vec<(f64, f64)> = (base + 2..base + k as usize)
            .filter_map(|s| at[s])
            .collect();
        if let Some((_, root_end)) = root {
            early_members += ms.iter().filter(|m| m.0 < root_end).count();
            if let Some(first) = ms.iter().map(|m| m.0).reduce(f64::min) {
                members.push(first - root_end);
            }
        }
        if let (Some((fan_start, _)), Some(last_end)) =
            (fan, ms.iter().map(|m| m.1).reduce(f64::max))
        {
            if fan_start < last_end {
                early_fan_ins += 1;
            }
            fan_in.push(fan_start - last_end);
        }
    }
    let mut problems = Vec::new();
    if early_members > 0 {
        problems.push(format!(
            "{early_members} members started before their root ended"
        ));
    }
    if early_fan_ins > 0 {
        problems.push(format!(
            "{early_fan_ins} fan-ins started before their last member ended"
        ));
    }
    (percentiles(fan_in), percentiles(members), problems)
}

/// (c): `rows` synthetic ended workflows, then the big workflow dispatched, its page timed
/// before it ran, drained, and every page timed.
async fn console(stack: &Stack, sizes: &WorkflowSizes, prefetch: usize) -> anyhow::Result<Console> {
    eprintln!(
        "bench: workflows (c): seeding {} workflows, then the console's pages",
        int(sizes.rows as f64)
    );
    stack.reset().await?;
    reset_workflows(stack).await?;
    let mut c = Console {
        rows: sizes.rows,
        big_steps: sizes.big_steps,
        ..Default::default()
    };
    let t = Instant::now();
    stack.client.batch_execute(&seed_sql(sizes.rows)).await?;
    vacuum(stack, &["drover.workflows", "drover.workflow_nodes"]).await?;
    c.seed_s = t.elapsed().as_secs_f64();

    // The big workflow: dispatched (running, its root queued, the rest waiting).
    let big = Variant {
        part: Part::Big,
        workflow: true,
    };
    dispatch(stack, big, sizes)?;
    check_dispatched(stack, big, 1, sizes.big_steps).await?;
    let id = stack
        .scalar_i64("SELECT max(id) FROM drover.workflows WHERE name = 'bench-big'")
        .await?;
    vacuum(stack, &["drover.jobs", "drover.workflow_steps"]).await?;

    let server = Server::start(stack)?;
    let detail = format!("/drover/workflows/{id}");
    let steps = int(sizes.big_steps as f64);
    c.pages.push(time_page(
        server.port,
        &format!("a workflow of {steps} steps, dispatched, none run yet"),
        &detail,
        sizes.repeat,
    )?);

    eprintln!("bench: workflows (c): draining the big workflow");
    let running = Running::start(
        Engine::Drover,
        stack,
        WorkerSettings::new(WORKERS, prefetch, 0),
    )
    .await?;
    let drained = drain_steps(
        stack,
        sizes.big_steps,
        Duration::from_secs(120),
        Duration::from_secs((sizes.big_steps as u64 / 20).max(900)),
    )
    .await;
    let (not_completed, _) = wait_workflows_ended(stack, Duration::from_secs(60)).await?;
    running.stop().await?;
    if let Err(e) = drained {
        c.notes.push(format!("the big workflow's drain: {e}"));
    }
    if not_completed > 0 {
        c.notes
            .push("the big workflow had not completed when its page was timed".into());
    }
    vacuum(stack, &["drover.workflows", "drover.workflow_steps"]).await?;
    let sizes_row = stack
        .client
        .query_one(
            "SELECT pg_total_relation_size('drover.workflows'), pg_total_relation_size('drover.workflow_nodes'),
                    pg_total_relation_size('drover.workflow_steps')",
            &[],
        )
        .await?;
    let mib = |i: usize| sizes_row.get::<_, i64>(i) as f64 / 1048576.0;
    c.table_mib = (mib(0), mib(1), mib(2));

    let pages: Vec<(String, String)> = vec![
        (
            "list, first page (newest)".into(),
            "/drover/workflows".into(),
        ),
        (
            "name prefix, 10 % (import-)".into(),
            "/drover/workflows?name=import-".into(),
        ),
        (
            "name prefix, ~1 in 10,000 (import-424)".into(),
            "/drover/workflows?name=import-424".into(),
        ),
        (
            "name prefix matching none (zzz)".into(),
            "/drover/workflows?name=zzz".into(),
        ),
        (
            "state failed (5 %)".into(),
            "/drover/workflows?state=failed".into(),
        ),
        (
            "state running (2 %, and the big one)".into(),
            "/drover/workflows?state=running".into(),
        ),
        (
            "state cancelled and a name prefix (1 %)".into(),
            "/drover/workflows?state=cancelled&name=onboard-".into(),
        ),
        (
            "created within 24 h".into(),
            "/drover/workflows?within=24h".into(),
        ),
        (
            "failed within 1 h".into(),
            "/drover/workflows?state=failed&within=1h".into(),
        ),
        (
            format!("a workflow of {steps} steps, completed"),
            detail.clone(),
        ),
    ];
    for (name, path) in &pages {
        let page = time_page(server.port, name, path, sizes.repeat)?;
        if name.starts_with("list, first page") {
            // The list's next page, if it links one (keyset pagination).
            if let Ok((200, body)) = get(server.port, path) {
                if let Some(next) = next_link(&body) {
                    c.pages.push(page.clone());
                    c.pages.push(time_page(
                        server.port,
                        "list, the next page (its link)",
                        &next,
                        sizes.repeat,
                    )?);
                    continue;
                }
                c.notes
                    .push("the list's first page links no next page the bench recognised (`after=`, `before=`, `cursor=`)".into());
            }
        }
        c.pages.push(page);
    }
    drop(server);
    Ok(c)
}

/// SQL that inserts `rows` ended workflows (and 2 % running) of 3 nodes each — root, 8 members,
/// a fan-in — without step rows: names `<prefix>-<g>` over ten prefixes (`import-` a tenth of
/// them), created over the last 30 days (newest first by `g`), 90 % completed, 5 % failed, 3 %
/// cancelled, 2 % running.
fn seed_sql(rows: i64) -> String {
    format!(
        "CREATE TEMP TABLE bench_seed AS
           SELECT g,
                  (ARRAY['import','export','sync','report','billing','onboard','resize','notify','reindex','cleanup'])[1 + g % 10] || '-' || g AS name,
                  CASE WHEN g % 100 < 90 THEN 'completed' WHEN g % 100 < 95 THEN 'failed'
                       WHEN g % 100 < 98 THEN 'cancelled' ELSE 'running' END AS state,
                  now() - interval '1 minute' - (interval '30 days' * g / {rows}) AS created
             FROM generate_series(1, {rows}) AS g;
         INSERT INTO drover.workflows (name, state, nodes, nodes_left, steps, created_at, started_at, finished_at)
         SELECT name, state, 3, CASE state WHEN 'running' THEN 2 ELSE 0 END, 10, created,
                created + interval '50 ms',
                CASE WHEN state <> 'running' THEN created + interval '4 s' END
           FROM bench_seed ORDER BY g DESC;
         INSERT INTO drover.workflow_nodes (wf, name, position, deps, members, members_left, failed_members, state, cause, released_at, due_at, ended_at)
         SELECT w.id, n.name, n.pos, n.deps, n.members,
                CASE WHEN w.state = 'running' AND n.name = 'members' THEN 3
                     WHEN w.state = 'running' AND n.name = 'fan-in' THEN 1 ELSE 0 END,
                CASE WHEN w.state = 'failed' AND n.name = 'members' THEN 1 ELSE 0 END,
                CASE WHEN n.name = 'root' THEN 'completed'
                     WHEN w.state = 'completed' THEN 'completed'
                     WHEN w.state = 'running' THEN CASE n.name WHEN 'members' THEN 'running' ELSE 'pending' END
                     WHEN w.state = 'failed' THEN CASE n.name WHEN 'members' THEN 'failed' ELSE 'cancelled' END
                     ELSE 'cancelled' END,
                CASE WHEN n.name = 'root' OR w.state IN ('completed', 'running') THEN NULL
                     WHEN w.state = 'failed' THEN CASE n.name WHEN 'fan-in' THEN 'members' END
                     ELSE 'cancelled' END,
                CASE WHEN n.name = 'root' OR w.state = 'completed' OR (w.state IN ('running', 'failed') AND n.name = 'members')
                     THEN w.created_at + n.pos * interval '1 s' END,
                CASE WHEN n.name = 'root' OR w.state = 'completed' OR (w.state IN ('running', 'failed') AND n.name = 'members')
                     THEN w.created_at + n.pos * interval '1 s' END,
                CASE WHEN w.state = 'running' AND n.name <> 'root' THEN NULL
                     ELSE w.created_at + (n.pos + 1) * interval '1 s' END
           FROM drover.workflows AS w
          CROSS JOIN (VALUES ('root', 1, '{{}}'::text[], 1), ('members', 2, '{{root}}'::text[], 8),
                             ('fan-in', 3, '{{members}}'::text[], 1)) AS n(name, pos, deps, members);
         DROP TABLE bench_seed;"
    )
}

/// `php artisan serve` of the bench's app in its own process group, ended with it.
struct Server {
    child: std::process::Child,
    port: u16,
}

impl Server {
    fn start(stack: &Stack) -> anyhow::Result<Server> {
        let storage = stack.dir.path().join("storage/framework");
        for d in ["views", "sessions"] {
            std::fs::create_dir_all(storage.join(d))?;
        }
        let port = serve::free_port()?;
        let child = serve::spawn(
            stack.with_env(
                &[
                    ("APP_ENV", "local".to_string()),
                    ("APP_DEBUG", "false".to_string()),
                    ("SESSION_DRIVER", "file".to_string()),
                ],
                &[],
            ),
            port,
            stack.log("serve.log"),
        )?;
        let server = Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while get(port, "/drover").map(|r| r.0).unwrap_or(0) == 0 {
            if Instant::now() > deadline {
                anyhow::bail!(
                    "the console never answered on port {port}: {}",
                    std::fs::read_to_string(stack.log_path("serve.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(server)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// `path` requested once to warm up, then `repeat` times timed.
fn time_page(port: u16, name: &str, path: &str, repeat: usize) -> anyhow::Result<Page> {
    let _ = get(port, path);
    let mut times = Vec::new();
    let (mut status, mut bytes) = (0, 0);
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let (s, body) = get(port, path)?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        status = s;
        bytes = body.len();
    }
    let page = Page {
        name: name.to_string(),
        path: path.to_string(),
        status,
        median_ms: median(times.iter().copied()),
        max_ms: times.iter().cloned().fold(f64::MIN, f64::max),
        kib: bytes as f64 / 1024.0,
    };
    eprintln!(
        "bench:   {name}: median {:.0} ms, max {:.0} ms ({status}, {:.0} KiB)",
        page.median_ms, page.max_ms, page.kib
    );
    Ok(page)
}

/// The first link of `body` to another page of the workflow list (keyset: `after=`, `before=`
/// or `cursor=`), as a path.
fn next_link(body: &str) -> Option<String> {
    body.split("href=\"").skip(1).find_map(|rest| {
        let href = rest.split('"').next()?.replace("&amp;", "&");
        let path = href
            .find("/drover/workflows?")
            .map(|i| href[i..].to_string())?;
        ["after=", "before=", "cursor="]
            .iter()
            .any(|k| path.contains(k))
            .then_some(path)
    })
}

/// GET `path` of the console: (status, body).
fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    serve::get(port, path, Duration::from_secs(120))
}

#[allow(clippy::too_many_arguments)]
fn report(
    variants: &[Variant],
    all: &[Run],
    console: Option<&Console>,
    sizes: &WorkflowSizes,
    prefetch: usize,
    runs: usize,
    conditions: &[String],
    command: &str,
    laravel: u8,
) -> String {
    let mut md = variants_intro(
        "Durable workflows against the same jobs plain, and the console's workflow pages (issue 60)",
        laravel,
        command,
        &format!(
            "The job is `App\\Jobs\\BenchJob` with no busy-wait (it appends its record and returns), `$tries` = 1, dispatched before the master starts; drained by drover's master with {WORKERS} forked workers (prefetch {prefetch}). Steps/s = steps / (first `handle()` start → last `handle()` end), from the records. Dispatch = the PHP dispatch loop's own time (its boot left out). Master PSS: when its workers were ready, the peak sampled every 500 ms over the drain, and after it (every workflow ended, 2 s idle). {runs} round(s), each running each part's two variants once, which goes first alternating between rounds. `VACUUM ANALYZE` of drover.jobs and the workflow tables after the dispatch, before each run. Medians over valid runs. A workflow run counts only if every step ran once, on its first attempt, no member started before its root ended, no fan-in before its last member ended, and every workflow completed. Targets: steps/s of workflow steps ≥ {:.0} % of the same jobs plain; the master's memory flat; the console's workflow pages ≤ {PAGE_TARGET_MS:.0} ms.\n\n",
            RATIO_TARGET * 100.0
        ),
        conditions,
    );
    let of = |key: &str| valid_runs(all, key);
    let med = |rs: &[&Run], g: &dyn Fn(&Run) -> f64| median(rs.iter().map(|r| g(r)));
    let mib = |kib: f64| f(kib / 1024.0, 2);
    if !variants.is_empty() {
        md += "\n| variant | valid runs | steps/s (runs) | steps/s | dispatch s | master PSS ready / peak / after MiB | CPU µs/step master / PHP / PostgreSQL | statements' execution µs/step |\n|---|---|---|---|---|---|---|---|\n";
        for v in variants {
            let rs = of(v.key());
            md += &format!(
                "| {} | {} | {} | {} / {} / {} | {} / {} / {} | {} |\n",
                v.label(sizes),
                rate_cells(all, v.key()),
                f(med(&rs, &|r| r.dispatch_s), 2),
                mib(med(&rs, &|r| r.master_pss_ready_kib as f64)),
                mib(med(&rs, &|r| r.master_pss_peak_kib as f64)),
                mib(med(&rs, &|r| r.master_pss_after_kib as f64)),
                f(med(&rs, &|r| r.master_cpu_us), 0),
                f(med(&rs, &|r| r.php_cpu_us), 0),
                f(med(&rs, &|r| r.postgres_cpu_us), 0),
                f(med(&rs, &|r| r.exec_ms_per_step * 1000.0), 0),
            );
        }
        md += &format!("\nWorkflow steps against the same jobs plain (target ≥ {RATIO_TARGET:.2}):\n\n| part | steps/s workflow / plain (medians) | per round | dispatch workflow / plain | master peak PSS workflow − plain MiB | master PSS after − ready (workflow) MiB | fan-in wait p50 / p99 ms | first member after its root p50 / p99 ms | last step → workflow completed ms | ends noted for the catch-up, peak |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for pair in variants.chunks(2) {
            let (wv, pv) = (pair[0], pair[1]);
            let (ws, ps) = (of(wv.key()), of(pv.key()));
            let ratio = med(&ws, &|r| r.steps_per_s) / med(&ps, &|r| r.steps_per_s);
            let per_round: Vec<String> = (0..runs)
                .filter_map(|round| {
                    let w = ws.iter().find(|r| r.round == round)?;
                    let p = ps.iter().find(|r| r.round == round)?;
                    Some(f(w.steps_per_s / p.steps_per_s, 2))
                })
                .collect();
            md += &format!(
                "| ({}) | **{}** {} | {} | {} s / {} s | {} | {} | {} / {} | {} / {} | {} | {} |\n",
                if wv.part == Part::Many { "a" } else { "b" },
                f(ratio, 2),
                if !ratio.is_finite() {
                    ""
                } else if ratio >= RATIO_TARGET {
                    "(meets)"
                } else {
                    "(misses)"
                },
                per_round.join(" "),
                f(med(&ws, &|r| r.dispatch_s), 2),
                f(med(&ps, &|r| r.dispatch_s), 2),
                f(
                    (med(&ws, &|r| r.master_pss_peak_kib as f64)
                        - med(&ps, &|r| r.master_pss_peak_kib as f64))
                        / 1024.0,
                    2
                ),
                f(
                    med(&ws, &|r| r.master_pss_after_kib as f64
                        - r.master_pss_ready_kib as f64)
                        / 1024.0,
                    2
                ),
                f(med(&ws, &|r| r.fan_in_wait.p50_ms), 1),
                f(med(&ws, &|r| r.fan_in_wait.p99_ms), 1),
                f(med(&ws, &|r| r.members_wait.p50_ms), 1),
                f(med(&ws, &|r| r.members_wait.p99_ms), 1),
                f(med(&ws, &|r| r.completed_lag_ms), 0),
                int(med(&ws, &|r| r.events_peak as f64)),
            );
        }
        md += "\nDispatch per unit (medians): a workflow's `dispatch()` is one transaction (`workflow_create`, `workflow_add_steps` per 1,000 steps, `workflow_start`); a plain `bulk()` push is one INSERT of its jobs.\n\n| variant | dispatch s | per workflow / push ms | per step µs | PHP CPU per step µs |\n|---|---|---|---|---|\n";
        for v in variants {
            let rs = of(v.key());
            let (w, k) = v.shape(sizes);
            // A workflow's dispatch, or a plain push: one per workflow's worth in (a), per 1,000 in (b).
            let units = if v.workflow || v.part == Part::Many {
                w
            } else {
                (k + PLAIN_BULK - 1) / PLAIN_BULK
            } as f64;
            let n = (w * k) as f64;
            md += &format!(
                "| {} | {} | {} | {} | {} |\n",
                v.key(),
                f(med(&rs, &|r| r.dispatch_s), 2),
                f(med(&rs, &|r| r.dispatch_s) * 1000.0 / units, 2),
                f(med(&rs, &|r| r.dispatch_s) * 1e6 / n, 1),
                f(med(&rs, &|r| r.dispatch_cpu_s) * 1e6 / n, 1),
            );
        }
        md += "\nThe master's counts (its `master stopped` line, medians): jobs claimed and acks that rode with a claim.\n\n| variant | claimed | acks ridden | returned unstarted |\n|---|---|---|---|\n";
        for v in variants {
            let rs = of(v.key());
            let c = |g: &dyn Fn(&ClaimTally) -> u64| {
                int(med(&rs, &|r| {
                    r.claims.as_ref().map(|c| g(c) as f64).unwrap_or(f64::NAN)
                }))
            };
            md += &format!(
                "| {} | {} | {} | {} |\n",
                v.key(),
                c(&|c| c.claimed),
                c(&|c| c.acks_ridden),
                c(&|c| c.returned_unstarted)
            );
        }
        md += &statements_tables(
            all,
            variants.iter().map(|v| v.key()),
            "\nThe statements that took the most of the database's time, and any other called at least once per 10 steps (pg_stat_statements, top level — a function's or trigger's own statements inside its caller's — reset before each drain, so the dispatch is not in them), in each variant's last valid run: calls and ms of execution per step:\n",
            "step",
        );
        md += &invalid_runs(all);
        md += &runs_in_order(
            all,
            "step",
            Some(("master PSS peak", "master PSS peak MiB", &|r: &Run| {
                mib(r.master_pss_peak_kib as f64)
            })),
        );
    }
    if let Some(c) = console {
        md += &format!(
            "\n## (c) The console's workflow pages\n\n{} synthetic workflows (3 nodes each — a root, 8 members, a fan-in — and no step rows; names over ten prefixes, `import-` a tenth; created over the last 30 days; 90 % completed, 5 % failed, 3 % cancelled, 2 % running) inserted by SQL in {:.0} s with `VACUUM ANALYZE`, and one real workflow of {} steps dispatched through `Drover::workflow()` and drained by the master. drover.workflows {:.0} MiB, drover.workflow_nodes {:.0} MiB, drover.workflow_steps {:.0} MiB (with indexes). Each page: {} timed request(s) after one to warm up, over HTTP from `php artisan serve` (one PHP process, APP_ENV local), end to end: the framework's boot is included, so these are upper bounds of server time. Target: {PAGE_TARGET_MS:.0} ms.\n\n| page | median ms | max ms | status | KiB | |\n|---|---:|---:|---|---:|---|\n",
            int(c.rows as f64),
            c.seed_s,
            int(c.big_steps as f64),
            c.table_mib.0,
            c.table_mib.1,
            c.table_mib.2,
            sizes.repeat,
        );
        let mut over = 0;
        for p in &c.pages {
            let verdict = if p.status != 200 {
                "not served".to_string()
            } else if p.max_ms > PAGE_TARGET_MS {
                over += 1;
                "over the target at its slowest".to_string()
            } else {
                String::new()
            };
            md += &format!(
                "| {} (`{}`) | {:.0} | {:.0} | {} | {:.0} | {verdict} |\n",
                p.name, p.path, p.median_ms, p.max_ms, p.status, p.kib
            );
        }
        let served = c.pages.iter().filter(|p| p.status == 200).count();
        md += &format!(
            "\n{over} of {served} page(s) served over {PAGE_TARGET_MS:.0} ms at their slowest; {} not served (status other than 200).\n",
            c.pages.len() - served
        );
        for n in &c.notes {
            md += &format!("\n- {n}");
        }
        if !c.notes.is_empty() {
            md += "\n";
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_in_order_pass_and_early_ones_are_named() {
        // Two workflows of 4 steps: seq 1 root, 2-3 members, 4 fan-in; 5-8 the second.
        let mut r = Runs::default();
        let mut push = |seq: i32, s: f64, e: f64| {
            r.seq.push(seq);
            r.attempt.push(1);
            r.pid.push(1);
            r.started.push(s);
            r.finished.push(e);
        };
        push(1, 0.0, 1.0);
        push(2, 1.1, 2.0);
        push(3, 1.2, 2.5);
        push(4, 2.6, 3.0);
        push(5, 0.0, 1.0);
        push(6, 0.5, 2.0); // before its root ended
        push(7, 1.5, 2.0);
        push(8, 1.9, 2.2); // before its last member ended
        let (fan_in, members, problems) = order(&r, 2, 4);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("1 members"));
        assert!(problems[1].starts_with("1 fan-ins"));
        // Waits of 100 ms and −300 ms; members 100 ms and −500 ms after their roots.
        assert!((fan_in.p50_ms - 100.0).abs() < 1e-6, "{fan_in:?}");
        assert!((members.p50_ms - 100.0).abs() < 1e-6, "{members:?}");
    }

    #[test]
    fn the_dispatch_numbers_steps_as_the_order_check_reads_them() {
        let s = WorkflowSizes::quick();
        let code = dispatch_code(
            Variant {
                part: Part::Many,
                workflow: true,
            },
            &s,
        );
        assert!(code.contains("new App\\Jobs\\BenchJob($base + 1, 0)"));
        assert!(code.contains("for ($i = 2; $i < 10; $i++)"));
        assert!(code.contains("BenchJob($base + 10, 0), after: 'members'"));
        let plain = dispatch_code(
            Variant {
                part: Part::Big,
                workflow: false,
            },
            &s,
        );
        assert!(plain.contains("$from <= 2000; $from += 1000"));
    }

    #[test]
    fn the_next_page_is_found_by_its_keyset_link() {
        let body = r#"<a href="/drover/workflows/5">x</a> <a href="http://127.0.0.1:8000/drover/workflows?state=failed&amp;after=123">Older</a>"#;
        assert_eq!(
            next_link(body).as_deref(),
            Some("/drover/workflows?state=failed&after=123")
        );
        assert_eq!(next_link("<a href=\"/drover/workflows?name=x\">"), None);
    }
}
