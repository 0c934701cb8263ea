//! One worker process and three tasks around it — a reader that turns lines into frames, a writer
//! that sends frames, and a reaper that waits for the exit. A worker is either started by the
//! master (`exec` mode: [`spawn`], a socketpair on fd 3) or forked by a zygote ([`forked`]: it
//! connects to the master's fork socket, and the master adopts the process).
//!
//! Ordering guarantee: a worker's `Exited` event is sent only after every frame it wrote before
//! dying has been delivered, so the master never releases a job whose `done` is still in flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot, watch};

use crate::adopted::{self, Adopted, Claim, Known, PidCell};
use crate::channel::{self, spawn_writer, Outgoing};
use crate::child::{self, Signal};
use crate::command::WorkerCommand;
use crate::events::{WorkerEvent, ZygoteEvent};
use crate::exit::describe_exit;
use crate::protocol::{FromWorker, ToWorker};
use crate::rendezvous::{Attached, Rendezvous};
use crate::worker_id::WorkerId;
use crate::{strays, SupervisorError};

/// A worker's PID: known at once when the master started it, reported later when a zygote
/// forked it.
#[derive(Debug)]
pub(crate) enum WorkerPid {
    Started(u32),
    Forked(PidCell),
}

/// The master's handle on a live worker.
#[derive(Debug)]
pub(crate) struct WorkerHandle {
    pid: WorkerPid,
    pub spawned_at: Instant,
    /// Frames to the worker, written in order by the writer task.
    pub frames: mpsc::UnboundedSender<Outgoing<ToWorker>>,
    /// Signals, delivered by the reaper task.
    pub signals: mpsc::UnboundedSender<Signal>,
    /// The zygote it was forked from, held so that zygote is told to exit only once its last
    /// worker is gone (a reload's old zygote is retired that way).
    pub zygote: Option<Arc<crate::zygote::Zygote>>,
    /// Its channel to the master is up: always for a started worker, once its connection
    /// presented its token for a forked one.
    attached: Arc<AtomicBool>,
}

impl WorkerHandle {
    /// A handle with no process behind it (`crate::pool::StandIn`): the frames and signals it is
    /// sent come out of the two receivers.
    #[cfg(feature = "stand-ins")]
    pub(crate) fn stand_in(
        pid: u32,
    ) -> (
        WorkerHandle,
        mpsc::UnboundedReceiver<Outgoing<ToWorker>>,
        mpsc::UnboundedReceiver<Signal>,
    ) {
        let (frames, frames_rx) = mpsc::unbounded_channel();
        let (signals, signals_rx) = mpsc::unbounded_channel();
        let handle = WorkerHandle {
            pid: WorkerPid::Started(pid),
            spawned_at: Instant::now(),
            frames,
            signals,
            zygote: None,
            attached: Arc::new(AtomicBool::new(true)),
        };
        (handle, frames_rx, signals_rx)
    }

    /// Its PID, once known (a forked worker's comes with the zygote's report or its connection).
    pub fn pid(&self) -> Option<u32> {
        match &self.pid {
            WorkerPid::Started(pid) => Some(*pid),
            WorkerPid::Forked(cell) => cell.get(),
        }
    }

    /// Whether it ever reached the master (a forked worker that did not never ran anything).
    pub fn attached(&self) -> bool {
        self.attached.load(Ordering::Relaxed)
    }

    /// Where a forked worker's PID is reported.
    pub fn forked_cell(&self) -> Option<PidCell> {
        match &self.pid {
            WorkerPid::Started(_) => None,
            WorkerPid::Forked(cell) => Some(cell.clone()),
        }
    }

    /// The zygote will not fork it after all.
    pub fn not_forked(&self, why: &str) {
        if let WorkerPid::Forked(cell) = &self.pid {
            cell.none(why);
        }
    }
}

/// Starts a worker and its tasks (`exec` mode).
pub(crate) fn spawn(
    id: WorkerId,
    command: &WorkerCommand,
    max_frame_bytes: usize,
    events: mpsc::UnboundedSender<WorkerEvent>,
) -> Result<WorkerHandle, SupervisorError> {
    let started = child::start(
        &id.to_string(),
        command,
        &[("DROVER_WORKER_ID", id.0.to_string())],
    )?;
    let mut child = started.child;
    let pid = started.pid;
    strays::waited_for(pid);
    let (read_half, write_half) = started.channel.into_split();

    let (frames_tx, frames_rx) = mpsc::unbounded_channel::<Outgoing<ToWorker>>();
    let (signals_tx, mut signals_rx) = mpsc::unbounded_channel::<Signal>();
    let (exited_tx, exited_rx) = watch::channel(false);
    let spawned_at = Instant::now();

    spawn_writer(write_half, frames_rx);
    let reader = tokio::spawn(read_frames(
        id,
        read_half,
        Vec::new(),
        max_frame_bytes,
        events.clone(),
        exited_rx,
    ));

    tokio::spawn(async move {
        let status = child::wait(&mut child, pid, &mut signals_rx).await;
        strays::reaped(pid);
        channel::drain(exited_tx, reader).await;
        let _ = events.send(WorkerEvent::Exited {
            worker: id,
            pid,
            status,
            lived: spawned_at.elapsed(),
        });
    });

    Ok(WorkerHandle {
        pid: WorkerPid::Started(pid),
        spawned_at,
        frames: frames_tx,
        signals: signals_tx,
        zygote: None,
        attached: Arc::new(AtomicBool::new(true)),
    })
}

/// The handle and tasks of a worker a zygote is being asked to fork: its connection arrives on
/// `attached` (the rendezvous delivers it for `token`), its PID from the connection's peer credentials or the
/// zygote's report ([`PidCell`]), whichever comes first.
pub(crate) fn forked(
    id: WorkerId,
    zygote: Arc<crate::zygote::Zygote>,
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
        let mut attached = attached;
        let attached = tokio::select! {
            biased;
            _ = exited_rx.wait_for(|e| *e) => {
                // Given up (never forked, killed): a connection that came meanwhile is a process
                // that must not run.
                rendezvous.forget(&token);
                if let Ok(Attached { pid: Some(peer), .. }) = attached.try_recv() {
                    adopted::kill_unwanted(peer);
                }
                return;
            }
            a = &mut attached => a.ok(),
        };
        let Some(Attached {
            stream,
            leftover,
            pid,
        }) = attached
        else {
            return;
        };
        let Some(peer) = pid else {
            tracing::error!(
                worker = id.0,
                "a forked worker's connection has no peer credentials; closed"
            );
            return;
        };
        match connection_cell.connected(peer) {
            Claim::Accepted => {}
            Claim::GivenUp => {
                tracing::warn!(
                    worker = id.0,
                    pid = peer,
                    "a forked worker connected after it was given up; killing it"
                );
                adopted::kill_unwanted(peer);
                return;
            }
            Claim::Contradicted(reported) => {
                tracing::error!(worker = id.0, pid = peer, reported, "pid {peer} connected as worker {} with its token, but its zygote reported pid {reported}; killing it", id.0);
                adopted::kill_unwanted(peer);
                return;
            }
        }
        connected.store(true, Ordering::Relaxed);
        from.report(ZygoteEvent::Attached { zygote: from.id });
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
                Some(signal) = signals_rx.recv() => {
                    if !matches!(pending, Some(Signal::Kill)) {
                        pending = Some(signal);
                    }
                }
            }
        };
        let status = match pid.map(|pid| (pid, Adopted::new(pid))) {
            None => None,
            Some((pid, Err(e))) => {
                tracing::error!(
                    worker = id.0,
                    pid,
                    "cannot take hold of the forked worker: {e}"
                );
                None
            }
            Some((pid, Ok(process))) => {
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
                        Some(next) = signals_rx.recv() => signal = Some(next),
                    }
                };
                strays::reaped(pid);
                status
            }
        };
        channel::drain(exited_tx, connection).await;
        // A process that ended before it reached the master is its zygote's failure (read once
        // the connection task is done: it alone sets `attached`).
        if pid.is_some() && !reaper_flag.load(Ordering::Relaxed) {
            reaper_zygote.report(ZygoteEvent::Lost {
                zygote: reaper_zygote.id,
                worker: id.0,
                how: status
                    .map(describe_exit)
                    .unwrap_or_else(|| "ended (status unknown)".into()),
            });
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

/// A worker's frames as events, until EOF, bad input, or — once the process has exited — until
/// nothing more arrives (see [`crate::channel`]).
async fn read_frames(
    id: WorkerId,
    read_half: tokio::net::unix::OwnedReadHalf,
    prefix: Vec<u8>,
    limit: usize,
    events: mpsc::UnboundedSender<WorkerEvent>,
    exited: watch::Receiver<bool>,
) {
    channel::read_frames(
        read_half,
        prefix,
        limit,
        exited,
        FromWorker::parse,
        |frame| {
            let _ = events.send(match frame {
                Ok(frame) => WorkerEvent::Frame { worker: id, frame },
                Err(problem) => WorkerEvent::BadInput {
                    worker: id,
                    problem,
                },
            });
        },
    )
    .await;
}
