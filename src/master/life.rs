//! Where the master is in its life ([`Life`]): serving, draining or stopping, paused as a whole,
//! since when it serves, why it gave up, whether it reaches its database, and what it tells
//! systemd.

use std::sync::Arc;
use std::time::Instant;

use crate::process::systemd::Notifier;

use super::database_reach::DatabaseReach;

/// Where the master is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Running,
    /// Graceful: workers finish their running job; killed at the deadline, if there is one (a
    /// master stopping by itself has none: running jobs end under their own timeouts, as
    /// `queue:work --max-time` lets them).
    Draining {
        deadline: Option<tokio::time::Instant>,
    },
    /// Every worker killed; leases released as they exit.
    Stopping,
}

/// The master's life, as every part asks of it ("does it serve?").
pub(super) struct Life {
    /// Running, draining or stopping.
    pub phase: Phase,
    /// Paused from the control socket (or SIGUSR2): no claims, workers told to pause.
    pub paused: bool,
    /// When the loop started (`--max-time`).
    pub started: Instant,
    /// Why a master stopping by itself gave up (every pool's circuit open): the exit says so.
    pub failed: Option<String>,
    /// Whether start-up's pages went back to the kernel (`startup_pages`): once, when every pool
    /// first serves its target, or at the first memory check past `STARTUP_PAGES_AT_LATEST`.
    pub startup_pages_released: bool,
    /// systemd's notification socket.
    pub notifier: Notifier,
    /// Since when the database cannot be reached, as the claims, renewals, heartbeats and
    /// settles see it (`database_reach`), for the status verdict; shared with the tasks that
    /// make those calls.
    pub database: Arc<DatabaseReach>,
}

impl Life {
    pub(super) fn new(notifier: Notifier, database: Arc<DatabaseReach>) -> Life {
        Life {
            phase: Phase::Running,
            paused: false,
            started: Instant::now(),
            failed: None,
            startup_pages_released: false,
            notifier,
            database,
        }
    }

    /// Running: neither draining nor stopping.
    pub(super) fn running(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Running and not paused as a whole: jobs are claimed and handed out.
    pub(super) fn serving(&self) -> bool {
        self.running() && !self.paused
    }
}
