//! The master's narrow view of the job store: the calls its decisions need, and nothing of how
//! they are made. [`drover_broker::Broker`] is the store in production (PostgreSQL); the
//! master's unit tests put a fake behind the same trait, so rules such as "a settle is never
//! dropped while the database is away" are tested without a database, and a fault is injected
//! on exactly the call that should see it.
//!
//! The calls return boxed futures so the master can hold any store as `Arc<dyn Store>` and
//! spawn its calls as tasks.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use drover_broker::{
    Broker, BrokerError, Claimed, Compaction, GroupStats, HeldGroup, HistoryRow, JobId, Lease,
    MinuteRow, NodeId, ReapOutcome, Settle, SettleOutcome,
};

/// A store call in flight.
pub type StoreCall<'a, T> = Pin<Box<dyn Future<Output = Result<T, BrokerError>> + Send + 'a>>;

/// What the master asks of the job store. Each call has its own deadline inside the store
/// (see [`Broker::call_deadline`]); a lost connection is reported as an error for which
/// [`BrokerError::is_connection_lost`] is true.
pub trait Store: Send + Sync + 'static {
    /// This master's row in `drover.nodes`.
    fn node(&self) -> NodeId;
    /// How long a lease lasts.
    fn lease_duration(&self) -> Duration;
    /// "host:port/db" of the server the store reached last, for log lines (none by default).
    fn address(&self) -> String {
        String::new()
    }
    /// A call got no answer in time: the next one opens a new connection.
    fn suspect_connection(&self);
    /// Leases up to `limit` ready jobs of these queues, highest priority first, deleting the
    /// completed jobs `acks` in the same commit (acks of ungrouped jobs riding with the claim).
    fn claim<'a>(
        &'a self,
        queues: &'a [String],
        limit: usize,
        acks: &'a [Lease],
    ) -> StoreCall<'a, Claimed>;
    /// Writes settles (ack, release, take back, fail) in one round.
    fn settle<'a>(&'a self, batch: &'a [Settle]) -> StoreCall<'a, SettleOutcome>;
    /// Renews leases; returns the jobs whose lease was still this master's.
    fn renew<'a>(&'a self, leases: &'a [Lease]) -> StoreCall<'a, Vec<JobId>>;
    /// Takes back jobs whose lease expired, whoever held them.
    fn reap_expired(&self) -> StoreCall<'_, ReapOutcome>;
    /// Keeps this master's node row alive, with its status document (JSON) when given.
    fn heartbeat<'a>(&'a self, status: Option<&'a str>) -> StoreCall<'a, ()>;
    /// How long until the earliest delayed job of these queues is due, if any.
    fn next_due<'a>(&'a self, queues: &'a [String]) -> StoreCall<'a, Option<Duration>>;
    /// How many jobs wait in each queue, each counted up to `cap`.
    fn backlog<'a>(&'a self, queues: &'a [String], cap: i64) -> StoreCall<'a, Vec<(String, i64)>>;
    /// The queues paused by name (`queue:pause`), with how long each pause has left (`None`:
    /// until resumed).
    fn paused_queues(&self) -> StoreCall<'_, Vec<(String, Option<Duration>)>>;
    /// Gives back the space a drained backlog left.
    fn compact_when_empty(&self) -> StoreCall<'_, Compaction>;
    /// Deletes failed jobs older than `older_than`, spending at most `budget`.
    fn purge_failed(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64>;
    /// Deletes deduplication ids whose window ended, spending at most `budget`.
    fn purge_dedup(&self, budget: Duration) -> StoreCall<'_, u64>;
    /// Removes this master's node row on a clean exit.
    fn deregister(&self) -> StoreCall<'_, ()>;
    /// Now by the database's clock (without a round trip).
    fn database_time(&self) -> std::time::SystemTime;
    /// Writes (or rewrites) this master's per-minute metric rows.
    fn record_metrics<'a>(&'a self, rows: &'a [MinuteRow]) -> StoreCall<'a, ()>;
    /// Deletes metric rows older than `older_than`, spending at most `budget`.
    fn trim_metrics(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64>;
    /// How long each queue's oldest available job has waited.
    fn oldest_waits<'a>(&'a self, queues: &'a [String]) -> StoreCall<'a, Vec<(String, Duration)>>;
    /// Per queue, its ordered groups: counts (each up to `cap`) and the oldest head's age.
    fn group_stats<'a>(&'a self, queues: &'a [String], cap: i64) -> StoreCall<'a, Vec<GroupStats>>;
    /// The held groups of these queues, oldest first, at most `limit`.
    fn held_groups<'a>(&'a self, queues: &'a [String], limit: i64)
        -> StoreCall<'a, Vec<HeldGroup>>;
    /// Per queue, the grouped job that has waited longest behind its group's head.
    fn oldest_group_waits<'a>(
        &'a self,
        queues: &'a [String],
    ) -> StoreCall<'a, Vec<(String, String, Duration)>>;
    /// Takes the right to alert about a queue's long wait (once per `cooldown`, fleet-wide):
    /// the time taken, or `None` when another alert is within its cooldown.
    fn claim_long_wait_notice<'a>(
        &'a self,
        queue: &'a str,
        waited: Duration,
        cooldown: Duration,
    ) -> StoreCall<'a, Option<f64>>;
    /// Gives back a right to alert taken at `taken` (the alert could not be sent).
    fn release_long_wait_notice<'a>(&'a self, queue: &'a str, taken: f64) -> StoreCall<'a, ()>;
    /// Writes completed jobs to the history.
    fn record_history<'a>(&'a self, rows: &'a [HistoryRow]) -> StoreCall<'a, ()>;
    /// Keeps this master's status document fresh in its node row.
    fn publish_status<'a>(&'a self, status: &'a str) -> StoreCall<'a, ()>;
    /// Deletes history rows older than `older_than`, spending at most `budget`.
    fn trim_history(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64>;
}

impl Store for Broker {
    fn node(&self) -> NodeId {
        Broker::node(self)
    }

    fn lease_duration(&self) -> Duration {
        Broker::lease_duration(self)
    }

    fn address(&self) -> String {
        Broker::address(self)
    }

    fn suspect_connection(&self) {
        Broker::suspect_connection(self)
    }

    fn claim<'a>(
        &'a self,
        queues: &'a [String],
        limit: usize,
        acks: &'a [Lease],
    ) -> StoreCall<'a, Claimed> {
        Box::pin(Broker::claim_with_acks(self, queues, limit, acks))
    }

    fn settle<'a>(&'a self, batch: &'a [Settle]) -> StoreCall<'a, SettleOutcome> {
        Box::pin(Broker::settle(self, batch))
    }

    fn renew<'a>(&'a self, leases: &'a [Lease]) -> StoreCall<'a, Vec<JobId>> {
        Box::pin(Broker::renew(self, leases))
    }

    fn reap_expired(&self) -> StoreCall<'_, ReapOutcome> {
        Box::pin(Broker::reap_expired(self))
    }

    fn heartbeat<'a>(&'a self, status: Option<&'a str>) -> StoreCall<'a, ()> {
        Box::pin(Broker::heartbeat(self, status))
    }

    fn next_due<'a>(&'a self, queues: &'a [String]) -> StoreCall<'a, Option<Duration>> {
        Box::pin(Broker::next_due(self, queues))
    }

    fn backlog<'a>(&'a self, queues: &'a [String], cap: i64) -> StoreCall<'a, Vec<(String, i64)>> {
        Box::pin(Broker::backlog(self, queues, cap))
    }

    fn paused_queues(&self) -> StoreCall<'_, Vec<(String, Option<Duration>)>> {
        Box::pin(Broker::paused_queues(self))
    }

    fn compact_when_empty(&self) -> StoreCall<'_, Compaction> {
        Box::pin(Broker::compact_when_empty(self))
    }

    fn purge_failed(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::purge_failed(self, older_than, budget))
    }

    fn purge_dedup(&self, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::purge_dedup(self, budget))
    }

    fn deregister(&self) -> StoreCall<'_, ()> {
        Box::pin(Broker::deregister(self))
    }

    fn database_time(&self) -> std::time::SystemTime {
        Broker::database_time(self)
    }

    fn record_metrics<'a>(&'a self, rows: &'a [MinuteRow]) -> StoreCall<'a, ()> {
        Box::pin(Broker::record_metrics(self, rows))
    }

    fn trim_metrics(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::trim_metrics(self, older_than, budget))
    }

    fn oldest_waits<'a>(&'a self, queues: &'a [String]) -> StoreCall<'a, Vec<(String, Duration)>> {
        Box::pin(Broker::oldest_waits(self, queues))
    }

    fn oldest_group_waits<'a>(
        &'a self,
        queues: &'a [String],
    ) -> StoreCall<'a, Vec<(String, String, Duration)>> {
        Box::pin(Broker::oldest_group_waits(self, queues))
    }

    fn group_stats<'a>(&'a self, queues: &'a [String], cap: i64) -> StoreCall<'a, Vec<GroupStats>> {
        Box::pin(Broker::group_stats(self, queues, cap))
    }

    fn held_groups<'a>(
        &'a self,
        queues: &'a [String],
        limit: i64,
    ) -> StoreCall<'a, Vec<HeldGroup>> {
        Box::pin(Broker::held_groups(self, queues, limit))
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

    fn record_history<'a>(&'a self, rows: &'a [HistoryRow]) -> StoreCall<'a, ()> {
        Box::pin(Broker::record_history(self, rows))
    }

    fn trim_history(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64> {
        Box::pin(Broker::trim_history(self, older_than, budget))
    }

    fn publish_status<'a>(&'a self, status: &'a str) -> StoreCall<'a, ()> {
        Box::pin(Broker::publish_status(self, status))
    }
}
