//! Leases and deadlines: renewing every lease the master holds (and giving back those it holds
//! unknowingly, leased by a claim whose answer was lost), telling each worker how long
//! its jobs' leases hold (so a worker stops by itself even if this master never runs again),
//! killing a worker whose lease could not be renewed before it ends, and killing a worker whose
//! job outran its timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_broker::{BrokerError, JobId, Lease, Settle};
use drover_supervisor::ToWorker;
use tokio::sync::mpsc;

use crate::lifecycle::{EndedBy, Event, JobRef, Lifecycle};
use crate::master::pools::Pools;
use crate::process::lease_guard::GuardClient;
use crate::rules::lease_deadlines::{fence_at, guard_at, start_by};
use crate::rules::settle::{self, Counted};
use crate::rules::worker_state::{Transition, WorkerState};
use crate::store::Claims;

use super::events::{Internal, RenewAnswer};

/// Where the renewal of the leases stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Renewal {
    Idle,
    /// A renew statement is running.
    Running,
    /// The last one failed (the database unreachable): tried again at every lease check, so a
    /// renewal lands within lease/10 of the database's return rather than lease/3.
    Failed,
}

/// `at` as milliseconds of `CLOCK_MONOTONIC`, the clock the workers read (`hrtime()` in PHP):
/// the master and its workers are on one host, so a deadline passes between them without any
/// allowance for transit or skew. `std::time::Instant` is that clock on Linux, but it does not
/// expose its value, so the offset to now is added to a fresh reading.
pub(super) fn monotonic_ms(at: Instant) -> u64 {
    let now = Instant::now();
    let reading = crate::process::lease_guard::monotonic_now();
    let value = match at.checked_duration_since(now) {
        Some(ahead) => reading.saturating_add(ahead),
        None => reading.saturating_sub(now - at),
    };
    u64::try_from(value.as_millis()).unwrap_or(u64::MAX)
}

/// The deadline a worker is told for a job leased until `lease_until`: the last moment it may
/// start it (`lease_deadlines::start_by`, whatever the pool's grace).
pub(super) fn worker_deadline_ms(lease_until: Instant, lease: Duration) -> u64 {
    monotonic_ms(start_by(lease_until, lease))
}

/// Keeps the leases this master holds: renews them, tells the lease guard and the workers how
/// long they hold, and kills a worker before a lease it could not keep ends.
pub(super) struct LeaseKeeper {
    /// The store's lease calls (renew, the claims whose answer was lost).
    store: Arc<dyn Claims>,
    /// The lease guard process: it stops workers at their deadline when this master cannot.
    guard: GuardClient,
    /// Idle, running, or failed last time (then tried again at every lease check, not only
    /// every lease/3: `rules::lease_deadlines`).
    renewal: Renewal,
    /// Where a renewal's answer goes (the loop's inbox).
    answers: mpsc::UnboundedSender<Internal>,
}

impl LeaseKeeper {
    pub(super) fn new(
        store: Arc<dyn Claims>,
        guard: GuardClient,
        answers: mpsc::UnboundedSender<Internal>,
    ) -> LeaseKeeper {
        LeaseKeeper {
            store,
            guard,
            renewal: Renewal::Idle,
            answers,
        }
    }

    /// Where the renewal stands.
    pub(super) fn renewal(&self) -> Renewal {
        self.renewal
    }

    /// Tells the lease guard each busy worker's deadline (and which workers hold nothing now).
    /// Called when jobs are handed out (a worker that held nothing gets a deadline at once), after
    /// each renewal, and on each renewal tick (idle workers are cleared). A deadline the guard
    /// holds is never later than the true one: between updates it can only be early, by at
    /// most a renewal period, which the margins absorb (docs/leases.md).
    pub(super) fn sync_guard(&mut self, pools: &Pools) {
        let lease = self.store.lease_duration();
        let in_force = self.store.grace_in_force();
        let mut wanted = std::collections::HashMap::new();
        for p in pools {
            for (worker, hold) in p.assignments.hold_floors(in_force) {
                if let Some(pid) = p.pool().pid(worker) {
                    wanted.insert(pid, monotonic_ms(guard_at(hold, lease)));
                }
            }
        }
        self.guard.sync(&wanted);
    }

    /// Renews every lease the pools hold, and asks which jobs claims whose answer was lost
    /// leased to this master, in a task; one renewal at a time. The store bounds the renew
    /// call with its own deadline (a third of the lease).
    pub(super) fn start_renew(&mut self, pools: &Pools) {
        if self.renewal == Renewal::Running {
            return;
        }
        let asked: Vec<Lease> = pools.iter().flat_map(|p| p.assignments.leases()).collect();
        let ask_unanswered = self.store.has_unanswered_claims();
        if asked.is_empty() && !ask_unanswered {
            self.renewal = Renewal::Idle;
            return;
        }
        self.renewal = Renewal::Running;
        let store = self.store.clone();
        let answers = self.answers.clone();
        tokio::spawn(async move {
            let at = Instant::now();
            // The leases this node holds without knowing: those of claims whose answer was lost.
            let unanswered = async {
                match ask_unanswered {
                    true => store.unanswered_claims().await,
                    false => Ok(Vec::new()),
                }
            };
            let (result, unanswered) = tokio::join!(store.renew(&asked), unanswered);
            let _ = answers.send(Internal::Renewed(RenewAnswer {
                asked,
                at,
                result,
                unanswered,
            }));
        });
    }

    /// Fencing on the master's side: a worker whose lease could not be renewed is killed before
    /// the lease ends — or, in a pool with an outage grace, before the grace after it ends — so
    /// no other node can start its job while it still runs.
    pub(super) fn stop_workers_with_expiring_leases(&self, pools: &mut Pools) {
        let lease = self.store.lease_duration();
        let in_force = self.store.grace_in_force();
        let now = Instant::now();
        for p in pools {
            let mut seen = Vec::new();
            for (worker, job, hold) in p.assignments.holds(in_force) {
                if fence_at(hold, lease) > now || seen.contains(&worker) {
                    continue;
                }
                seen.push(worker);
                let left = hold.saturating_duration_since(now);
                tracing::error!(worker = worker.0, job, "the lease of job {job} could not be renewed and its hold ends within {left:?}; killing worker {} so the job never runs in two places", worker.0);
                p.kill_worker(worker, Transition::Fence);
            }
        }
    }

    /// A renewal answered: a worker whose lease was lost (its token moved on) is killed, workers
    /// holding unstarted jobs learn how long they now hold them, the guard is told. Returns the
    /// settles that give back what claims whose answer was lost leased.
    pub(super) fn on_renewed(
        &mut self,
        answer: RenewAnswer,
        pools: &mut Pools,
        lifecycle: &mut Lifecycle,
    ) -> Vec<Settle> {
        let RenewAnswer {
            asked,
            at,
            result,
            unanswered,
        } = answer;
        self.renewal = match result {
            Ok(_) => Renewal::Idle,
            Err(_) => Renewal::Failed,
        };
        let give_back = give_back_unanswered(unanswered, &self.store.address(), lifecycle);
        match result {
            Ok(renewed) => {
                let lease = self.store.lease_duration();
                for p in pools.iter_mut() {
                    for (worker, job) in p.assignments.renewed(&renewed, &asked, at, lease) {
                        tracing::error!(worker = worker.0, job, "lease lost (its token moved on, the job was taken back); stopping the worker so the job never runs in two places");
                        lifecycle.emit(Event::TakenBack {
                            job,
                            worker: worker.0,
                        });
                        p.kill_worker(worker, Transition::Fence);
                    }
                    // Workers holding unstarted jobs learn how long they now hold them (one
                    // frame until they speak again, `rules::socket_room`).
                    for (worker, until) in p.assignments.lease_frames_due() {
                        if p.assignments.state(worker) == Some(WorkerState::Fenced) {
                            continue;
                        }
                        let until_ms = worker_deadline_ms(until, lease);
                        p.send(worker, ToWorker::Lease { until_ms });
                    }
                }
                self.sync_guard(pools);
            }
            Err(e) => tracing::error!(
                database = %self.store.address(),
                "cannot renew leases: {e}; workers whose lease runs out first will be stopped"
            ),
        }
        give_back
    }
}

/// Jobs past their timeout: kill the worker; its exit settles the job by the job's rules.
pub(super) fn stop_overdue_jobs(pools: &mut Pools) {
    let now = Instant::now();
    for p in pools {
        for (worker, job) in p.assignments.overdue(now) {
            tracing::warn!(
                pool = p.pool().name(),
                worker = worker.0,
                job,
                "job {job} ran past its timeout; killing worker {} and settling the job now",
                worker.0
            );
            p.timed_out += 1;
            p.kill_worker(worker, Transition::TimeOut);
        }
    }
}

/// Jobs a claim leased to this master although its answer never came (the connection dropped
/// after the commit): no worker got them, so they go back with their attempt uncharged, as a
/// prefetched job nobody started does. Left alone, they would wait out their lease and the
/// reap would charge them an attempt they never used. `database` names the server for the log.
/// Each goes back to the lifecycle as a job that never reached a worker (its queue and class are
/// not known: the claim's answer never came).
pub(super) fn give_back_unanswered(
    found: Result<Vec<Lease>, BrokerError>,
    database: &str,
    lifecycle: &mut Lifecycle,
) -> Vec<Settle> {
    match found {
        Ok(leases) if leases.is_empty() => Vec::new(),
        Ok(leases) => {
            let jobs: Vec<JobId> = leases.iter().map(|l| l.id).collect();
            tracing::warn!(?jobs, "a claim committed but its answer was lost; giving its {} job(s) back with their attempt uncharged", jobs.len());
            let settles: Vec<Settle> = leases.into_iter().map(settle::unstarted).collect();
            for s in &settles {
                lifecycle.emit(Event::Ended {
                    job: JobRef {
                        id: s.lease().id,
                        attempt: 0,
                        queue: "",
                        class: "",
                    },
                    by: EndedBy::NotHandedOut,
                    counted: Counted::of(s),
                    ran: None,
                    pid: None,
                });
            }
            settles
        }
        Err(e) => {
            tracing::warn!(database, "{e}; asking again at the next renewal");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::lease_deadlines::worker_margin;

    #[test]
    fn a_workers_deadline_is_its_lease_end_less_the_margin_on_the_clock_workers_read() {
        let lease = Duration::from_secs(30);
        let now = Instant::now();
        let until = now + lease;
        let deadline = worker_deadline_ms(until, lease);
        let reading = monotonic_ms(now);
        let ahead = deadline.saturating_sub(reading);
        let want = (lease - worker_margin(lease)).as_millis() as u64;
        // Two clock readings apart: within a few milliseconds, more on a loaded machine.
        assert!(ahead.abs_diff(want) <= 50, "{ahead} ms ahead, want {want}");
        // A later lease end is a later deadline; one past is in the past, never an overflow.
        assert!(worker_deadline_ms(until + Duration::from_secs(1), lease) > deadline);
        assert!(monotonic_ms(now - Duration::from_secs(1)) < reading);
    }
}
