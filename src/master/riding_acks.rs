//! Acks that ride with a claim. A completed job's ack waits a moment (`ack_ride_wait`, 5 ms by
//! default) for the next claim, which deletes it in its own statement: one commit, one WAL
//! flush, for both. With a producer dispatching one job at a time, every job otherwise cost the
//! master two synchronous commits of its own (the claim its NOTIFY set off, then its ack) beside
//! the producer's, and the WAL flush they queued behind was what a dispatch waited for
//! (bench/notes.md, "Acks ride with claims"). An ack no claim takes within the wait goes to the
//! settler as before; nothing is dropped and every commit stays synchronous.
//!
//! Only acks of ungrouped jobs ride: a grouped job's ack moves its group's next job in, which a
//! claim carrying that ack could not see, so it goes to the settler at once and the claim its
//! `done` sets off follows it on the connection.

use std::time::Duration;

use drover_broker::Settle;
use tokio::time::Instant;

/// The acks waiting for a claim to carry them.
#[derive(Debug)]
pub(super) struct RidingAcks {
    /// Oldest first; each a `Settle::Ack` or `Settle::CompletedWithin` (whose claim forgets its
    /// completion row), carried whole to the claim and back.
    acks: Vec<Settle>,
    /// When the oldest goes to the settler if no claim took it by then.
    due: Option<Instant>,
    /// How long an ack may wait; zero: acks never ride.
    wait: Duration,
}

impl RidingAcks {
    pub(super) fn new(wait: Duration) -> RidingAcks {
        RidingAcks {
            acks: Vec::new(),
            due: None,
            wait,
        }
    }

    /// Whether acks ride at all (a zero wait turns it off).
    pub(super) fn enabled(&self) -> bool {
        !self.wait.is_zero()
    }

    /// How long an ack may wait for a claim.
    pub(super) fn wait(&self) -> Duration {
        self.wait
    }

    /// An ack to carry with the next claim, completed at `now`.
    pub(super) fn push(&mut self, ack: Settle, now: Instant) {
        self.acks.push(ack);
        self.due.get_or_insert(now + self.wait);
    }

    /// Every waiting ack, for the claim about to start.
    pub(super) fn take(&mut self) -> Vec<Settle> {
        self.due = None;
        std::mem::take(&mut self.acks)
    }

    /// When the oldest waiting ack must go to the settler.
    pub(super) fn due(&self) -> Option<Instant> {
        self.due
    }

    /// The acks whose wait is over at `now` (all of them: they came within one wait of the
    /// oldest, and one batch writes them), or none.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<Settle> {
        match self.due {
            Some(due) if due <= now => self.take(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(id: i64) -> Settle {
        Settle::Ack(drover_broker::Lease { id, token: id * 10 })
    }

    #[test]
    fn an_ack_waits_its_wait_from_the_oldest_and_then_goes_with_every_later_one() {
        let t0 = Instant::now();
        let mut r = RidingAcks::new(Duration::from_millis(5));
        r.push(lease(1), t0);
        r.push(lease(2), t0 + Duration::from_millis(3));
        assert_eq!(r.due(), Some(t0 + Duration::from_millis(5)));
        assert!(r.take_due(t0 + Duration::from_millis(4)).is_empty());
        assert_eq!(
            r.take_due(t0 + Duration::from_millis(5)),
            vec![lease(1), lease(2)]
        );
        assert_eq!(r.due(), None);
        assert!(r.take().is_empty());
    }

    #[test]
    fn a_claim_takes_every_waiting_ack_and_the_next_ack_starts_a_new_wait() {
        let t0 = Instant::now();
        let mut r = RidingAcks::new(Duration::from_millis(5));
        r.push(lease(1), t0);
        assert_eq!(r.take(), vec![lease(1)]);
        assert_eq!(r.due(), None);
        r.push(lease(2), t0 + Duration::from_millis(4));
        assert_eq!(r.due(), Some(t0 + Duration::from_millis(9)));
    }

    #[test]
    fn a_zero_wait_turns_riding_off() {
        assert!(!RidingAcks::new(Duration::ZERO).enabled());
        assert!(RidingAcks::new(Duration::from_millis(1)).enabled());
    }
}
