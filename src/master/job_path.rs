//! A job's way through the master, as the loop wires its parts: the [`claimer`](super::claimer)
//! leases it for a pool with free credit, the [`dispatcher`](super::dispatcher) hands it to a
//! worker, the worker's frames (`workers`) end its attempt, and the [`settler`](super::settler)
//! writes how it ended. Each part owns its state; this file only passes what one part produced
//! to the next. `docs/architecture.md` ("One job, end to end") follows the same way file by file.

use crate::lifecycle::{Event, JobRef};
use crate::master::pools::PoolId;

use super::claimer::Offer;
use super::events::ClaimAnswer;
use super::settler::BatchReport;
use super::Master;

impl Master {
    /// The claimer claims for pool `index` if the rule says so now.
    pub(super) fn maybe_claim(&mut self, index: PoolId) {
        let p = &self.pools[index];
        let offer = Offer {
            queues: &p.queues,
            stopped: p.retired || p.paused,
            free: p.assignments.free_credit(),
            capacity: p.assignments.capacity(),
            idle_worker: p.assignments.has_idle_worker(),
            grace: p.policy.outage_grace,
        };
        let settler = &mut self.settler;
        let settled = settler.settled_epoch();
        self.claimer
            .maybe_claim(index, offer, self.life.serving(), settled, || {
                settler.take_riding()
            });
    }

    /// A claim answered: the acks that rode with it are written (or go to the settler), its jobs
    /// go to the pool's workers, and what reached none is settled.
    pub(super) fn on_claimed(&mut self, answer: ClaimAnswer) {
        self.life.database.saw(&answer.result, answer.at);
        self.claimer.answered(&answer);
        let ClaimAnswer {
            pool,
            result,
            limit,
            at,
            acks,
        } = answer;
        let stale = result.as_ref().ok().map(|c| c.stale_acks.as_slice());
        let ridden = self
            .settler
            .on_ridden(acks, stale, at.elapsed(), &mut self.lifecycle);
        if ridden && self.config.stop_when.empty {
            // As the settler does after every batch: a drain claims once more, to see the
            // queues empty after the last settle.
            self.claimer.want_all();
        }
        match result {
            Ok(claimed) => {
                if !claimed.jobs.is_empty() {
                    self.upkeep.duties.compactor.jobs_went_through();
                }
                let full = claimed.jobs.len() == limit;
                let name = self.pools[pool].pool().name();
                for job in &claimed.jobs {
                    self.lifecycle.emit(Event::Claimed {
                        job: JobRef::leased(job),
                        pool: name,
                    });
                }
                let pauses = self.claimer.pauses();
                let delivery = self.dispatcher.deliver(
                    &mut self.pools[pool],
                    claimed.jobs,
                    claimed.grace,
                    at,
                    |queue| pauses.is_paused(queue),
                    &mut self.lifecycle,
                );
                self.leases.sync_guard(&self.pools);
                for settle in delivery.settles {
                    self.settler.settle(settle);
                }
                let queues = self.pools[pool].queues.clone();
                self.claimer
                    .after_delivery(pool, full && !delivery.left_some, &queues);
            }
            Err(e) => {
                tracing::error!(database = %self.store.address(), "{e}; trying again in 1s");
            }
        }
        // A pause learned of while this claim ran may be held now.
        self.maybe_confirm_pauses();
    }

    /// The next delayed job of some pool is due, the claim a finished job deferred, a queue's
    /// pause ends, or a worker's restart waited out its backoff: those pools claim, those
    /// workers start. (Acks past their wait go to the settler at the loop's next turn.)
    pub(super) fn on_due(&mut self) {
        let now = tokio::time::Instant::now();
        self.expire_queue_pauses(now);
        self.claimer.on_due(now);
        for p in &mut self.pools {
            p.start_due_restarts(now.into_std());
        }
    }
}

impl Master {
    /// A renewal answered (the lease keeper acts on it); what claims whose answer was lost
    /// leased goes back uncharged.
    pub(super) fn on_renewed(&mut self, answer: super::events::RenewAnswer) {
        self.life.database.saw(&answer.result, answer.at);
        for settle in self
            .leases
            .on_renewed(answer, &mut self.pools, &mut self.lifecycle)
        {
            self.settler.settle(settle);
        }
    }

    /// A batch of the settler came back: written, or a settle in it refused and dropped.
    pub(super) fn on_settles(&mut self, report: BatchReport) {
        match report {
            BatchReport::Written {
                jobs,
                took,
                completed_after_exit,
            } => {
                self.lifecycle.emit(Event::SettlesWritten {
                    jobs: &jobs,
                    rode_claim: false,
                    took,
                });
                if !completed_after_exit.is_empty() {
                    tracing::info!(jobs = ?completed_after_exit, "these jobs completed inside their own transaction before their worker could say so: counted completed, not run again");
                    self.lifecycle.emit(Event::CompletedInDatabase {
                        jobs: &completed_after_exit,
                    });
                }
            }
            BatchReport::Dropped { job, error } => self
                .lifecycle
                .emit(Event::SettleDropped { job, error: &error }),
        }
    }

    /// Gives back what claims whose answer was lost leased to this master.
    pub(super) fn give_back_unanswered(
        &mut self,
        found: Result<Vec<drover_broker::Lease>, drover_broker::BrokerError>,
    ) {
        let address = self.store.address();
        for settle in super::leases::give_back_unanswered(found, &address, &mut self.lifecycle) {
            self.settler.settle(settle);
        }
    }
}
