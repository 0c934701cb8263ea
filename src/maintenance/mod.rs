//! The master's duties beside the jobs' own path, each a part with its own state, started from
//! the loop's reap tick (every half lease) and, for their results, from its events.
//!
//! - [`reaper`]: the heartbeat and the pass that takes back expired leases.
//! - [`compactor`]: gives back the space a drained backlog left in `drover.jobs`.
//! - [`retention`]: failed jobs past `failed_retention_days`, deduplication ids past their window.
//! - [`long_waits`]: Horizon's long-wait alerts, once per cooldown for the whole fleet.
//! - [`horizon_watch`]: the alert for a snapshot that holds the vacuum horizon back.

pub mod compactor;
pub mod horizon_watch;
pub mod long_waits;
pub mod reaper;
pub mod retention;

/// Every duty's state, as the master holds it.
#[derive(Debug)]
pub struct Duties {
    pub reaper: reaper::Reaper,
    pub compactor: compactor::Compactor,
    pub retention: retention::Retention,
    pub long_waits: long_waits::LongWaitWatch,
    pub horizon: horizon_watch::HorizonWatch,
}

impl Duties {
    pub fn new(now: std::time::Instant) -> Duties {
        Duties {
            reaper: reaper::Reaper::default(),
            compactor: compactor::Compactor::default(),
            retention: retention::Retention::new(now),
            long_waits: long_waits::LongWaitWatch::default(),
            horizon: horizon_watch::HorizonWatch::default(),
        }
    }
}
