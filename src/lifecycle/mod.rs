//! A job's life in the master as one stream of typed events (`docs/architecture.md`, "One
//! lifecycle, many observers").
//!
//! Each transition is produced once, where it happens — a claim answered (`master::job_path`),
//! a job handed to a worker (`master::dispatcher`), a worker's `started` and how its attempt
//! ended (`master::workers`), settles written or refused (`master::settler`), a lease found taken
//! back (`master::leases`), leases of gone masters reaped (`maintenance::reaper`) — and every
//! observer that registered with the [`Lifecycle`] at the master's start sees it, in order, on
//! the master's loop. An observer keeps what it needs of a job itself (a start mark, a payload)
//! by the job's id; none reaches into another part's fields to learn a job's fate.
//!
//! - [`Event`]: the transitions, borrowing what the producer holds (no copy unless an observer
//!   keeps it).
//! - [`Observer`]: what an observer implements — `observe`, and `close` for one that hands work
//!   to a task of its own (the recorder's writes) and must be waited for at exit.
//! - [`Lifecycle`]: the observers registered, in order.
//! - [`tally`]: the master's totals since start (status, the exit summary), an observer like any
//!   other.
//!
//! Adding an observer is one file implementing [`Observer`] and one `register` in
//! `Master::new`.

use std::time::Duration;

use drover_broker::{JobId, LeasedJob};

use crate::rules::held_job::HeldJob;
use crate::rules::settle::Counted;

pub mod tally;

/// A job as the events name it: what every observer may key or label by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRef<'a> {
    pub id: JobId,
    /// The attempt this lease is (the claim charged it; 1 for a first run); 0 where it is not
    /// known (a job a claim leased whose answer was lost, given back at the next renewal).
    pub attempt: i32,
    /// Its queue; empty where it is not known (as for the attempt).
    pub queue: &'a str,
    /// The job's class as its payload names it (`displayName`); empty where the payload was not
    /// read (a job given back before any worker had it).
    pub class: &'a str,
}

impl<'a> JobRef<'a> {
    /// A job as a claim leased it, its payload not read yet (no class).
    pub fn leased(job: &'a LeasedJob) -> JobRef<'a> {
        JobRef {
            id: job.id,
            attempt: job.attempts,
            queue: &job.queue,
            class: "",
        }
    }

    /// A job a worker holds, as its record in the assignments says.
    pub fn held(id: JobId, held: &'a HeldJob) -> JobRef<'a> {
        JobRef {
            id,
            attempt: held.attempts,
            queue: &held.queue,
            class: &held.hints.class,
        }
    }
}

/// How an attempt ended, beside what its settle counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// The worker said `done`.
    Done,
    /// The worker said `done`, its completion written inside the job's own transaction
    /// (`drover.complete_within`): the job's row was gone before the master heard of it.
    DoneWithin,
    /// The worker said `release`.
    Released,
    /// The worker said `fail`.
    Failed,
    /// The worker gave back a job it had not started (`return`).
    Returned,
    /// Its worker exited, was killed past the job's timeout, or was stopped by an operator.
    WorkerGone,
    /// It never reached a worker: its queue was paused, its payload refused, no worker had room.
    NotHandedOut,
}

/// One transition of a job in the master.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// A claim of pool `pool` leased the job.
    Claimed { job: JobRef<'a>, pool: &'a str },
    /// The job frame went to worker `worker` (process `pid`, when known).
    Dispatched {
        job: JobRef<'a>,
        worker: u64,
        pid: Option<u32>,
        /// The payload as leased (the history keeps it; a trace reads its `traceparent`).
        payload: &'a str,
    },
    /// The worker said `started`: the job had been available for `wait`.
    Started {
        job: JobRef<'a>,
        pid: Option<u32>,
        wait: Duration,
    },
    /// The attempt ended: `counted` is what its settle counts as (`rules::settle::Counted`),
    /// `ran` how long it ran (none if it never started), `pid` the worker that ran it while that
    /// process is still there to be read (none once it was reaped).
    Ended {
        job: JobRef<'a>,
        by: EndedBy,
        counted: Counted,
        ran: Option<Duration>,
        pid: Option<u32>,
    },
    /// The settles of `jobs` were written, in `took`: a batch of the settler, or acks that rode
    /// with a claim (`rode_claim`).
    SettlesWritten {
        jobs: &'a [JobId],
        rode_claim: bool,
        took: Duration,
    },
    /// Jobs whose attempt was counted as something else (their worker died after the job's own
    /// transaction committed its completion, before its `done` reached the master: taken back,
    /// counted released) turned out to have completed inside that transaction. Each counts as
    /// completed now, once; nothing runs it again.
    CompletedInDatabase { jobs: &'a [JobId] },
    /// The database refused the settle of job `job` by itself and it was dropped: the job's
    /// lease runs out and it runs again.
    SettleDropped { job: JobId, error: &'a str },
    /// The lease keeper found the job's lease moved on (taken back by a reaper): its worker is
    /// stopped so the job never runs in two places.
    TakenBack { job: JobId, worker: u64 },
    /// This master's reaper made `jobs` expired leases of gone masters claimable again.
    Reaped { jobs: u64 },
    /// Worker process `pid` is gone: what an observer keeps by process is dropped (the PID may
    /// be reused).
    WorkerGone { pid: u32 },
}

/// What observes the stream.
pub trait Observer: Send {
    /// One event, on the master's loop: quick, never blocking (hand slow work to a task).
    fn observe(&mut self, event: &Event<'_>);

    /// The master exits: no event follows. An observer with a task of its own returns it, and
    /// the master waits for it (within its exit budget) before it ends.
    fn close(self: Box<Self>) -> Option<tokio::task::JoinHandle<()>> {
        None
    }
}

/// The observers registered, in order of registration.
#[derive(Default)]
pub struct Lifecycle {
    observers: Vec<Box<dyn Observer>>,
}

impl Lifecycle {
    /// Adds an observer: it sees every event from now on.
    pub fn register(&mut self, observer: Box<dyn Observer>) {
        self.observers.push(observer);
    }

    /// One transition, to every observer.
    pub fn emit(&mut self, event: Event<'_>) {
        for observer in &mut self.observers {
            observer.observe(&event);
        }
    }

    /// The tasks of the observers that have one, to wait for at exit.
    pub fn close(self) -> Vec<tokio::task::JoinHandle<()>> {
        self.observers
            .into_iter()
            .filter_map(|o| o.close())
            .collect()
    }
}

/// An observer for unit tests: it writes each event down in a line (`claimed 7`, `dispatched 7
/// to 0`, `started 7`, `ended 7 Done Completed`, …).
#[cfg(test)]
pub(crate) mod notes {
    use std::sync::{Arc, Mutex};

    use super::{Event, Lifecycle, Observer};

    /// The lines written so far.
    pub(crate) type Lines = Arc<Mutex<Vec<String>>>;

    pub(crate) struct Notes(pub(crate) Lines);

    /// A lifecycle with only a note-taker, and its lines.
    pub(crate) fn noted() -> (Lifecycle, Lines) {
        let lines = Lines::default();
        let mut lifecycle = Lifecycle::default();
        lifecycle.register(Box::new(Notes(Arc::clone(&lines))));
        (lifecycle, lines)
    }

    impl Observer for Notes {
        fn observe(&mut self, event: &Event<'_>) {
            let line = match event {
                Event::Claimed { job, .. } => format!("claimed {}", job.id),
                Event::Dispatched { job, worker, .. } => {
                    format!("dispatched {} to {worker}", job.id)
                }
                Event::Started { job, .. } => format!("started {}", job.id),
                Event::Ended {
                    job, by, counted, ..
                } => format!("ended {} {by:?} {counted:?}", job.id),
                Event::SettlesWritten {
                    jobs, rode_claim, ..
                } => format!("written {jobs:?} rode {rode_claim}"),
                Event::SettleDropped { job, .. } => format!("dropped {job}"),
                Event::CompletedInDatabase { jobs } => format!("completed in database {jobs:?}"),
                Event::TakenBack { job, worker } => format!("taken back {job} from {worker}"),
                Event::Reaped { jobs } => format!("reaped {jobs}"),
                Event::WorkerGone { pid } => format!("gone {pid}"),
            };
            self.0.lock().unwrap().push(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::notes::Notes;
    use super::*;
    use std::sync::Arc;

    #[test]
    fn every_observer_sees_every_event_in_order_and_closes_once() {
        let (a, b) = (Arc::default(), Arc::default());
        let mut lifecycle = Lifecycle::default();
        lifecycle.register(Box::new(Notes(Arc::clone(&a))));
        lifecycle.register(Box::new(Notes(Arc::clone(&b))));
        let job = JobRef {
            id: 7,
            attempt: 1,
            queue: "default",
            class: "App\\Jobs\\Ship",
        };
        lifecycle.emit(Event::Claimed {
            job,
            pool: "default",
        });
        lifecycle.emit(Event::Ended {
            job,
            by: EndedBy::Done,
            counted: Counted::Completed,
            ran: Some(Duration::from_millis(3)),
            pid: Some(42),
        });
        let want = ["claimed 7", "ended 7 Done Completed"];
        assert_eq!(*a.lock().unwrap(), want);
        assert_eq!(*b.lock().unwrap(), want);
        assert!(lifecycle.close().is_empty(), "no observer here has a task");
    }
}
