//! The dispatcher: which worker gets which of the jobs a claim leased. It reads each payload's
//! rules once, hands the jobs to the pool's workers by their free credit (`rules::assignments`)
//! as `job` frames carrying the moment each worker may start them by (`rules::lease_deadlines`),
//! and gives back as settles what must not reach a worker: a job of a queue paused since the
//! claim was sent, a payload asking for something out of range (failed by name), a job no
//! worker has room for (back uncharged).

use std::time::{Duration, Instant};

use drover_broker::{Lease, LeasedJob, Settle};
use drover_supervisor::ToWorker;

use crate::master::pools::PoolRuntime;
use crate::rules::assignments::LeaseTerms;
use crate::rules::job_policy::JobHints;
use crate::rules::settle;

use super::leases::worker_deadline_ms;

/// What became of a claim's jobs.
#[derive(Debug, Default)]
pub(super) struct Delivery {
    /// Jobs handed to a worker.
    pub handed: usize,
    /// Settles for the jobs that did not reach a worker.
    pub settles: Vec<Settle>,
    /// Some job found no worker with room: claiming again at once would lease it again.
    pub left_some: bool,
}

/// Hands claimed jobs to workers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dispatcher {
    /// How long a lease lasts (the store's): a job's deadline counts from its claim.
    lease: Duration,
    /// Completed jobs go to the history: their payload is kept while they run.
    keeps_history: bool,
}

impl Dispatcher {
    pub(super) fn new(lease: Duration, keeps_history: bool) -> Dispatcher {
        Dispatcher {
            lease,
            keeps_history,
        }
    }

    /// Hands `jobs`, leased at `at` with the outage `grace`, to `pool`'s workers; a job of a
    /// queue `paused` names is given back instead.
    pub(super) fn deliver(
        &self,
        pool: &mut PoolRuntime,
        jobs: Vec<LeasedJob>,
        grace: Duration,
        at: Instant,
        paused: impl Fn(&str) -> bool,
    ) -> Delivery {
        let mut delivery = Delivery::default();
        // The payload's rules, read once; a job asking for something out of range is failed by
        // name here and never reaches a worker (or a clock).
        let mut hinted = Vec::with_capacity(jobs.len());
        for job in jobs {
            let lease = Lease {
                id: job.id,
                token: job.token,
            };
            if paused(&job.queue) {
                // Claimed before the pause committed, learned of since: never handed out.
                delivery.settles.push(settle::unstarted(lease));
                continue;
            }
            let hints = JobHints::from_payload(&job.payload);
            match settle::refuse(lease, &hints) {
                Some(refusal) => {
                    tracing::error!(job = job.id, queue = %job.queue, "{}", refusal_reason(&refusal));
                    delivery.settles.push(refusal);
                }
                None => hinted.push((job, hints)),
            }
        }
        let terms = LeaseTerms {
            lease: self.lease,
            grace,
        };
        let (given, left) = pool.assign(hinted, terms, at, self.keeps_history);
        delivery.handed = given.len();
        for (worker, job) in given {
            let lease_until_ms = worker_deadline_ms(at + self.lease, self.lease);
            // The `failure` column holds a failure request, or only a note of how the last
            // attempt's worker died.
            let (fail, died) = match job.failure {
                Some(f) => match f.strip_prefix(drover_broker::DIED_NOTE) {
                    Some(how) => (None, Some(how.to_string())),
                    None => (Some(f), None),
                },
                None => (None, None),
            };
            let frame = ToWorker::Job {
                job: job.id,
                token: job.token,
                queue: job.queue,
                attempts: job.attempts,
                max_attempts: job.max_attempts,
                payload: job.payload,
                fail,
                lease_until_ms,
                died,
            };
            // If the worker is already gone, its Exited event will release the job.
            pool.send(worker, frame);
        }
        delivery.left_some = !left.is_empty();
        for job in left {
            delivery.settles.push(settle::unstarted(Lease {
                id: job.id,
                token: job.token,
            }));
        }
        delivery
    }
}

/// The error a refusal records, for the log.
fn refusal_reason(settle: &Settle) -> &str {
    match settle {
        Settle::Fail { error, .. } => error,
        _ => "refused",
    }
}
