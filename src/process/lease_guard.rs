//! The lease guard: a small process beside the master (`drover lease-guard`, started by the
//! master with a pipe on its stdin) that kills any worker still holding jobs past its lease
//! deadline. It exists for the case the master's own lease check cannot cover: a master that
//! does not run (frozen by SIGSTOP, swapped out, a stalled loop) while another master takes its
//! jobs back once their leases end. The guard is a separate process, so it keeps time when the
//! master does not; it needs nothing from the worker, so a job blocked in a C call or one that
//! plays with signals cannot escape it (docs/leases.md, "Workers are stopped at their deadline").
//!
//! - [`GuardClient`]: the master's end. It tells the guard, per worker PID, the deadline by which
//!   that worker must be gone unless told otherwise (a point on `CLOCK_MONOTONIC`, in ms), or
//!   that it holds nothing (`0`). One line per change: `<pid> <deadline_ms>`.
//! - [`run`]: the guard's loop (on stdin: [`run_on_stdin`], `drover lease-guard`). It waits for
//!   the earliest deadline or the next line; at a deadline it SIGKILLs the worker (through a
//!   pidfd taken when the worker was first named, so a recycled PID is never hit) and its
//!   process group, and says so on stderr (the master's log). It exits when the master closes
//!   the pipe (the master is gone; its workers die by their parent-death signal).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// `CLOCK_MONOTONIC` now: the clock of every deadline the master, the guard and the workers
/// (PHP's `hrtime()`) exchange. `std::time::Instant` is that clock on Linux but does not expose
/// its value.
pub fn monotonic_now() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default()
}

/// [`monotonic_now`] in whole milliseconds.
fn now_ms() -> u64 {
    u64::try_from(monotonic_now().as_millis()).unwrap_or(u64::MAX)
}

/// A worker the guard watches.
struct Watched {
    /// Taken when the PID was first named: signals go to that process, never to a later one
    /// that got the same PID.
    pidfd: OwnedFd,
    /// When it must be gone (`CLOCK_MONOTONIC` ms).
    deadline_ms: u64,
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let error = std::io::Error::last_os_error();
        // ESRCH: the worker is already gone. Anything else (ENOSYS before Linux 5.3, EPERM under
        // a seccomp profile that blocks it) means the guard protects nothing: say so, once.
        static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if error.raw_os_error() != Some(libc::ESRCH)
            && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            eprintln!(
                "drover lease guard: cannot watch worker pid {pid} (pidfd_open: {error}); workers are stopped only by the master's own lease check (drover needs Linux 5.3+ and pidfd_open allowed)"
            );
        }
        return None;
    }
    // SAFETY: a non-negative result is a descriptor this process now owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// SIGKILL through the pidfd; true when the process was still there to receive it.
fn pidfd_kill(pidfd: &OwnedFd) -> bool {
    // SAFETY: pidfd_send_signal(pidfd, sig, info = NULL, flags = 0).
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0
}

/// `drover lease-guard`: the guard's loop over this process's stdin (the master's pipe).
pub fn run_on_stdin() -> std::io::Result<()> {
    // Unbuffered: the guard polls the descriptor itself.
    let stdin = std::io::stdin().as_fd().try_clone_to_owned()?;
    // Only its pipe ends it (the master is gone): terminal and group signals do not.
    for sig in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
        nix::sys::signal::Signal::SIGTSTP,
    ] {
        // SAFETY: SIG_IGN installs no handler code.
        let _ = unsafe { nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigIgn) };
    }
    run(std::fs::File::from(stdin))
}

/// The guard's loop over `input` (the master's pipe): returns when it closes.
pub fn run(mut input: impl Read + AsFd) -> std::io::Result<()> {
    let mut watched: HashMap<i32, Watched> = HashMap::new();
    let mut pending = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let now = now_ms();
        let due: Vec<i32> = watched
            .iter()
            .filter(|(_, w)| w.deadline_ms <= now)
            .map(|(pid, _)| *pid)
            .collect();
        for pid in due {
            let w = watched.remove(&pid).expect("listed above");
            if pidfd_kill(&w.pidfd) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                eprintln!(
                    "drover lease guard: worker pid {pid} still held jobs at its lease deadline and the master had not renewed them (frozen, stopped or cut off from the database); killed it so no job runs in two places"
                );
            }
        }
        let wait = watched
            .values()
            .map(|w| w.deadline_ms.saturating_sub(now))
            .min()
            .map(|ms| {
                PollTimeout::try_from(Duration::from_millis(ms.min(60_000)))
                    .unwrap_or(PollTimeout::MAX)
            })
            .unwrap_or(PollTimeout::NONE);
        let mut fds = [PollFd::new(input.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, wait) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let n = match input.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            apply(&mut watched, &line);
        }
    }
}

/// One line from the master: `<pid> <deadline_ms>`; a deadline of 0 stops watching the PID.
/// A line that does not parse is ignored (the master writes them; nothing else can).
fn apply(watched: &mut HashMap<i32, Watched>, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let mut parts = text.split_whitespace();
    let (Some(Ok(pid)), Some(Ok(deadline_ms))) = (
        parts.next().map(str::parse::<i32>),
        parts.next().map(str::parse::<u64>),
    ) else {
        return;
    };
    if pid <= 0 {
        return;
    }
    if deadline_ms == 0 {
        watched.remove(&pid);
        return;
    }
    match watched.get_mut(&pid) {
        Some(w) => w.deadline_ms = deadline_ms,
        None => {
            if let Some(pidfd) = pidfd_open(pid) {
                watched.insert(pid, Watched { pidfd, deadline_ms });
            }
        }
    }
}

/// The master's end of the guard: the guard process while it runs, and what it was last told
/// per PID. A guard that dies (the OOM killer, an operator's `kill`) is started again on the
/// next update and told every deadline afresh: a master must never run on without one.
pub struct GuardClient {
    /// The running guard, or `None` until a start succeeds.
    running: Option<Running>,
    /// What the running guard was last told, per worker PID.
    told: HashMap<u32, u64>,
    /// After a failed start, when to try again (a start is a fork and exec: not on every
    /// hand-out while it keeps failing).
    retry_at: Option<std::time::Instant>,
}

/// A started guard process and the pipe to it.
struct Running {
    child: std::process::Child,
    /// When it was started: one that dies young is started again only after [`RETRY_START`].
    started: std::time::Instant,
    /// The pipe to the guard's stdin (non-blocking: the master never waits on the guard).
    stdin: std::process::ChildStdin,
}

/// Lines are written in pieces of at most this many bytes: a pipe write of up to `PIPE_BUF`
/// (4096 on Linux) is all or nothing, so the guard never reads half a line when the pipe is full.
const ATOMIC_WRITE: usize = 4096;

/// How long after a failed start the next one is tried.
const RETRY_START: Duration = Duration::from_secs(1);

impl GuardClient {
    /// Starts `drover lease-guard`, its stderr into the master's. A failure is logged and
    /// retried on later updates.
    pub fn start() -> GuardClient {
        let mut client = GuardClient {
            running: None,
            told: HashMap::new(),
            retry_at: None,
        };
        client.spawn();
        client
    }

    /// A guard that is never started (unit tests of the loop, which run no worker): its updates
    /// are dropped, as while a start keeps failing.
    #[cfg(test)]
    pub fn not_started() -> GuardClient {
        GuardClient {
            running: None,
            told: HashMap::new(),
            retry_at: Some(std::time::Instant::now() + Duration::from_secs(86_400)),
        }
    }

    fn spawn(&mut self) {
        match spawn_guard() {
            Ok(running) => {
                self.running = Some(running);
                self.retry_at = None;
            }
            Err(e) => {
                self.retry_at = Some(std::time::Instant::now() + RETRY_START);
                tracing::error!("cannot start the lease guard: {e}; until it starts, workers are stopped by this master's own lease check only (retrying every {RETRY_START:?})");
            }
        }
        self.told.clear();
    }

    /// The guard is gone (its pipe is closed): reap it, say how it ended and start another — at
    /// once, or after [`RETRY_START`] if it died within [`RETRY_START`] × 5 of its start (no
    /// fork and exec per hand-out for a guard that cannot live).
    fn replace(&mut self, error: &std::io::Error) {
        let mut young = false;
        if let Some(mut old) = self.running.take() {
            young = old.started.elapsed() < RETRY_START * 5;
            let _ = old.child.kill();
            let how = old
                .child
                .wait()
                .map(|status| status.to_string())
                .unwrap_or_else(|e| format!("cannot be reaped: {e}"));
            drover_supervisor::strays::reaped(old.child.id());
            tracing::error!(
                "the lease guard (pid {}) is gone ({error}; {how}); starting a new one and telling it every deadline",
                old.child.id()
            );
        }
        self.told.clear();
        if young {
            self.retry_at = Some(std::time::Instant::now() + RETRY_START);
        } else {
            self.spawn();
        }
    }

    /// Brings the guard in line with `wanted` (every worker PID holding jobs, and the deadline
    /// by which it must be gone): new and moved deadlines are sent, PIDs no longer listed are
    /// cleared. A guard found gone is replaced and told everything.
    pub fn sync(&mut self, wanted: &HashMap<u32, u64>) {
        if self.running.is_none() {
            if self
                .retry_at
                .is_some_and(|at| std::time::Instant::now() < at)
            {
                return;
            }
            self.spawn();
        }
        for _attempt in 0..2 {
            if self.running.is_none() {
                return;
            }
            match self.send(wanted) {
                Ok(()) => return,
                Err(e) => self.replace(&e),
            }
        }
    }

    /// Writes what changed since the guard was last told. A full pipe (the guard is behind)
    /// leaves the rest for the next update; any other error means the guard is gone.
    fn send(&mut self, wanted: &HashMap<u32, u64>) -> std::io::Result<()> {
        let Some(running) = self.running.as_mut() else {
            return Ok(());
        };
        let mut lines: Vec<(u32, u64)> = wanted
            .iter()
            .filter(|(pid, deadline)| self.told.get(pid) != Some(deadline))
            .map(|(pid, deadline)| (*pid, *deadline))
            .collect();
        lines.extend(
            self.told
                .keys()
                .filter(|pid| !wanted.contains_key(pid))
                .map(|pid| (*pid, 0)),
        );
        let mut chunk = String::new();
        let mut in_chunk: Vec<(u32, u64)> = Vec::new();
        for (i, (pid, deadline)) in lines.iter().enumerate() {
            let line = format!("{pid} {deadline}\n");
            if chunk.len() + line.len() > ATOMIC_WRITE {
                flush(&mut running.stdin, &chunk, &in_chunk, &mut self.told)?;
                chunk.clear();
                in_chunk.clear();
            }
            chunk.push_str(&line);
            in_chunk.push((*pid, *deadline));
            if i + 1 == lines.len() {
                flush(&mut running.stdin, &chunk, &in_chunk, &mut self.told)?;
            }
        }
        Ok(())
    }
}

/// One all-or-nothing write of whole lines; what was written is recorded as told. A full
/// pipe is not an error: those lines are sent on a later update.
fn flush(
    pipe: &mut std::process::ChildStdin,
    chunk: &str,
    lines: &[(u32, u64)],
    told: &mut HashMap<u32, u64>,
) -> std::io::Result<()> {
    match pipe.write(chunk.as_bytes()) {
        // At most PIPE_BUF bytes go in whole or not at all; anything else is a broken pipe.
        Ok(n) if n != chunk.len() => Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("wrote {n} of {} bytes", chunk.len()),
        )),
        Ok(_) => {
            for (pid, deadline) in lines {
                if *deadline == 0 {
                    told.remove(pid);
                } else {
                    told.insert(*pid, *deadline);
                }
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => Err(e),
    }
}

/// Starts `drover lease-guard` from this very binary: `/proc/self/exe` names the running image
/// even after a package upgrade has replaced the file on disk.
fn spawn_guard() -> std::io::Result<Running> {
    use std::os::unix::process::CommandExt;
    // In a process group of its own: a Ctrl-Z, Ctrl-C or signal to the master's group must not
    // stop or kill the guard with the master (the workers have groups of their own and run on).
    let mut child = std::process::Command::new("/proc/self/exe")
        .arg0("drover")
        .arg("lease-guard")
        .process_group(0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    // Waited for here (`replace`, drop): a subreaper master's sweep of strays leaves it alone.
    drover_supervisor::strays::waited_for(child.id());
    let stdin = child.stdin.take().expect("piped");
    nix::fcntl::fcntl(
        stdin.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )?;
    Ok(Running {
        child,
        stdin,
        started: std::time::Instant::now(),
    })
}

impl Drop for GuardClient {
    fn drop(&mut self) {
        if let Some(mut running) = self.running.take() {
            let _ = running.child.kill();
            let _ = running.child.wait();
            drover_supervisor::strays::reaped(running.child.id());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    fn sleeper() -> std::process::Child {
        Command::new("sleep")
            .arg("30")
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    use std::os::unix::process::CommandExt;

    /// A guard thread reading from a pipe; the write end is returned.
    fn guard() -> (std::fs::File, std::thread::JoinHandle<std::io::Result<()>>) {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let handle = std::thread::spawn(move || run(std::fs::File::from(read)));
        (std::fs::File::from(write), handle)
    }

    fn exited_within(child: &mut std::process::Child, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if child.try_wait().unwrap().is_some() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    #[test]
    fn a_worker_past_its_deadline_is_killed_and_a_cleared_or_moved_one_is_not() {
        let (mut to_guard, guard) = guard();
        let (mut late, mut cleared, mut moved) = (sleeper(), sleeper(), sleeper());
        let (at, set) = (now_ms() + 300, Instant::now());
        writeln!(to_guard, "{} {at}", late.id()).unwrap();
        writeln!(to_guard, "{} {at}", cleared.id()).unwrap();
        writeln!(to_guard, "{} {at}", moved.id()).unwrap();
        writeln!(to_guard, "{} 0", cleared.id()).unwrap();
        writeln!(to_guard, "{} {}", moved.id(), at + 60_000).unwrap();
        exited_within(&mut late, Duration::from_secs(5)).expect("killed");
        // Measured from when the deadline was set (the writes between may be preempted).
        let took = set.elapsed();
        assert!(
            took >= Duration::from_millis(295),
            "killed at its deadline, not before: {took:?}"
        );
        assert!(exited_within(&mut cleared, Duration::from_millis(300)).is_none());
        assert!(exited_within(&mut moved, Duration::from_millis(10)).is_none());
        drop(to_guard);
        guard.join().unwrap().unwrap();
        for mut c in [cleared, moved] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    #[test]
    fn a_pidfd_outlives_its_process_and_signals_nothing_once_it_is_reaped() {
        // The guard signals through the pidfd it took when the PID was named: once that process
        // is gone, the kill reaches nothing (whatever process gets the PID next).
        let mut live = sleeper();
        let pidfd = pidfd_open(live.id() as i32).expect("a pidfd for a live process");
        let mut gone = sleeper();
        let stale = pidfd_open(gone.id() as i32).expect("a pidfd for a live process");
        gone.kill().unwrap();
        gone.wait().unwrap();
        assert!(!pidfd_kill(&stale), "a reaped process is not signalled");
        assert!(pidfd_kill(&pidfd), "a live one is");
        assert!(exited_within(&mut live, Duration::from_secs(5)).is_some());
    }

    #[test]
    fn garbage_lines_are_ignored() {
        let mut watched = HashMap::new();
        for line in [&b"x y\n"[..], b"-5 100\n", b"0 100\n", b"\n", b"12"] {
            apply(&mut watched, line);
        }
        assert!(watched.is_empty());
    }
}
