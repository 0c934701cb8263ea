//! systemd's notification protocol (`sd_notify`): a datagram of `KEY=VALUE` lines to the socket in
//! `$NOTIFY_SOCKET`, when systemd started the master with `Type=notify`. Without that variable
//! every call does nothing.
//!
//! - `READY=1` once the broker is connected and the workers are started;
//! - `RELOADING=1` during a reload (HUP), `READY=1` again after;
//! - `STOPPING=1` when a shutdown begins;
//! - `WATCHDOG=1` every half of `$WATCHDOG_USEC` while the event loop turns (a hung master is
//!   restarted by systemd);
//! - `STATUS=…` a one-line summary shown by `systemctl status`.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The connection to systemd's notification socket, if there is one.
pub struct Notifier {
    socket: Option<(UnixDatagram, SocketAddr)>,
    /// From `$WATCHDOG_USEC` (only when `$WATCHDOG_PID` is unset or ours).
    watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET` and `$WATCHDOG_USEC`. An unusable socket is logged and ignored.
    pub fn from_environment() -> Notifier {
        let socket = std::env::var_os("NOTIFY_SOCKET").and_then(|path| {
            let path = path.to_string_lossy().into_owned();
            let addr = if let Some(name) = path.strip_prefix('@') {
                SocketAddr::from_abstract_name(name.as_bytes())
            } else {
                SocketAddr::from_pathname(&path)
            };
            match (UnixDatagram::unbound(), addr) {
                (Ok(s), Ok(a)) => Some((s, a)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!("NOTIFY_SOCKET={path} is not usable ({e}); systemd will not hear from drover");
                    None
                }
            }
        });
        let ours = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            .is_none_or(|p| p == std::process::id());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|u| *u > 0 && ours)
            .map(Duration::from_micros);
        Notifier { socket, watchdog }
    }

    /// How often to send `WATCHDOG=1`: half the watchdog interval, if systemd set one.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.socket.as_ref()?;
        self.watchdog.map(|w| w / 2)
    }

    /// Sends one notification (lines `KEY=VALUE`); failures are logged at debug level only.
    pub fn notify(&self, state: &str) {
        if let Some((socket, addr)) = &self.socket {
            if let Err(e) = socket.send_to_addr(state.as_bytes(), addr) {
                tracing::debug!("sd_notify {state:?}: {e}");
            }
        }
    }

    pub fn ready(&self, status: &str) {
        self.notify(&format!("READY=1\nSTATUS={status}"));
    }

    pub fn reloading(&self) {
        let mut t = nix::libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into the timespec we own.
        unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_MONOTONIC, &mut t) };
        let now = t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000;
        self.notify(&format!("RELOADING=1\nMONOTONIC_USEC={now}"));
    }

    pub fn stopping(&self) {
        self.notify("STOPPING=1");
    }

    pub fn watchdog(&self) {
        self.notify("WATCHDOG=1");
    }

    pub fn status(&self, status: &str) {
        self.notify(&format!("STATUS={status}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_reach_the_socket_named_in_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let receiver = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier {
            socket: Some((
                UnixDatagram::unbound().unwrap(),
                SocketAddr::from_pathname(&path).unwrap(),
            )),
            watchdog: Some(Duration::from_secs(20)),
        };
        notifier.ready("4 workers");
        let mut buf = [0u8; 256];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=4 workers");
        assert_eq!(notifier.watchdog_interval(), Some(Duration::from_secs(10)));
        notifier.stopping();
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
    }
}
