//! drover's supervisor: it spawns PHP worker processes, talks to them over a socketpair inherited
//! as fd 3, reaps them and restarts them with backoff. It knows nothing about databases: jobs are
//! opaque to it, and everything a worker says is turned into a [`WorkerEvent`] for the master.
//!
//! The parts:
//! - [`protocol`]: the frames of the worker protocol (see `docs/protocol.md`) and their validation.
//! - [`worker`]: spawning one worker and the three tasks that read, write and reap it.
//! - [`pool`]: a [`Pool`] of workers: restarts with backoff, boot timeout, scaling, rolling
//!   reloads, the [`Control`]s a worker can be given.
//! - [`backoff`]: the restart delay policy.
//! - [`circuit`]: the restart circuit breaker: crash loops stop, then one probe is let through.
//! - [`error`]: the crate's one error type, [`SupervisorError`].

pub mod backoff;
pub mod circuit;
pub mod error;
pub mod pool;
pub mod protocol;
pub mod worker;

pub use circuit::{CircuitConfig, CircuitState};
pub use error::SupervisorError;
pub use pool::{Control, Pool, PoolConfig, WorkerInfo};
pub use protocol::{FromWorker, ProtocolError, ToWorker, PROTOCOL_VERSION};
pub use worker::{RunAs, WorkerCommand, WorkerEvent, WorkerId};
