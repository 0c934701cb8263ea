//! One worker process, the master's [`WorkerHandle`] on it, and three tasks around it — a reader
//! that turns lines into frames, a writer that sends frames, and a reaper that waits for the exit.
//! A worker is either started by the master ([`exec`]: [`spawn`], a socketpair on fd 3) or forked
//! by a zygote ([`fork`]: [`forked`], it connects to the master's fork socket, and the master
//! adopts the process).
//!
//! Ordering guarantee: a worker's `Exited` event is sent only after every frame it wrote before
//! dying has been delivered, so the master never releases a job whose `done` is still in flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, watch};

use crate::adopted::PidCell;
use crate::channel::{self, Outgoing};
use crate::child::Signal;
use crate::events::WorkerEvent;
use crate::protocol::{FromWorker, ToWorker};
use crate::worker_id::WorkerId;

mod exec;
mod fork;

pub(crate) use exec::spawn;
pub(crate) use fork::forked;
// What a one-off (`crate::one_off`) shares with a forked worker: its arrival, its PID, its reaping.
pub(crate) use fork::{arrival, attach, lost, pid_once_known, reap_adopted};

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
