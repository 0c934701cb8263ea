//! The master's totals since start, as `drover status`, the status row and the exit summary give
//! them: an observer of the lifecycle like any other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::rules::settle::Counted;

use super::{Event, Observer};

/// What the jobs came to since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Jobs leased by this master's claims.
    pub claimed: u64,
    /// Attempts that ran to completion.
    pub done: u64,
    /// Attempts that ended with the job going on (released, taken back from a gone worker).
    pub released: u64,
    /// Jobs failed for good.
    pub failed: u64,
    /// Jobs given back without starting (uncharged, not an attempt).
    pub returned_unstarted: u64,
    /// Of `done`, the acks a claim wrote in its own commit.
    pub acks_ridden: u64,
}

/// The counters, shared between the observer and whoever reads them.
#[derive(Debug, Default)]
struct Counters {
    claimed: AtomicU64,
    done: AtomicU64,
    released: AtomicU64,
    failed: AtomicU64,
    returned_unstarted: AtomicU64,
    acks_ridden: AtomicU64,
}

/// The observer: counts each event once.
pub struct Tally(Arc<Counters>);

/// Reads what the tally counted so far.
#[derive(Debug, Clone)]
pub struct TallyReader(Arc<Counters>);

impl Tally {
    /// The observer to register, and its reader.
    pub fn new() -> (Tally, TallyReader) {
        let counters = Arc::new(Counters::default());
        (Tally(Arc::clone(&counters)), TallyReader(counters))
    }
}

impl Observer for Tally {
    fn observe(&mut self, event: &Event<'_>) {
        let c = &self.0;
        let counter = match event {
            Event::Claimed { .. } => &c.claimed,
            Event::Ended { counted, .. } => match counted {
                Counted::Completed => &c.done,
                Counted::Released => &c.released,
                Counted::Failed => &c.failed,
                Counted::ReturnedUnstarted => &c.returned_unstarted,
            },
            Event::SettlesWritten {
                jobs,
                rode_claim: true,
                ..
            } => {
                c.acks_ridden
                    .fetch_add(jobs.len() as u64, Ordering::Relaxed);
                return;
            }
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl TallyReader {
    /// The totals now.
    pub fn counts(&self) -> Counts {
        let c = &self.0;
        Counts {
            claimed: c.claimed.load(Ordering::Relaxed),
            done: c.done.load(Ordering::Relaxed),
            released: c.released.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            returned_unstarted: c.returned_unstarted.load(Ordering::Relaxed),
            acks_ridden: c.acks_ridden.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lifecycle::{EndedBy, JobRef, Lifecycle};

    #[test]
    fn each_ending_is_counted_as_its_settle_counts_and_ridden_acks_by_their_batch() {
        let (tally, reader) = Tally::new();
        let mut lifecycle = Lifecycle::default();
        lifecycle.register(Box::new(tally));
        let job = JobRef {
            id: 1,
            attempt: 1,
            queue: "default",
            class: "",
        };
        lifecycle.emit(Event::Claimed {
            job,
            pool: "default",
        });
        for (by, counted) in [
            (EndedBy::Done, Counted::Completed),
            (EndedBy::Done, Counted::Completed),
            (EndedBy::Released, Counted::Released),
            (EndedBy::WorkerGone, Counted::Failed),
            (EndedBy::NotHandedOut, Counted::ReturnedUnstarted),
        ] {
            lifecycle.emit(Event::Ended {
                job,
                by,
                counted,
                ran: None,
                pid: None,
            });
        }
        lifecycle.emit(Event::SettlesWritten {
            jobs: &[1, 2],
            rode_claim: true,
            took: Duration::ZERO,
        });
        lifecycle.emit(Event::SettlesWritten {
            jobs: &[3, 4, 5, 6, 7],
            rode_claim: false,
            took: Duration::ZERO,
        });
        assert_eq!(
            reader.counts(),
            Counts {
                claimed: 1,
                done: 2,
                released: 1,
                failed: 1,
                returned_unstarted: 1,
                acks_ridden: 2,
            }
        );
    }
}
