//! What one job cost its worker process, read by the master from `/proc`, never asked of PHP:
//! CPU time from `/proc/<pid>/schedstat` (nanoseconds on the CPU, the worker's main thread: PHP
//! runs jobs on one thread) and peak memory from `VmHWM` in `/proc/<pid>/status`, whose
//! high-water mark is reset to the current resident set at the job's start by writing `5` to
//! `/proc/<pid>/clear_refs` (Linux 4.0+; the master owns its workers or is root).
//!
//! A [`Probe`] keeps those three files open for the worker's life and re-reads them in place
//! (`pread` at offset 0 regenerates a `/proc` file), parsing only the two numbers it needs: 8 µs
//! per job on this machine, against 54 µs through the `procfs` crate (a directory open per read
//! and a parse of every field of `status`), which halved the master's throughput on no-op jobs
//! (docs/metrics.md, "Cost").
//!
//! The readings bracket the job from the master's side: at its `started` frame and at its
//! report. Whatever the worker does between writing the frame and the master reading it (well
//! under a millisecond on a host that keeps up) is counted with the job.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Duration;

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

/// One worker's `/proc` files, open while it lives (three descriptors; the units set
/// `LimitNOFILE=65536`). Drop it when the worker is reaped: its PID may then be reused.
#[derive(Debug)]
pub struct Probe {
    schedstat: File,
    status: File,
    /// `None` when the master may not write it: no peak is recorded then.
    clear_refs: Option<File>,
}

/// Room for `/proc/<pid>/status` (about 1.5 KB).
const STATUS_BUF: usize = 4096;

impl Probe {
    /// Opens the worker's files. `None` when the process is gone or `/proc` cannot be read
    /// (the job is then counted without CPU and memory).
    pub fn open(pid: u32) -> Option<Probe> {
        let dir = format!("/proc/{pid}");
        Some(Probe {
            schedstat: File::open(format!("{dir}/schedstat")).ok()?,
            status: File::open(format!("{dir}/status")).ok()?,
            clear_refs: std::fs::OpenOptions::new()
                .write(true)
                .open(format!("{dir}/clear_refs"))
                .ok(),
        })
    }

    /// Reads the CPU counter and resets the memory high-water mark.
    pub fn mark(&self) -> Option<UsageMark> {
        let cpu_ns = self.cpu_ns()?;
        let peak_reset = self
            .clear_refs
            .as_ref()
            .is_some_and(|f| f.write_at(b"5", 0).is_ok());
        Some(UsageMark { cpu_ns, peak_reset })
    }

    /// What the worker used since `start`. `None` when the process is gone.
    pub fn measure(&self, start: UsageMark) -> Option<JobUsage> {
        let cpu_ns = self.cpu_ns()?;
        let peak_kib = if start.peak_reset {
            self.peak_kib()
        } else {
            None
        };
        Some(JobUsage {
            cpu: Duration::from_nanos(cpu_ns.saturating_sub(start.cpu_ns)),
            peak_kib,
        })
    }

    /// The first field of `schedstat`: nanoseconds on a CPU.
    fn cpu_ns(&self) -> Option<u64> {
        let mut buf = [0u8; 128];
        let n = self.schedstat.read_at(&mut buf, 0).ok()?;
        first_number(&buf[..n])
    }

    /// `VmHWM` of `status`, KiB.
    fn peak_kib(&self) -> Option<u64> {
        let mut buf = [0u8; STATUS_BUF];
        let n = self.status.read_at(&mut buf, 0).ok()?;
        buf[..n]
            .split(|b| *b == b'\n')
            .find_map(|line| line.strip_prefix(b"VmHWM:"))
            .and_then(first_number)
    }
}

/// The first run of ASCII digits in `text`, as a number (`None` if none, or if it overflows).
fn first_number(text: &[u8]) -> Option<u64> {
    let start = text.iter().position(u8::is_ascii_digit)?;
    let digits = &text[start..];
    let end = digits
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
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

        let probe = Probe::open(pid).expect("the worker's /proc files");
        let start = probe.mark().expect("a mark");
        ask(&mut child, "burn");
        let burned = probe.measure(start).expect("a reading");
        assert!(
            burned.cpu >= Duration::from_millis(190) && burned.cpu < Duration::from_millis(400),
            "{burned:?}"
        );

        let start = probe.mark().expect("a mark");
        ask(&mut child, "grow");
        let grown = probe.measure(start).expect("a reading");
        let peak = grown.peak_kib.expect("the peak was reset");
        assert!(peak > 64 * 1024, "peak {peak} KiB");

        // The reset works: a job after the big one that allocates nothing peaks far lower.
        let start = probe.mark().expect("a mark");
        ask(&mut child, "noop");
        let small = probe.measure(start).expect("a reading");
        assert!(
            small.peak_kib.expect("reset") < 64 * 1024,
            "{small:?} after {grown:?}"
        );
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            probe.measure(start),
            None,
            "a reaped process has no reading"
        );
        assert!(Probe::open(pid).is_none());
    }

    #[test]
    fn numbers_are_read_from_proc_text_and_garbage_is_none() {
        assert_eq!(first_number(b"12345 678 9\n"), Some(12345));
        assert_eq!(first_number(b"   30240 kB"), Some(30240));
        assert_eq!(first_number(b"none"), None);
        assert_eq!(first_number(b"99999999999999999999999"), None);
    }
}
