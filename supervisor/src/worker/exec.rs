//! A worker the master starts itself (`exec` mode): a child with a socketpair on fd 3
//! ([`crate::child`]), its writer and reader on the master's end, and a reaper that waits for the
//! child.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, watch};

use super::{read_frames, WorkerHandle, WorkerPid};
use crate::channel::{self, spawn_writer, Outgoing};
use crate::child::{self, Signal};
use crate::command::WorkerCommand;
use crate::events::WorkerEvent;
use crate::protocol::ToWorker;
use crate::worker_id::WorkerId;
use crate::{strays, SupervisorError};

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
