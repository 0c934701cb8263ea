//! The control socket, `<state_dir>/control.sock`: one JSON line in (`{"command":"status"}`), one
//! JSON line out. `drover status|pause|continue|terminate|restart` and the artisan commands
//! `drover:status|pause|continue|terminate|restart` speak it. The socket also keeps a second master
//! from starting on the same state directory.
//!
//! Mode 0660, group-owned by the workers' user's group when a root master runs them as another
//! user (else the master's own group): the application's user can run `php artisan drover:status`
//! against a root-started service, everyone else is refused by the kernel. A client refused that
//! way says so ([`MasterError::ControlDenied`]), never "not running".

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::MasterError;

/// What an operator can ask the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// Pools, workers, jobs held, phase.
    Status,
    /// Stop feeding workers (they finish what they run; prefetched jobs wait).
    Pause,
    /// Feed them again.
    Continue,
    /// Graceful shutdown, as SIGTERM.
    Terminate,
    /// Re-read the configuration and replace every worker one by one, as SIGHUP.
    Restart,
    /// The health verdict alone (phase, pools, problems): answered by the loop at once, with no
    /// database query and no per-worker `/proc` read, for `GET /healthz`.
    Health,
}

/// A command on its way to the master loop, with where to send the answer.
#[derive(Debug)]
pub struct Request {
    pub command: Command,
    /// `pause` and `continue` of one pool only (by its name in the configuration; a balanced
    /// pool's per-queue members go with it), as Horizon's `pause-supervisor`.
    pub pool: Option<String>,
    pub reply: oneshot::Sender<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    command: Command,
    #[serde(default)]
    pool: Option<String>,
}

pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join("control.sock")
}

/// The one-master lock of a state directory: `<state_dir>/master.lock`, held with `flock` for as
/// long as the returned file is open (the master's life; the kernel lets go when it dies, however
/// it dies). Two masters started at once cannot both pass, unlike a check of the socket followed
/// by a bind. The file is opened close-on-exec, so workers do not hold it.
pub fn lock(state_dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, MasterError> {
    let path = state_dir.join("master.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| MasterError::Io {
            about: format!("opening the lock file {}", path.display()),
            source,
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| match errno {
            nix::errno::Errno::EWOULDBLOCK => MasterError::AlreadyRunning {
                state_dir: state_dir.display().to_string(),
            },
            other => MasterError::Io {
                about: format!("locking {}", path.display()),
                source: other.into(),
            },
        },
    )
}

/// Binds the control socket (after [`lock`]: a socket file left by a dead master is removed);
/// a live master answering on it is refused as well. `group` (the workers' user's group, for a
/// root master) gets read and write on it.
pub async fn bind(state_dir: &Path, group: Option<u32>) -> Result<UnixListener, MasterError> {
    let path = socket_path(state_dir);
    let io = |about: String| move |source| MasterError::Io { about, source };
    if path.as_os_str().len() > 107 {
        return Err(MasterError::Io {
            about: format!(
                "the control socket path {} is longer than 107 bytes; use a shorter --state-dir",
                path.display()
            ),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    }
    if path.exists() {
        if UnixStream::connect(&path).await.is_ok() {
            return Err(MasterError::AlreadyRunning {
                state_dir: state_dir.display().to_string(),
            });
        }
        std::fs::remove_file(&path)
            .map_err(io(format!("removing the stale socket {}", path.display())))?;
    }
    let listener = UnixListener::bind(&path)
        .map_err(io(format!("binding the control socket {}", path.display())))?;
    if let Some(gid) = group {
        std::os::unix::fs::chown(&path, None, Some(gid))
            .map_err(io(format!("giving {} to group {gid}", path.display())))?;
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660))
        .map_err(io(format!("setting the mode of {}", path.display())))?;
    Ok(listener)
}

/// Accepts connections until the listener is dropped with the task.
pub fn serve(
    listener: UnixListener,
    requests: mpsc::UnboundedSender<Request>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let requests = requests.clone();
            tokio::spawn(async move {
                if let Err(e) = answer(stream, requests).await {
                    tracing::warn!("control socket: {e}");
                }
            });
        }
    })
}

async fn answer(
    stream: UnixStream,
    requests: mpsc::UnboundedSender<Request>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let n = tokio::time::timeout(
        Duration::from_secs(5),
        BufReader::new(read.take(4096)).read_line(&mut line),
    )
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let response = match serde_json::from_str::<Wire>(line.trim()) {
        Ok(wire) if n > 0 => {
            let (reply, answer) = oneshot::channel();
            if requests
                .send(Request {
                    command: wire.command,
                    pool: wire.pool,
                    reply,
                })
                .is_err()
            {
                serde_json::json!({"error": "the master is shutting down"})
            } else {
                answer
                    .await
                    .unwrap_or_else(|_| serde_json::json!({"error": "the master is shutting down"}))
            }
        }
        Ok(_) => serde_json::json!({"error": "empty request"}),
        Err(e) => {
            serde_json::json!({"error": format!("bad request ({e}); send {{\"command\":\"status|pause|continue|terminate\"}}")})
        }
    };
    let mut bytes = serde_json::to_vec(&response).unwrap_or_default();
    bytes.push(b'\n');
    write.write_all(&bytes).await
}

/// The error for a socket (or state directory) this user may not use, naming who may.
fn denied(state_dir: &Path, socket: &Path) -> MasterError {
    use std::os::unix::fs::MetadataExt;
    let who = match std::fs::metadata(socket) {
        Ok(meta) => {
            let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(meta.uid()))
                .ok()
                .flatten()
                .map(|u| u.name)
                .unwrap_or_else(|| meta.uid().to_string());
            let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(meta.gid()))
                .ok()
                .flatten()
                .map(|g| g.name)
                .unwrap_or_else(|| meta.gid().to_string());
            format!(
                "it belongs to {user}:{group} with mode {:o}: run this as {user}, as root, or as a member of group {group} (the workers' user)",
                meta.mode() & 0o777
            )
        }
        Err(_) => format!(
            "the state directory {} cannot be entered by this user: run this as the service's user or root",
            state_dir.display()
        ),
    };
    MasterError::ControlDenied {
        socket: socket.display().to_string(),
        who,
    }
}

/// Sends one command to the master of `state_dir` and returns its answer.
pub async fn request(state_dir: &Path, command: Command) -> Result<serde_json::Value, MasterError> {
    request_for(state_dir, command, None).await
}

/// [`request`] for one pool (`pause` and `continue`).
pub async fn request_for(
    state_dir: &Path,
    command: Command,
    pool: Option<&str>,
) -> Result<serde_json::Value, MasterError> {
    let path = socket_path(state_dir);
    let not_running = |reason: String| MasterError::NotRunning {
        state_dir: state_dir.display().to_string(),
        reason,
    };
    let mut stream = UnixStream::connect(&path).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            denied(state_dir, &path)
        } else {
            not_running(format!("cannot connect to {}: {e}", path.display()))
        }
    })?;
    let mut wire = serde_json::json!({ "command": command });
    if let Some(pool) = pool {
        wire["pool"] = pool.into();
    }
    let mut line = serde_json::to_vec(&wire).unwrap_or_default();
    line.push(b'\n');
    stream
        .write_all(&line)
        .await
        .map_err(|e| not_running(e.to_string()))?;
    let mut answer = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        BufReader::new(stream).read_line(&mut answer),
    )
    .await
    .map_err(|_| not_running("no answer within 10s".to_string()))?
    .map_err(|e| not_running(e.to_string()))?;
    serde_json::from_str(&answer).map_err(|e| not_running(format!("unreadable answer: {e}")))
}
