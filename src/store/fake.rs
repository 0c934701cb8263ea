//! A store with no database, for unit tests of the master's loop: every call answers at once
//! with nothing, except what a test scripts (what claims lease, what an unanswered claim leased,
//! what backlog counts find, which queues are paused, what progress and workflows reads find),
//! and the calls that matter are recorded (claims and their limits, renewals and their leases,
//! questions about unanswered claims, settles, the acks riding with claims, backlog counts, the
//! pauses confirmed, the jobs whose progress was read). A test may hold a
//! claim's answer back until it lets it go.

use std::sync::Mutex;
use std::time::Duration;

use drover_broker::{
    ClaimTerms, Claimed, GroupStats, HeldGroup, HistoryRow, JobId, Lease, LeasedJob, MinuteRow,
    NodeId, PausedQueue, ReapOutcome, Settle, SettleOutcome, TableCompaction,
};
use tokio::sync::oneshot;

use super::{Claims, Connection, Maintenance, Node, Records, Settles, StoreCall};

/// What a test sets up and reads back.
#[derive(Default)]
pub struct FakeStore {
    state: Mutex<Calls>,
}

#[derive(Default)]
struct Calls {
    /// Jobs an unanswered claim leased, found by the next question (then none are left).
    unanswered: Vec<Lease>,
    /// What the next claims lease, one batch per claim (then nothing).
    to_lease: std::collections::VecDeque<Vec<LeasedJob>>,
    /// The limit each claim asked for.
    limits: Vec<usize>,
    /// The outage grace each claim asked for.
    graces: Vec<Duration>,
    /// The queue budgets each claim carried.
    budgets: Vec<drover_broker::QueueBudgets>,
    /// The longest outage grace asked of the node row.
    grace_wanted: Duration,
    /// How many of the next renewals fail, as against an unreachable database.
    renewals_failing: u32,
    /// The newest fleet restart request made of this master, and the newest it answered.
    reload_requested: i64,
    reload_done: i64,
    /// Stop requests the next reading finds (then none are left), and the jobs said carried out.
    stop_requests: Vec<drover_broker::StopRequest>,
    stops_taken: Vec<JobId>,
    /// Pool sizes the next reading finds (then none), and what the master said of each.
    pool_sizes: Vec<drover_broker::PoolSize>,
    pool_size_outcomes: Vec<(String, String)>,
    /// How many times the master forgot its pool sizes (a reload).
    pool_sizes_forgotten: usize,
    /// The queues each claim asked for.
    queues: Vec<Vec<String>>,
    /// The acks that rode with claims.
    ridden: Vec<Lease>,
    /// The leases each renewal asked for.
    renewed: Vec<Vec<Lease>>,
    /// How many claims were made.
    claims: usize,
    /// How many renewals were made.
    renewals: usize,
    /// How many times the master asked about unanswered claims.
    questions: usize,
    /// How many admission passes the master ran.
    admissions: usize,
    /// Every settle written, in order.
    settled: Vec<Settle>,
    /// What a backlog count finds waiting in each queue (a queue left out has none).
    waiting: Vec<(String, i64)>,
    /// The queues each backlog count asked for.
    counted: Vec<Vec<String>>,
    /// The queues paused by name (Laravel's `queue:pause`), as reads find them.
    paused: Vec<PausedQueue>,
    /// The versions each confirmation of held pauses wrote, in order.
    confirmations: Vec<Vec<i64>>,
    /// The next claim answers only once this is let go (or dropped).
    held_claim: Option<oneshot::Receiver<()>>,
    /// The next confirmation of held pauses answers only once this is let go (or dropped).
    held_confirmation: Option<oneshot::Receiver<()>>,
    /// The next heartbeat finds this master's row gone, and registers it again.
    row_gone: bool,
    /// The progress reports reads find (those of the jobs asked for).
    progress: Vec<drover_broker::JobProgress>,
    /// The jobs each read of progress asked for.
    progress_asked: Vec<Vec<JobId>>,
    /// What reads of the workflows find.
    workflows: drover_broker::WorkflowCounts,
}

impl FakeStore {
    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.state.lock().unwrap()
    }

    /// A claim committed with these jobs and its answer was lost.
    pub fn lose_the_answer_of_a_claim(&self, leased: Vec<Lease>) {
        self.calls().unanswered = leased;
    }

    /// The next claim leases `jobs`.
    pub fn will_lease(&self, jobs: Vec<LeasedJob>) {
        self.calls().to_lease.push_back(jobs);
    }

    /// Backlog counts find these jobs waiting, by queue.
    pub fn waiting(&self, counts: &[(&str, i64)]) {
        self.calls().waiting = counts.iter().map(|(q, n)| (q.to_string(), *n)).collect();
    }

    /// Reads of the paused queues find these paused, until resumed, each a new version.
    pub fn pause_queues(&self, queues: &[&str]) {
        let mut calls = self.calls();
        let first = calls.paused.iter().map(|p| p.version).max().unwrap_or(0) + 1;
        calls.paused = queues
            .iter()
            .zip(first..)
            .map(|(q, version)| PausedQueue {
                queue: q.to_string(),
                left: None,
                version,
            })
            .collect();
    }

    /// Reads of the paused queues find exactly these.
    pub fn paused_as(&self, paused: Vec<PausedQueue>) {
        self.calls().paused = paused;
    }

    /// The versions each confirmation of held pauses wrote, in order.
    pub fn confirmations(&self) -> Vec<Vec<i64>> {
        self.calls().confirmations.clone()
    }

    /// The next confirmation of held pauses is answered only when the returned sender fires (or is
    /// dropped).
    pub fn hold_the_next_confirmation(&self) -> oneshot::Sender<()> {
        let (release, held) = oneshot::channel();
        self.calls().held_confirmation = Some(held);
        release
    }

    /// The next heartbeat finds this master's node row gone (another master took it for gone).
    pub fn lose_the_node_row(&self) {
        self.calls().row_gone = true;
    }

    /// The next claim is answered only when the returned sender fires (or is dropped).
    pub fn hold_the_next_claim(&self) -> oneshot::Sender<()> {
        let (release, held) = oneshot::channel();
        self.calls().held_claim = Some(held);
        release
    }

    /// Reads of progress find these reports (of the jobs they ask for).
    pub fn progress_reported(&self, reports: Vec<drover_broker::JobProgress>) {
        self.calls().progress = reports;
    }

    /// The jobs each read of progress asked for, in order.
    pub fn progress_asked(&self) -> Vec<Vec<JobId>> {
        self.calls().progress_asked.clone()
    }

    /// Reads of the workflows find these counts.
    pub fn workflows_counted(&self, counts: drover_broker::WorkflowCounts) {
        self.calls().workflows = counts;
    }

    /// The queues each backlog count asked for, in order.
    pub fn backlog_counts(&self) -> Vec<Vec<String>> {
        self.calls().counted.clone()
    }

    /// The limit each claim asked for, in order.
    /// How many admission passes the master ran.
    pub fn admissions(&self) -> usize {
        self.calls().admissions
    }

    pub fn claim_limits(&self) -> Vec<usize> {
        self.calls().limits.clone()
    }

    /// The queue budgets each claim carried, in order.
    pub fn claim_budgets(&self) -> Vec<drover_broker::QueueBudgets> {
        self.calls().budgets.clone()
    }

    /// The outage grace each claim asked for, in order.
    pub fn claim_graces(&self) -> Vec<Duration> {
        self.calls().graces.clone()
    }

    /// The next `n` renewals fail (the database unreachable).
    pub fn fail_renewals(&self, n: u32) {
        self.calls().renewals_failing = n;
    }

    /// An operator asks to stop a job (read at the master's next reading).
    pub fn request_stop(&self, request: drover_broker::StopRequest) {
        self.calls().stop_requests.push(request);
    }

    /// The console sets a pool's size (read at the master's next reading).
    pub fn set_pool_size(&self, size: drover_broker::PoolSize) {
        self.calls().pool_sizes.push(size);
    }

    /// What the master said of each pool size, in order: (pool, outcome).
    pub fn pool_size_outcomes(&self) -> Vec<(String, String)> {
        self.calls().pool_size_outcomes.clone()
    }

    /// How many times the master forgot its pool sizes.
    pub fn pool_sizes_forgotten(&self) -> usize {
        self.calls().pool_sizes_forgotten
    }

    /// The jobs whose stop requests the master said it carried out.
    pub fn stops_carried_out(&self) -> Vec<JobId> {
        self.calls().stops_taken.clone()
    }

    /// A fleet restart asks this master to reload (its request number goes up by one).
    pub fn request_reload(&self) {
        self.calls().reload_requested += 1;
    }

    /// The newest fleet restart request this master said it applied.
    pub fn reload_done(&self) -> i64 {
        self.calls().reload_done
    }

    /// The longest outage grace asked of the node row.
    pub fn grace_wanted(&self) -> Duration {
        self.calls().grace_wanted
    }

    /// The queues each claim asked for, in order.
    pub fn claim_queues(&self) -> Vec<Vec<String>> {
        self.calls().queues.clone()
    }

    /// The acks that rode with claims, in order.
    pub fn ridden(&self) -> Vec<Lease> {
        self.calls().ridden.clone()
    }

    /// The leases each renewal asked for, in order.
    pub fn renewals(&self) -> Vec<Vec<Lease>> {
        self.calls().renewed.clone()
    }

    pub fn settled(&self) -> Vec<Settle> {
        self.calls().settled.clone()
    }

    /// Claims, renewals and questions about unanswered claims so far.
    pub fn statements(&self) -> (usize, usize, usize) {
        let c = self.calls();
        (c.claims, c.renewals, c.questions)
    }
}

fn done<'a, T: Send + 'a>(value: T) -> StoreCall<'a, T> {
    Box::pin(std::future::ready(Ok(value)))
}

impl Connection for FakeStore {
    fn suspect_connection(&self) {}
    fn lease_duration(&self) -> Duration {
        Duration::from_secs(30)
    }
    fn database_time(&self) -> std::time::SystemTime {
        std::time::SystemTime::now()
    }
}

impl Claims for FakeStore {
    fn claim<'a>(
        &'a self,
        queues: &'a [String],
        limit: usize,
        acks: &'a [Lease],
        terms: &'a ClaimTerms,
    ) -> StoreCall<'a, Claimed> {
        let grace = terms.grace;
        let mut calls = self.calls();
        calls.claims += 1;
        calls.limits.push(limit);
        calls.graces.push(grace);
        calls.budgets.push((*terms.budgets).clone());
        calls.queues.push(queues.to_vec());
        calls.ridden.extend_from_slice(acks);
        let jobs = calls.to_lease.pop_front().unwrap_or_default();
        let held = calls.held_claim.take();
        Box::pin(async move {
            if let Some(held) = held {
                let _ = held.await;
            }
            Ok(Claimed {
                jobs,
                stale_acks: Vec::new(),
                grace,
                held_by_budget: false,
            })
        })
    }
    fn grace_in_force(&self) -> bool {
        true
    }
    fn want_grace(&self, grace: Duration) {
        let mut calls = self.calls();
        calls.grace_wanted = calls.grace_wanted.max(grace);
    }
    fn renew<'a>(&'a self, leases: &'a [Lease]) -> StoreCall<'a, drover_broker::Renewed> {
        // As `Broker::renew`: nothing to renew sends no statement.
        if leases.is_empty() {
            return done(drover_broker::Renewed::default());
        }
        let mut calls = self.calls();
        calls.renewals += 1;
        calls.renewed.push(leases.to_vec());
        if calls.renewals_failing > 0 {
            calls.renewals_failing -= 1;
            return Box::pin(async {
                Err(drover_broker::BrokerError::TimedOut {
                    about: "renewing leases",
                })
            });
        }
        done(drover_broker::Renewed::all(
            leases.iter().map(|l| l.id).collect(),
        ))
    }
    fn has_unanswered_claims(&self) -> bool {
        !self.calls().unanswered.is_empty()
    }
    fn unanswered_claims(&self) -> StoreCall<'_, Vec<Lease>> {
        let mut calls = self.calls();
        calls.questions += 1;
        done(std::mem::take(&mut calls.unanswered))
    }
    fn admit_waiting(&self) -> StoreCall<'_, drover_broker::Admitted> {
        self.calls().admissions += 1;
        done(drover_broker::Admitted::default())
    }
    fn next_due<'a>(&'a self, _: &'a [String]) -> StoreCall<'a, Option<Duration>> {
        done(None)
    }
    fn backlog<'a>(&'a self, queues: &'a [String], _: i64) -> StoreCall<'a, Vec<(String, i64)>> {
        let mut calls = self.calls();
        calls.counted.push(queues.to_vec());
        let counts = queues
            .iter()
            .map(|q| {
                let n = calls
                    .waiting
                    .iter()
                    .find(|(w, _)| w == q)
                    .map_or(0, |w| w.1);
                (q.clone(), n)
            })
            .collect();
        done(counts)
    }
    fn paused_queues(&self) -> StoreCall<'_, Vec<PausedQueue>> {
        done(self.calls().paused.clone())
    }
}

impl Settles for FakeStore {
    fn settle<'a>(&'a self, batch: &'a [Settle]) -> StoreCall<'a, SettleOutcome> {
        self.calls().settled.extend_from_slice(batch);
        done(SettleOutcome {
            released: batch.len(),
            ..SettleOutcome::default()
        })
    }
}

impl Node for FakeStore {
    fn fleet_reload(&self, answered: i64) -> StoreCall<'_, i64> {
        let mut calls = self.calls();
        calls.reload_done = calls.reload_done.max(answered);
        done(calls.reload_requested)
    }

    fn node(&self) -> NodeId {
        1
    }
    fn stop_requests(&self) -> StoreCall<'_, Vec<drover_broker::StopRequest>> {
        done(std::mem::take(&mut self.calls().stop_requests))
    }
    fn stops_taken<'a>(&'a self, jobs: &'a [JobId], _tokens: &'a [i64]) -> StoreCall<'a, ()> {
        self.calls().stops_taken.extend_from_slice(jobs);
        done(())
    }
    fn pool_sizes(&self) -> StoreCall<'_, Vec<drover_broker::PoolSize>> {
        done(std::mem::take(&mut self.calls().pool_sizes))
    }
    fn pool_sizes_applied<'a>(
        &'a self,
        pools: &'a [String],
        _processes: &'a [i32],
        outcomes: &'a [String],
    ) -> StoreCall<'a, ()> {
        let mut calls = self.calls();
        for (p, o) in pools.iter().zip(outcomes) {
            calls.pool_size_outcomes.push((p.clone(), o.clone()));
        }
        done(())
    }
    fn forget_pool_sizes(&self) -> StoreCall<'_, ()> {
        self.calls().pool_sizes_forgotten += 1;
        done(())
    }
    fn heartbeat<'a>(&'a self, _: Option<&'a str>) -> StoreCall<'a, bool> {
        done(std::mem::take(&mut self.calls().row_gone))
    }
    fn publish_status<'a>(&'a self, _: &'a str) -> StoreCall<'a, ()> {
        done(())
    }
    fn deregister(&self) -> StoreCall<'_, ()> {
        done(())
    }
    fn confirm_pauses<'a>(&'a self, versions: &'a [i64]) -> StoreCall<'a, ()> {
        let mut calls = self.calls();
        calls.confirmations.push(versions.to_vec());
        let held = calls.held_confirmation.take();
        Box::pin(async move {
            if let Some(held) = held {
                let _ = held.await;
            }
            Ok(())
        })
    }
}

impl Maintenance for FakeStore {
    fn reap_expired(&self) -> StoreCall<'_, ReapOutcome> {
        done(ReapOutcome::default())
    }
    fn compact_when_empty(&self) -> StoreCall<'_, Vec<TableCompaction>> {
        done(Vec::new())
    }
    fn purge_failed(&self, _: Duration, _: Duration) -> StoreCall<'_, u64> {
        done(0)
    }
    fn purge_dedup(&self, _: Duration) -> StoreCall<'_, u64> {
        done(0)
    }
    fn purge_completions(&self, _: Duration) -> StoreCall<'_, u64> {
        done(0)
    }
    fn purge_workflows(&self, _: Duration) -> StoreCall<'_, u64> {
        done(0)
    }
    fn oldest_waits<'a>(&'a self, _: &'a [String]) -> StoreCall<'a, Vec<(String, Duration)>> {
        done(Vec::new())
    }
    fn group_stats<'a>(&'a self, _: &'a [String], _: i64) -> StoreCall<'a, Vec<GroupStats>> {
        done(Vec::new())
    }
    fn purge_limits(&self) -> StoreCall<'_, u64> {
        done(0)
    }
    fn limit_keys(&self, _: i64) -> StoreCall<'_, Vec<drover_broker::LimitKeyStats>> {
        done(Vec::new())
    }
    fn held_groups<'a>(&'a self, _: &'a [String], _: i64) -> StoreCall<'a, Vec<HeldGroup>> {
        done(Vec::new())
    }
    fn oldest_held_waits<'a>(
        &'a self,
        _: &'a [String],
    ) -> StoreCall<'a, Vec<drover_broker::HeldWait>> {
        done(Vec::new())
    }
    fn horizon(&self) -> StoreCall<'_, drover_broker::Horizon> {
        done(drover_broker::Horizon {
            oldest: None,
            jobs_dead_tuples: None,
            sees_all_sessions: true,
        })
    }
    fn workflow_counts(&self) -> StoreCall<'_, drover_broker::WorkflowCounts> {
        done(self.calls().workflows)
    }
    fn job_progress<'a>(
        &'a self,
        jobs: &'a [JobId],
    ) -> StoreCall<'a, Vec<drover_broker::JobProgress>> {
        // As `Broker::job_progress`: no job, no statement.
        if jobs.is_empty() {
            return done(Vec::new());
        }
        let mut calls = self.calls();
        calls.progress_asked.push(jobs.to_vec());
        let found = calls
            .progress
            .iter()
            .filter(|p| jobs.contains(&p.job))
            .cloned()
            .collect();
        done(found)
    }
    fn claim_long_wait_notice<'a>(
        &'a self,
        _: &'a str,
        _: Duration,
        _: Duration,
    ) -> StoreCall<'a, Option<f64>> {
        done(None)
    }
    fn release_long_wait_notice<'a>(&'a self, _: &'a str, _: f64) -> StoreCall<'a, ()> {
        done(())
    }
}

impl Records for FakeStore {
    fn record_metrics<'a>(&'a self, _: &'a [MinuteRow]) -> StoreCall<'a, ()> {
        done(())
    }
    fn trim_metrics(&self, _: Duration, _: Duration) -> StoreCall<'_, u64> {
        done(0)
    }
    fn record_history<'a>(&'a self, _: &'a [HistoryRow]) -> StoreCall<'a, ()> {
        done(())
    }
    fn trim_history(&self, _: Duration, _: Duration) -> StoreCall<'_, u64> {
        done(0)
    }
}
