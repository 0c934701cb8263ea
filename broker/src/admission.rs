//! Admission of jobs dispatched under limits (`migrations/0011_limits.sql`, docs/limits.md): a
//! job waits in `drover.limit_waiting`, taking its concurrency slots and rate starts one key at
//! a time, and moves into `drover.jobs` after its last, where the claim sees it like any other.
//! A settle that frees a slot admits the next jobs itself when it can take the key's lock at
//! once; everything else — an enqueue, a step to a job's next key, a settle that could not —
//! leaves a note whose NOTIFY asks a master for a pass ([`Broker::admit_waiting`]), and a key
//! that must wait for a time (its rate's next window, a delayed job at the head of its line)
//! says when, which the pass returns for the master's timer. The master runs a pass on its reap
//! tick too, so a note whose NOTIFY was missed (the LISTEN connection was down) waits no longer
//! than half a lease, and forgets the keys whose window is over ([`Broker::purge_limits`]). Both
//! run on the side connection: the job connection's claims never wait behind them (measured:
//! a master's first pass and purge, compiling their PL/pgSQL, held its first claims back ~50 ms).

use std::time::Duration;

use crate::{Broker, BrokerError};

/// What one admission pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Admitted {
    /// Jobs that entered `drover.jobs` (their insert wakes the masters' claims).
    pub jobs: u64,
    /// When a key must be looked at again for a time — the earliest; `None`: on events only.
    /// Zero when that time has already come.
    pub next_wake: Option<Duration>,
}

impl Broker {
    /// Admits from the lines of every noted key and every key whose wake-up time has come. On
    /// the side connection (never in the way of a claim, and a pass that waits for a key's lock
    /// holds up nothing but itself), within [`Broker::call_deadline`].
    pub async fn admit_waiting(&self) -> Result<Admitted, BrokerError> {
        const ABOUT: &str = "admitting jobs waiting for their limits";
        let rows = self
            .side_query(ABOUT, include_str!("../queries/limit_pass.sql"), &[])
            .await?;
        // No row: nothing was noted and no key waits for a time.
        Ok(rows
            .first()
            .map_or_else(Admitted::default, |row| admitted(row.get(0), row.get(1))))
    }

    /// Forgets the keys whose rate window is over and that wait for no time, and the keys of
    /// fair queues behind their queue's virtual time: in batches of up to 1000 of each (a
    /// transaction each, so no lock is held long), going on while a batch was full and for no
    /// longer than [`PURGE_BUDGET`]; how many in all. On the side connection, each batch within
    /// [`Broker::call_deadline`] (an admission pass may run between two); the master runs it on
    /// its reap tick. A million keys a minute stay a table of the keys that mean something.
    pub async fn purge_limits(&self) -> Result<u64, BrokerError> {
        const ABOUT: &str = "forgetting rate windows that are over";
        let started = std::time::Instant::now();
        let mut forgotten = 0u64;
        let mut left = Purge::BOTH;
        while left != Purge::DONE {
            let rows = self
                .side_query(
                    ABOUT,
                    include_str!("../queries/limit_purge.sql"),
                    &[&left.limits, &left.fair],
                )
                .await?;
            let (limits, fair) = rows.first().map_or((0, 0), |r| (r.get(0), r.get(1)));
            forgotten = forgotten
                .saturating_add(count(limits))
                .saturating_add(count(fair));
            left = left.after(limits, fair, started.elapsed());
        }
        Ok(forgotten)
    }
}

/// How long one [`Broker::purge_limits`] goes on: far less than a reap tick (half a lease), and
/// at 1000 keys a batch of a few ten milliseconds, some ten thousand keys a second forgotten.
pub const PURGE_BUDGET: Duration = Duration::from_secs(2);

/// Which of the two purges still has keys to forget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Purge {
    /// `drover.limit_keys` (rate windows).
    limits: bool,
    /// `drover.fair_keys` (fair queues' tags).
    fair: bool,
}

impl Purge {
    const BOTH: Purge = Purge {
        limits: true,
        fair: true,
    };
    const DONE: Purge = Purge {
        limits: false,
        fair: false,
    };

    /// After a batch that forgot `limits` and `fair` keys, `elapsed` into the purge: a purge
    /// whose batch was not full is done, and every purge is once the budget is spent.
    fn after(self, limits: i32, fair: i32, elapsed: Duration) -> Purge {
        if elapsed >= PURGE_BUDGET {
            return Purge::DONE;
        }
        Purge {
            limits: self.limits && limits >= 1000,
            fair: self.fair && fair >= 1000,
        }
    }
}

/// A count as the statement gives it, which cannot be negative.
fn count(n: i32) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A pass's answer as the statement gives it: a count that cannot be negative, and a wake-up in
/// seconds that may be past (then now), or absurd (then none: the reap tick's pass covers it).
fn admitted(jobs: i32, next_wake_secs: Option<f64>) -> Admitted {
    Admitted {
        jobs: count(jobs),
        next_wake: next_wake_secs
            .filter(|s| s.is_finite())
            .map(|s| Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_up_already_past_is_now_and_none_is_none() {
        assert_eq!(admitted(3, Some(-2.5)).next_wake, Some(Duration::ZERO));
        assert_eq!(admitted(0, None), Admitted::default());
        assert_eq!(
            admitted(1, Some(1.5)).next_wake,
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn a_purge_goes_on_while_its_batches_are_full_and_within_its_budget() {
        let soon = Duration::from_millis(30);
        assert_eq!(Purge::BOTH.after(1000, 1000, soon), Purge::BOTH);
        let limits_only = Purge::BOTH.after(1000, 3, soon);
        assert_eq!(
            limits_only,
            Purge {
                limits: true,
                fair: false
            }
        );
        // A purge that was done stays done though the other's batch is full.
        assert_eq!(limits_only.after(1000, 1000, soon), limits_only);
        assert_eq!(limits_only.after(999, 0, soon), Purge::DONE);
        assert_eq!(Purge::BOTH.after(1000, 1000, PURGE_BUDGET), Purge::DONE);
        assert_eq!(Purge::BOTH.after(-1, 0, soon), Purge::DONE);
    }

    #[test]
    fn a_nonsense_answer_never_panics() {
        assert_eq!(admitted(-1, Some(f64::NAN)), Admitted::default());
        assert_eq!(admitted(0, Some(1e300)).next_wake, Some(Duration::MAX));
    }
}
