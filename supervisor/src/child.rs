//! Starting a child process the master talks to over fd 3 — a worker in `exec` mode, or a zygote —
//! waiting for it, and signalling a process and its group.
//!
//! The child gets one end of a fresh socketpair as fd 3, its own process group, the worker's
//! user, nice value and working directory, and SIGKILL as its parent-death signal; between fork
//! and exec only async-signal-safe calls are made.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt as _;
use std::process::{ExitStatus, Stdio};

use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use crate::command::WorkerCommand;
use crate::SupervisorError;

/// A child that was started, and the master's end of its channel.
pub(crate) struct Started {
    pub child: tokio::process::Child,
    pub pid: u32,
    pub channel: UnixStream,
}

/// Starts `command` with fd 3 connected to the returned stream. `what` names the child in errors
/// ("worker 7", "the zygote of pool default"); `env` is added to the command's own.
pub(crate) fn start(
    what: &str,
    command: &WorkerCommand,
    env: &[(&str, String)],
) -> Result<Started, SupervisorError> {
    let spawn_err = |about: &str, source: std::io::Error| SupervisorError::Spawn {
        about: format!("{what}: {about}"),
        source,
    };
    let (ours, theirs): (OwnedFd, OwnedFd) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| spawn_err("creating the socketpair", e.into()))?;

    let mut cmd = std_command(command, env);
    between_fork_and_exec(&mut cmd, theirs.as_raw_fd(), command);
    let child = tokio::process::Command::from(cmd).spawn().map_err(|e| {
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
    // A child not yet waited for always has its PID.
    let pid = child.id().ok_or_else(|| {
        spawn_err(
            "reading its PID",
            std::io::Error::other("the child was reaped already"),
        )
    })?;
    let channel = stream(ours).map_err(|e| spawn_err("registering the socket", e))?;
    Ok(Started {
        child,
        pid,
        channel,
    })
}

/// The child's program, arguments, environment (`env` added to the command's own), directory and
/// process group, as the parent sets them.
fn std_command(command: &WorkerCommand, env: &[(&str, String)]) -> std::process::Command {
    let mut cmd = std::process::Command::new(&command.program);
    cmd.args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        // The master's database URL is its own: a Laravel worker would read DATABASE_URL as its
        // connection's `url` and connect somewhere else.
        .env_remove("DATABASE_URL")
        .env_remove("DROVER_DATABASE_URL")
        .env("DROVER_MASTER_PID", std::process::id().to_string())
        // The newest worker protocol this master speaks: a worker of a newer package speaks no
        // newer one to it (docs/protocol.md, "Versions").
        .env(
            "DROVER_PROTOCOL",
            crate::protocol::PROTOCOL_VERSION.to_string(),
        )
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        // Its own process group: a Ctrl-C in the terminal reaches the master only, which then
        // drains the workers instead of having them die mid-job.
        .process_group(0);
    if let Some(cwd) = &command.cwd {
        cmd.current_dir(cwd);
    }
    cmd
}

/// What the child does between fork and exec, in this order: its nice value, the channel `child_fd` as fd 3 kept open across exec, SIGKILL as its
/// parent-death signal, and an exit if the master is already gone.
fn between_fork_and_exec(
    cmd: &mut std::process::Command,
    child_fd: RawFd,
    command: &WorkerCommand,
) {
    let master = std::process::id();
    let nice = command.nice;
    // SAFETY: between fork and exec only async-signal-safe calls: setpriority, dup2, fcntl, prctl,
    // getppid, _exit. The closure only reads what it captured.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(nice) = nice {
                if libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
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
            // be handed to a second worker. A zygote neither: the workers it forks would.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != master {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// A connected Unix socket as a tokio stream.
pub(crate) fn stream(fd: OwnedFd) -> std::io::Result<UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    UnixStream::from_std(stream)
}

/// Signals the reaper task can deliver while the process is alive (and only then: a reaped
/// PID may already belong to someone else).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Signal {
    Terminate,
    Kill,
}

/// Waits for `child` (`pid`) to exit, delivering `signals` while it lives: the one place a child
/// the master started is waited for. Its exit status, `None` if it cannot be had.
pub(crate) async fn wait(
    child: &mut tokio::process::Child,
    pid: u32,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
) -> Option<ExitStatus> {
    loop {
        tokio::select! {
            status = child.wait() => return status.ok(),
            Some(signal) = signals.recv() => match signal {
                Signal::Kill => kill_group(pid),
                Signal::Terminate => terminate(pid),
            },
        }
    }
}

/// SIGKILL to the process group `pid` leads, then to `pid` itself: whatever a job started dies
/// with its worker, so nothing of the job runs on after its lease is handed back, and a worker
/// that left its group (setsid, setpgid) is still hit. Only for a PID that cannot have been
/// reused: a child not yet reaped.
pub(crate) fn kill_group(pid: u32) {
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
}

/// SIGTERM to `pid` alone (same proviso as [`kill_group`]).
pub(crate) fn terminate(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
}
