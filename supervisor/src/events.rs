//! What the master hears from the supervisor, on one channel: a [`WorkerEvent`] about a worker
//! (a frame, input that breaks the protocol, its exit), and, inside
//! [`WorkerEvent::Zygote`], a [`ZygoteEvent`] about a zygote of a pool that forks.

use std::process::ExitStatus;
use std::time::Duration;

use crate::protocol::{FromWorker, FromZygote, ProtocolError};
use crate::worker_id::WorkerId;

/// What the master hears about a worker.
#[derive(Debug)]
pub enum WorkerEvent {
    /// A well-formed frame.
    Frame { worker: WorkerId, frame: FromWorker },
    /// Input that breaks the protocol; the worker should be stopped.
    BadInput {
        worker: WorkerId,
        problem: ProtocolError,
    },
    /// The process is gone and all its frames were delivered.
    Exited {
        worker: WorkerId,
        pid: u32,
        status: Option<ExitStatus>,
        lived: Duration,
    },
    /// Something happened to a zygote of the line named `line` (the pool in the configuration
    /// whose members fork from it).
    Zygote { line: String, event: ZygoteEvent },
}

/// What the master hears about a zygote (inside [`WorkerEvent::Zygote`]). `zygote` is the
/// process's [`Zygote::id`](crate::zygote::Zygote::id), so events of a zygote already given up
/// are told apart.
#[derive(Debug)]
pub enum ZygoteEvent {
    Frame {
        zygote: u64,
        frame: FromZygote,
    },
    BadInput {
        zygote: u64,
        problem: ProtocolError,
    },
    Exited {
        zygote: u64,
        pid: u32,
        status: Option<ExitStatus>,
        lived: Duration,
    },
    /// A worker forked from `zygote` reached the master (its connection presented its token).
    Attached {
        zygote: u64,
    },
    /// A worker forked from `zygote` ended before it reached the master: `how`.
    Lost {
        zygote: u64,
        worker: u64,
        how: String,
    },
    /// A time the line asked to be woken at has come.
    Wake,
}
