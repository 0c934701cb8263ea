//! Shape 5: what forking workers from a zygote buys (issue 12), for drover with workers forked
//! (`spawn: fork`) and started by exec, beside the `queue:work` peers where a figure applies:
//!
//! - whole-stack PSS (every process of the engine: the master, its lease guard, the zygote and
//!   the workers; for the peers every `queue:work` process) with 4 and with 32 workers, idle and
//!   after the seed workload (shape 1's jobs) ran through them;
//! - time from the master's spawn request (a fork request, or the exec) to the worker's hello,
//!   p50 and p99, over the respawns of a run with `max_jobs` = 1 (the master logs each);
//! - time to replace all 16 workers of a pool on a reload (`drover restart` until 16 workers of
//!   the new generation serve and the old ones are gone);
//! - where a forked worker's and the zygote's memory is, by kind of mapping, after the workload.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engines::{Engine, Running, WorkerSettings};
use crate::sampler::pss_kib;
use crate::sizes::Sizes;
use crate::stack::Stack;

/// One engine with N workers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryRow {
    pub engine: Engine,
    pub workers: usize,
    /// Whole-stack PSS once every worker is ready and has idled 3 s.
    pub idle_kib: u64,
    /// Whole-stack PSS after the seed workload, the workers still running.
    pub after_kib: u64,
    /// After the workload, by role (`master`, `lease guard`, `zygote`, `workers`).
    pub roles: Vec<(String, u64)>,
    /// The workload ran every job exactly once.
    pub valid: bool,
}

/// Spawn request to hello, over the respawns of one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadyRow {
    pub engine: Engine,
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReloadRow {
    pub engine: Engine,
    pub workers: usize,
    pub seconds: f64,
}

/// One kind of mapping of one process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MappingRow {
    /// `zygote` or `forked worker`.
    pub process: String,
    pub kind: String,
    pub rss_kib: u64,
    pub pss_kib: u64,
    /// Pages this process shares with another (Shared_Clean + Shared_Dirty).
    pub shared_kib: u64,
    /// Pages only this process maps (Private_Clean + Private_Dirty).
    pub private_kib: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ForkFigures {
    pub memory: Vec<MemoryRow>,
    pub ready: Vec<ReadyRow>,
    pub reload: Vec<ReloadRow>,
    pub mappings: Vec<MappingRow>,
}

/// Every figure of shape 5; `runs` repeats each measurement (medians are reported).
pub async fn run(stack: &Stack, sizes: &Sizes, runs: usize) -> anyhow::Result<ForkFigures> {
    let mut figures = ForkFigures::default();
    for run in 0..runs {
        for workers in [4, 32] {
            let mut order = Engine::on(stack.laravel);
            let by = run % order.len();
            order.rotate_left(by);
            for engine in order {
                eprintln!(
                    "bench: shape 5 run {} of {runs}: memory of {} with {workers} workers",
                    run + 1,
                    engine.name()
                );
                let keep_mappings =
                    engine == Engine::Drover && workers == 4 && figures.mappings.is_empty();
                match memory(stack, engine, workers, sizes, keep_mappings).await {
                    Ok((row, mappings)) => {
                        eprintln!(
                            "bench:   {:.1} MiB idle, {:.1} MiB after the workload (valid: {})",
                            row.idle_kib as f64 / 1024.0,
                            row.after_kib as f64 / 1024.0,
                            row.valid
                        );
                        figures.memory.push(row);
                        figures.mappings.extend(mappings);
                    }
                    Err(e) => eprintln!("bench:   failed: {e:#}"),
                }
            }
        }
        for engine in [Engine::Drover, Engine::DroverExec] {
            eprintln!(
                "bench: shape 5 run {} of {runs}: spawn to hello, {}",
                run + 1,
                engine.name()
            );
            match ready_times(stack, engine).await {
                Ok(row) => {
                    eprintln!(
                        "bench:   p50 {:.2} ms, p99 {:.2} ms over {} spawns",
                        row.p50_ms, row.p99_ms, row.samples
                    );
                    figures.ready.push(row);
                }
                Err(e) => eprintln!("bench:   failed: {e:#}"),
            }
            eprintln!(
                "bench: shape 5 run {} of {runs}: reload of 16 workers, {}",
                run + 1,
                engine.name()
            );
            match reload(stack, engine, 16).await {
                Ok(row) => {
                    eprintln!("bench:   {:.2} s", row.seconds);
                    figures.reload.push(row);
                }
                Err(e) => eprintln!("bench:   failed: {e:#}"),
            }
        }
    }
    Ok(figures)
}

/// The processes of a running engine by role, with their PSS.
fn roles(running: &Running) -> Vec<(String, u64)> {
    let (orchestrators, all) = running.pid_source()();
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut add = |role: &str, kib: u64| match out.iter_mut().find(|(r, _)| r == role) {
        Some((_, total)) => *total += kib,
        None => out.push((role.to_string(), kib)),
    };
    for pid in all {
        let kib = pss_kib(pid).unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        let role = if orchestrators.contains(&pid) {
            "master"
        } else if cmdline.contains("lease-guard") {
            "lease guard"
        } else if cmdline.contains("(drover zygote)") {
            "zygote"
        } else {
            "workers"
        };
        add(role, kib);
    }
    out
}

fn total(roles: &[(String, u64)]) -> u64 {
    roles.iter().map(|(_, k)| k).sum()
}

/// The median of three samples 500 ms apart (a worker between jobs, a page being written).
async fn settled_roles(running: &Running) -> Vec<(String, u64)> {
    let mut samples = Vec::new();
    for _ in 0..3 {
        samples.push(roles(running));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    samples.sort_by_key(|r| total(r));
    samples.swap_remove(1)
}

async fn memory(
    stack: &Stack,
    engine: Engine,
    workers: usize,
    sizes: &Sizes,
    keep_mappings: bool,
) -> anyhow::Result<(MemoryRow, Vec<MappingRow>)> {
    stack.reset().await?;
    let settings = WorkerSettings::new(workers, sizes.prefetch, 0);
    let mut running = Running::start(engine, stack, settings).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = total(&settled_roles(&running).await);
    let n = sizes.seed_jobs;
    let producer = crate::measure::dispatch(stack, engine, n, 10, &[])?;
    crate::measure::drain(stack, &mut running, n, Duration::from_secs(600)).await?;
    crate::measure::first_dispatch(producer)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = settled_roles(&running).await;
    let r = stack.runs()?;
    let valid = crate::measure::validate(stack, engine, n, &r)
        .await?
        .is_empty();
    let mappings = if keep_mappings {
        forked_mappings(&running)
    } else {
        Vec::new()
    };
    running.stop().await?;
    Ok((
        MemoryRow {
            engine,
            workers,
            idle_kib: idle,
            after_kib: total(&after),
            roles: after,
            valid,
        },
        mappings,
    ))
}

/// The zygote's and one forked worker's mappings, by kind.
fn forked_mappings(running: &Running) -> Vec<MappingRow> {
    let (orchestrators, all) = running.pid_source()();
    let cmdline = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).into_owned())
            .unwrap_or_default()
    };
    let zygote = all
        .iter()
        .copied()
        .find(|p| cmdline(*p).contains("(drover zygote)"));
    let worker = all.iter().copied().find(|p| {
        !orchestrators.contains(p) && Some(*p) != zygote && cmdline(*p).contains("drover:work")
    });
    let mut rows = Vec::new();
    for (name, pid) in [("zygote", zygote), ("forked worker", worker)] {
        if let Some(pid) = pid {
            rows.extend(mapping_kinds(name, pid));
        }
    }
    rows
}

/// What a mapping in /proc/<pid>/smaps holds.
fn kind_of(path: &str) -> &'static str {
    if path.starts_with("/dev/zero") || path.starts_with("/SYSV") {
        "OPcache shared memory"
    } else if path.contains("/bin/php") {
        "the PHP binary"
    } else if path.contains(".so") {
        "shared libraries and PHP extensions"
    } else if path == "[heap]" {
        "[heap] (brk)"
    } else if path.is_empty() {
        "anonymous (Zend memory manager chunks)"
    } else if path == "[stack]" {
        "[stack]"
    } else {
        "other files and kernel mappings"
    }
}

fn mapping_kinds(process: &str, pid: i32) -> Vec<MappingRow> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return Vec::new();
    };
    let mut rows: Vec<MappingRow> = Vec::new();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if first.contains('-') && !first.ends_with(':') {
            // "start-end perms offset dev inode [path]"
            let path = line
                .split_whitespace()
                .skip(5)
                .collect::<Vec<_>>()
                .join(" ");
            let kind = kind_of(&path);
            current = Some(match rows.iter().position(|r| r.kind == kind) {
                Some(i) => i,
                None => {
                    rows.push(MappingRow {
                        process: process.to_string(),
                        kind: kind.to_string(),
                        rss_kib: 0,
                        pss_kib: 0,
                        shared_kib: 0,
                        private_kib: 0,
                    });
                    rows.len() - 1
                }
            });
            continue;
        }
        let (Some(i), Some(kib)) = (current, fields.next().and_then(|v| v.parse::<u64>().ok()))
        else {
            continue;
        };
        let row = &mut rows[i];
        match first {
            "Rss:" => row.rss_kib += kib,
            "Pss:" => row.pss_kib += kib,
            "Shared_Clean:" | "Shared_Dirty:" => row.shared_kib += kib,
            "Private_Clean:" | "Private_Dirty:" => row.private_kib += kib,
            _ => {}
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.pss_kib));
    rows
}

/// Milliseconds from spawn request to hello, from the master's `worker ready ... ready_ms=X`
/// lines, over a run in which every worker is replaced after each job.
async fn ready_times(stack: &Stack, engine: Engine) -> anyhow::Result<ReadyRow> {
    stack.reset().await?;
    let mut settings = WorkerSettings::new(4, 1, 0);
    settings.max_jobs = 1;
    let mut running = Running::start(engine, stack, settings).await?;
    let n = 200;
    crate::measure::first_dispatch(crate::measure::dispatch(stack, engine, n, 0, &["--bulk"])?)?;
    crate::measure::drain(stack, &mut running, n, Duration::from_secs(600)).await?;
    running.stop().await?;
    let log = std::fs::read_to_string(stack.dir.path().join("drover.log"))?;
    let mut ms: Vec<f64> = log
        .lines()
        .filter(|l| l.contains("worker ready"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|f| f.strip_prefix("ready_ms="))
                .and_then(|v| v.parse().ok())
        })
        .collect();
    anyhow::ensure!(!ms.is_empty(), "the master logged no ready time");
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    Ok(ReadyRow {
        engine,
        samples: ms.len(),
        p50_ms: at(0.5),
        p99_ms: at(0.99),
    })
}

fn status(stack: &Stack) -> Option<serde_json::Value> {
    let out = std::process::Command::new(stack.drover())
        .args(["status", "--json", "--state-dir"])
        .arg(stack.state_dir())
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// `drover restart` with `workers` idle workers, until as many of the next generation serve and
/// no older one is left.
async fn reload(stack: &Stack, engine: Engine, workers: usize) -> anyhow::Result<ReloadRow> {
    stack.reset().await?;
    let running = Running::start(engine, stack, WorkerSettings::new(workers, 1, 0)).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let generation = status(stack)
        .and_then(|s| s["pools"][0]["generation"].as_u64())
        .unwrap_or(0);
    let started = Instant::now();
    let out = std::process::Command::new(stack.drover())
        .args(["restart", "--state-dir"])
        .arg(stack.state_dir())
        .output()?;
    anyhow::ensure!(out.status.success(), "drover restart failed");
    let deadline = started + Duration::from_secs(120);
    let seconds = loop {
        if let Some(s) = status(stack) {
            let list = s["pools"][0]["workers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let renewed = list.len() == workers
                && list.iter().all(|w| {
                    w["generation"].as_u64() > Some(generation)
                        && (w["state"] == "idle" || w["state"] == "busy")
                });
            if renewed {
                break started.elapsed().as_secs_f64();
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the reload did not finish in 120 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    running.stop().await?;
    Ok(ReloadRow {
        engine,
        workers,
        seconds,
    })
}
