//! The schedule without cron (issue 39, docs/schedule.md) beside `schedule:work`, into
//! `bench/results/schedule.md` (`--schedule`; RESULTS.md links it).
//!
//! The fixture's schedule `bench` (App\Console\TestSchedule): a closure every second, one every
//! minute, each appending the time `handle()` began to the app's `schedule-runs.log`, and 48
//! closures due once a year — 50 tasks. Three variants in turn, each for a whole number of
//! minutes from a minute's start, on an otherwise idle stack:
//! - **drover**: `php artisan drover` with the schedule (its pools idle: no job is queued);
//! - **drover without a schedule**: the same master with no schedule, the yardstick of what the
//!   schedule adds to the master;
//! - **schedule:work**: `php artisan schedule:work` with the same schedule, as Laravel runs it
//!   without cron.
//!
//! Lateness: when a task's closure began, less its due time (the second, or the minute's
//! start). CPU: the orchestrator's utime + stime and its reaped children's (the master and its
//! scheduled runs; `schedule:work` and its `schedule:run` processes), over the window, per
//! minute. Memory: the orchestrator's PSS, the highest sample.

use std::time::{Duration, Instant};

use anyhow::Context;

use crate::measure::percentiles;
use crate::report::Conditions;
use crate::sampler::pss_kib;
use crate::stack::Stack;

/// The variants, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Drover,
    DroverWithout,
    ScheduleWork,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Drover => "drover",
            Variant::DroverWithout => "drover without a schedule",
            Variant::ScheduleWork => "schedule:work",
        }
    }
}

/// One variant's figures.
struct Figures {
    variant: Variant,
    window_s: u64,
    /// Lateness of the every-second task's runs in the window, seconds.
    tick_late: Vec<f64>,
    /// Lateness of the every-minute task's runs in the window, seconds.
    minute_late: Vec<f64>,
    cpu_s_per_min: f64,
    peak_pss_kib: u64,
}

/// utime, stime, cutime and cstime of `pid`, in seconds.
fn cpu_with_children(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(") ")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = (11..=14)
        .map(|i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum::<Option<u64>>()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) } as f64;
    Some(ticks as f64 / hz)
}

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

async fn measure(stack: &Stack, variant: Variant, window_s: u64) -> anyhow::Result<Figures> {
    let log = stack.dir.path().join("storage/schedule-runs.log");
    let _ = std::fs::remove_file(&log);
    let with: Vec<(&str, String)> = match variant {
        Variant::DroverWithout => Vec::new(),
        _ => vec![("DROVER_TEST_SCHEDULE", "bench".to_string())],
    };
    let args: &[&str] = match variant {
        Variant::ScheduleWork => &["schedule:work"],
        _ => &["drover"],
    };
    let log_name = format!("schedule-{}.log", variant.name().replace([' ', ':'], "-"));
    let mut child = stack.spawn_logged(&with, args, &log_name)?;
    let pid = child.id() as i32;
    // Warm: 15 s, then the window from the next minute's start.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let start = (now_s() / 60.0).ceil() * 60.0;
    tokio::time::sleep(Duration::from_secs_f64((start - now_s()).max(0.0))).await;
    let cpu0 = cpu_with_children(pid).context("the orchestrator's CPU at the window's start")?;
    let end = start + window_s as f64;
    let mut peak = 0;
    let until = Instant::now() + Duration::from_secs_f64((end - now_s()).max(0.0));
    while Instant::now() < until {
        peak = peak.max(pss_kib(pid).unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let cpu1 = cpu_with_children(pid).context("the orchestrator's CPU at the window's end")?;
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = tokio::task::spawn_blocking(move || child.wait()).await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let (mut tick_late, mut minute_late) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let mut parts = line.split(' ');
        let (Some(name), Some(at)) = (
            parts.next(),
            parts.next().and_then(|t| t.parse::<f64>().ok()),
        ) else {
            continue;
        };
        if at < start || at >= end {
            continue;
        }
        match name {
            "tick" => tick_late.push(at - at.floor()),
            "minute" => minute_late.push(at - (at / 60.0).floor() * 60.0),
            _ => {}
        }
    }
    Ok(Figures {
        variant,
        window_s,
        tick_late,
        minute_late,
        cpu_s_per_min: (cpu1 - cpu0) / (window_s as f64 / 60.0),
        peak_pss_kib: peak,
    })
}

pub async fn run(
    root: &std::path::Path,
    stack: &Stack,
    window_s: u64,
    conditions: &Conditions,
    command: &str,
) -> anyhow::Result<()> {
    let mut all = Vec::new();
    for variant in [
        Variant::Drover,
        Variant::DroverWithout,
        Variant::ScheduleWork,
    ] {
        eprintln!("bench: schedule, {} for {window_s} s", variant.name());
        let f = measure(stack, variant, window_s).await?;
        eprintln!(
            "bench:   {} every-second runs, {} every-minute runs, CPU {:.2} s/min, PSS {:.2} MiB",
            f.tick_late.len(),
            f.minute_late.len(),
            f.cpu_s_per_min,
            f.peak_pss_kib as f64 / 1024.0
        );
        all.push(f);
    }
    let md = report(&all, conditions, command);
    let path = root.join("bench/results/schedule.md");
    std::fs::write(&path, &md).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("bench: wrote {}", path.display());
    print!("{md}");
    Ok(())
}

fn report(all: &[Figures], conditions: &Conditions, command: &str) -> String {
    let mut md = String::from("# The schedule without cron (issue 39)\n\n");
    md += &format!(
        "`{command}` (bench/src/schedule.rs), one run of each variant, on this machine:\n\n"
    );
    // The commit, the machine, PostgreSQL and PHP (the other lines are the shapes').
    for line in conditions.lines.iter().take(4) {
        md += &format!("- {line}\n");
    }
    md += "\nThe fixture's schedule `bench` (`tests/laravel-app/app/Console/TestSchedule.php`): a closure every second (`everySecond()`), one every minute, each appending the time its `handle()` began, and 48 closures due once a year: 50 tasks. Each variant alone for its window, from a minute's start, after 15 s of warm-up; no job queued. Lateness: the closure's start less its due time (the second; the minute's start). CPU: the orchestrator's user + system time and its reaped children's (drover's master and its scheduled runs; `schedule:work` and the `schedule:run` it starts each minute), per minute. Memory: the orchestrator's PSS (`smaps_rollup`), the highest sample.\n\n";
    md += "| variant | window s | every-second runs | late p50 ms | late p99 ms | late max ms | every-minute runs | late p50 ms | late max ms | CPU s per minute | orchestrator PSS MiB |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
    for f in all {
        let t = percentiles(f.tick_late.clone());
        let m = percentiles(f.minute_late.clone());
        let max = |v: &[f64]| v.iter().cloned().fold(f64::NAN, f64::max) * 1000.0;
        let cell = |x: f64| {
            if x.is_finite() {
                format!("{x:.1}")
            } else {
                "–".into()
            }
        };
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} |\n",
            f.variant.name(),
            f.window_s,
            f.tick_late.len(),
            cell(t.p50_ms),
            cell(t.p99_ms),
            cell(max(&f.tick_late)),
            f.minute_late.len(),
            cell(m.p50_ms),
            cell(max(&f.minute_late)),
            f.cpu_s_per_min,
            f.peak_pss_kib as f64 / 1024.0,
        );
    }
    let find = |v: Variant| all.iter().find(|f| f.variant == v);
    md += "\n## Targets\n\n";
    if let Some(d) = find(Variant::Drover) {
        let p99 = percentiles(d.tick_late.clone()).p99_ms;
        md += &format!(
            "- A due task starts within 100 ms of its due second (p99, idle host): {:.1} ms: **{}**\n",
            p99,
            if p99 <= 100.0 { "met" } else { "not met" }
        );
        if let Some(w) = find(Variant::DroverWithout) {
            let grew = (d.peak_pss_kib as f64 - w.peak_pss_kib as f64) / 1024.0;
            md += &format!(
                "- The master's memory grows by less than 0.3 MiB with a schedule of 50 tasks: {:.2} MiB ({:.2} against {:.2} without): **{}**\n",
                grew,
                d.peak_pss_kib as f64 / 1024.0,
                w.peak_pss_kib as f64 / 1024.0,
                if grew < 0.3 { "met" } else { "not met" }
            );
        }
        if let Some(s) = find(Variant::ScheduleWork) {
            let sp99 = percentiles(s.tick_late.clone()).p99_ms;
            md += &format!(
                "- Against `schedule:work`: lateness p99 {:.1} ms against {:.1} ms; CPU {:.2} s a minute against {:.2} s (drover's master without a schedule: {:.2} s)\n",
                p99,
                sp99,
                d.cpu_s_per_min,
                s.cpu_s_per_min,
                find(Variant::DroverWithout).map(|w| w.cpu_s_per_min).unwrap_or(f64::NAN)
            );
        }
    }
    md
}
