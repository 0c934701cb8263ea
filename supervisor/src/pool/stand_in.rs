//! Stand-in workers (feature `stand-ins`, for unit tests of a master): a worker with no process
//! behind it, placed in a [`Pool`] as if it had been spawned. The master's frames to it and its
//! signals land in the test's hands; its frames to the master are whatever the test sends as
//! [`WorkerEvent`](crate::WorkerEvent)s. So a master's loop is driven through hello, jobs, leases
//! and exits without a PHP process.

use tokio::sync::mpsc;

use super::{Pool, Slot};
use crate::protocol::ToWorker;
use crate::worker::{Signal, WorkerHandle, WorkerId};

/// The test's end of a stand-in worker.
pub struct StandIn {
    pub id: WorkerId,
    /// The PID it claims (the test's own process, so `/proc` reads of it succeed).
    pub pid: u32,
    /// Every frame the master sent it, in order.
    pub frames: mpsc::UnboundedReceiver<ToWorker>,
    signals: mpsc::UnboundedReceiver<Signal>,
}

impl StandIn {
    /// The frames sent to it so far.
    pub fn sent(&mut self) -> Vec<ToWorker> {
        let mut sent = Vec::new();
        while let Ok(frame) = self.frames.try_recv() {
            sent.push(frame);
        }
        sent
    }

    /// The signals sent to it so far, by name (`terminate`, `kill`).
    pub fn signalled(&mut self) -> Vec<&'static str> {
        let mut names = Vec::new();
        while let Ok(signal) = self.signals.try_recv() {
            names.push(match signal {
                Signal::Terminate => "terminate",
                Signal::Kill => "kill",
            });
        }
        names
    }
}

impl Pool {
    /// A stand-in worker in the pool's first free place, not yet ready (it says hello when the
    /// test sends its `hello` frame).
    pub fn stand_in(&mut self) -> StandIn {
        let id = WorkerId::next();
        let pid = std::process::id();
        let (handle, frames, signals) = WorkerHandle::stand_in(pid);
        let index = (0..)
            .find(|i| !self.workers.values().any(|s| s.index == *i))
            .unwrap_or(0);
        self.workers.insert(
            id,
            Slot {
                index,
                handle,
                generation: self.generation,
                ready_at: None,
                healthy: false,
                retiring: false,
                boot_timed_out: false,
                probe: false,
            },
        );
        StandIn {
            id,
            pid,
            frames,
            signals,
        }
    }
}
