//! The claimer: what to lease, for which pool, and when, under the limits of the claim side —
//! the pool's free credit (`rules::claiming`), the queues paused by name for every master
//! (`rules::queue_pauses`) and the fleet-wide budgets of queues (`drover_broker::QueueBudgets`,
//! enforced by the claim statement itself); a fair queue is claimed by fair tag
//! (`drover_broker::FairQueues`).
//!
//! Per pool it keeps whether something happened that may let a claim find jobs, the claim
//! running, when the next delayed job is due, when a finished job's deferred claim falls due, and
//! what a drain needs to call the pool empty. Each claim runs in a task over the store's
//! [`Claims`] role and answers the loop with an [`Internal::Claimed`]; the store bounds the call
//! with its own deadline (one layer: `drover_broker::Broker::call_deadline`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_broker::{ClaimTerms, FairQueues, Lease, QueueBudgets, Settle};
use tokio::sync::mpsc;

use crate::master::pools::PoolId;
use crate::rules::claiming::{claim_now, PoolMoment};
use crate::rules::queue_pauses::QueuePauses;
use crate::store::Claims;

use super::events::{ClaimAnswer, Internal};

/// How long a pool waits to claim again after a claim failed.
const RETRY_AFTER_FAILED_CLAIM: Duration = Duration::from_secs(1);

/// One pool's claiming.
#[derive(Debug)]
struct PoolClaims {
    /// Something happened that may let a claim find jobs.
    wanted: bool,
    /// The claim running for this pool, by its number ([`Claimer::sent`] when it was sent).
    running: Option<u64>,
    /// A worker finished a job, which may let a claim find jobs no NOTIFY announces (a release
    /// or a group's move by another master): claim by then, unless a claim starts sooner and
    /// takes the acks waiting (`riding_acks`).
    after: Option<tokio::time::Instant>,
    /// When the next delayed job of its queues becomes due.
    next_due: Option<tokio::time::Instant>,
    /// The running claim began after every settle was written: the settle epoch then (see
    /// `drain`).
    epoch: Option<u64>,
    /// The settle epoch at which a claim of this pool last found nothing (`--stop-when-empty`).
    found_empty: Option<u64>,
}

impl Default for PoolClaims {
    /// A new pool claims as soon as it has credit.
    fn default() -> Self {
        PoolClaims {
            wanted: true,
            running: None,
            after: None,
            next_due: None,
            epoch: None,
            found_empty: None,
        }
    }
}

/// What a pool offers a claim now, read from it and its assignments.
#[derive(Debug, Clone, Copy)]
pub(super) struct Offer<'a> {
    /// Its queues, highest priority first.
    pub queues: &'a [String],
    /// Retired by a reload, or paused on its own.
    pub stopped: bool,
    /// Jobs its workers could take now.
    pub free: usize,
    /// Jobs its workers could hold in all.
    pub capacity: usize,
    /// A worker has nothing to run.
    pub idle_worker: bool,
    /// Its outage grace, which goes with its claims.
    pub grace: Duration,
}

/// The claim side of the master.
pub(super) struct Claimer {
    /// The store's claim calls.
    store: Arc<dyn Claims>,
    /// Where claims' and next-due reads' answers go (the loop's inbox).
    answers: mpsc::UnboundedSender<Internal>,
    /// Per pool, by id (pools are only ever added, so an id in an answer names its pool).
    pools: BTreeMap<PoolId, PoolClaims>,
    /// Claims sent so far: each is numbered by it, so a pause learned of is held once the claims
    /// sent before it have answered (`queue_pauses`).
    sent: u64,
    /// The most jobs one claim leases (`MasterConfig::claim_batch_max`).
    batch_max: usize,
    /// The running configuration's queue budgets, as every claim takes them: built once per
    /// configuration, not per claim.
    budgets: Arc<QueueBudgets>,
    /// The running configuration's fair queues, whose claims take jobs by fair tag.
    fair: Arc<FairQueues>,
    /// Queues paused by name for every master (`queue:pause`), read from the database: none of
    /// their jobs is claimed.
    pauses: QueuePauses,
}

impl Claimer {
    pub(super) fn new(
        store: Arc<dyn Claims>,
        answers: mpsc::UnboundedSender<Internal>,
        batch_max: usize,
        budgets: Arc<QueueBudgets>,
        fair: Arc<FairQueues>,
    ) -> Claimer {
        Claimer {
            store,
            answers,
            pools: BTreeMap::new(),
            sent: 0,
            batch_max,
            budgets,
            fair,
            pauses: QueuePauses::default(),
        }
    }

    fn pool(&mut self, pool: PoolId) -> &mut PoolClaims {
        self.pools.entry(pool).or_default()
    }

    /// Something happened that may let `pool` find jobs.
    pub(super) fn want(&mut self, pool: PoolId) {
        self.pool(pool).wanted = true;
    }

    /// Something happened that may let any pool find jobs (a NOTIFY, a reap, a resume).
    pub(super) fn want_all(&mut self) {
        for p in self.pools.values_mut() {
            p.wanted = true;
        }
    }

    /// Whether `pool` claims when it has credit (a paused pool is not woken by its own
    /// continue until it is told to be).
    pub(super) fn set_wanted(&mut self, pool: PoolId, wanted: bool) {
        self.pool(pool).wanted = wanted;
    }

    /// A finished job's ack waits up to `wait` to ride with a claim: `pool` claims by then at the
    /// latest, for the jobs no NOTIFY announces.
    pub(super) fn want_within(&mut self, pool: PoolId, wait: Duration) {
        self.pool(pool)
            .after
            .get_or_insert(tokio::time::Instant::now() + wait);
    }

    /// The budgets and fair queues of a new configuration.
    pub(super) fn set_queue_rules(&mut self, budgets: Arc<QueueBudgets>, fair: Arc<FairQueues>) {
        self.budgets = budgets;
        self.fair = fair;
    }

    /// The fleet-wide budgets the claims honour.
    pub(super) fn budgets(&self) -> &Arc<QueueBudgets> {
        &self.budgets
    }

    /// The queues paused by name.
    pub(super) fn pauses(&self) -> &QueuePauses {
        &self.pauses
    }

    pub(super) fn pauses_mut(&mut self) -> &mut QueuePauses {
        &mut self.pauses
    }

    /// Claims sent so far (a claim's number).
    pub(super) fn sent(&self) -> u64 {
        self.sent
    }

    /// The number of the oldest claim still running, if any.
    pub(super) fn oldest_running(&self) -> Option<u64> {
        self.pools.values().filter_map(|p| p.running).min()
    }

    /// Whether a claim of `pool` is running.
    pub(super) fn claiming(&self, pool: PoolId) -> bool {
        self.pools.get(&pool).is_some_and(|p| p.running.is_some())
    }

    /// The settle epoch at which `pool`'s last claim found nothing (see `drain`).
    pub(super) fn found_empty(&self, pool: PoolId) -> Option<u64> {
        self.pools.get(&pool).and_then(|p| p.found_empty)
    }

    /// The queues of `queues` that may be claimed from now, in their order.
    pub(super) fn claimable(&self, queues: &[String]) -> Vec<String> {
        queues
            .iter()
            .filter(|q| !self.pauses.is_paused(q))
            .cloned()
            .collect()
    }

    /// When the claimer next needs the loop: a delayed job due, a deferred claim, a pause's end.
    pub(super) fn next_wake(&self) -> Option<tokio::time::Instant> {
        self.pools
            .values()
            .flat_map(|p| [p.next_due, p.after])
            .chain([self.pauses.next_expiry()])
            .flatten()
            .min()
    }

    /// Claims for `pool` if the rule says so now (`rules::claiming`): `serving` while the master
    /// serves and is not paused; `settled` is the settle epoch if every settle is written (a
    /// drain's evidence); `acks` gives the acks to ride with the claim, taken only if it starts.
    pub(super) fn maybe_claim(
        &mut self,
        pool: PoolId,
        offer: Offer<'_>,
        serving: bool,
        settled: Option<u64>,
        acks: impl FnOnce() -> Vec<Settle>,
    ) {
        let serving = serving && self.pauses.known();
        let batch_max = self.batch_max;
        let p = self.pool(pool);
        let Some(limit) = claim_now(PoolMoment {
            serving,
            claiming: p.running.is_some(),
            wanted: p.wanted,
            stopped: offer.stopped,
            free: offer.free,
            capacity: offer.capacity,
            idle_worker: offer.idle_worker,
            batch_max,
        }) else {
            return;
        };
        let queues = self.claimable(offer.queues);
        let number = self.sent + 1;
        let p = self.pool(pool);
        p.wanted = false;
        if queues.is_empty() {
            // Every queue of the pool is paused by name: nothing to claim, which a drain counts
            // as empty (as queue:work --stop-when-empty skips paused queues).
            p.found_empty = settled;
            return;
        }
        p.running = Some(number);
        p.epoch = settled;
        // This claim comes after the finished jobs that asked for one later.
        p.after = None;
        self.sent = number;
        let acks = acks();
        let terms = ClaimTerms {
            grace: offer.grace,
            budgets: self.budgets.clone(),
            fair: self.fair.clone(),
        };
        let store = self.store.clone();
        let answers = self.answers.clone();
        tokio::spawn(async move {
            let at = Instant::now();
            let leases: Vec<Lease> = acks.iter().map(Settle::lease).collect();
            let result = store.claim(&queues, limit, &leases, &terms).await;
            let _ = answers.send(Internal::Claimed(ClaimAnswer {
                pool,
                result,
                limit,
                at,
                acks,
            }));
        });
    }

    /// A claim answered: the pool may claim again; found nothing (and no budget held jobs back)
    /// counts as empty at the epoch it began with; a failed claim is tried again in a second.
    pub(super) fn answered(&mut self, answer: &ClaimAnswer) {
        let p = self.pool(answer.pool);
        p.running = None;
        let epoch = p.epoch.take();
        p.found_empty = match &answer.result {
            // Jobs a budget holds back are not an empty queue.
            Ok(claimed) if claimed.jobs.is_empty() && !claimed.held_by_budget => epoch,
            _ => None,
        };
        if answer.result.is_err() {
            p.next_due = Some(tokio::time::Instant::now() + RETRY_AFTER_FAILED_CLAIM);
        }
    }

    /// After a claim's jobs were handed out: a full claim whose jobs all found a worker may
    /// have left more behind, so `pool` claims again at once; otherwise it asks when the next
    /// delayed job of `queues` is due. (A claim that leased what no worker could take would
    /// lease the same jobs again.)
    pub(super) fn after_delivery(&mut self, pool: PoolId, more_likely: bool, queues: &[String]) {
        if more_likely {
            self.want(pool);
            return;
        }
        let store = self.store.clone();
        let queues = queues.to_vec();
        let answers = self.answers.clone();
        tokio::spawn(async move {
            match store.next_due(&queues).await {
                Ok(due) => {
                    let _ = answers.send(Internal::NextDue { pool, due });
                }
                Err(e) => tracing::warn!(database = %store.address(), "{e}"),
            }
        });
    }

    /// The database said when `pool`'s next delayed job is due.
    pub(super) fn on_next_due(&mut self, pool: PoolId, due: Option<Duration>) {
        // A wait beyond what an Instant can hold (a job delayed for centuries) is no wait at all.
        self.pool(pool).next_due =
            due.and_then(|wait| tokio::time::Instant::now().checked_add(wait));
    }

    /// The pools whose next delayed job or deferred claim is due at `now` claim.
    pub(super) fn on_due(&mut self, now: tokio::time::Instant) {
        for p in self.pools.values_mut() {
            if p.next_due.is_some_and(|d| d <= now) {
                p.next_due = None;
                p.wanted = true;
            }
            if p.after.is_some_and(|d| d <= now) {
                p.after = None;
                p.wanted = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The claimer alone, over the fake store: one job, from the wake-up to the answer.

    use super::*;
    use crate::master::tests::leased;
    use crate::store::fake::FakeStore;

    fn offer(queues: &[String], free: usize) -> Offer<'_> {
        Offer {
            queues,
            stopped: false,
            free,
            capacity: 4,
            idle_worker: true,
            grace: Duration::ZERO,
        }
    }

    async fn answer(rx: &mut mpsc::UnboundedReceiver<Internal>) -> Internal {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("an answer")
            .expect("the channel open")
    }

    /// A claimer that has read the (no) paused queues, for the first pool's id.
    fn claimer(store: Arc<FakeStore>) -> (Claimer, mpsc::UnboundedReceiver<Internal>, PoolId) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut claimer = Claimer::new(
            store,
            tx,
            256,
            Arc::new(QueueBudgets::default()),
            Arc::new(FairQueues::default()),
        );
        claimer.pauses.start_read(tokio::time::Instant::now());
        claimer
            .pauses
            .on_read(Vec::new(), tokio::time::Instant::now(), 0);
        let pool = PoolId::first();
        (claimer, rx, pool)
    }

    #[tokio::test]
    async fn a_job_is_claimed_for_the_pools_free_credit_carrying_the_acks() {
        let store = Arc::new(FakeStore::default());
        store.will_lease(vec![leased(1, "default", "{}")]);
        let (mut claimer, mut rx, pool) = claimer(store.clone());
        let queues = vec!["default".to_string()];
        let ack = Settle::Ack(Lease { id: 9, token: 90 });
        claimer.maybe_claim(pool, offer(&queues, 3), true, Some(4), || vec![ack.clone()]);
        assert!(claimer.claiming(pool));
        assert_eq!(claimer.sent(), 1);
        // One claim at a time, however often the pool is woken.
        claimer.want(pool);
        claimer.maybe_claim(pool, offer(&queues, 3), true, Some(4), Vec::new);
        assert_eq!(claimer.sent(), 1);
        let Internal::Claimed(answer) = answer(&mut rx).await else {
            panic!("a claim's answer");
        };
        assert_eq!(answer.limit, 3);
        assert_eq!(answer.acks, vec![ack]);
        assert_eq!(store.claim_queues(), vec![queues.clone()]);
        assert_eq!(store.claim_limits(), vec![3]);
        assert_eq!(store.ridden(), vec![Lease { id: 9, token: 90 }]);
        claimer.answered(&answer);
        assert!(!claimer.claiming(pool));
        assert_eq!(answer.result.as_ref().map(|c| c.jobs.len()).ok(), Some(1));
        assert_eq!(claimer.found_empty(pool), None, "it found a job");
    }

    #[tokio::test]
    async fn a_claim_that_finds_nothing_after_every_settle_counts_the_pool_empty_at_that_epoch() {
        let store = Arc::new(FakeStore::default());
        let (mut claimer, mut rx, pool) = claimer(store);
        let queues = vec!["default".to_string()];
        claimer.maybe_claim(pool, offer(&queues, 1), true, Some(7), Vec::new);
        let Internal::Claimed(answer) = answer(&mut rx).await else {
            panic!("a claim's answer");
        };
        claimer.answered(&answer);
        assert_eq!(claimer.found_empty(pool), Some(7));
        // Nothing more is claimed until something may have brought jobs.
        claimer.maybe_claim(pool, offer(&queues, 1), true, Some(7), Vec::new);
        assert_eq!(claimer.sent(), 1);
        claimer.want_all();
        claimer.maybe_claim(pool, offer(&queues, 1), true, Some(7), Vec::new);
        assert_eq!(claimer.sent(), 2);
    }

    #[tokio::test]
    async fn a_pool_whose_every_queue_is_paused_claims_nothing_and_a_master_not_serving_neither() {
        let store = Arc::new(FakeStore::default());
        let (mut claimer, _rx, pool) = claimer(store);
        let queues = vec!["default".to_string()];
        claimer.maybe_claim(pool, offer(&queues, 1), false, None, Vec::new);
        assert_eq!(claimer.sent(), 0, "not serving");
        claimer.maybe_claim(pool, offer(&queues, 0), true, None, Vec::new);
        assert_eq!(claimer.sent(), 0, "no credit");
        let now = tokio::time::Instant::now();
        claimer.pauses.start_read(now);
        claimer.pauses.on_read(
            vec![drover_broker::PausedQueue {
                queue: "default".into(),
                left: None,
                version: 1,
            }],
            now,
            0,
        );
        claimer.maybe_claim(pool, offer(&queues, 1), true, Some(3), Vec::new);
        assert_eq!(claimer.sent(), 0, "every queue paused");
        assert_eq!(claimer.found_empty(pool), Some(3));
    }

    #[tokio::test]
    async fn a_failed_claim_is_tried_again_a_second_later() {
        let store = Arc::new(FakeStore::default());
        let (mut claimer, _rx, pool) = claimer(store);
        claimer.answered(&ClaimAnswer {
            pool,
            result: Err(drover_broker::BrokerError::TimedOut {
                about: "claiming jobs",
            }),
            limit: 1,
            at: Instant::now(),
            acks: Vec::new(),
        });
        let due = claimer.next_wake().expect("a retry");
        assert!(due > tokio::time::Instant::now());
        claimer.set_wanted(pool, false);
        claimer.on_due(due);
        assert!(claimer.pools[&pool].wanted);
    }
}
