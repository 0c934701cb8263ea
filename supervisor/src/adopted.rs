//! Processes the master adopted rather than started: workers a zygote forked. The zygote forks
//! twice and the middle process exits at once, so the worker is re-parented to the nearest
//! subreaper — the master ([`become_subreaper`]) — which then waits for it like for any child.
//!
//! A forked worker's PID is not known when it is asked for: it comes from the zygote's `forked`
//! frame or from the kernel's peer credentials of the worker's own connection, whichever arrives
//! first ([`PidCell`]). From then on the master holds a pidfd for it, so it waits for that process
//! and signals that process, never a later one that got the same PID.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

/// Makes this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`): a
/// worker forked by a zygote becomes the master's child when the zygote's middle process exits.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with an integer option and argument.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether pidfds work here (Linux 5.3+, not blocked by a seccomp profile): fork mode needs them.
pub fn pidfds_work() -> Result<(), String> {
    pidfd_open(std::process::id()).map(drop).map_err(|e| {
        format!("pidfd_open is not available ({e}); forking workers needs Linux 5.3 or later")
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
    /// before it did): why.
    NoProcess(String),
}

/// The PID of an adopted worker as it becomes known; the first report wins.
#[derive(Debug, Clone)]
pub(crate) struct PidCell(watch::Sender<Known>);

impl PidCell {
    pub fn new() -> (PidCell, watch::Receiver<Known>) {
        let (tx, rx) = watch::channel(Known::Unknown);
        (PidCell(tx), rx)
    }

    /// Reports the PID; false if another one was reported before (the first stands).
    pub fn set(&self, pid: u32) -> bool {
        let mut agreed = true;
        self.0.send_if_modified(|known| match known {
            Known::Unknown => {
                *known = Known::Pid(pid);
                true
            }
            Known::Pid(p) => {
                agreed = *p == pid;
                false
            }
            Known::NoProcess(_) => false,
        });
        agreed
    }

    /// Reports that no process will come, unless a PID already did.
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

/// Sends `signal` through the pidfd: to that process, or to nobody if it is gone.
pub(crate) fn pidfd_signal(pidfd: &OwnedFd, signal: i32) {
    // SAFETY: pidfd_send_signal(pidfd, sig, info = NULL, flags = 0).
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
}

/// An adopted process being waited for.
pub(crate) struct Adopted {
    pid: u32,
    /// Readable once the process has exited.
    pidfd: AsyncFd<OwnedFd>,
}

impl Adopted {
    /// Takes hold of `pid`. It cannot have been reaped and reused yet: only its parent can reap
    /// it, and that is the zygote's middle process (which never does) or the master.
    pub fn new(pid: u32) -> std::io::Result<Adopted> {
        // SAFETY: an OwnedFd's descriptor stays open and the same until the AsyncFd drops it.
        let pidfd = unsafe {
            AsyncFd::register_with_interest(pidfd_open(pid)?, tokio::io::Interest::READABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        Ok(Adopted { pid, pidfd })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// SIGKILL to its process group (a forked worker leads its own), then to the process through
    /// its pidfd. The group is signalled only while the process is unreaped, so its PID — the
    /// group's id — cannot belong to anyone else.
    pub fn kill(&self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        pidfd_signal(self.pidfd.get_ref(), libc::SIGKILL);
    }

    pub fn terminate(&self) {
        pidfd_signal(self.pidfd.get_ref(), libc::SIGTERM);
    }

    /// Waits for the exit and reaps it. `None` if its status cannot be had (it was reaped by
    /// someone else).
    pub async fn wait(&self) -> Option<ExitStatus> {
        loop {
            let Ok(mut ready) = self.pidfd.readable().await else {
                return None;
            };
            match reap(self.pid) {
                Reaped::Status(status) => return Some(status),
                Reaped::Gone => return None,
                Reaped::Running => ready.clear_ready(),
                // Exited before the middle process did: not yet the master's child. It becomes
                // one within milliseconds, when the middle process exits. (Readiness is kept: the
                // pidfd stays readable and no new edge would come.)
                Reaped::NotOurs => {
                    drop(ready);
                    tokio::time::sleep(Duration::from_millis(2)).await;
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

fn reap(pid: u32) -> Reaped {
    let mut status = 0;
    // SAFETY: waitpid on one PID with a pointer to a local int.
    let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    match r {
        0 => Reaped::Running,
        r if r == pid as libc::pid_t => Reaped::Status(ExitStatus::from_raw(status)),
        _ => {
            // ECHILD: not (yet) a child of ours. Is it still there at all?
            // SAFETY: kill with signal 0 only checks for existence.
            if unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
            {
                Reaped::NotOurs
            } else {
                Reaped::Gone
            }
        }
    }
}
