//! `--exactly-once` (issue 59): what completing a job inside its own transaction costs. A job that
//! writes one row, drained by drover from the same backlog (shape 2's: N jobs queued before 4
//! forked workers start), as three job classes, runs interleaved:
//!
//! - `App\Jobs\WriteRowJob`: one INSERT that commits by itself; the worker says `done` and the
//!   master acks the job (its DELETE rides with the next claim, or the settle batcher writes it);
//! - `App\Jobs\WriteRowOnceJob` (`Drover\Contracts\CompletesInTransaction`): the worker runs the
//!   handler in one transaction, `SELECT drover.complete_within(job, token)` last before the
//!   COMMIT, then `done` with `within`: the master only forgets the completion row, by the settle
//!   batcher (a `within` never rides a claim);
//! - `App\Jobs\WriteRowInTransactionJob`: the INSERT in `DB::transaction` of its own and an
//!   ordinary `done`: the control that separates the transaction (BEGIN, COMMIT) from the
//!   completion (`complete_within` and the completion row).
//!
//! Per run: jobs/s (distinct jobs / first `handle()` start → last row committed, as shape 2),
//! per-job latency from the records (`handle()` → its row committed; and on each worker, one
//! job's start → its next job's start: the handler, the completion and commit, `done`, and the
//! wait for the next job), CPU per job of the master, the PHP processes and PostgreSQL, commits
//! and WAL syncs per job, the master's own counts, and the statements that took the database's
//! time (pg_stat_statements). Writes `results/exactly_once.md` (Laravel 12) or
//! `results/laravel8/exactly_once.md`, and the runs beside it as JSON; RESULTS.md is left alone.

use crate::measure::median;
use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::engines::{ClaimTally, Engine, Running, WorkerSettings};
use crate::figure::{f, int};
use crate::measure::{drain, percentiles, statements, validate, Percentiles};
use crate::records::Runs;
use crate::report::{
    invalid_runs, rate_cells, runs_in_order, statements_tables, valid_runs, variant_run,
    variants_intro, write_variants_report,
};
use crate::stack::Stack;

/// One job class of the comparison.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    /// For `--exactly-once-variants` and the JSON.
    pub key: &'static str,
    pub class: &'static str,
    /// What it is, for the report.
    pub label: &'static str,
}

pub const VARIANTS: [Variant; 3] = [
    Variant {
        key: "plain",
        class: "App\\Jobs\\WriteRowJob",
        label: "WriteRowJob: the INSERT commits by itself, the master acks",
    },
    Variant {
        key: "within",
        class: "App\\Jobs\\WriteRowOnceJob",
        label: "WriteRowOnceJob: CompletesInTransaction",
    },
    Variant {
        key: "tx",
        class: "App\\Jobs\\WriteRowInTransactionJob",
        label: "WriteRowInTransactionJob: its own DB::transaction, the master acks",
    },
];

/// Workers, as shape 2.
pub const WORKERS: usize = 4;

/// One run of one variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub variant: String,
    pub round: usize,
    pub jobs: i64,
    pub valid: bool,
    pub problems: Vec<String>,
    pub jobs_per_s: f64,
    /// `handle()` started → its row committed (the record is written after the commit).
    pub handler: Percentiles,
    /// On each worker, one job's `handle()` start → the next job's.
    pub cycle: Percentiles,
    /// On each worker, one job's row committed → the next job's `handle()` start.
    pub gap: Percentiles,
    /// CPU per job over the drain, µs: the master, its PHP processes, PostgreSQL's processes.
    pub master_cpu_us: f64,
    pub php_cpu_us: f64,
    pub postgres_cpu_us: f64,
    /// Per job over the drain: transactions committed (pg_stat_database's `xact_commit`,
    /// read-only ones included: outside a transaction, PDO's prepare and deallocate count one
    /// each), WAL syncs and WAL bytes (pg_stat_wal).
    pub commits_per_job: f64,
    pub wal_syncs_per_job: f64,
    pub wal_bytes_per_job: f64,
    /// µs of WAL syncs per job (`wal_sync_time`, with `track_wal_io_timing` on).
    pub wal_sync_us_per_job: f64,
    pub claims: Option<ClaimTally>,
    /// The master's `completed_within` count.
    pub completed_within: u64,
    /// The statements that took the most of the database's time: (calls per job, ms per job,
    /// the statement's first words).
    pub statements: Vec<(f64, f64, String)>,
    /// Every statement's execution time summed (pg_stat_statements, top level), ms per job.
    pub exec_ms_per_job: f64,
    /// 1-minute load average before the run and after it.
    pub load_before: f64,
    pub load_after: f64,
    /// The machine's CPU used by other processes than this run's over the drain, % of all its
    /// cores (/proc/stat's busy time less the master's, its workers', PostgreSQL's and the
    /// harness's).
    #[serde(default)]
    pub others_cpu_pct: f64,
    /// Jobs already completed when the workers were seen ready: CPU and counters are per job
    /// of the rest.
    pub done_before_window: i64,
}

variant_run!(Run, jobs_per_s);

/// `--exactly-once`: `runs` rounds of every variant in `keys` (all when empty), the order rotated
/// each round, `n` jobs each; the report written and printed.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    root: &std::path::Path,
    stack: &Stack,
    n: i64,
    prefetch: usize,
    runs: usize,
    keys: &[String],
    conditions: &[String],
    command: &str,
) -> anyhow::Result<()> {
    let variants: Vec<Variant> = VARIANTS
        .into_iter()
        .filter(|v| keys.is_empty() || keys.iter().any(|k| k == v.key))
        .collect();
    anyhow::ensure!(
        !variants.is_empty(),
        "--exactly-once-variants: none of {keys:?} is one of plain, within, tx"
    );
    let mut all: Vec<Run> = Vec::new();
    for round in 0..runs {
        let mut order = variants.clone();
        let by = round % order.len();
        order.rotate_left(by);
        for v in order {
            eprintln!(
                "bench: exactly-once round {} of {runs}: {} ({n} jobs)",
                round + 1,
                v.class
            );
            let r = one(stack, v, n, prefetch, round).await?;
            eprintln!(
                "bench:   {:.0} jobs/s, handle→committed p50 {:.2} ms p99 {:.2} ms, job→job p50 {:.2} ms p99 {:.2} ms, CPU/job master {:.0} µs PHP {:.0} µs PostgreSQL {:.0} µs, xacts/job {:.2}, WAL syncs/job {:.2} ({:.0} µs), others' CPU {:.0}%, load {:.2}→{:.2}, valid: {}{}",
                r.jobs_per_s, r.handler.p50_ms, r.handler.p99_ms, r.cycle.p50_ms, r.cycle.p99_ms,
                r.master_cpu_us, r.php_cpu_us, r.postgres_cpu_us, r.commits_per_job, r.wal_syncs_per_job, r.wal_sync_us_per_job,
                r.others_cpu_pct, r.load_before, r.load_after, r.valid,
                if r.valid { String::new() } else { format!(" ({})", r.problems.join("; ")) }
            );
            all.push(r);
        }
    }
    let md = report(
        &variants,
        &all,
        n,
        prefetch,
        runs,
        conditions,
        command,
        stack.laravel,
    );
    write_variants_report(
        root,
        stack.laravel,
        "exactly_once",
        &md,
        serde_json::json!({
            "command": command,
            "conditions": conditions,
            "jobs": n,
            "workers": WORKERS,
            "prefetch": prefetch,
            "runs": all,
        }),
    )
}

/// CPU ticks of `pids` (utime + stime), each by pid.
pub(crate) fn ticks(pids: &[i32]) -> HashMap<i32, u64> {
    pids.iter()
        .filter_map(|p| crate::sampler::cpu_ticks(*p).map(|t| (*p, t)))
        .collect()
}

/// Kernel clock ticks per second.
pub(crate) fn clock_ticks() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64
}

/// Busy ticks of every core so far (/proc/stat: user, nice, system, irq, softirq, steal).
pub(crate) fn machine_busy_ticks() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let line = s.lines().next()?.to_string();
            let f: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse().ok())
                .collect();
            Some([0, 1, 2, 5, 6, 7].iter().filter_map(|i| f.get(*i)).sum())
        })
        .unwrap_or(0)
}

/// Seconds of CPU spent between `before` and `after` by the pids seen in both (a process that
/// started after `before` counts from 0).
pub(crate) fn spent(before: &HashMap<i32, u64>, after: &HashMap<i32, u64>) -> f64 {
    let tps = clock_ticks();
    after
        .iter()
        .map(|(p, t)| t.saturating_sub(before.get(p).copied().unwrap_or(0)) as f64 / tps)
        .sum()
}

/// The CPU of a run over its drain: ticks of the master, its PHP processes (zygote, workers),
/// PostgreSQL's processes, the machine's busy time and the harness's own, from [`CpuWindow::start`]
/// to [`CpuWindow::end`].
pub(crate) struct CpuWindow {
    master: i32,
    postmaster: i32,
    ticks: [HashMap<i32, u64>; 4],
    busy: u64,
    at: std::time::Instant,
}

/// Seconds of CPU over a [`CpuWindow`], and what else ran on the machine meanwhile.
pub(crate) struct CpuSpent {
    pub master_s: f64,
    pub php_s: f64,
    pub postgres_s: f64,
    /// The machine's busy CPU less this run's processes and the harness's own, % of every core
    /// over the window.
    pub others_cpu_pct: f64,
}

impl CpuWindow {
    /// The master's and PostgreSQL's (`postmaster`'s) processes and the machine, now.
    pub(crate) fn start(master: i32, postmaster: i32) -> CpuWindow {
        let ticks = Self::ticks(master, postmaster);
        CpuWindow {
            master,
            postmaster,
            ticks,
            busy: machine_busy_ticks(),
            at: std::time::Instant::now(),
        }
    }

    /// The master, its PHP processes, PostgreSQL's and the harness, by pid.
    fn ticks(master: i32, postmaster: i32) -> [HashMap<i32, u64>; 4] {
        let php: Vec<i32> = descendants(master)
            .into_iter()
            .filter(|p| crate::sampler::comm(*p).as_deref() != Some("postgres"))
            .collect();
        [
            ticks(&[master]),
            ticks(&php),
            ticks(&descendants(postmaster)),
            ticks(&[std::process::id() as i32]),
        ]
    }

    /// What each spent since [`CpuWindow::start`].
    pub(crate) fn end(&self) -> CpuSpent {
        let ticks = Self::ticks(self.master, self.postmaster);
        let busy = machine_busy_ticks();
        let wall = self.at.elapsed().as_secs_f64();
        let [master_s, php_s, postgres_s, me_s] =
            [0, 1, 2, 3].map(|i| spent(&self.ticks[i], &ticks[i]));
        let cores = std::thread::available_parallelism()
            .map(|c| c.get())
            .unwrap_or(1) as f64;
        let ours = master_s + php_s + postgres_s + me_s;
        CpuSpent {
            master_s,
            php_s,
            postgres_s,
            others_cpu_pct: ((busy.saturating_sub(self.busy)) as f64 / clock_ticks() - ours)
                .max(0.0)
                * 100.0
                / (wall * cores),
        }
    }
}

/// Every descendant of `pid`, without it.
pub(crate) fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for c in crate::sampler::children(p) {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

/// (transactions committed, WAL syncs, WAL bytes, ms spent in WAL syncs) so far.
async fn db_counters(stack: &Stack) -> anyhow::Result<(i64, i64, f64, f64)> {
    let commits = stack
        .scalar_i64("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        .await?;
    let row = stack
        .client
        .query_one(
            "SELECT wal_sync, wal_bytes::float8, wal_sync_time FROM pg_stat_wal",
            &[],
        )
        .await?;
    Ok((commits, row.get(0), row.get(1), row.get(2)))
}

/// One run: the backlog of `v`'s jobs queued, 4 workers started, the drain measured, checked.
async fn one(
    stack: &Stack,
    v: Variant,
    n: i64,
    prefetch: usize,
    round: usize,
) -> anyhow::Result<Run> {
    stack.reset().await?;
    stack
        .client
        .batch_execute("TRUNCATE public.bench_rows, drover.completions")
        .await?;
    // The backlog, as `bench:dispatch --bulk` queues shape 2's: one bulk push per 1,000 jobs.
    let code = format!(
        "$q = Illuminate\\Support\\Facades\\Queue::connection('drover'); \
         for ($from = 1; $from <= {n}; $from += 1000) {{ $jobs = []; \
           for ($seq = $from; $seq < min($from + 1000, {n} + 1); $seq++) {{ $jobs[] = new {}($seq); }} \
           $q->bulk($jobs); }} return 'queued';",
        v.class
    );
    stack.artisan(&["app:eval", &code])?;
    let queued = stack.scalar_i64("SELECT count(*) FROM drover.jobs").await?;
    anyhow::ensure!(queued == n, "{queued} jobs queued of {n}");
    // The same plan and visibility map for every run (a backlog just inserted, else analysed
    // by autovacuum at a moment of its own).
    stack
        .client
        .batch_execute("VACUUM ANALYZE drover.jobs")
        .await?;
    if stack.stat_statements {
        stack
            .client
            .batch_execute("SELECT pg_stat_statements_reset()")
            .await?;
    }
    let load_before = crate::sampler::load_average_1m();
    let mut running = Running::start(
        Engine::Drover,
        stack,
        WorkerSettings::new(WORKERS, prefetch, 0),
    )
    .await?;
    let master = running.master.as_ref().context("drover's master")?.id() as i32;
    let postmaster = stack.pg.pid().context("PostgreSQL's pid")? as i32;
    // The drain began as the workers said hello: CPU and the database's counters are taken
    // from here, per job completed from here (the jobs done before the harness saw the workers
    // ready are left out, with the boot of the master and its workers).
    let cpu = CpuWindow::start(master, postmaster);
    let counters0 = db_counters(stack).await?;
    let done0 = stack.completed()?;
    drain(stack, &mut running, n, Duration::from_secs(900)).await?;
    let cpu = cpu.end();
    let window = (n - done0).max(1) as f64;
    let load_after = crate::sampler::load_average_1m();
    let r = stack.runs()?;
    let mut problems = validate(stack, Engine::Drover, n, &r).await?;
    let claims = running.stop_counted(stack).await?;
    // The master and the workers exited: their statistics are flushed.
    tokio::time::sleep(Duration::from_millis(600)).await;
    // The database's counters to the master's exit: its last settles are in them.
    let counters1 = db_counters(stack).await?;
    let log = std::fs::read_to_string(stack.log_path("drover.log"))?;
    let completed_within = log
        .lines()
        .rev()
        .find(|l| l.contains("master stopped"))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("completed_within="))
                .and_then(|v| v.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
        })
        .unwrap_or(0);
    let rows = stack
        .scalar_i64("SELECT count(DISTINCT seq) FROM public.bench_rows")
        .await?;
    let all_rows = stack
        .scalar_i64("SELECT count(*) FROM public.bench_rows")
        .await?;
    if rows != n || all_rows != n {
        problems.push(format!(
            "{all_rows} rows written for {rows} distinct jobs of {n}"
        ));
    }
    let left = stack
        .scalar_i64("SELECT count(*) FROM drover.completions")
        .await?;
    if left != 0 {
        problems.push(format!(
            "{left} completion rows left after the master stopped"
        ));
    }
    let expected_within = if v.key == "within" { n as u64 } else { 0 };
    if completed_within != expected_within {
        problems.push(format!(
            "the master counted {completed_within} jobs completed within their transaction, not {expected_within}"
        ));
    }
    let (statements, exec_ms_per_job) = statements(stack, n).await?;
    let first = r.started.iter().cloned().fold(f64::MAX, f64::min);
    let last = r.finished.iter().cloned().fold(f64::MIN, f64::max);
    let (cycle, gap) = worker_times(&r);
    let per_job = |s: f64| s * 1e6 / window;
    Ok(Run {
        variant: v.key.to_string(),
        round,
        jobs: n,
        valid: problems.is_empty(),
        problems,
        jobs_per_s: r.seq.len() as f64 / (last - first),
        handler: percentiles(
            r.started
                .iter()
                .zip(&r.finished)
                .map(|(s, e)| e - s)
                .collect(),
        ),
        cycle: percentiles(cycle),
        gap: percentiles(gap),
        master_cpu_us: per_job(cpu.master_s),
        php_cpu_us: per_job(cpu.php_s),
        postgres_cpu_us: per_job(cpu.postgres_s),
        commits_per_job: (counters1.0 - counters0.0) as f64 / window,
        wal_syncs_per_job: (counters1.1 - counters0.1) as f64 / window,
        wal_bytes_per_job: (counters1.2 - counters0.2) / window,
        wal_sync_us_per_job: (counters1.3 - counters0.3) * 1000.0 / window,
        claims,
        completed_within,
        statements,
        exec_ms_per_job,
        load_before,
        load_after,
        others_cpu_pct: cpu.others_cpu_pct,
        done_before_window: done0,
    })
}

/// On each worker, in start order: one job's start → the next one's (cycle), and one job's end
/// → the next one's start (gap), seconds.
fn worker_times(r: &Runs) -> (Vec<f64>, Vec<f64>) {
    let mut by_pid: HashMap<i32, Vec<(f64, f64)>> = HashMap::new();
    for i in 0..r.seq.len() {
        by_pid
            .entry(r.pid[i])
            .or_default()
            .push((r.started[i], r.finished[i]));
    }
    let (mut cycle, mut gap) = (Vec::new(), Vec::new());
    for runs in by_pid.values_mut() {
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in runs.windows(2) {
            cycle.push(w[1].0 - w[0].0);
            gap.push((w[1].0 - w[0].1).max(0.0));
        }
    }
    (cycle, gap)
}

#[allow(clippy::too_many_arguments)]
fn report(
    variants: &[Variant],
    all: &[Run],
    n: i64,
    prefetch: usize,
    runs: usize,
    conditions: &[String],
    command: &str,
    laravel: u8,
) -> String {
    let mut md = variants_intro(
        "Exactly-once completion, with and without it (issue 59)",
        laravel,
        command,
        &format!(
            "{n} jobs that each write one row (`bench_rows`, on the application's connection) queued before {WORKERS} forked workers start (prefetch {prefetch}), drained by drover; {runs} round(s), each running every variant once, the order rotated between rounds. `VACUUM ANALYZE drover.jobs` after queueing, before each run. A job's record is appended once its row is committed. Medians over valid runs; the latencies are each run's percentile, then the median over runs.\n\n"
        ),
        conditions,
    );
    md += "\n| variant | valid runs | jobs/s (runs) | jobs/s | handle → row committed p50 / p99 ms | job → next job on a worker p50 / p99 ms | committed → next start p50 / p99 ms |\n|---|---|---|---|---|---|---|\n";
    let of = |key: &str| valid_runs(all, key);
    let med = |rs: &[&Run], g: &dyn Fn(&Run) -> f64| {
        median(rs.iter().map(|r| g(r)).collect::<Vec<f64>>())
    };
    for v in variants {
        let rs = of(v.key);
        md += &format!(
            "| {} | {} | {} / {} | {} / {} | {} / {} |\n",
            v.label,
            rate_cells(all, v.key),
            f(med(&rs, &|r| r.handler.p50_ms), 2),
            f(med(&rs, &|r| r.handler.p99_ms), 2),
            f(med(&rs, &|r| r.cycle.p50_ms), 2),
            f(med(&rs, &|r| r.cycle.p99_ms), 2),
            f(med(&rs, &|r| r.gap.p50_ms), 2),
            f(med(&rs, &|r| r.gap.p99_ms), 2),
        );
    }
    let base = of("plain");
    if !base.is_empty() {
        md += "\nAgainst WriteRowJob (medians):\n\n| variant | jobs/s | handle → committed p99 | job → next job p99 |\n|---|---|---|---|\n";
        let b_jobs = med(&base, &|r| r.jobs_per_s);
        let b_handler = med(&base, &|r| r.handler.p99_ms);
        let b_cycle = med(&base, &|r| r.cycle.p99_ms);
        for v in variants.iter().filter(|v| v.key != "plain") {
            let rs = of(v.key);
            if rs.is_empty() {
                continue;
            }
            md += &format!(
                "| {} | {}× ({:+.1}%) | {}× | {}× |\n",
                v.label,
                f(med(&rs, &|r| r.jobs_per_s) / b_jobs, 3),
                (med(&rs, &|r| r.jobs_per_s) / b_jobs - 1.0) * 100.0,
                f(med(&rs, &|r| r.handler.p99_ms) / b_handler, 2),
                f(med(&rs, &|r| r.cycle.p99_ms) / b_cycle, 2),
            );
        }
    }
    md += "\nWhere it goes (medians per job over the drain): CPU of the master, of its PHP processes (zygote, workers) and of PostgreSQL's processes (every backend, autovacuum and the WAL writer included); the execution time of every statement (pg_stat_statements, top level: a function's own statements inside its call); transactions committed (`pg_stat_database.xact_commit`, every session's, read-only ones included: outside a transaction PDO's prepare, execute and deallocate of a statement count one each), WAL syncs, their time and WAL bytes (`pg_stat_wal`, with `track_wal_io_timing`); the master's counts (its `master stopped` line):\n\n| variant | master CPU µs | PHP CPU µs | PostgreSQL CPU µs | statements' execution µs | transactions | WAL syncs | WAL sync µs | WAL bytes | claimed | acks ridden | completed within |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for v in variants {
        let rs = of(v.key);
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            v.key,
            f(med(&rs, &|r| r.master_cpu_us), 0),
            f(med(&rs, &|r| r.php_cpu_us), 0),
            f(med(&rs, &|r| r.postgres_cpu_us), 0),
            f(med(&rs, &|r| r.exec_ms_per_job * 1000.0), 0),
            f(med(&rs, &|r| r.commits_per_job), 2),
            f(med(&rs, &|r| r.wal_syncs_per_job), 2),
            f(med(&rs, &|r| r.wal_sync_us_per_job), 0),
            f(med(&rs, &|r| r.wal_bytes_per_job), 0),
            int(med(&rs, &|r| r
                .claims
                .as_ref()
                .map(|c| c.claimed as f64)
                .unwrap_or(f64::NAN))),
            int(med(&rs, &|r| r
                .claims
                .as_ref()
                .map(|c| c.acks_ridden as f64)
                .unwrap_or(f64::NAN))),
            int(med(&rs, &|r| r.completed_within as f64)),
        );
    }
    md += &statements_tables(
        all,
        variants.iter().map(|v| v.key),
        "\nThe statements that took the most of the database's time, and any other called at least once per 10 jobs (pg_stat_statements, top level, reset before each run: the master's start and the drain), in each variant's last valid run: calls and ms of execution per job:\n",
        "job",
    );
    md += &invalid_runs(all);
    md += &runs_in_order(all, "job", None);
    md
}
