//! Where a queue's claims start reading (`queries/claim_from.sql`): the rules that keep a claim
//! from walking past every index entry settled jobs left while another session holds a snapshot
//! (docs/decisions/0010-a-held-snapshot.md).
//!
//! A full claim (`queries/claim.sql`) reads `jobs_ready` from the queue's start. Each job it
//! leases leaves an entry there pointing at a row version no snapshot may need any more — unless
//! one does: while a report, a `pg_dump` or a standby holds the horizon back, neither VACUUM nor
//! the index's own clean-up may drop those entries, and every full claim visits them all, one
//! heap fetch each. So a full claim also notes where the queue's head was: the priority it took
//! first and the oldest `available_at` of that priority it leased. Until the next full claim is
//! due ([`FULL_EVERY`]), claims read that priority from there on ([`FLOOR_MARGIN`] earlier, for
//! producers' transactions still open), an index condition that starts the scan past the dead
//! entries; other priorities are read in full. What the floor skips — a job of that priority
//! made available before it, by a producer's transaction that outlived the margin, or given back
//! unstarted in its old place — the next full claim takes.
//!
//! The rules are pure: [`ClaimCursors::plan`] and [`ClaimCursors::after`], unit-tested here.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

/// How often a queue's claim reads it in full: the longest a job behind the floor waits for it.
pub const FULL_EVERY: Duration = Duration::from_secs(2);

/// How far before the head a cursor's floor lies: a producer's transaction open this long
/// (its jobs' `available_at` is its start) still has its jobs found by the next claim.
pub const FLOOR_MARGIN: Duration = Duration::from_secs(5);

/// What a queue's next claim reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// The whole queue in order (`claim.sql`).
    Full,
    /// `priority` from `floor` on, every other priority in full (`claim_from.sql`).
    From { priority: i16, floor: SystemTime },
}

/// A queue's cursor: where its last full claim found the head.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cursor {
    /// The priority the full claim leased first.
    priority: i16,
    /// The oldest `available_at` of that priority it leased, less [`FLOOR_MARGIN`].
    floor: SystemTime,
    /// When that full claim ran.
    full_at: Instant,
}

/// Per queue, its cursor.
#[derive(Debug)]
pub struct ClaimCursors {
    /// Queues whose last full claim leased something, by name.
    by_queue: HashMap<String, Cursor>,
    /// How often a queue is read in full ([`FULL_EVERY`] unless the broker's config says).
    full_every: Duration,
}

impl Default for ClaimCursors {
    fn default() -> Self {
        ClaimCursors::new(FULL_EVERY)
    }
}

impl ClaimCursors {
    /// Cursors whose queues are read in full every `full_every`.
    pub fn new(full_every: Duration) -> Self {
        ClaimCursors {
            by_queue: HashMap::new(),
            full_every,
        }
    }

    /// What `queue`'s claim at `now` reads: in full when it has no cursor or its last full
    /// claim is `full_every` old, else from its cursor.
    pub fn plan(&self, queue: &str, now: Instant) -> Scan {
        match self.by_queue.get(queue) {
            Some(c) if now.saturating_duration_since(c.full_at) < self.full_every => Scan::From {
                priority: c.priority,
                floor: c.floor,
            },
            _ => Scan::Full,
        }
    }

    /// A claim of `queue` that read by `scan` at `now` leased `leased` (each job's priority and
    /// `available_at`, in any order). A full claim moves the cursor to the head it found; one
    /// that leased nothing keeps the cursor where it was (a drained queue's new jobs come after
    /// it) and counts as the full claim it was. A claim from the cursor leaves it be.
    pub fn after(&mut self, queue: &str, scan: Scan, now: Instant, leased: &[(i16, SystemTime)]) {
        if scan != Scan::Full {
            return;
        }
        let head = leased.iter().map(|(p, _)| *p).max().and_then(|top| {
            leased
                .iter()
                .filter(|(p, _)| *p == top)
                .map(|(_, at)| *at)
                .min()
                .map(|oldest| (top, oldest))
        });
        match head {
            Some((priority, oldest)) => {
                let floor = oldest.checked_sub(FLOOR_MARGIN).unwrap_or(oldest);
                self.by_queue.insert(
                    queue.to_string(),
                    Cursor {
                        priority,
                        floor,
                        full_at: now,
                    },
                );
            }
            None => {
                if let Some(c) = self.by_queue.get_mut(queue) {
                    c.full_at = now;
                }
            }
        }
    }

    /// Forgets every cursor: the next claim of each queue reads it in full. For jobs this
    /// master gave back in their old place (released without a delay, reaped), which may lie
    /// before a floor.
    pub fn forget(&mut self) {
        self.by_queue.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    #[test]
    fn a_queue_is_read_in_full_until_a_full_claim_found_its_head() {
        let mut c = ClaimCursors::default();
        let t0 = Instant::now();
        assert_eq!(c.plan("default", t0), Scan::Full);
        c.after("default", Scan::Full, t0, &[]);
        assert_eq!(c.plan("default", t0), Scan::Full, "nothing leased, no head");
        c.after("default", Scan::Full, t0, &[(0, at(20)), (0, at(10))]);
        assert_eq!(
            c.plan("default", t0 + Duration::from_millis(10)),
            Scan::From {
                priority: 0,
                floor: at(10) - FLOOR_MARGIN
            }
        );
        assert_eq!(c.plan("other", t0), Scan::Full, "per queue");
    }

    #[test]
    fn the_queue_is_read_in_full_again_every_full_every() {
        let mut c = ClaimCursors::default();
        let t0 = Instant::now();
        c.after("q", Scan::Full, t0, &[(0, at(10))]);
        let from = c.plan("q", t0 + FULL_EVERY - Duration::from_millis(1));
        assert!(matches!(from, Scan::From { .. }));
        // Claims from the cursor do not move it nor put the full claim off.
        c.after("q", from, t0 + Duration::from_millis(1500), &[(0, at(30))]);
        assert_eq!(c.plan("q", t0 + FULL_EVERY), Scan::Full);
    }

    #[test]
    fn the_cursor_is_on_the_highest_priority_leased_at_its_oldest_job() {
        let mut c = ClaimCursors::default();
        let t0 = Instant::now();
        c.after(
            "q",
            Scan::Full,
            t0,
            &[(0, at(1)), (5, at(40)), (5, at(30)), (-3, at(0))],
        );
        assert_eq!(
            c.plan("q", t0),
            Scan::From {
                priority: 5,
                floor: at(30) - FLOOR_MARGIN
            }
        );
    }

    #[test]
    fn a_full_claim_that_found_the_queue_drained_keeps_the_cursor_and_counts_as_full() {
        let mut c = ClaimCursors::default();
        let t0 = Instant::now();
        c.after("q", Scan::Full, t0, &[(0, at(10))]);
        let later = t0 + FULL_EVERY;
        assert_eq!(c.plan("q", later), Scan::Full);
        c.after("q", Scan::Full, later, &[]);
        assert_eq!(
            c.plan("q", later + Duration::from_millis(5)),
            Scan::From {
                priority: 0,
                floor: at(10) - FLOOR_MARGIN
            }
        );
    }

    #[test]
    fn forgetting_reads_every_queue_in_full() {
        let mut c = ClaimCursors::default();
        let t0 = Instant::now();
        c.after("q", Scan::Full, t0, &[(0, at(10))]);
        c.forget();
        assert_eq!(c.plan("q", t0), Scan::Full);
    }
}
