//! drover's supervisor: it starts PHP worker processes — by exec with a socketpair inherited as
//! fd 3, or forked from a zygote that booted the application once — talks to them, reaps them and
//! restarts them with backoff. It knows nothing about databases: jobs are opaque to it, and
//! everything a worker says is turned into a [`WorkerEvent`] for the master.
//!
//! The parts, in three groups. Each names only parts listed before it, so no two modules name
//! each other.
//!
//! What the master and the supervisor share (the contracts):
//! - [`protocol`]: the frames of the worker and zygote protocols (see `docs/protocol.md`) and
//!   their validation.
//! - [`worker_id`]: [`WorkerId`], the name of a worker across all pools, never reused.
//! - [`command`]: how a worker or a zygote is started ([`WorkerCommand`]), and the user it runs
//!   as ([`RunAs`]).
//! - [`events`]: what the master hears — a [`WorkerEvent`], with a [`ZygoteEvent`] inside when it
//!   is about a zygote.
//! - [`exit`]: how a process ended, in words ([`describe_exit`]).
//! - [`error`]: the crate's one error type, [`SupervisorError`].
//! - [`backoff`]: the restart delay policy.
//! - [`circuit`]: the restart circuit breaker: crash loops stop, then one probe is let through.
//!
//! Processes as the operating system sees them. No module is called `process`: each says which
//! processes it is about.
//! - [`proc_stat`]: any process, as `/proc/<pid>/stat` describes it.
//! - [`subreaper`]: making the master a child subreaper, which fork mode needs.
//! - [`strays`]: reaping the orphans a subreaper inherits and nobody else waits for.
//! - [`adopted`]: processes the master waits for without having started them (forked workers,
//!   re-parented to it), by pidfd.
//! - [`child`]: a child the master starts itself (a worker in exec mode, a zygote): starting it
//!   with fd 3, waiting for it, and the signals its reaper delivers to it and its process group.
//! - [`channel`]: the master's end of a child's channel: a writer, a line reader.
//! - [`rendezvous`]: the Unix socket forked workers connect to with a one-time token.
//!
//! Workers, zygotes and pools:
//! - [`zygote`]: one zygote process as the master holds it ([`zygote::Zygote`]): its start, fork
//!   requests and retirement.
//! - [`worker`]: one worker, the master's handle on it and the three tasks that read, write and
//!   reap it — started by exec (`worker::exec`) or forked from a zygote (`worker::fork`), whose
//!   handle holds its zygote.
//! - [`zygote_line`]: fork mode — a [`ZygoteLine`] per configured pool: its current zygote, the
//!   workers it asks of it, and the state machine that decides between forking, restarting the
//!   zygote and falling back to exec.
//! - [`pool`]: a [`Pool`] of workers: restarts with backoff, boot timeout, scaling, rolling
//!   reloads, the [`Control`]s a worker can be given.

pub mod adopted;
pub mod backoff;
mod channel;
mod child;
pub mod circuit;
pub mod command;
pub mod error;
pub mod events;
pub mod exit;
pub mod one_off;
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
pub use command::WorkerCommand;
pub use error::SupervisorError;
pub use events::{WorkerEvent, ZygoteEvent};
pub use exit::describe_exit;
pub use one_off::{Control as OneOffControl, OneOff, OneOffEnd};
pub use pool::{Control, ExitVerdict, Pool, PoolConfig, Spawn, WorkerInfo};
pub use protocol::{
    FromWorker, FromZygote, ProtocolError, ToWorker, ToZygote, MIN_PROTOCOL_VERSION,
    MIN_ZYGOTE_PROTOCOL_VERSION, PROTOCOL_VERSION, ZYGOTE_PROTOCOL_VERSION,
};
pub use rendezvous::Rendezvous;
pub use worker_id::WorkerId;
pub use zygote_line::{ZygoteConfig, ZygoteLine, ZygoteStatus};
