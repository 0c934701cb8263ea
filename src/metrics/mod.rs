//! What the master knows about the jobs it runs, for people and for Prometheus (docs/metrics.md).
//!
//! - [`usage`]: a job's CPU time and peak memory, read from its worker's `/proc` entries.
//! - [`classes`]: the job classes a master names (at most 500; the rest are `(other)`).
//! - [`histogram`]: the sparse log-scale histogram the minute rows store.
//! - [`minutes`]: the per-minute book (per queue and job class) behind `drover.metrics`.
//! - [`exposition`]: the Prometheus / OpenMetrics series.
//! - [`http`]: the small HTTP server for `GET /metrics` and `GET /healthz`.
//!
//! The master's loop only reads `/proc` and sends [`minutes::Observation`]s; the recorder task
//! (`master::recorder`) adds them up and writes them, off the loop.

pub(crate) mod classes;
pub mod exposition;
pub(crate) mod histogram;
pub mod http;
pub(crate) mod minutes;
pub(crate) mod usage;

pub use exposition::Exposition;
pub use minutes::{CompletedJob, MinuteBook, Observation, Outcome};
