//! Stand-in workers (feature `stand-ins`, for unit tests of a master): a worker with no process
//! behind it, placed in a [`Pool`] where a start would have spawned one ([`Pool::use_stand_ins`]). The master's frames to it and its
//! signals land in the test's hands; its frames to the master are whatever the test sends as
//! [`WorkerEvent`](crate::WorkerEvent)s. So a master's loop is driven through hello, jobs, leases
//! and exits without a PHP process.

use tokio::sync::mpsc;

use super::Pool;
use crate::channel::Outgoing;
use crate::child::Signal;
use crate::protocol::ToWorker;
use crate::worker::WorkerHandle;
use crate::worker_id::WorkerId;

/// The test's end of a stand-in worker.
pub struct StandIn {
    pub id: WorkerId,
    /// The PID it claims (the test's own process, so `/proc` reads of it succeed).
    pub pid: u32,
    /// Every frame the master sent it, in order.
    frames: mpsc::UnboundedReceiver<Outgoing<ToWorker>>,
    signals: mpsc::UnboundedReceiver<Signal>,
}

impl StandIn {
    /// The frames sent to it so far. Taking them is what writing them to a worker's socket is:
    /// whoever waits to hear a frame was written ([`Pool::send_written`]) hears it now.
    pub fn sent(&mut self) -> Vec<ToWorker> {
        let mut sent = Vec::new();
        while let Ok(out) = self.frames.try_recv() {
            if let Some(written) = out.written {
                let _ = written.send(());
            }
            sent.push(out.frame);
        }
        sent
    }

    /// The ids of the `job` frames sent to it so far (the other frames are taken too).
    pub fn jobs_sent(&mut self) -> Vec<i64> {
        self.sent()
            .into_iter()
            .filter_map(|f| match f {
                ToWorker::Job { job, .. } => Some(job),
                _ => None,
            })
            .collect()
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
    /// From now on every start in this pool places a stand-in instead of a process: the pool's
    /// own start, refills, restarts and a reload's new workers alike. [`Pool::take_stand_ins`]
    /// hands them to the test.
    pub fn use_stand_ins(&mut self) {
        self.stand_ins = Some(Vec::new());
    }

    /// The stand-ins the pool placed since the last call, in the order it placed them.
    pub fn take_stand_ins(&mut self) -> Vec<StandIn> {
        self.stand_ins
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// A stand-in in place `index`, not yet ready (it says hello when the test sends its `hello`
    /// frame); kept for [`Pool::take_stand_ins`]. What `spawn_into` does in this mode.
    pub(super) fn place_stand_in(&mut self, index: usize, probe: bool) -> WorkerId {
        let id = WorkerId::next();
        let pid = std::process::id();
        let (handle, frames, signals) = WorkerHandle::stand_in(pid);
        self.place(id, index, handle, probe);
        if let Some(made) = &mut self.stand_ins {
            made.push(StandIn {
                id,
                pid,
                frames,
                signals,
            });
        }
        id
    }
}
