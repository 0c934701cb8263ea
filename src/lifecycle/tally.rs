//! The master's totals since start, as `drover status`, the status row and the exit summary give
//! them: an observer of the lifecycle like any other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::rules::settle::Counted;

use super::{EndedBy, Event, Observer};

/// What the jobs came to since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Jobs leased by this master's claims.
    pub claimed: u64,
    /// Attempts that ran to completion.
    pub done: u64,
    /// Attempts that ended with the job going on (released, taken back from a gone worker),
    /// less those that turned out to have completed inside their own transaction.
    pub released: u64,
    /// Jobs failed for good.
    pub failed: u64,
    /// Jobs given back without starting (uncharged, not an attempt).
    pub returned_unstarted: u64,
    /// Of `done`, the acks a claim wrote in its own commit.
    pub acks_ridden: u64,
    /// Of `done`, the jobs that completed inside their own transaction (`drover.complete_within`).
    pub completed_within: u64,
    /// Of `completed_within`, those whose worker died after the commit, before it could say so:
    /// learned from the database when their settle changed nothing (counted once, as completed).
    pub completed_after_exit: u64,
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
    completed_within: AtomicU64,
    completed_after_exit: AtomicU64,
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
            Event::Ended {
                by: EndedBy::DoneWithin,
                ..
            } => {
                c.done.fetch_add(1, Ordering::Relaxed);
                &c.completed_within
            }
            Event::Ended { counted, .. } => match counted {
                Counted::Completed => &c.done,
                Counted::Released => &c.released,
                Counted::Failed => &c.failed,
                Counted::ReturnedUnstarted => &c.returned_unstarted,
            },
            Event::CompletedInDatabase { jobs } => {
                let n = jobs.len() as u64;
                c.done.fetch_add(n, Ordering::Relaxed);
                c.completed_within.fetch_add(n, Ordering::Relaxed);
                c.completed_after_exit.fetch_add(n, Ordering::Relaxed);
                return;
            }
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
            released: c
                .released
                .load(Ordering::Relaxed)
                .saturating_sub(c.completed_after_exit.load(Ordering::Relaxed)),
            failed: c.failed.load(Ordering::Relaxed),
            returned_unstarted: c.returned_unstarted.load(Ordering::Relaxed),
            acks_ridden: c.acks_ridden.load(Ordering::Relaxed),
            completed_within: c.completed_within.load(Ordering::Relaxed),
            completed_after_exit: c.completed_after_exit.load(Ordering::Relaxed),
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
                completed_within: 0,
                completed_after_exit: 0,
            }
        );
    }

    #[test]
    fn a_job_completed_in_its_own_transaction_counts_once_whether_its_worker_said_so_or_died_first()
    {
        let (tally, reader) = Tally::new();
        let mut lifecycle = Lifecycle::default();
        lifecycle.register(Box::new(tally));
        let ended = |lifecycle: &mut Lifecycle, id, by, counted| {
            lifecycle.emit(Event::Ended {
                job: JobRef {
                    id,
                    attempt: 1,
                    queue: "default",
                    class: "App\\Jobs\\Charge",
                },
                by,
                counted,
                ran: Some(Duration::from_millis(40)),
                pid: None,
            })
        };
        // Job 1's worker said `done` with `within`; job 2's worker died after its commit, so
        // its attempt was first counted taken back, then learned completed from the database.
        ended(&mut lifecycle, 1, EndedBy::DoneWithin, Counted::Completed);
        ended(&mut lifecycle, 2, EndedBy::WorkerGone, Counted::Released);
        lifecycle.emit(Event::CompletedInDatabase { jobs: &[2] });
        let counts = reader.counts();
        assert_eq!(
            (counts.done, counts.released),
            (2, 0),
            "each completed once, none left counted as taken back"
        );
        assert_eq!(
            (counts.completed_within, counts.completed_after_exit),
            (2, 1)
        );
    }
}
