//! A one-off: a process a zygote forks to run one thing and exit — a scheduled task — instead of
//! a worker (zygote protocol version 2, [`crate::protocol::ToZygote::Fork`]'s `run`). It reaches
//! the master the way a forked worker does (the rendezvous, the fork request's one-time token; the
//! master adopts the process and waits for it through a pidfd), writes what it has to say on that
//! connection, and exits. [`OneOff::ended`] gives what it wrote and how it ended.
//!
//! The master answers the one-off's attach with `{"t":"go"}`, and only then does it run its
//! thing: one the master gave up (its zygote retired, its boot timeout passed) never runs it, so
//! a one-off that did not attach ran nothing, and its caller may run that thing another way.
//!
//! A one-off that dies before it reaches the master is its zygote's failure, as a worker's is
//! (the line counts it towards falling back to exec); one the zygote does not fork within the
//! line's boot timeout makes the line kill that zygote, as for a worker.

use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot, watch};

use crate::adopted::PidCell;
use crate::child::Signal;
use crate::rendezvous::{Attached, Rendezvous};
use crate::worker::{arrival, attach, lost, pid_once_known, reap_adopted};
use crate::worker_id::WorkerId;
use crate::zygote::Zygote;

/// Of what a one-off writes on its connection, the master keeps this much, from the end.
pub const KEPT_SAID: usize = 256 * 1024;

/// Once the process has exited, how long its connection may still deliver what is in flight (a
/// process it started may hold the connection open: it is not waited for).
const AFTER_EXIT: Duration = Duration::from_millis(200);

/// The master's handle on a one-off.
#[derive(Debug)]
pub struct OneOff {
    control: Control,
    /// Sent by the reaper when the process is gone and its connection read.
    ended: oneshot::Receiver<OneOffEnd>,
}

/// What can be asked of a one-off while it runs; cloning shares it.
#[derive(Debug, Clone)]
pub struct Control {
    /// Its PID, once the zygote's report or its connection gave it.
    cell: PidCell,
    /// Signals for the reaper, which delivers them once the PID is known.
    signals: mpsc::UnboundedSender<Signal>,
    /// It reached the master.
    attached: Arc<AtomicBool>,
    /// Its process was reaped: its PID and group may be another's by now.
    reaped: Arc<AtomicBool>,
    /// Turns true once it attached or its process is gone: nothing is left to time out.
    settled: watch::Receiver<bool>,
}

/// How a one-off ended.
#[derive(Debug)]
pub struct OneOffEnd {
    /// `None`: there never was a process (the zygote could not fork it, or was given up).
    pub pid: Option<u32>,
    /// `None` when there was no process, or its status could not be had.
    pub status: Option<ExitStatus>,
    /// It reached the master: without that, nothing of the application ran.
    pub attached: bool,
    /// What it wrote on its connection after its attach frame: the last [`KEPT_SAID`] bytes.
    pub said: Vec<u8>,
    /// Why there was no process, when there was none.
    pub why_none: Option<String>,
}

impl Control {
    /// Its PID, once known.
    pub fn pid(&self) -> Option<u32> {
        self.cell.get()
    }

    /// Its PID once the zygote reported it or it connected; `None`: there is no process (the
    /// zygote could not fork it, or it was given up).
    pub async fn pid_known(&self) -> Option<u32> {
        self.cell.known().await
    }

    /// Returns once it attached or its process is gone.
    pub async fn settled(&self) {
        let mut settled = self.settled.clone();
        let _ = settled.wait_for(|s| *s).await;
    }

    /// Whether it reached the master yet.
    pub fn attached(&self) -> bool {
        self.attached.load(Ordering::Relaxed)
    }

    /// Kills it and its process group (what it started: a command's shell and children). Before
    /// its PID is known, it is killed once it is.
    pub fn kill(&self) {
        if let Some(pid) = self.pid().filter(|_| !self.reaped.load(Ordering::Relaxed)) {
            // Its own group, which it made first thing after the fork; before that there is no
            // group of that number and this does nothing (the pidfd kill below still does).
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let _ = self.signals.send(Signal::Kill);
    }
}

impl OneOff {
    /// What can be asked of it while it runs.
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// Where the zygote's report of its PID goes.
    pub(crate) fn cell(&self) -> PidCell {
        self.control.cell.clone()
    }

    /// Waits for it to end.
    pub async fn ended(self) -> OneOffEnd {
        self.ended.await.unwrap_or(OneOffEnd {
            pid: None,
            status: None,
            attached: false,
            said: Vec::new(),
            why_none: Some("its reaper is gone (the master is stopping)".into()),
        })
    }
}

/// The handle and tasks of a one-off the zygote is being asked to fork (see
/// `crate::worker::forked`, which this mirrors for a process that is not a worker).
pub(crate) fn forked(
    id: WorkerId,
    zygote: Arc<Zygote>,
    rendezvous: Arc<Rendezvous>,
    token: String,
    arrived: oneshot::Receiver<Attached>,
) -> OneOff {
    let (cell, mut known) = PidCell::new();
    let (signals_tx, mut signals_rx) = mpsc::unbounded_channel::<Signal>();
    let (exited_tx, mut exited_rx) = watch::channel(false);
    let (ended_tx, ended_rx) = oneshot::channel();
    let attached = Arc::new(AtomicBool::new(false));
    let reaped = Arc::new(AtomicBool::new(false));
    let (settled_tx, settled_rx) = watch::channel(false);
    let settled_tx = Arc::new(settled_tx);

    let connection_cell = cell.clone();
    let connected = attached.clone();
    let from = zygote.clone();
    let attach_settles = settled_tx.clone();
    let connection = tokio::spawn(async move {
        let Some(Attached {
            stream,
            leftover,
            pid,
        }) = arrival(arrived, &mut exited_rx, &rendezvous, &token).await
        else {
            return Vec::new();
        };
        if !attach(id, &connection_cell, pid, &connected, &from) {
            return Vec::new();
        }
        let _ = attach_settles.send(true);
        // It runs only once told: a one-off the master gave up never runs its thing, so one
        // that did not get here ran nothing (the caller may run it another way).
        let mut stream = stream;
        if stream.write_all(b"{\"t\":\"go\"}\n").await.is_err() {
            return Vec::new();
        }
        read_said(stream, leftover, exited_rx).await
    });

    let reaper_attached = attached.clone();
    let reaper_reaped = reaped.clone();
    tokio::spawn(async move {
        let (pid, pending) = pid_once_known(id, &mut known, &mut signals_rx).await;
        let why_none = match &*known.borrow() {
            crate::adopted::Known::NoProcess(why) => Some(why.clone()),
            _ => None,
        };
        let status = match pid {
            None => None,
            Some(pid) => reap_adopted(id, pid, pending, &mut signals_rx).await,
        };
        reaper_reaped.store(true, Ordering::Relaxed);
        let _ = settled_tx.send(true);
        let _ = exited_tx.send(true);
        let said = connection.await.unwrap_or_default();
        let attached = reaper_attached.load(Ordering::Relaxed);
        if pid.is_some() && !attached {
            lost(&zygote, id, status);
        }
        let _ = ended_tx.send(OneOffEnd {
            pid,
            status,
            attached,
            said,
            why_none,
        });
    });

    OneOff {
        control: Control {
            cell,
            signals: signals_tx,
            attached,
            reaped,
            settled: settled_rx,
        },
        ended: ended_rx,
    }
}

/// Reads the connection to its end, keeping the last [`KEPT_SAID`] bytes; once the process has
/// exited, only what arrives within [`AFTER_EXIT`].
async fn read_said(
    mut stream: UnixStream,
    leftover: Vec<u8>,
    mut exited: watch::Receiver<bool>,
) -> Vec<u8> {
    let mut said = leftover;
    let mut buf = vec![0u8; 8192];
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let read = async {
            match deadline {
                Some(at) => tokio::time::timeout_at(at, stream.read(&mut buf))
                    .await
                    .unwrap_or(Ok(0)),
                None => stream.read(&mut buf).await,
            }
        };
        tokio::select! {
            n = read => match n {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    said.extend_from_slice(&buf[..n]);
                    if said.len() > 2 * KEPT_SAID {
                        said.drain(..said.len() - KEPT_SAID);
                    }
                }
            },
            _ = exited.wait_for(|e| *e), if deadline.is_none() => {
                deadline = Some(tokio::time::Instant::now() + AFTER_EXIT);
            }
        }
    }
    if said.len() > KEPT_SAID {
        said.drain(..said.len() - KEPT_SAID);
    }
    said
}
