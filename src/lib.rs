//! The `drover` binary's own parts: the master loop that joins the supervisor to the broker.
//!
//! - [`config`]: the run configuration, from flags or the versioned JSON file, and its validation.
//! - [`master`]: the event loop ([`Master`]) over one or more pools, and the parts on a job's way
//!   that it wires — a claimer, a dispatcher, a settler, a lease keeper — with reload, shutdown
//!   and status; [`master::pools`] builds the pools.
//! - [`lifecycle`]: each job's transitions in the master as one stream of typed events, and the
//!   observers that register once to consume it (the totals, the metrics, the history).
//! - [`rules`]: the decisions, pure and unit-tested: which worker holds which job, a worker's
//!   state, how a job is settled, health, autoscaling.
//! - [`maintenance`]: reaping, compaction, retention, long-wait alerts: each a part with its state.
//! - [`scheduling`]: the application's schedule run by the master (no cron): the export read at
//!   start, each due time claimed in PostgreSQL and run by the application's run command; when a
//!   due time falls is the `drover-scheduler` crate's (pure rules).
//! - [`process`]: signals, the control socket, systemd, the lease guard, start-up's pages,
//!   `master.json`.
//! - [`state_dir`]: the state directory and the contract, kept so that nobody but the master's
//!   user can steer the master through them.
//! - [`privileges`]: who drover runs as: the application's user; root only as a way in
//!   (`drover launch`), never while serving.
//! - [`status_document`]: the status a master gives of itself, typed, with its JSON schema in
//!   `docs/status.schema.json`; [`status_text`] renders it for `drover status`.
//! - [`metrics`]: per-job CPU and memory from `/proc`, the per-minute book behind
//!   `drover.metrics`, the Prometheus series and the `/metrics` + `/healthz` listener.
//! - [`traces`]: OpenTelemetry spans of each job (send, process, settle) by the messaging
//!   conventions, exported over OTLP/HTTP when `traces.endpoint` is set.
//! - [`store`]: the master's narrow view of the job store, in roles (claims, settles, node,
//!   maintenance, records), so a part is unit-tested with a fake of its role alone.
//! - `error`: the master's error type, [`MasterError`].
//!
//! `src/main.rs` only parses the command line and wires these together with the
//! `drover-broker`, `drover-supervisor` and `drover-scheduler` crates.

pub mod config;
#[cfg(test)]
mod contract_files;
pub(crate) mod error;
pub mod lifecycle;
pub(crate) mod maintenance;
pub mod master;
pub mod metrics;
pub mod privileges;
pub mod process;
pub mod rules;
pub mod scheduling;
pub mod state_dir;
pub mod status_document;
pub(crate) mod status_text;
pub(crate) mod store;
pub mod traces;

pub use error::MasterError;
pub use master::{Master, MasterConfig, Reloading};
