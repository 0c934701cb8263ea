//! Where the broker's "now" comes from: the database's clock, unless a test says otherwise.
//!
//! Every time the broker compares or writes — a job being due, a lease's expiry, a lease having
//! expired, a node's heartbeat, a job's `failed_at`, the age of a failed job — is computed by
//! PostgreSQL in the statement itself. Each statement takes one optional timestamp parameter
//! and uses `coalesce($n::timestamptz, now())`: the production clock ([`SystemClock`]) passes
//! NULL, so the database decides; a [`ManualClock`] passes its own time, so the lease tests move
//! time forward without sleeping (as River does with its injectable time).
//!
//! Why the database's: leases are compared across hosts. With each master's wall clock, two
//! masters whose clocks differ by more than the lease disagree about whether a lease has
//! expired; after a database outage both could hold the same job, one by its clock and one by
//! the other's. With one clock, the database's, there is one answer. `now()` rather than
//! `clock_timestamp()` because it is stable within a statement (every row of a claim gets the
//! same expiry, and the comparison can bound an index scan); the broker's statements run on
//! their own, so `now()` is the time the statement started.
//!
//! The master never turns a database time into a local wall-clock time: what it needs to wait
//! for (the next delayed job, a lease's end) it gets as a duration from the database
//! ([`crate::Broker::next_due`]) or derives from its own monotonic clock at the moment it sent
//! the statement, which is never later than the database's.
//!
//! Where a time must be placed without a round trip (a metrics row's minute), the broker keeps
//! the database's clock less this host's as last seen (`offset_ms`).

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// A source of "now" for the broker's statements.
pub trait Clock: Send + Sync + 'static {
    /// The time every statement should take as "now", or `None`: the database's own clock
    /// (`now()`) decides. Production clocks return `None`.
    fn now(&self) -> Option<SystemTime>;
}

/// The production clock: the database's. Always `None`, so every statement uses PostgreSQL's
/// `now()`; the master's host clock plays no part in any lease or due time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Option<SystemTime> {
        None
    }
}

/// A clock that only moves when told to; for tests of lease expiry and due times. Every
/// statement gets its time instead of the database's.
#[derive(Debug)]
pub struct ManualClock {
    /// The time it reports until advanced.
    now: Mutex<SystemTime>,
}

impl ManualClock {
    pub fn new(start: SystemTime) -> Self {
        ManualClock {
            now: Mutex::new(start),
        }
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }

    /// The time it reports (what [`Clock::now`] wraps in `Some`).
    pub fn time(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Option<SystemTime> {
        Some(self.time())
    }
}

/// A duration the database computed, in seconds (`extract(epoch FROM ...)`): negative (a clock
/// step) counts as none, beyond what a `Duration` holds as the longest.
pub(crate) fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX)
}

/// The database's time (seconds since the epoch, as a statement returned it) less this host's
/// now, in milliseconds.
pub(crate) fn offset_ms(database_epoch_secs: f64) -> i64 {
    let here = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let ms = (database_epoch_secs - here) * 1000.0;
    if ms.is_finite() {
        ms.clamp(i64::MIN as f64, i64::MAX as f64) as i64
    } else {
        0
    }
}

/// `d` in whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
