//! The master as an operating-system process: what it answers and what it tells.
//!
//! - [`signals`]: the signals the master answers, installed before anything else.
//! - [`control`]: the control socket (`status`, `pause`, `continue`, `terminate`, `restart`).
//! - [`systemd`]: `sd_notify` (READY, RELOADING, STOPPING, WATCHDOG, STATUS).
//! - [`lease_guard`]: the process beside the master that kills a worker past its lease deadline
//!   when the master cannot (frozen, stopped).
//! - [`app_command`]: running a command of the application (reload, long-wait alerts).
//! - [`memory`]: a process's RSS and PSS from `/proc`.
//! - [`startup_pages`]: hands back the memory only start-up used, once the master serves.
//! - [`state_file`]: `master.json`, what a running master tells of itself (and a master that did
//!   not exit cleanly left behind).

pub(crate) mod app_command;
pub mod control;
pub mod lease_guard;
pub(crate) mod memory;
pub mod signals;
pub(crate) mod startup_pages;
pub mod state_file;
pub mod systemd;
