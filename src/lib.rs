//! The `drover` binary's own parts: the master loop that joins the supervisor to the broker.
//!
//! - [`master`]: the event loop ([`Master`]) over one or more pools.
//! - [`lease_guard`]: the process beside the master that kills a worker past its lease deadline
//!   when the master cannot (frozen, stopped).
//! - [`ledger`]: which worker holds which leased job.
//! - [`metrics`]: per-job CPU and memory from `/proc`, the per-minute book behind
//!   `drover.metrics`, the Prometheus series and the `/metrics` + `/healthz` listener.
//! - [`worker_state`]: one worker's state and the one rule that moves it (may it get jobs?).
//! - [`policy`]: how a job whose worker died or timed out is settled (Laravel's rules).
//! - [`balancer`]: autoscaling of `balance: auto` pools (workers follow each queue's backlog).
//! - [`contract`]: the run configuration, from flags or the versioned JSON file.
//! - [`control`]: the control socket (`status`, `pause`, `continue`, `terminate`, `restart`).
//! - [`health`]: the one verdict on whether the master serves its queues (status exit codes).
//! - [`workforce`]: pools from the configuration, at start and on every reload.
//! - [`signals`]: the signals the master answers, installed before anything else.
//! - [`startup_pages`]: hands back the memory only start-up used, once the master serves.
//! - [`store`]: the master's narrow view of the job store ([`store::Store`]), so its decisions are
//!   unit-tested with a fake.
//! - [`systemd`]: `sd_notify` (READY, RELOADING, STOPPING, WATCHDOG, STATUS).
//! - [`error`]: the master's error type, [`MasterError`].
//!
//! `src/main.rs` only parses the command line and wires these together with the
//! `drover-broker` and `drover-supervisor` crates.

pub mod balancer;
pub mod contract;
pub mod control;
pub mod error;
pub mod health;
pub mod lease_guard;
pub mod ledger;
pub mod master;
pub mod metrics;
pub mod policy;
pub mod signals;
pub mod startup_pages;
pub mod store;
pub mod systemd;
pub mod worker_state;
pub mod workforce;

pub use error::MasterError;
pub use master::{Master, MasterConfig, PoolRuntime, Reloading};
