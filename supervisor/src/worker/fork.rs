//! A worker a zygote forks (fork mode): it reaches the master through the rendezvous
//! ([`crate::rendezvous`]), and the master adopts the process ([`crate::adopted`]). Its PID is
//! known only later — from its connection or its zygote's report — so its reaper first waits for
//! the PID, then for the process.

use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot, watch};

use super::{read_frames, WorkerHandle, WorkerPid};
use crate::adopted::{self, Adopted, Claim, Known, PidCell};
use crate::channel::{self, spawn_writer, Outgoing};
use crate::child::Signal;
use crate::events::{WorkerEvent, ZygoteEvent};
use crate::exit::describe_exit;
use crate::protocol::ToWorker;
use crate::rendezvous::{Attached, Rendezvous};
use crate::strays;
use crate::worker_id::WorkerId;
use crate::zygote::Zygote;

/// The handle and tasks of a worker a zygote is being asked to fork: its connection arrives on
/// `attached` (the rendezvous delivers it for `token`), its PID from the connection's peer
/// credentials or the zygote's report ([`PidCell`]), whichever comes first.
pub(crate) fn forked(
    id: WorkerId,
    zygote: Arc<Zygote>,
    rendezvous: Arc<Rendezvous>,
    token: String,
    attached: oneshot::Receiver<Attached>,
    max_frame_bytes: usize,
    events: mpsc::UnboundedSender<WorkerEvent>,
) -> WorkerHandle {
    let (cell, mut known) = PidCell::new();
    let (frames_tx, frames_rx) = mpsc::unbounded_channel::<Outgoing<ToWorker>>();
    let (signals_tx, mut signals_rx) = mpsc::unbounded_channel::<Signal>();
    let (exited_tx, mut exited_rx) = watch::channel(false);
    let spawned_at = Instant::now();
    let attached_flag = Arc::new(AtomicBool::new(false));

    // The connection: once it is there, a writer and a reader on it, as for a started worker.
    let connection_cell = cell.clone();
    let reader_events = events.clone();
    let connected = attached_flag.clone();
    let from = zygote.clone();
    let connection = tokio::spawn(async move {
        let Some(Attached {
            stream,
            leftover,
            pid,
        }) = arrival(attached, &mut exited_rx, &rendezvous, &token).await
        else {
            return;
        };
        if !attach(id, &connection_cell, pid, &connected, &from) {
            return;
        }
        let (read_half, write_half) = stream.into_split();
        spawn_writer(write_half, frames_rx);
        read_frames(
            id,
            read_half,
            leftover,
            max_frame_bytes,
            reader_events,
            exited_rx,
        )
        .await;
    });

    // Reaper: waits for the PID, then for the process. A signal sent before the PID is known is
    // delivered once it is (a kill wins over a terminate).
    let reaper_flag = attached_flag.clone();
    let reaper_zygote = zygote.clone();
    tokio::spawn(async move {
        let (pid, pending) = pid_once_known(id, &mut known, &mut signals_rx).await;
        let status = match pid {
            None => None,
            Some(pid) => reap_adopted(id, pid, pending, &mut signals_rx).await,
        };
        channel::drain(exited_tx, connection).await;
        // Read once the connection task is done: it alone sets `attached`.
        if pid.is_some() && !reaper_flag.load(Ordering::Relaxed) {
            lost(&reaper_zygote, id, status);
        }
        let _ = events.send(WorkerEvent::Exited {
            worker: id,
            // 0: never forked.
            pid: pid.unwrap_or(0),
            status,
            lived: spawned_at.elapsed(),
        });
    });

    WorkerHandle {
        pid: WorkerPid::Forked(cell),
        spawned_at,
        frames: frames_tx,
        signals: signals_tx,
        zygote: Some(zygote),
        attached: attached_flag,
    }
}

/// The worker's connection, as the rendezvous delivers it on `attached`; `None` if none comes, or
/// if the worker is given up first (`exited`: never forked, killed) — then a connection that came
/// meanwhile is a process that must not run.
pub(crate) async fn arrival(
    mut attached: oneshot::Receiver<Attached>,
    exited: &mut watch::Receiver<bool>,
    rendezvous: &Rendezvous,
    token: &str,
) -> Option<Attached> {
    tokio::select! {
        biased;
        _ = exited.wait_for(|e| *e) => {
            // Given up (never forked, killed): a connection that came meanwhile is a process
            // that must not run.
            rendezvous.forget(token);
            if let Ok(Attached { pid: Some(peer), .. }) = attached.try_recv() {
                adopted::kill_unwanted(peer);
            }
            None
        }
        a = &mut attached => a.ok(),
    }
}

/// Whether the process that connected with the worker's token (`peer`, the kernel's credentials)
/// is the worker `id` ([`PidCell::connected`]); if so it is `attached` now, and its zygote is told
/// (forking works). One the master gave up, or whose zygote reported another PID, is killed.
pub(crate) fn attach(
    id: WorkerId,
    cell: &PidCell,
    peer: Option<u32>,
    attached: &AtomicBool,
    zygote: &Zygote,
) -> bool {
    let Some(peer) = peer else {
        tracing::error!(
            worker = id.0,
            "a forked worker's connection has no peer credentials; closed"
        );
        return false;
    };
    match cell.connected(peer) {
        Claim::Accepted => {
            attached.store(true, Ordering::Relaxed);
            zygote.report(ZygoteEvent::Attached { zygote: zygote.id });
            true
        }
        Claim::GivenUp => {
            tracing::warn!(
                worker = id.0,
                pid = peer,
                "a forked worker connected after it was given up; killing it"
            );
            adopted::kill_unwanted(peer);
            false
        }
        Claim::Contradicted(reported) => {
            tracing::error!(worker = id.0, pid = peer, reported, "pid {peer} connected as worker {} with its token, but its zygote reported pid {reported}; killing it", id.0);
            adopted::kill_unwanted(peer);
            false
        }
    }
}

/// The worker's PID once it is known (`None`: there will be no process), and the signal sent
/// before it was, to be delivered once it is (a kill wins over a terminate).
pub(crate) async fn pid_once_known(
    id: WorkerId,
    known: &mut watch::Receiver<Known>,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
) -> (Option<u32>, Option<Signal>) {
    let mut pending: Option<Signal> = None;
    let pid = loop {
        let now = known.borrow_and_update().clone();
        match now {
            Known::Pid(pid) => break Some(pid),
            Known::NoProcess(why) => {
                tracing::debug!(worker = id.0, "no process: {why}");
                break None;
            }
            Known::Unknown => {}
        }
        tokio::select! {
            changed = known.changed() => if changed.is_err() { break None },
            Some(signal) = signals.recv() => {
                if !matches!(pending, Some(Signal::Kill)) {
                    pending = Some(signal);
                }
            }
        }
    };
    (pid, pending)
}

/// Takes hold of the forked worker `pid` and waits for it, delivering `pending` and then
/// `signals` through its pidfd. Its exit status; `None` if it cannot be had.
pub(crate) async fn reap_adopted(
    id: WorkerId,
    pid: u32,
    pending: Option<Signal>,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
) -> Option<ExitStatus> {
    let process = match Adopted::new(pid) {
        Ok(process) => process,
        Err(e) => {
            tracing::error!(
                worker = id.0,
                pid,
                "cannot take hold of the forked worker: {e}"
            );
            return None;
        }
    };
    strays::waited_for(pid);
    let mut signal = pending;
    let status = loop {
        match signal.take() {
            Some(Signal::Kill) => process.kill(),
            Some(Signal::Terminate) => process.terminate(),
            None => {}
        }
        tokio::select! {
            status = process.wait() => break status,
            Some(next) = signals.recv() => signal = Some(next),
        }
    };
    strays::reaped(pid);
    status
}

/// A forked worker that ended (`status`) before it reached the master is its zygote's failure:
/// the zygote's line is told.
pub(crate) fn lost(zygote: &Zygote, id: WorkerId, status: Option<ExitStatus>) {
    zygote.report(ZygoteEvent::Lost {
        zygote: zygote.id,
        worker: id.0,
        how: status
            .map(describe_exit)
            .unwrap_or_else(|| "ended (status unknown)".into()),
    });
}
