//! The control socket, `<state_dir>/control.sock`: one JSON line in (`{"command":"status"}`), one
//! JSON line out. `drover status|pause|continue|terminate|restart` and the artisan commands
//! `drover:status|pause|continue|terminate|restart` speak it. The socket also keeps a second master
//! from starting on the same state directory.
//!
//! Mode 0660, owned by the master's user (the application's) and its primary group: that user and
//! the members of its group (a deploy user) may ask, everyone else is refused by the kernel. A
//! client refused that way says so ([`MasterError::ControlDenied`]), never "not running".

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::state_dir::StateDir;
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

/// Binds the control socket in `state_dir`, mode 0660: the master's user and its group (the
/// application's deploy user) may ask, nobody else. Call after [`StateDir::lock`]: no live master
/// of the directory answers there then, so what stands there is a stale socket of a dead one
/// (replaced), or a plant (refused by name).
pub fn bind(state_dir: &StateDir) -> Result<UnixListener, MasterError> {
    let io = |about: String| move |source| MasterError::Io { about, source };
    let shown = state_dir.shown("control.sock");
    let at = state_dir.socket_slot("control.sock")?;
    let listener =
        UnixListener::bind(&at).map_err(io(format!("binding the control socket {shown}")))?;
    state_dir.set_socket_mode("control.sock", 0o660)?;
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

/// The error for a socket (or state directory) this user may not use, naming who may: the
/// socket's owner and group, or, when this user cannot even enter the state directory (mode 0750),
/// the directory's.
fn denied(state_dir: &Path, socket: &Path) -> MasterError {
    use std::os::unix::fs::MetadataExt;
    let name_of_user = |uid: u32| {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| u.name)
            .unwrap_or_else(|| uid.to_string())
    };
    let name_of_group = |gid: u32| {
        nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
            .ok()
            .flatten()
            .map(|g| g.name)
            .unwrap_or_else(|| gid.to_string())
    };
    let (what, meta) = match std::fs::metadata(socket) {
        Ok(meta) => ("it", Some(meta)),
        Err(_) => ("its state directory", std::fs::metadata(state_dir).ok()),
    };
    let who = match meta {
        Some(meta) => {
            let (user, group) = (name_of_user(meta.uid()), name_of_group(meta.gid()));
            format!(
                "{what} belongs to {user}:{group} with mode {:o}: run this as {user}, as root, or as a member of group {group} (the master's user and group)",
                meta.mode() & 0o777
            )
        }
        None => format!(
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
