//! The production store: [`Broker`] (PostgreSQL) in every role, each call forwarded to the
//! broker's own.

use std::time::Duration;

use drover_broker::{
    Broker, ClaimTerms, Claimed, GroupStats, HeldGroup, HistoryRow, JobId, Lease, MinuteRow,
    NodeId, PausedQueue, ReapOutcome, Settle, SettleOutcome, TableCompaction,
};

use super::{Claims, Connection, Maintenance, Node, Records, Settles, StoreCall};

impl Connection for Broker {
    fn address(&self) -> String {
        Broker::address(self)
    }

    fn suspect_connection(&self) {
        Broker::suspect_connection(self)
    }

    fn lease_duration(&self) -> Duration {
        Broker::lease_duration(self)
    }

    fn database_time(&self) -> std::time::SystemTime {
        Broker::database_time(self)
    }
}

impl Claims for Broker {
    fn claim<'a>(
        &'a self,
        queues: &'a [String],
        limit: usize,
        acks: &'a [Lease],
        terms: &'a ClaimTerms,
    ) -> StoreCall<'a, Claimed> {
        Box::pin(Broker::claim_with_terms(self, queues, limit, acks, terms))
    }

    fn want_grace(&self, grace: Duration) {
        Broker::want_grace(self, grace)
    }

    fn grace_in_force(&self) -> bool {
        Broker::grace_in_force(self)
    }

    fn renew<'a>(&'a self, leases: &'a [Lease]) -> StoreCall<'a, drover_broker::Renewed> {
        Box::pin(Broker::renew(self, leases))
    }

    fn has_unanswered_claims(&self) -> bool {
        Broker::has_unanswered_claims(self)
    }

    fn unanswered_claims(&self) -> StoreCall<'_, Vec<Lease>> {
        Box::pin(Broker::unanswered_claims(self))
    }

    fn admit_waiting(&self) -> StoreCall<'_, drover_broker::Admitted> {
        Box::pin(Broker::admit_waiting(self))
    }

    fn next_due<'a>(&'a self, queues: &'a [String]) -> StoreCall<'a, Option<Duration>> {
        Box::pin(Broker::next_due(self, queues))
    }

    fn backlog<'a>(&'a self, queues: &'a [String], cap: i64) -> StoreCall<'a, Vec<(String, i64)>> {
        Box::pin(Broker::backlog(self, queues, cap))
    }

    fn paused_queues(&self) -> StoreCall<'_, Vec<PausedQueue>> {
        Box::pin(Broker::paused_queues(self))
    }
}

impl Settles for Broker {
    fn settle<'a>(&'a self, batch: &'a [Settle]) -> StoreCall<'a, SettleOutcome> {
        Box::pin(Broker::settle(self, batch))
    }
}

impl Node for Broker {
    fn fleet_reload(&self, done: i64) -> StoreCall<'_, i64> {
        Box::pin(Broker::fleet_reload(self, done))
    }

    fn stop_requests(&self) -> StoreCall<'_, Vec<drover_broker::StopRequest>> {
        Box::pin(Broker::stop_requests(self))
    }

    fn stops_taken<'a>(&'a self, jobs: &'a [JobId], tokens: &'a [i64]) -> StoreCall<'a, ()> {
        Box::pin(Broker::stops_taken(self, jobs, tokens))
    }

    fn pool_sizes(&self) -> StoreCall<'_, Vec<drover_broker::PoolSize>> {
        Box::pin(Broker::pool_sizes(self))
    }

    fn pool_sizes_applied<'a>(
        &'a self,
        pools: &'a [String],
        processes: &'a [i32],
        outcomes: &'a [String],
    ) -> StoreCall<'a, ()> {
        Box::pin(Broker::pool_sizes_applied(self, pools, processes, outcomes))
    }

    fn forget_pool_sizes(&self) -> StoreCall<'_, ()> {
        Box::pin(Broker::forget_pool_sizes(self))
    }

    fn node(&self) -> NodeId {
        Broker::node(self)
    }

    fn heartbeat<'a>(&'a self, status: Option<&'a str>) -> StoreCall<'a, bool> {
        Box::pin(Broker::heartbeat(self, status))
    }

    fn publish_status<'a>(&'a self, status: &'a str) -> StoreCall<'a, ()> {
        Box::pin(Broker::publish_status(self, status))
    }

    fn deregister(&self) -> StoreCall<'_, ()> {
        Box::pin(Broker::deregister(self))
    }

    fn confirm_pauses<'a>(&'a self, versions: &'a [i64]) -> StoreCall<'a, ()> {
        Box::pin(Broker::confirm_pauses(self, versions))
    }
}

impl Maintenance for Broker {
    fn reap_expired(&self) -> StoreCall<'_, ReapOutcome> {
        Box::pin(Broker::reap_expired(self))
    }

    fn compact_when_empty(&self) -> StoreCall<'_, Vec<TableCompaction>> {
        Box::pin(Broker::compact_when_empty(self))
    }

    fn purge_failed(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::purge_failed(self, older_than, budget))
    }

    fn purge_dedup(&self, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::purge_dedup(self, budget))
    }

    fn purge_completions(&self, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::purge_completions(self, budget))
    }

    fn purge_workflows(&self, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::purge_workflows(self, budget))
    }

    fn oldest_waits<'a>(&'a self, queues: &'a [String]) -> StoreCall<'a, Vec<(String, Duration)>> {
        Box::pin(Broker::oldest_waits(self, queues))
    }

    fn group_stats<'a>(&'a self, queues: &'a [String], cap: i64) -> StoreCall<'a, Vec<GroupStats>> {
        Box::pin(Broker::group_stats(self, queues, cap))
    }

    fn purge_limits(&self) -> StoreCall<'_, u64> {
        Box::pin(Broker::purge_limits(self))
    }

    fn limit_keys(&self, top: i64) -> StoreCall<'_, Vec<drover_broker::LimitKeyStats>> {
        Box::pin(Broker::limit_keys(self, top))
    }

    fn held_groups<'a>(
        &'a self,
        queues: &'a [String],
        limit: i64,
    ) -> StoreCall<'a, Vec<HeldGroup>> {
        Box::pin(Broker::held_groups(self, queues, limit))
    }

    fn oldest_held_waits<'a>(
        &'a self,
        queues: &'a [String],
    ) -> StoreCall<'a, Vec<drover_broker::HeldWait>> {
        Box::pin(Broker::oldest_held_waits(self, queues))
    }

    fn horizon(&self) -> StoreCall<'_, drover_broker::Horizon> {
        Box::pin(Broker::horizon(self))
    }

    fn workflow_counts(&self) -> StoreCall<'_, drover_broker::WorkflowCounts> {
        Box::pin(Broker::workflow_counts(self))
    }

    fn job_progress<'a>(
        &'a self,
        jobs: &'a [JobId],
    ) -> StoreCall<'a, Vec<drover_broker::JobProgress>> {
        Box::pin(Broker::job_progress(self, jobs))
    }

    fn claim_long_wait_notice<'a>(
        &'a self,
        queue: &'a str,
        waited: Duration,
        cooldown: Duration,
    ) -> StoreCall<'a, Option<f64>> {
        Box::pin(Broker::claim_long_wait_notice(
            self, queue, waited, cooldown,
        ))
    }

    fn release_long_wait_notice<'a>(&'a self, queue: &'a str, taken: f64) -> StoreCall<'a, ()> {
        Box::pin(Broker::release_long_wait_notice(self, queue, taken))
    }
}

impl Records for Broker {
    fn record_metrics<'a>(&'a self, rows: &'a [MinuteRow]) -> StoreCall<'a, ()> {
        Box::pin(Broker::record_metrics(self, rows))
    }

    fn trim_metrics(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::trim_metrics(self, older_than, budget))
    }

    fn record_history<'a>(&'a self, rows: &'a [HistoryRow]) -> StoreCall<'a, ()> {
        Box::pin(Broker::record_history(self, rows))
    }

    fn trim_history(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::trim_history(self, older_than, budget))
    }
}
