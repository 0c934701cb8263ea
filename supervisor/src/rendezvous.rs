//! The Unix socket forked workers reach the master on (`<state_dir>/fork.sock`).
//!
//! A worker a zygote forks has no socketpair from the master: it connects to this socket and opens
//! with `{"t":"attach","worker":N,"token":HEX}`, the one-time token the master put in its fork
//! request. A token is good once and only for its worker; a connection that presents no valid
//! one within a second is closed. From then on that connection is the worker's channel, exactly
//! as fd 3 is for a worker the master started itself. (Passing one end of a socketpair with
//! `SCM_RIGHTS` was the first choice: PHP 8.2 hands a received descriptor over as a stream that
//! cannot be written to — docs/decisions/0001.)
//!
//! The kernel's peer credentials of the connection give the worker's PID, which the master trusts
//! over anything a process says about itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;

use crate::protocol::Attach;
use crate::worker_id::WorkerId;
use crate::SupervisorError;

/// The longest path a Unix socket address holds.
const MAX_SOCKET_PATH: usize = 107;

/// How long a new connection has to present its token.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(1);

/// The longest first line a connection may send (an attach frame is about 100 bytes).
const MAX_ATTACH_BYTES: usize = 1024;

/// A forked worker's connection, handed to the tasks that wait for it.
#[derive(Debug)]
pub(crate) struct Attached {
    pub stream: UnixStream,
    /// What the worker sent after its attach frame, already read off the stream.
    pub leftover: Vec<u8>,
    /// The connecting process, as the kernel says.
    pub pid: Option<u32>,
}

struct Pending {
    worker: WorkerId,
    deliver: oneshot::Sender<Attached>,
}

type PendingMap = Arc<Mutex<HashMap<String, Pending>>>;

/// The socket and the tokens it waits for.
pub struct Rendezvous {
    path: PathBuf,
    /// Tokens handed out in fork requests and not yet presented, with where to deliver each
    /// connection.
    pending: PendingMap,
    /// Accepts connections for as long as the rendezvous lives.
    accept: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Rendezvous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rendezvous")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Rendezvous {
    /// Binds `path` (replacing a stale socket: one master per state directory is enforced by its
    /// lock), mode 0600, and starts accepting: for a socket in a directory of the caller's own.
    /// Call within the master's runtime.
    pub fn bind(path: &Path) -> Result<Arc<Rendezvous>, SupervisorError> {
        let io = |about: String| move |source| SupervisorError::Io { about, source };
        if path.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(SupervisorError::Io {
                about: format!(
                    "the fork socket path {} is longer than {MAX_SOCKET_PATH} bytes; use a shorter state directory",
                    path.display()
                ),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            });
        }
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(io(format!("removing the stale socket {}", path.display()))(
                    e,
                ))
            }
        }
        let listener = UnixListener::bind(path)
            .map_err(io(format!("binding the fork socket {}", path.display())))?;
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io(format!("setting the mode of {}", path.display())))?;
        Ok(Self::listen(listener, path))
    }

    /// Starts accepting on `listener`, bound (and its mode set) by the caller — the master binds
    /// it through its checked state directory —, which workers reach at `path`. Call within the
    /// master's runtime.
    pub fn listen(listener: UnixListener, path: &Path) -> Arc<Rendezvous> {
        let pending: PendingMap = Arc::default();
        let accept = tokio::spawn(accept(listener, pending.clone()));
        Arc::new(Rendezvous {
            path: path.to_path_buf(),
            pending,
            accept,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A new one-time token for `worker`, and where its connection will be delivered; an error
    /// if the kernel gives no randomness.
    pub(crate) fn expect(
        &self,
        worker: WorkerId,
    ) -> std::io::Result<(String, oneshot::Receiver<Attached>)> {
        let token = new_token()?;
        let (deliver, receive) = oneshot::channel();
        self.pending
            .lock()
            .expect("not poisoned")
            .insert(token.clone(), Pending { worker, deliver });
        Ok((token, receive))
    }

    /// The token will not be presented (its worker is gone): a late connection with it is refused.
    pub(crate) fn forget(&self, token: &str) {
        self.pending.lock().expect("not poisoned").remove(token);
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// 128 random bits from the kernel, as 32 hex digits.
fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

async fn accept(listener: UnixListener, pending: PendingMap) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(admit(stream, pending.clone()));
            }
            Err(e) => {
                // EMFILE and the like: the worker's connect fails or waits; it is retried by the
                // pool as a failed start. Do not spin.
                tracing::warn!("accepting a forked worker's connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Reads the attach frame and hands the connection over, or closes it.
async fn admit(mut stream: UnixStream, pending: PendingMap) {
    let mut buf = Vec::with_capacity(256);
    let read = tokio::time::timeout(ATTACH_TIMEOUT, async {
        let mut chunk = [0u8; 256];
        loop {
            if buf.contains(&b'\n') || buf.len() > MAX_ATTACH_BYTES {
                return true;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    let peer = stream
        .peer_cred()
        .ok()
        .and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok());
    let Ok(true) = read else {
        tracing::warn!(
            peer_pid = peer,
            "a connection to the fork socket sent no attach frame within {ATTACH_TIMEOUT:?}; closed"
        );
        return;
    };
    let Some(end) = buf.iter().position(|b| *b == b'\n') else {
        tracing::warn!(
            peer_pid = peer,
            "a connection to the fork socket sent more than {MAX_ATTACH_BYTES} bytes without a newline; closed"
        );
        return;
    };
    let Attach::Attach { worker, token } = match Attach::parse(&buf[..end]) {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(
                peer_pid = peer,
                "a connection to the fork socket: {e}; closed"
            );
            return;
        }
    };
    let found = pending.lock().expect("not poisoned").remove(&token);
    match found {
        Some(p) if p.worker.0 == worker => {
            let _ = p.deliver.send(Attached {
                stream,
                leftover: buf[end + 1..].to_vec(),
                pid: peer,
            });
        }
        Some(p) => {
            // Not its token: the token is spent, and its own worker will fail to attach.
            tracing::warn!(
                peer_pid = peer,
                "a connection to the fork socket presented worker {}'s token as worker {worker}; closed",
                p.worker.0
            );
        }
        None => tracing::warn!(
            peer_pid = peer,
            worker,
            "a connection to the fork socket presented an unknown or spent token (a worker whose start was given up?); closed"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn tokens_are_128_bit_hex_and_differ() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn a_connection_is_delivered_once_to_its_token_with_what_followed_the_attach_frame() {
        let dir = tempdir();
        let r = Rendezvous::bind(&dir.join("fork.sock")).unwrap();
        let (token, delivered) = r.expect(WorkerId(5)).unwrap();
        let mut c = UnixStream::connect(r.path()).await.unwrap();
        c.write_all(
            format!("{{\"t\":\"attach\",\"worker\":5,\"token\":\"{token}\"}}\n{{\"t\":\"hel")
                .as_bytes(),
        )
        .await
        .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), delivered)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.leftover, b"{\"t\":\"hel");
        assert_eq!(got.pid, Some(std::process::id()));

        // Spent: a second connection with it is closed.
        let mut again = UnixStream::connect(r.path()).await.unwrap();
        again
            .write_all(
                format!("{{\"t\":\"attach\",\"worker\":5,\"token\":\"{token}\"}}\n").as_bytes(),
            )
            .await
            .unwrap();
        let mut byte = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), again.read(&mut byte))
            .await
            .unwrap()
            .unwrap_or(0);
        assert_eq!(n, 0, "closed");
        drop(r);
        assert!(!dir.join("fork.sock").exists(), "the socket goes with it");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_wrong_worker_or_garbage_is_refused_and_a_forgotten_token_is_spent() {
        let dir = tempdir();
        let r = Rendezvous::bind(&dir.join("fork.sock")).unwrap();
        let (token, mut delivered) = r.expect(WorkerId(5)).unwrap();
        for line in [
            format!("{{\"t\":\"attach\",\"worker\":6,\"token\":\"{token}\"}}\n"),
            "garbage\n".to_string(),
        ] {
            let mut c = UnixStream::connect(r.path()).await.unwrap();
            c.write_all(line.as_bytes()).await.unwrap();
            let mut byte = [0u8; 1];
            let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut byte))
                .await
                .unwrap()
                .unwrap_or(0);
            assert_eq!(n, 0, "{line} is closed");
        }
        // The wrong worker spent the token.
        assert!(delivered.try_recv().is_err());
        let (token, _rx) = r.expect(WorkerId(7)).unwrap();
        r.forget(&token);
        assert!(r.pending.lock().unwrap().is_empty());
        drop(r);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "drover-rv-{}-{}",
            std::process::id(),
            new_token().unwrap()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
