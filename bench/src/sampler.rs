//! Memory and CPU of an engine's processes, from procfs, every 500 ms: PSS from
//! `/proc/<pid>/smaps_rollup`, CPU time from `/proc/<pid>/stat`; and the machine's load average.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Kernel clock ticks per second for /proc/<pid>/stat times.
fn ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64
}

pub fn pss_kib(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    text.lines()
        .find(|l| l.starts_with("Pss:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// utime + stime in ticks.
pub(crate) fn cpu_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(") ")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// The machine's 1-minute load average (`/proc/loadavg`); NaN when it cannot be read.
pub fn load_average_1m() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

pub fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Direct children of `pid`.
pub fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|s| s.parse::<i32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// One sample: seconds since start, orchestrator PSS, whole-stack PSS (KiB).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    pub orchestrator_kib: u64,
    pub stack_kib: u64,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Usage {
    pub samples: Vec<Sample>,
    pub peak_orchestrator_kib: u64,
    pub peak_stack_kib: u64,
    /// CPU seconds of the orchestrator while sampled.
    pub orchestrator_cpu_s: f64,
    /// CPU seconds of every engine process while sampled.
    pub stack_cpu_s: f64,
}

/// Samples until stopped. `pids` is asked each time, since workers come and go.
pub struct Sampler {
    usage: Arc<Mutex<Usage>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    pub fn start(pids: impl Fn() -> (Vec<i32>, Vec<i32>) + Send + 'static) -> Sampler {
        let usage = Arc::new(Mutex::new(Usage::default()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (u, s) = (usage.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let start = Instant::now();
            // CPU ticks per pid: first and last seen, so only time spent while sampling counts.
            let mut first: HashMap<i32, u64> = HashMap::new();
            let mut last: HashMap<i32, u64> = HashMap::new();
            let mut orchestrators: Vec<i32> = Vec::new();
            loop {
                let (orch, all) = pids();
                let mut sample = Sample {
                    t: start.elapsed().as_secs_f64(),
                    orchestrator_kib: 0,
                    stack_kib: 0,
                };
                for p in &all {
                    let pss = pss_kib(*p).unwrap_or(0);
                    sample.stack_kib += pss;
                    if orch.contains(p) {
                        sample.orchestrator_kib += pss;
                        if !orchestrators.contains(p) {
                            orchestrators.push(*p);
                        }
                    }
                    if let Some(t) = cpu_ticks(*p) {
                        first.entry(*p).or_insert(t);
                        last.insert(*p, t);
                    }
                }
                {
                    let mut usage = u.lock().unwrap();
                    usage.peak_orchestrator_kib =
                        usage.peak_orchestrator_kib.max(sample.orchestrator_kib);
                    usage.peak_stack_kib = usage.peak_stack_kib.max(sample.stack_kib);
                    usage.samples.push(sample);
                    let tps = ticks_per_second();
                    let spent = |p: &i32| (last[p] - first[p]) as f64 / tps;
                    usage.stack_cpu_s = last.keys().map(spent).sum();
                    usage.orchestrator_cpu_s = orchestrators
                        .iter()
                        .filter(|p| last.contains_key(p))
                        .map(spent)
                        .sum();
                }
                if s.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Sampler { usage, stop, task }
    }

    pub async fn finish(self) -> Usage {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.task.await;
        let usage = self.usage.lock().unwrap().clone();
        usage
    }
}
