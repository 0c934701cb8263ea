//! The `drover` binary's own parts: the master loop that joins the supervisor to the broker.
//!
//! - [`master`]: the event loop ([`Master`]) and its configuration.
//! - [`ledger`]: which worker holds which leased job.
//! - [`error`]: the master's error type, [`MasterError`].
//!
//! `src/main.rs` only parses the command line and wires these together with the
//! `drover-broker` and `drover-supervisor` crates.

pub mod error;
pub mod ledger;
pub mod master;

pub use error::MasterError;
pub use master::{Master, MasterConfig};
