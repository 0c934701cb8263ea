//! drover's supervisor: it starts PHP worker processes — by exec with a socketpair inherited as
//! fd 3, or forked from a zygote that booted the application once — talks to them, reaps them and
//! restarts them with backoff. It knows nothing about databases: jobs are opaque to it, and
//! everything a worker says is turned into a [`WorkerEvent`] for the master.
//!
//! The parts:
//! - [`protocol`]: the frames of the worker and zygote protocols (see `docs/protocol.md`) and
//!   their validation.
//! - [`events`]: what the master hears — a [`WorkerEvent`], with a [`ZygoteEvent`] inside when it
//!   is about a zygote.
//! - [`worker`]: one worker, the master's handle on it and the three tasks that read, write and
//!   reap it — started by exec (`worker::exec`) or forked from a zygote (`worker::fork`).
//! - [`worker_id`]: [`WorkerId`], the name of a worker across all pools, never reused.
//! - [`child`]: a child the master starts itself (a worker in exec mode, a zygote): starting it
//!   with fd 3, waiting for it, signalling its process group.
//! - [`command`]: how a worker or a zygote is started ([`WorkerCommand`]), and the user it runs
//!   as ([`RunAs`]).
//! - [`channel`]: the master's end of a child's channel: a writer, a line reader.
//! - [`pool`]: a [`Pool`] of workers: restarts with backoff, boot timeout, scaling, rolling
//!   reloads, the [`Control`]s a worker can be given.
//! - [`zygote_line`]: fork mode — a [`ZygoteLine`] per configured pool, its current zygote and the
//!   state machine that decides between forking, restarting the zygote and falling back to exec.
//! - [`zygote`]: one zygote process as the master holds it ([`zygote::Zygote`]): its start, fork
//!   requests and retirement.
//! - [`rendezvous`]: the Unix socket forked workers connect to with a one-time token.
//! - [`subreaper`]: the master made a child subreaper, which fork mode needs.
//! - [`adopted`]: forked workers, re-parented to the master (a subreaper), waited for by pidfd.
//! - [`strays`]: reaping the other orphans a subreaper inherits.
//! - [`exit`]: how a process ended, in words ([`describe_exit`]).
//! - [`proc_stat`]: a process as `/proc/<pid>/stat` describes it.
//! - [`backoff`]: the restart delay policy.
//! - [`circuit`]: the restart circuit breaker: crash loops stop, then one probe is let through.
//! - [`error`]: the crate's one error type, [`SupervisorError`].

pub mod adopted;
pub mod backoff;
mod channel;
mod child;
pub mod circuit;
pub mod command;
pub mod error;
pub mod events;
pub mod exit;
pub mod pool;
pub mod proc_stat;
pub mod protocol;
pub mod rendezvous;
pub mod strays;
pub mod subreaper;
mod worker;
pub mod worker_id;
pub mod zygote;
pub mod zygote_line;

pub use circuit::{CircuitConfig, CircuitState};
pub use command::{RunAs, WorkerCommand};
pub use error::SupervisorError;
pub use events::{WorkerEvent, ZygoteEvent};
pub use exit::describe_exit;
pub use pool::{Control, Pool, PoolConfig, Spawn, WorkerInfo};
pub use protocol::{
    FromWorker, FromZygote, ProtocolError, ToWorker, ToZygote, MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION, ZYGOTE_PROTOCOL_VERSION,
};
pub use rendezvous::Rendezvous;
pub use worker_id::WorkerId;
pub use zygote_line::{ZygoteConfig, ZygoteLine, ZygoteStatus};
