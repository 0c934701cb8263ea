//! The loop's clocks: one `next()` that says which duty is due — the fallback poll, the next
//! delayed job, lease renewal and the lease check, job timeouts and the pools' own ticks, memory
//! checks, the systemd watchdog, reaping, and the end of a graceful shutdown's grace.

use std::time::Duration;

use tokio::time::{interval, Instant, Interval, MissedTickBehavior};

/// A duty that is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tick {
    /// The fallback poll (NOTIFY may have been missed).
    Poll,
    /// The next delayed job of some pool is due.
    Due,
    /// Renew every lease held.
    Renew,
    /// Kill workers whose lease could not be renewed in time.
    LeaseCheck,
    /// Job timeouts, the pools' ticks (boot timeouts, health, reload steps), autoscaling.
    Timeouts,
    /// Workers' PSS against their pool's limit.
    Memory,
    /// Tell systemd the loop turns.
    Watchdog,
    /// Take back expired leases; compact a drained table; housekeeping.
    Reap,
    /// A graceful shutdown's grace is over.
    GraceOver,
    /// `--max-time` is up.
    StopTime,
}

/// The intervals, built from the lease and the configuration.
pub(super) struct Timers {
    poll: Interval,
    renew: Interval,
    lease_check: Interval,
    timeouts: Interval,
    memory: Interval,
    watchdog: Option<Interval>,
    reap: Interval,
}

impl Timers {
    /// Renewal every third of the lease, the lease check every tenth, reaping every half.
    pub(super) fn new(
        lease: Duration,
        poll: Duration,
        memory: Duration,
        watchdog: Option<Duration>,
    ) -> Timers {
        let mut t = Timers {
            poll: interval(poll),
            renew: interval(lease / 3),
            lease_check: interval(lease / 10),
            timeouts: interval(Duration::from_millis(100)),
            memory: interval(memory),
            watchdog: watchdog.map(interval),
            reap: interval(lease / 2),
        };
        for i in [
            &mut t.poll,
            &mut t.renew,
            &mut t.lease_check,
            &mut t.timeouts,
            &mut t.memory,
            &mut t.reap,
        ] {
            i.set_missed_tick_behavior(MissedTickBehavior::Delay);
        }
        t
    }

    /// The next duty; `due` is the next delayed job, `grace_over` the end of a drain, `stop_at`
    /// the end of `--max-time`.
    pub(super) async fn next(
        &mut self,
        due: Option<Instant>,
        grace_over: Option<Instant>,
        stop_at: Option<Instant>,
    ) -> Tick {
        tokio::select! {
            _ = self.poll.tick() => Tick::Poll,
            _ = sleep_until_opt(due) => Tick::Due,
            _ = self.renew.tick() => Tick::Renew,
            _ = self.lease_check.tick() => Tick::LeaseCheck,
            _ = self.timeouts.tick() => Tick::Timeouts,
            _ = self.memory.tick() => Tick::Memory,
            _ = tick_opt(self.watchdog.as_mut()) => Tick::Watchdog,
            _ = self.reap.tick() => Tick::Reap,
            _ = sleep_until_opt(grace_over) => Tick::GraceOver,
            _ = sleep_until_opt(stop_at) => Tick::StopTime,
        }
    }
}

async fn tick_opt(interval: Option<&mut Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
