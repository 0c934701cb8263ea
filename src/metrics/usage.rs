//! What one job cost its worker process, read by the master from `/proc`, never asked of PHP:
//! CPU time from `/proc/<pid>/schedstat` (nanoseconds on the CPU, the worker's main thread: PHP
//! runs jobs on one thread) and peak memory from `VmHWM` in `/proc/<pid>/status`, whose
//! high-water mark is reset to the current resident set at the job's start by writing `5` to
//! `/proc/<pid>/clear_refs` (Linux 4.0+; the master owns its workers or is root).
//!
//! The readings bracket the job from the master's side: at its `started` frame and at its
//! report. Whatever the worker does between writing the frame and the master reading it (well
//! under a millisecond on a host that keeps up) is counted with the job.

use std::time::Duration;

use procfs::process::{ClearRefs, Process};

/// A worker's counters when a job started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageMark {
    /// Nanoseconds the worker had spent on a CPU.
    cpu_ns: u64,
    /// The peak-RSS reset succeeded, so `VmHWM` at the end is this job's peak.
    peak_reset: bool,
}

/// What a job used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobUsage {
    /// CPU time of the worker while it ran the job.
    pub cpu: Duration,
    /// The worker's peak resident set while it ran the job, KiB; `None` when the peak could not
    /// be reset at the start (the master may not write the worker's `clear_refs`).
    pub peak_kib: Option<u64>,
}

/// Reads the worker's CPU counter and resets its memory high-water mark. `None` when the
/// process is gone or `/proc` cannot be read.
pub fn mark(pid: u32) -> Option<UsageMark> {
    let process = Process::new(i32::try_from(pid).ok()?).ok()?;
    let cpu_ns = process.schedstat().ok()?.sum_exec_runtime;
    let peak_reset = process.clear_refs(ClearRefs::PeakRSS).is_ok();
    Some(UsageMark { cpu_ns, peak_reset })
}

/// What the worker used since `start`. `None` when the process is gone.
pub fn measure(pid: u32, start: UsageMark) -> Option<JobUsage> {
    let process = Process::new(i32::try_from(pid).ok()?).ok()?;
    let cpu_ns = process.schedstat().ok()?.sum_exec_runtime;
    let peak_kib = if start.peak_reset {
        process.status().ok().and_then(|s| s.vmhwm)
    } else {
        None
    };
    Some(JobUsage {
        cpu: Duration::from_nanos(cpu_ns.saturating_sub(start.cpu_ns)),
        peak_kib,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// A child that burns CPU and grows its heap when told to, through its stdin.
    fn python_worker() -> std::process::Child {
        Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import sys, time\n\
                 for line in sys.stdin:\n\
                 \x20   if line.startswith('burn'):\n\
                 \x20       end = time.process_time() + 0.2\n\
                 \x20       while time.process_time() < end: pass\n\
                 \x20   elif line.startswith('grow'):\n\
                 \x20       b = bytearray(64 * 1024 * 1024)\n\
                 \x20       for i in range(0, len(b), 4096): b[i] = 1\n\
                 \x20       del b\n\
                 \x20   print('ok', flush=True)\n",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn ask(child: &mut std::process::Child, what: &str) {
        use std::io::BufRead;
        writeln!(child.stdin.as_mut().unwrap(), "{what}").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ok");
    }

    #[test]
    fn a_job_that_burns_200ms_of_cpu_shows_about_that_and_a_64mb_one_shows_its_peak() {
        let mut child = python_worker();
        let pid = child.id();
        ask(&mut child, "noop");

        let start = mark(pid).expect("a mark");
        ask(&mut child, "burn");
        let burned = measure(pid, start).expect("a reading");
        assert!(
            burned.cpu >= Duration::from_millis(190) && burned.cpu < Duration::from_millis(400),
            "{burned:?}"
        );

        let start = mark(pid).expect("a mark");
        ask(&mut child, "grow");
        let grown = measure(pid, start).expect("a reading");
        let peak = grown.peak_kib.expect("the peak was reset");
        assert!(peak > 64 * 1024, "peak {peak} KiB");

        // The reset works: a job after the big one that allocates nothing peaks far lower.
        let start = mark(pid).expect("a mark");
        ask(&mut child, "noop");
        let small = measure(pid, start).expect("a reading");
        assert!(
            small.peak_kib.expect("reset") < 64 * 1024,
            "{small:?} after {grown:?}"
        );
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(measure(pid, start), None, "a reaped process has no reading");
    }
}
