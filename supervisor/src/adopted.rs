//! Processes the master adopted rather than started: workers a zygote forked. The zygote forks
//! twice and the middle process exits at once, so the worker is re-parented to the nearest
//! subreaper — the master ([`crate::subreaper`]) — which then waits for it like for any child.
//!
//! A forked worker's PID is not known when it is asked for. The kernel's peer credentials of the
//! worker's own connection (which presented the fork request's one-time token) say who it is; the
//! zygote's `forked` report is believed only for a process that is, by `/proc`, a fork of that
//! zygote made after the request ([`is_fork_of`]), and only serves to wait for (and kill) a worker
//! that dies or hangs before it connects ([`PidCell`]). From then on the master holds a pidfd for
//! it, so it waits for that process and signals that process, never a later one that got the PID.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

use crate::proc_stat::Stat;

/// Whether pidfds work here (Linux 5.4+ for waiting on one, not blocked by a seccomp profile):
/// fork mode needs them.
pub fn pidfds_work() -> Result<(), String> {
    pidfd_open(std::process::id()).map(drop).map_err(|e| {
        format!("pidfd_open is not available ({e}); forking workers needs Linux 5.4 or later")
    })
}

/// What is known of an adopted worker's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Known {
    /// Asked for; not yet reported.
    Unknown,
    /// Its PID.
    Pid(u32),
    /// There is no such process, and there will be none (the zygote could not fork it, or died
    /// before it did, or the master gave it up): why.
    NoProcess(String),
}

/// What became of a connection's claim to be the worker ([`PidCell::connected`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// It is the worker.
    Accepted,
    /// The master gave this worker up before it connected: the process must not run.
    GivenUp,
    /// The zygote reported another process for it.
    Contradicted(u32),
}

/// The PID of an adopted worker as it becomes known.
#[derive(Debug, Clone)]
pub(crate) struct PidCell(watch::Sender<Known>);

impl PidCell {
    pub fn new() -> (PidCell, watch::Receiver<Known>) {
        let (tx, rx) = watch::channel(Known::Unknown);
        (PidCell(tx), rx)
    }

    /// The zygote reported the PID (already checked with [`is_fork_of`]); a PID the worker's own
    /// connection gave first stands. False if it contradicts that one.
    pub fn reported(&self, pid: u32) -> bool {
        !matches!(self.claim(pid), Claim::Contradicted(_))
    }

    /// The worker's connection came from `peer` (the kernel's credentials).
    pub fn connected(&self, peer: u32) -> Claim {
        self.claim(peer)
    }

    /// Whichever of the two comes first sets the PID; the later one must agree with it.
    fn claim(&self, pid: u32) -> Claim {
        let mut claim = Claim::Accepted;
        self.0.send_if_modified(|known| match known {
            Known::Unknown => {
                *known = Known::Pid(pid);
                true
            }
            Known::Pid(p) => {
                if *p != pid {
                    claim = Claim::Contradicted(*p);
                }
                false
            }
            Known::NoProcess(_) => {
                claim = Claim::GivenUp;
                false
            }
        });
        claim
    }

    /// No process will come (or the master gives it up), unless a PID already did.
    pub fn none(&self, why: &str) {
        self.0.send_if_modified(|known| {
            if *known == Known::Unknown {
                *known = Known::NoProcess(why.to_string());
                true
            } else {
                false
            }
        });
    }

    /// Waits until it is known whether there is a process: its PID, or `None`.
    pub async fn known(&self) -> Option<u32> {
        let mut rx = self.0.subscribe();
        let known = rx.wait_for(|k| *k != Known::Unknown).await;
        match known.as_deref() {
            Ok(Known::Pid(pid)) => Some(*pid),
            _ => None,
        }
    }

    /// The PID, once known.
    pub fn get(&self) -> Option<u32> {
        match *self.0.borrow() {
            Known::Pid(pid) => Some(pid),
            _ => None,
        }
    }
}

pub(crate) fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a non-negative result is a descriptor this process now owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends `signal` through the pidfd: to that process, or to nobody if it is gone. False if it
/// is gone (or cannot be signalled).
pub(crate) fn pidfd_signal(pidfd: &OwnedFd, signal: i32) -> bool {
    // SAFETY: pidfd_send_signal(pidfd, sig, info = NULL, flags = 0).
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        ) == 0
    }
}

/// Whether `pid` can be what a zygote says it forked: a process other than the master and the
/// zygote, started no earlier than the request (`asked_at`, [`crate::proc_stat::boot_ticks_now`]), whose parent is
/// the master (re-parented) or a child of the zygote (its middle process, not yet gone). A report
/// that fails this is the zygote's fault and is never acted on.
pub(crate) fn is_fork_of(pid: u32, zygote: u32, asked_at: u64) -> bool {
    let master = std::process::id();
    if pid <= 1 || pid == master || pid == zygote {
        return false;
    }
    let Some(stat) = Stat::read(&pid.to_string()) else {
        return false;
    };
    // The start time counts whole ticks (10 ms): one tick of slack.
    if stat.start_ticks + 1 < asked_at {
        return false;
    }
    if stat.ppid == master
        || Stat::read(&stat.ppid.to_string()).is_some_and(|parent| parent.ppid == zygote)
    {
        return true;
    }
    // The zygote's intermediate process may have exited (and been reaped) between the two reads:
    // the worker is then the master's, re-parented to it. The same process (its start time), read
    // again.
    Stat::read(&pid.to_string())
        .is_some_and(|again| again.ppid == master && again.start_ticks == stat.start_ticks)
}

/// A worker nobody wants any more (given up before it connected, or reported twice): killed and
/// reaped in the background. Only for a PID the kernel or [`is_fork_of`] vouched for.
pub(crate) fn kill_unwanted(pid: u32) {
    match Adopted::new(pid) {
        Ok(process) => {
            crate::strays::waited_for(pid);
            process.kill();
            tokio::spawn(async move {
                let _ = process.wait().await;
                crate::strays::reaped(pid);
            });
        }
        Err(e) => tracing::debug!(pid, "cannot take hold of an unwanted worker: {e}"),
    }
}

/// An adopted process being waited for.
pub(crate) struct Adopted {
    pid: u32,
    /// Readable once the process has exited.
    pidfd: AsyncFd<OwnedFd>,
}

impl Adopted {
    /// Takes hold of `pid`: from now on the pidfd stands for that process, whoever gets the PID
    /// later.
    pub fn new(pid: u32) -> std::io::Result<Adopted> {
        // SAFETY: an OwnedFd's descriptor stays open and the same until the AsyncFd drops it.
        let pidfd = unsafe {
            AsyncFd::register_with_interest(pidfd_open(pid)?, tokio::io::Interest::READABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        Ok(Adopted { pid, pidfd })
    }

    /// SIGKILL to the process through its pidfd, then to its process group (a forked worker
    /// leads its own) — only if the process was still there, so the group's id is still its PID.
    pub fn kill(&self) {
        if pidfd_signal(self.pidfd.get_ref(), libc::SIGKILL) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(self.pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    pub fn terminate(&self) {
        pidfd_signal(self.pidfd.get_ref(), libc::SIGTERM);
    }

    /// Waits for the exit and reaps exactly this process (`waitid(P_PIDFD)`). `None` if its status
    /// cannot be had (someone else reaped it).
    pub async fn wait(&self) -> Option<ExitStatus> {
        let mut not_ours = Duration::from_millis(2);
        loop {
            let Ok(mut ready) = self.pidfd.readable().await else {
                return None;
            };
            match reap(self.pidfd.get_ref()) {
                Reaped::Status(status) => return Some(status),
                Reaped::Gone => return None,
                Reaped::Running => ready.clear_ready(),
                // Exited before the middle process did: not yet the master's child. It becomes
                // one within milliseconds, when the middle process exits. (Readiness is kept: the
                // pidfd stays readable and no new edge would come.)
                Reaped::NotOurs => {
                    drop(ready);
                    tokio::time::sleep(not_ours).await;
                    not_ours = (not_ours * 2).min(Duration::from_millis(200));
                }
            }
        }
    }
}

enum Reaped {
    Status(ExitStatus),
    Running,
    NotOurs,
    Gone,
}

fn reap(pidfd: &OwnedFd) -> Reaped {
    // SAFETY: a zeroed siginfo_t is valid for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on one pidfd, WNOHANG, with a pointer to a local siginfo_t.
    let r = unsafe {
        libc::waitid(
            libc::P_PIDFD,
            pidfd.as_raw_fd() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG,
        )
    };
    if r == 0 {
        // SAFETY: waitid filled `info` (si_pid 0: nothing to report yet).
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return Reaped::Running;
        }
        let raw = match info.si_code {
            libc::CLD_EXITED => (status & 0xff) << 8,
            libc::CLD_DUMPED => status | 0x80,
            _ => status,
        };
        return Reaped::Status(ExitStatus::from_raw(raw));
    }
    // ECHILD: not (yet) a child of ours, or reaped already. Signal 0 tells whether it is there.
    if pidfd_signal(pidfd, 0) {
        Reaped::NotOurs
    } else {
        Reaped::Gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_is_the_worker_and_a_contradicting_or_late_report_is_refused() {
        let (cell, _rx) = PidCell::new();
        assert_eq!(cell.connected(42), Claim::Accepted);
        assert!(cell.reported(42));
        assert!(
            !cell.reported(43),
            "a report that contradicts the connection"
        );
        assert_eq!(cell.get(), Some(42));

        let (cell, _rx) = PidCell::new();
        assert!(cell.reported(42));
        assert_eq!(cell.connected(43), Claim::Contradicted(42));

        let (cell, _rx) = PidCell::new();
        cell.none("given up");
        assert_eq!(cell.connected(42), Claim::GivenUp);
        assert_eq!(cell.get(), None);
    }

    #[test]
    fn only_a_fork_of_the_zygote_made_after_the_request_passes_for_one() {
        let asked = crate::proc_stat::boot_ticks_now();
        // This test process plays the master; a child of it started now passes, whatever zygote
        // is named (the parent is the master).
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(is_fork_of(pid, 999_999, asked));
        // Not the master itself, not init, not the zygote, nothing started before the request.
        assert!(!is_fork_of(std::process::id(), 999_999, asked));
        assert!(!is_fork_of(1, 999_999, asked));
        assert!(!is_fork_of(pid, pid, asked));
        assert!(!is_fork_of(pid, 999_999, asked + 1000));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn a_killed_process_is_reaped_through_its_pidfd_with_its_signal() {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let process = Adopted::new(child.id()).unwrap();
        process.kill();
        let status = tokio::time::timeout(Duration::from_secs(5), process.wait())
            .await
            .unwrap()
            .expect("reaped");
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // std's Child was not asked: the pidfd wait reaped it.
        std::mem::forget(child);
    }
}
