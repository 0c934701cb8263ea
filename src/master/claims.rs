//! Claims and hand-out: when a pool may claim (credit free, batched under load), claiming in a
//! task, handing the leased jobs to workers (most free credit first) — except those of a queue
//! paused since the claim was sent, which go back unstarted — and waiting for the next delayed
//! job. A claim carries the acks waiting to ride with it (`riding_acks`).

use std::time::{Duration, Instant};

use drover_broker::{Lease, LeasedJob, Settle};
use drover_supervisor::ToWorker;

use crate::master::pools::PoolId;
use crate::rules::assignments::LeaseTerms;
use crate::rules::claiming::{claim_now, PoolMoment};
use crate::rules::job_policy::JobHints;
use crate::rules::settle;

use super::{leases, Internal, Master, Phase};

impl Master {
    pub(super) fn want_claims(&mut self) {
        for p in &mut self.pools {
            p.claim_wanted = true;
        }
    }

    pub(super) fn maybe_claim(&mut self, index: PoolId) {
        let serving = self.phase == Phase::Running && !self.paused && self.queue_pauses.known();
        let p = &self.pools[index];
        let Some(limit) = claim_now(PoolMoment {
            serving,
            claiming: p.claiming.is_some(),
            wanted: p.claim_wanted,
            stopped: p.retired || p.paused,
            free: p.assignments.free_credit(),
            capacity: p.assignments.capacity(),
            idle_worker: p.assignments.has_idle_worker(),
            batch_max: self.config.claim_batch_max,
        }) else {
            return;
        };
        let epoch = self.claim_epoch();
        let queues = self.claimable_queues(index);
        let p = &mut self.pools[index];
        p.claim_wanted = false;
        if queues.is_empty() {
            // Every queue of the pool is paused by name: nothing to claim, which a drain counts
            // as empty (as queue:work --stop-when-empty skips paused queues).
            p.found_empty = epoch;
            return;
        }
        self.claims_sent += 1;
        p.claiming = Some(self.claims_sent);
        p.claim_epoch = epoch;
        // This claim comes after the finished jobs that asked for one later.
        p.claim_after = None;
        let acks = self.settling.riding.take();
        let terms = drover_broker::ClaimTerms {
            grace: p.policy.outage_grace,
            budgets: self.reloading.budgets().clone(),
        };
        let broker = self.broker.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let at = Instant::now();
            let result = match tokio::time::timeout(
                broker.lease_duration() / 2,
                broker.claim(&queues, limit, &acks, &terms),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => {
                    broker.suspect_connection();
                    Err(drover_broker::BrokerError::TimedOut {
                        about: "claiming jobs",
                    })
                }
            };
            let _ = tx.send(Internal::Claimed {
                pool: index,
                result,
                limit,
                at,
                acks,
            });
        });
    }

    pub(super) fn hand_out(
        &mut self,
        index: PoolId,
        jobs: Vec<LeasedJob>,
        grace: Duration,
        limit: usize,
        at: Instant,
    ) {
        let full = jobs.len() == limit;
        if !jobs.is_empty() {
            self.duties.compactor.jobs_went_through();
        }
        self.tally.claimed += jobs.len() as u64;
        let lease = self.broker.lease_duration();
        // The payload's rules, read once; a job asking for something out of range is failed by
        // name here and never reaches a worker (or a clock).
        let mut hinted = Vec::with_capacity(jobs.len());
        for job in jobs {
            let lease = Lease {
                id: job.id,
                token: job.token,
            };
            if self.queue_pauses.is_paused(&job.queue) {
                // Claimed before the pause committed, learned of since: never handed out.
                self.settle(settle::unstarted(lease));
                continue;
            }
            let hints = JobHints::from_payload(&job.payload);
            match settle::refuse(lease, &hints) {
                Some(refusal) => {
                    tracing::error!(job = job.id, queue = %job.queue, "{}", refusal_reason(&refusal));
                    self.settle(refusal);
                }
                None => hinted.push((job, hints)),
            }
        }
        let p = &mut self.pools[index];
        let terms = LeaseTerms { lease, grace };
        let (given, left) =
            p.assignments
                .assign(hinted, terms, at, self.config.recorder.keeps_history());
        for (worker, job) in given {
            let lease_until_ms = leases::worker_deadline_ms(at + lease, lease);
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
            p.pool.send(worker, frame);
        }
        self.sync_guard();
        let left_none = left.is_empty();
        for job in left {
            self.settle(settle::unstarted(Lease {
                id: job.id,
                token: job.token,
            }));
        }
        let p = &mut self.pools[index];
        // A full claim may have left more behind, unless it leased what no worker could take
        // (no room in their sockets): claiming again at once would lease the same jobs again.
        if full && left_none {
            p.claim_wanted = true;
        } else {
            let broker = self.broker.clone();
            let queues = p.queues.clone();
            let tx = self.internal_tx.clone();
            tokio::spawn(async move {
                match broker.next_due(&queues).await {
                    Ok(due) => {
                        let _ = tx.send(Internal::NextDue { pool: index, due });
                    }
                    Err(e) => tracing::warn!(database = %broker.address(), "{e}"),
                }
            });
        }
    }

    pub(super) fn on_claimed(
        &mut self,
        pool: PoolId,
        result: Result<drover_broker::Claimed, drover_broker::BrokerError>,
        limit: usize,
        at: Instant,
        acks: Vec<Lease>,
    ) {
        let p = &mut self.pools[pool];
        p.claiming = None;
        let epoch = p.claim_epoch.take();
        p.found_empty = match &result {
            // Jobs a budget holds back are not an empty queue.
            Ok(claimed) if claimed.jobs.is_empty() && !claimed.held_by_budget => epoch,
            _ => None,
        };
        self.on_ridden_acks(
            acks,
            result
                .as_ref()
                .ok()
                .map(|claimed| claimed.stale_acks.as_slice()),
        );
        match result {
            Ok(claimed) => self.hand_out(pool, claimed.jobs, claimed.grace, limit, at),
            Err(e) => {
                tracing::error!(database = %self.broker.address(), "{e}; trying again in 1s");
                self.pools[pool].next_due =
                    Some(tokio::time::Instant::now() + Duration::from_secs(1));
            }
        }
        // A pause learned of while this claim ran may be held now.
        self.maybe_confirm_pauses();
    }

    pub(super) fn on_next_due(&mut self, pool: PoolId, due: Option<Duration>) {
        // A wait beyond what an Instant can hold (a job delayed for centuries) is no wait at all.
        self.pools[pool].next_due =
            due.and_then(|wait| tokio::time::Instant::now().checked_add(wait));
    }

    /// The next delayed job of some pool is due, the claim a finished job deferred, or a queue's
    /// pause ends: those pools claim. (Acks past their wait go to the settler at the loop's next
    /// turn.)
    pub(super) fn on_due(&mut self) {
        let now = tokio::time::Instant::now();
        self.expire_queue_pauses(now);
        for p in &mut self.pools {
            if p.next_due.is_some_and(|d| d <= now) {
                p.next_due = None;
                p.claim_wanted = true;
            }
            if p.claim_after.is_some_and(|d| d <= now) {
                p.claim_after = None;
                p.claim_wanted = true;
            }
        }
    }
}

/// The error a refusal records, for the log.
fn refusal_reason(settle: &Settle) -> &str {
    match settle {
        Settle::Fail { error, .. } => error,
        _ => "refused",
    }
}
