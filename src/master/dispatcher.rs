//! The dispatcher: which worker gets which of the jobs a claim leased. It reads each payload's
//! rules once, hands the jobs to the pool's workers by their free credit (`rules::assignments`)
//! as `job` frames carrying the moment each worker may start them by (`rules::lease_deadlines`),
//! and gives back as settles what must not reach a worker: a job of a queue paused since the
//! claim was sent, a payload asking for something out of range (failed by name), a job no
//! worker has room for (back uncharged).

use std::time::{Duration, Instant};

use drover_broker::{Lease, LeasedJob, Settle};
use drover_supervisor::ToWorker;

use crate::lifecycle::{EndedBy, Event, JobRef, Lifecycle};
use crate::master::pools::PoolRuntime;
use crate::rules::assignments::LeaseTerms;
use crate::rules::job_policy::JobHints;
use crate::rules::settle::{self, Counted};

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
}

impl Dispatcher {
    pub(super) fn new(lease: Duration) -> Dispatcher {
        Dispatcher { lease }
    }

    /// Hands `jobs`, leased at `at` with the outage `grace`, to `pool`'s workers; a job of a
    /// queue `paused` names is given back instead. Each job's way is told to `lifecycle`: handed
    /// to a worker, or ended without reaching one.
    pub(super) fn deliver(
        &self,
        pool: &mut PoolRuntime,
        jobs: Vec<LeasedJob>,
        grace: Duration,
        at: Instant,
        paused: impl Fn(&str) -> bool,
        lifecycle: &mut Lifecycle,
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
                delivery.give_back(JobRef::leased(&job), settle::unstarted(lease), lifecycle);
                continue;
            }
            let hints = JobHints::from_payload(&job.payload);
            match settle::refuse(lease, &hints) {
                Some(refusal) => {
                    tracing::error!(job = job.id, queue = %job.queue, "{}", refusal_reason(&refusal));
                    let named = JobRef {
                        class: &hints.class,
                        ..JobRef::leased(&job)
                    };
                    delivery.give_back(named, refusal, lifecycle);
                }
                None => hinted.push((job, hints)),
            }
        }
        let terms = LeaseTerms {
            lease: self.lease,
            grace,
        };
        let (given, left) = pool.assignments.assign(hinted, terms, at);
        delivery.handed = given.len();
        // One claim, one lease end: the same start-by deadline for each of its jobs.
        let lease_until_ms = worker_deadline_ms(at + self.lease, self.lease);
        for (worker, job) in given {
            if let Some(held) = pool.assignments.held_job(worker, job.id) {
                lifecycle.emit(Event::Dispatched {
                    job: JobRef::held(job.id, held),
                    worker: worker.0,
                    pid: pool.pool().pid(worker),
                    payload: &job.payload,
                });
            }
            // If the worker is already gone, its Exited event will release the job.
            pool.send(worker, job_frame(job, lease_until_ms));
        }
        delivery.left_some = !left.is_empty();
        for job in left {
            let lease = Lease {
                id: job.id,
                token: job.token,
            };
            delivery.give_back(JobRef::leased(&job), settle::unstarted(lease), lifecycle);
        }
        delivery
    }
}

impl Delivery {
    /// Job `job` does not reach a worker: it ends so, settled by `settle`.
    fn give_back(&mut self, job: JobRef<'_>, settle: Settle, lifecycle: &mut Lifecycle) {
        lifecycle.emit(Event::Ended {
            job,
            by: EndedBy::NotHandedOut,
            counted: Counted::of(&settle),
            ran: None,
            pid: None,
        });
        self.settles.push(settle);
    }
}

/// The `job` frame of `job`, which its worker may start until `lease_until_ms`.
fn job_frame(job: LeasedJob, lease_until_ms: u64) -> ToWorker {
    // The `failure` column holds a failure request, or only a note of how the last attempt's
    // worker died.
    let (fail, died) = match job.failure {
        Some(f) => match f.strip_prefix(drover_broker::DIED_NOTE) {
            Some(how) => (None, Some(how.to_string())),
            None => (Some(f), None),
        },
        None => (None, None),
    };
    ToWorker::Job {
        job: job.id,
        token: job.token,
        queue: job.queue,
        attempts: job.attempts,
        max_attempts: job.max_attempts,
        payload: job.payload,
        fail,
        lease_until_ms,
        died,
    }
}

/// The error a refusal records, for the log.
fn refusal_reason(settle: &Settle) -> &str {
    match settle {
        Settle::Fail { error, .. } => error,
        _ => "refused",
    }
}

#[cfg(test)]
mod tests {
    //! The dispatcher alone: a pool of one stand-in worker (no process), built as `main` builds
    //! pools, and the jobs of one claim.

    use drover_supervisor::pool::StandIn;
    use drover_supervisor::{ToWorker, PROTOCOL_VERSION};
    use tokio::sync::mpsc;

    use super::*;
    use crate::config::{PoolSpec, RunConfig};
    use crate::master::pools::setup::{build_pools, WorkerContext};
    use crate::master::tests::leased as job;

    const LEASE: Duration = Duration::from_secs(30);

    /// A pool of one worker that said hello with `prefetch`.
    fn pool_with_one_worker(prefetch: u32) -> (PoolRuntime, StandIn) {
        let spec =
            PoolSpec::defaults_with("default", vec!["default".into()], 1, vec!["php".into()]);
        let context = WorkerContext {
            stand_ins: true,
            ..WorkerContext::default()
        };
        let (events, _) = mpsc::unbounded_channel();
        let mut pool = build_pools(&RunConfig::defaults_with(vec![spec]), &context, &events)
            .unwrap()
            .remove(0);
        pool.start().unwrap();
        let worker = pool.take_stand_ins().remove(0);
        pool.on_hello(worker.id, (PROTOCOL_VERSION, prefetch, 0), true, false)
            .unwrap();
        (pool, worker)
    }

    #[tokio::test]
    async fn a_claims_jobs_reach_the_worker_with_room_and_the_rest_come_back_as_settles() {
        let (mut pool, mut worker) = pool_with_one_worker(2);
        let dispatcher = Dispatcher::new(LEASE);
        let (mut lifecycle, lines) = crate::lifecycle::notes::noted();
        let jobs = vec![
            job(1, "default", r#"{"job":"J"}"#),
            job(2, "paused", r#"{"job":"J"}"#),
            job(3, "default", r#"{"job":"J","timeout":-1}"#),
            job(4, "default", r#"{"job":"J"}"#),
            job(5, "default", r#"{"job":"J"}"#),
        ];
        let delivery = dispatcher.deliver(
            &mut pool,
            jobs,
            Duration::ZERO,
            Instant::now(),
            |q| q == "paused",
            &mut lifecycle,
        );
        // The worker's credit is two: jobs 1 and 4, in claim order.
        assert_eq!(delivery.handed, 2);
        tokio::task::yield_now().await;
        assert_eq!(worker.jobs_sent(), [1, 4]);
        assert_eq!(pool.assignments.held(), 2);
        // A paused queue's job and the one no worker had room for go back uncharged; the
        // out-of-range payload is failed by name.
        let lease = |id: i64| Lease { id, token: id * 10 };
        assert_eq!(delivery.settles.len(), 3, "{:?}", delivery.settles);
        assert_eq!(delivery.settles[0], settle::unstarted(lease(2)));
        match &delivery.settles[1] {
            Settle::Fail { lease: l, error } => {
                assert_eq!(*l, lease(3));
                assert!(error.starts_with("drover: refused: "), "{error}");
            }
            other => panic!("job 3 failed by name, not {other:?}"),
        }
        assert_eq!(delivery.settles[2], settle::unstarted(lease(5)));
        assert!(delivery.left_some, "a claim now would lease job 5 again");
        // Each job's way, as the lifecycle heard it.
        assert_eq!(
            *lines.lock().unwrap(),
            [
                "ended 2 NotHandedOut ReturnedUnstarted",
                "ended 3 NotHandedOut Failed",
                "dispatched 1 to 1",
                "dispatched 4 to 1",
                "ended 5 NotHandedOut ReturnedUnstarted",
            ]
        );
    }

    #[tokio::test]
    async fn a_job_frame_carries_the_moment_the_worker_may_start_it_by_and_how_its_last_worker_died(
    ) {
        let (mut pool, mut worker) = pool_with_one_worker(1);
        let dispatcher = Dispatcher::new(LEASE);
        let mut lifecycle = Lifecycle::default();
        let mut died = job(7, "default", r#"{"job":"J"}"#);
        died.failure = Some(format!("{}was killed by SIGKILL", drover_broker::DIED_NOTE));
        let at = Instant::now();
        let delivery = dispatcher.deliver(
            &mut pool,
            vec![died],
            Duration::ZERO,
            at,
            |_| false,
            &mut lifecycle,
        );
        assert!(delivery.settles.is_empty() && !delivery.left_some);
        tokio::task::yield_now().await;
        match worker.sent().as_slice() {
            [ToWorker::Job {
                job: 7,
                fail: None,
                died: Some(how),
                lease_until_ms,
                ..
            }] => {
                assert_eq!(how, "was killed by SIGKILL");
                // Two clock readings apart (`leases::monotonic_ms`): within a few milliseconds.
                let want = worker_deadline_ms(at + LEASE, LEASE);
                assert!(
                    lease_until_ms.abs_diff(want) <= 50,
                    "{lease_until_ms} vs {want}"
                );
            }
            other => panic!("one job frame, not {other:?}"),
        }
    }
}
