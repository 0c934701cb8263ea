//! One worker process: spawned with a socketpair on fd 3, and three tasks around it — a reader
//! that turns lines into frames, a writer that sends frames, and a reaper that waits for the exit.
//!
//! Ordering guarantee: a worker's `Exited` event is sent only after every frame it wrote before
//! dying has been delivered, so the master never releases a job whose `done` is still in flight.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch};

use crate::protocol::{FromWorker, ProtocolError, ToWorker};
use crate::SupervisorError;

/// A master-assigned worker identity; unlike a PID it is never reused, across all pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkerId(pub u64);

impl WorkerId {
    /// The next unused id of this process.
    pub fn next() -> WorkerId {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        WorkerId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "worker {}", self.0)
    }
}

/// How to start a worker process.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    /// The program, e.g. `php`.
    pub program: PathBuf,
    /// Its arguments, e.g. `["artisan", "drover:work"]`.
    pub args: Vec<OsString>,
    /// Extra environment variables (the master adds `DROVER_MASTER_PID` and `DROVER_WORKER_ID`).
    pub env: Vec<(OsString, OsString)>,
    /// Working directory; default the master's.
    pub cwd: Option<PathBuf>,
    /// Scheduling priority (nice, -20 to 19); `None` keeps the master's.
    pub nice: Option<i32>,
    /// The user to run as (set when the master runs as root); `None` keeps the master's.
    pub run_as: Option<RunAs>,
}

/// An OS user a worker runs as: resolved once by the master, applied between fork and exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the user's memberships in /etc/group).
    pub groups: Vec<u32>,
    pub home: PathBuf,
}

impl RunAs {
    /// Looks a user up by name, with its groups.
    pub fn lookup(name: &str) -> Result<RunAs, String> {
        let user = nix::unistd::User::from_name(name)
            .map_err(|e| format!("looking up user {name:?}: {e}"))?
            .ok_or_else(|| {
                format!(
                    "user {name:?} does not exist on this machine; create it or set another user"
                )
            })?;
        let cname = std::ffi::CString::new(name).map_err(|_| format!("user {name:?}: bad name"))?;
        let groups = nix::unistd::getgrouplist(&cname, user.gid)
            .map_err(|e| format!("reading the groups of user {name:?}: {e}"))?;
        Ok(RunAs {
            name: name.to_string(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups: groups.iter().map(|g| g.as_raw()).collect(),
            home: user.dir,
        })
    }
}

/// What the master hears about a worker.
#[derive(Debug)]
pub enum WorkerEvent {
    /// A well-formed frame.
    Frame { worker: WorkerId, frame: FromWorker },
    /// Input that breaks the protocol; the worker should be stopped.
    BadInput {
        worker: WorkerId,
        problem: ProtocolError,
    },
    /// The process is gone and all its frames were delivered.
    Exited {
        worker: WorkerId,
        pid: u32,
        status: Option<ExitStatus>,
        lived: Duration,
    },
    /// A restart delay has passed (sent by the timers of the pool named `pool`).
    RestartDue { pool: String, slot: usize },
}

/// Signals the reaper task can deliver while the process is alive (and only then: a reaped
/// PID may already belong to someone else).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Signal {
    Terminate,
    Kill,
}

/// The master's handle on a live worker.
#[derive(Debug)]
pub(crate) struct WorkerHandle {
    pub pid: u32,
    pub spawned_at: Instant,
    /// Frames to the worker, written in order by the writer task.
    pub frames: mpsc::UnboundedSender<ToWorker>,
    /// Signals, delivered by the reaper task.
    pub signals: mpsc::UnboundedSender<Signal>,
}

/// Starts a worker and its tasks.
pub(crate) fn spawn(
    id: WorkerId,
    command: &WorkerCommand,
    max_frame_bytes: usize,
    events: mpsc::UnboundedSender<WorkerEvent>,
) -> Result<WorkerHandle, SupervisorError> {
    let spawn_err = |about: &str, source: std::io::Error| SupervisorError::Spawn {
        about: format!("{id}: {about}"),
        source,
    };
    let (ours, theirs): (OwnedFd, OwnedFd) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| spawn_err("creating the socketpair", e.into()))?;

    let mut cmd = std::process::Command::new(&command.program);
    cmd.args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        // The master's database URL is its own: a Laravel worker would read DATABASE_URL as its
        // connection's `url` and connect somewhere else.
        .env_remove("DATABASE_URL")
        .env_remove("DROVER_DATABASE_URL")
        .env("DROVER_MASTER_PID", std::process::id().to_string())
        .env("DROVER_WORKER_ID", id.0.to_string())
        .stdin(Stdio::null())
        // Its own process group: a Ctrl-C in the terminal reaches the master only, which then
        // drains the workers instead of having them die mid-job.
        .process_group(0);
    if let Some(cwd) = &command.cwd {
        cmd.current_dir(cwd);
    }
    if let Some(user) = &command.run_as {
        cmd.env("USER", &user.name)
            .env("LOGNAME", &user.name)
            .env("HOME", &user.home);
    }
    let child_fd = theirs.as_raw_fd();
    let master = std::process::id();
    let nice = command.nice;
    let run_as = command.run_as.clone();
    // SAFETY: between fork and exec only async-signal-safe calls: setpriority, setgroups, setgid,
    // setuid, dup2, fcntl, prctl, getppid, _exit. The closure only reads what it captured.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(nice) = nice {
                if libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // Drop privileges before anything else of the worker's runs; groups and gid first,
            // while still root. (The parent-death signal is set after: a change of uid clears it.)
            if let Some(user) = &run_as {
                if libc::setgroups(user.groups.len(), user.groups.as_ptr()) != 0
                    || libc::setgid(user.gid) != 0
                    || libc::setuid(user.uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if child_fd == 3 {
                // Already in place: just let it survive exec.
                if libc::fcntl(3, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(child_fd, 3) != 3 {
                return Err(std::io::Error::last_os_error());
            }
            // A worker never outlives its master: the job it runs would lose its lease and could
            // be handed to a second worker.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != master {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let mut child = tokio::process::Command::from(cmd).spawn().map_err(|e| {
        // The kernel reports a missing working directory as the program's ENOENT: name it.
        match &command.cwd {
            Some(cwd) if !cwd.is_dir() => spawn_err(
                &format!(
                    "starting {} in {}: the working directory does not exist (a deleted release? give the path the deploy tool keeps current, e.g. its `current` symlink)",
                    command.program.display(),
                    cwd.display()
                ),
                e,
            ),
            _ => spawn_err(&format!("starting {}", command.program.display()), e),
        }
    })?;
    drop(theirs);
    let pid = child.id().unwrap_or(0);

    let stream = std::os::unix::net::UnixStream::from(ours);
    stream
        .set_nonblocking(true)
        .map_err(|e| spawn_err("configuring the socket", e))?;
    let stream =
        UnixStream::from_std(stream).map_err(|e| spawn_err("registering the socket", e))?;
    let (read_half, mut write_half) = stream.into_split();

    let (frames_tx, mut frames_rx) = mpsc::unbounded_channel::<ToWorker>();
    let (signals_tx, mut signals_rx) = mpsc::unbounded_channel::<Signal>();
    let (exited_tx, exited_rx) = watch::channel(false);
    let spawned_at = Instant::now();

    // Writer: frames in order; stops when the socket breaks or the handle is dropped.
    tokio::spawn(async move {
        while let Some(frame) = frames_rx.recv().await {
            if write_half.write_all(&frame.encode()).await.is_err() {
                break;
            }
        }
    });

    // Reader: one line per frame, bounded by max_frame_bytes.
    let reader_events = events.clone();
    let reader = tokio::spawn(read_frames(
        id,
        read_half,
        max_frame_bytes,
        reader_events,
        exited_rx,
    ));

    // Reaper: the one place this child is waited for.
    tokio::spawn(async move {
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.ok(),
                Some(signal) = signals_rx.recv() => match signal {
                    Signal::Kill => {
                        // The whole process group: whatever the job started dies with the worker,
                        // so nothing of the job runs on after its lease is handed back. And the
                        // worker itself by its PID: one that left its group (setsid, setpgid)
                        // is not in it any more.
                        match child.id() {
                            Some(pid) => {
                                let pid = nix::unistd::Pid::from_raw(pid as i32);
                                let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
                                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                            }
                            None => { let _ = child.start_kill(); }
                        }
                    }
                    Signal::Terminate => {
                        if let Some(pid) = child.id() {
                            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM);
                        }
                    }
                },
            }
        };
        let _ = exited_tx.send(true);
        let _ = reader.await;
        let _ = events.send(WorkerEvent::Exited {
            worker: id,
            pid,
            status,
            lived: spawned_at.elapsed(),
        });
    });

    Ok(WorkerHandle {
        pid,
        spawned_at,
        frames: frames_tx,
        signals: signals_tx,
    })
}

/// Reads frames until EOF, bad input, or — once the process has exited — until nothing more
/// arrives (a grandchild may still hold fd 3 open, so EOF is not guaranteed).
async fn read_frames(
    id: WorkerId,
    read_half: tokio::net::unix::OwnedReadHalf,
    limit: usize,
    events: mpsc::UnboundedSender<WorkerEvent>,
    mut exited: watch::Receiver<bool>,
) {
    let mut reader = BufReader::new(read_half);
    let mut line = Vec::new();
    loop {
        let result = if *exited.borrow() {
            match tokio::time::timeout(
                Duration::from_millis(100),
                read_line(&mut reader, &mut line, limit),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => return,
            }
        } else {
            tokio::select! {
                r = read_line(&mut reader, &mut line, limit) => r,
                _ = exited.changed() => continue,
            }
        };
        match result {
            Ok(true) => {
                let body = line.strip_suffix(b"\n").unwrap_or(&line);
                let event = match FromWorker::parse(body) {
                    Ok(frame) => WorkerEvent::Frame { worker: id, frame },
                    Err(problem) => WorkerEvent::BadInput {
                        worker: id,
                        problem,
                    },
                };
                let bad = matches!(event, WorkerEvent::BadInput { .. });
                let _ = events.send(event);
                line.clear();
                if bad {
                    return;
                }
            }
            Ok(false) => {
                // EOF. Normally the process is exiting; one that closed fd 3 and lives on can
                // never report its jobs again and must be stopped. Bytes after the last newline
                // are a frame cut short: said, so the exit is not read as a clean one.
                if !line.is_empty() {
                    let _ = events.send(WorkerEvent::BadInput {
                        worker: id,
                        problem: ProtocolError::partial(&line),
                    });
                    return;
                }
                if !*exited.borrow() {
                    let gone =
                        tokio::time::timeout(Duration::from_secs(1), exited.wait_for(|e| *e)).await;
                    if !matches!(gone, Ok(Ok(_))) {
                        let _ = events.send(WorkerEvent::BadInput {
                            worker: id,
                            problem: ProtocolError::Closed,
                        });
                    }
                }
                return;
            }
            Err(problem) => {
                let _ = events.send(WorkerEvent::BadInput {
                    worker: id,
                    problem,
                });
                return;
            }
        }
    }
}

/// Reads up to and including `\n` into `line` (which keeps partial data across cancellation).
/// `Ok(false)` on EOF.
async fn read_line(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    line: &mut Vec<u8>,
    limit: usize,
) -> Result<bool, ProtocolError> {
    loop {
        let room = (limit + 1).saturating_sub(line.len()) as u64;
        if room == 0 {
            return Err(ProtocolError::Oversized { limit });
        }
        let n = (&mut *reader)
            .take(room)
            .read_until(b'\n', line)
            .await
            .unwrap_or(0);
        if line.last() == Some(&b'\n') {
            if line.len() > limit + 1 {
                return Err(ProtocolError::Oversized { limit });
            }
            return Ok(true);
        }
        if n == 0 {
            // EOF; a partial last line stays in `line` for the caller to report.
            return Ok(false);
        }
        if line.len() > limit {
            return Err(ProtocolError::Oversized { limit });
        }
    }
}
