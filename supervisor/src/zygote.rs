//! One zygote — a PHP process that booted the application once and forks workers on request — as
//! the master holds it ([`Zygote`]): started like a worker (fd 3, its own process group, the
//! workers' user), with `DROVER_ZYGOTE=1` in its environment, which makes the worker command boot
//! the application and then fork on request instead of running jobs. A reader turns its frames
//! into [`ZygoteEvent`]s and a reaper reports its exit, after its last frame.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::channel::{drain, read_frames, spawn_writer, Outgoing};
use crate::child::{self, Signal};
use crate::command::WorkerCommand;
use crate::events::{WorkerEvent, ZygoteEvent};
use crate::protocol::{FromZygote, ToZygote};
use crate::worker_id::WorkerId;
use crate::{strays, SupervisorError};

/// How long a retired zygote that was ready has to exit after `stop` before it is killed.
const RETIRE_GRACE: Duration = Duration::from_secs(10);

/// A live zygote. Dropping the last reference tells it to exit: the line holds one for its
/// current zygote, and every worker forked from it holds one. One that never became ready is
/// killed at once; one that does not exit within [`RETIRE_GRACE`] of `stop` is killed then.
#[derive(Debug)]
pub struct Zygote {
    /// Unique in this master, never reused.
    pub id: u64,
    /// The line (the configured pool) it belongs to.
    pub line: String,
    /// It said it was ready.
    ready: AtomicBool,
    /// The protocol version it said it speaks when ready (0 before): 2 runs one-offs.
    version: AtomicU32,
    /// The master's event channel, for what its workers' tasks report.
    events: mpsc::UnboundedSender<WorkerEvent>,
    pub pid: u32,
    /// The line's generation it was started for (a reload starts the next).
    pub generation: u64,
    pub started_at: Instant,
    frames: mpsc::UnboundedSender<Outgoing<ToZygote>>,
    signals: mpsc::UnboundedSender<Signal>,
}

impl Zygote {
    /// Starts a zygote of the line `line` and its tasks.
    pub(crate) fn spawn(
        line: &str,
        generation: u64,
        command: &WorkerCommand,
        max_frame_bytes: usize,
        events: mpsc::UnboundedSender<WorkerEvent>,
    ) -> Result<Zygote, SupervisorError> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let started = child::start(
            &format!("the zygote of pool {line}"),
            command,
            &[
                ("DROVER_ZYGOTE", "1".to_string()),
                // This master takes version 2 (one-offs); a zygote speaks it only when told so.
                ("DROVER_ZYGOTE_ONE_OFFS", "1".to_string()),
            ],
        )?;
        let mut child = started.child;
        let pid = started.pid;
        strays::zygote(pid);
        let (read_half, write_half) = started.channel.into_split();
        let (frames_tx, frames_rx) = mpsc::unbounded_channel::<Outgoing<ToZygote>>();
        let (signals_tx, mut signals_rx) = mpsc::unbounded_channel::<Signal>();
        let (exited_tx, exited_rx) = watch::channel(false);
        let started_at = Instant::now();
        spawn_writer(write_half, frames_rx);

        let events_for_workers = events.clone();
        let name = line.to_string();
        let reader_events = events.clone();
        let reader = tokio::spawn(async move {
            read_frames(
                read_half,
                Vec::new(),
                max_frame_bytes,
                exited_rx,
                FromZygote::parse,
                |frame| {
                    let event = match frame {
                        Ok(frame) => ZygoteEvent::Frame { zygote: id, frame },
                        Err(problem) => ZygoteEvent::BadInput {
                            zygote: id,
                            problem,
                        },
                    };
                    let _ = reader_events.send(WorkerEvent::Zygote {
                        line: name.clone(),
                        event,
                    });
                },
            )
            .await;
        });

        let name = line.to_string();
        tokio::spawn(async move {
            // A kill takes its group too, which holds only what it has not handed over yet: a
            // middle process, a worker before it left for a group of its own.
            let status = child::wait(&mut child, pid, &mut signals_rx).await;
            strays::reaped(pid);
            drain(exited_tx, reader).await;
            let _ = events.send(WorkerEvent::Zygote {
                line: name,
                event: ZygoteEvent::Exited {
                    zygote: id,
                    pid,
                    status,
                    lived: started_at.elapsed(),
                },
            });
        });
        Ok(Zygote {
            id,
            line: line.to_string(),
            ready: AtomicBool::new(false),
            version: AtomicU32::new(0),
            events: events_for_workers,
            pid,
            generation,
            started_at,
            frames: frames_tx,
            signals: signals_tx,
        })
    }

    /// Asks for a worker, or for a one-off when `run` says what it runs; false if the zygote's
    /// channel is gone.
    pub(crate) fn fork(
        &self,
        worker: WorkerId,
        connect: &std::path::Path,
        token: String,
        env: BTreeMap<String, String>,
        run: Option<BTreeMap<String, String>>,
    ) -> bool {
        self.frames
            .send(Outgoing::frame(ToZygote::Fork {
                worker: worker.0,
                connect: connect.display().to_string(),
                token,
                env,
                run,
            }))
            .is_ok()
    }

    /// Whether it runs one-offs (it said version 2 or later).
    pub(crate) fn runs_one_offs(&self) -> bool {
        self.version.load(Ordering::Relaxed) >= 2
    }

    pub(crate) fn kill(&self) {
        let _ = self.signals.send(Signal::Kill);
    }

    /// It said `zygote` with version `v`: ready to fork.
    pub(crate) fn mark_ready(&self, v: u32) {
        self.version.store(v, Ordering::Relaxed);
        self.ready.store(true, Ordering::Relaxed);
    }

    /// What a forked worker's tasks have to tell this zygote's line.
    pub(crate) fn report(&self, event: ZygoteEvent) {
        let _ = self.events.send(WorkerEvent::Zygote {
            line: self.line.clone(),
            event,
        });
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        if !self.ready.load(Ordering::Relaxed) {
            // Still booting (a boot stuck on the network, say): it will never be needed.
            let _ = self.signals.send(Signal::Kill);
            return;
        }
        // The writer sends it, then closes the channel: an idle zygote exits at once. One that is
        // frozen or stuck is killed after the grace.
        let _ = self.frames.send(Outgoing::frame(ToZygote::Stop));
        let signals = self.signals.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tokio::time::sleep(RETIRE_GRACE).await;
                // Only if its reaper still runs: it is alive.
                let _ = signals.send(Signal::Kill);
            });
        }
    }
}
