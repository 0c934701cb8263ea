//! The master's narrow view of the job store, in roles: the calls each part of the master
//! needs, and nothing of how they are made. A part holds the role it uses (the settler an
//! `Arc<dyn Settles>`, the recorder an `Arc<dyn Records>`), so a fake implements only that role and
//! [`Connection`]. [`drover_broker::Broker`] is the store in production (PostgreSQL, `postgres.rs`);
//! the master's unit tests put a fake behind a role, so rules such as "a settle is never
//! dropped while the database is away" are tested without a database, and a fault is injected
//! on exactly the call that should see it. `fake` is a whole store with no database, for the
//! tests that drive the loop itself (`master/tests.rs`).
//!
//! The calls return boxed futures so the master can hold any store as `Arc<dyn Store>` and
//! spawn its calls as tasks.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use drover_broker::{
    BrokerError, ClaimTerms, Claimed, GroupStats, HeldGroup, HistoryRow, JobId, Lease, MinuteRow,
    NodeId, PausedQueue, ReapOutcome, Settle, SettleOutcome, TableCompaction,
};

/// A store call in flight.
pub type StoreCall<'a, T> = Pin<Box<dyn Future<Output = Result<T, BrokerError>> + Send + 'a>>;

/// What every role shares: where the store is, a connection to give up on, the database's
/// clock and the lease.
/// Each call has its own deadline inside the store (see [`drover_broker::Broker::call_deadline`]); a lost
/// connection is reported as an error for which [`BrokerError::is_connection_lost`] is true.
pub trait Connection: Send + Sync + 'static {
    /// "host:port/db" of the server the store reached last, for log lines (none by default).
    fn address(&self) -> String {
        String::new()
    }
    /// A call got no answer in time: the next one opens a new connection.
    fn suspect_connection(&self);
    /// How long a lease lasts.
    fn lease_duration(&self) -> Duration;
    /// Now by the database's clock (without a round trip).
    fn database_time(&self) -> std::time::SystemTime;
}

/// Leasing jobs to workers and keeping the leases: the claim loop's and the renewer's calls.
pub trait Claims: Connection {
    /// Leases up to `limit` ready jobs of these queues, highest priority first, deleting the
    /// completed jobs `acks` in the same commit (acks of ungrouped jobs riding with the claim).
    /// Each lease is given the pool's outage grace (capped by what the node row holds, and
    /// said in [`Claimed::grace`]); a budgeted queue leases no more than its fleet-wide budget
    /// leaves (`terms`, [`Claimed::held_by_budget`]).
    fn claim<'a>(
        &'a self,
        queues: &'a [String],
        limit: usize,
        acks: &'a [Lease],
        terms: &'a ClaimTerms,
    ) -> StoreCall<'a, Claimed>;
    /// Asks for the node row to hold an outage grace of up to `grace` (a reload gave a pool a
    /// longer one); claims use it once a heartbeat has written it.
    fn want_grace(&self, grace: Duration);
    /// Whether outage graces are in force (no master that ignores them has a row).
    fn grace_in_force(&self) -> bool;
    /// Renews leases; returns the jobs whose lease was still this master's.
    fn renew<'a>(&'a self, leases: &'a [Lease]) -> StoreCall<'a, drover_broker::Renewed>;
    /// Whether some claim's answer was lost after it may have committed.
    fn has_unanswered_claims(&self) -> bool;
    /// The jobs such claims leased to this master, which no worker got (none when there are no
    /// such claims, without a statement).
    fn unanswered_claims(&self) -> StoreCall<'_, Vec<Lease>>;
    /// Admits the jobs waiting for limits whose keys were noted or fell due.
    fn admit_waiting(&self) -> StoreCall<'_, drover_broker::Admitted>;
    /// How long until the earliest delayed job of these queues is due, if any.
    fn next_due<'a>(&'a self, queues: &'a [String]) -> StoreCall<'a, Option<Duration>>;
    /// How many jobs wait in each queue, each counted up to `cap`.
    fn backlog<'a>(&'a self, queues: &'a [String], cap: i64) -> StoreCall<'a, Vec<(String, i64)>>;
    /// The queues paused by name (`queue:pause`), with how long each pause has left (`None`:
    /// until resumed) and its version.
    fn paused_queues(&self) -> StoreCall<'_, Vec<PausedQueue>>;
}

/// Writing how held jobs ended: the settler's one call.
pub trait Settles: Connection {
    /// Writes settles (ack, release, take back, fail) in one round.
    fn settle<'a>(&'a self, batch: &'a [Settle]) -> StoreCall<'a, SettleOutcome>;
}

/// This master's row in `drover.nodes`: its id, heartbeat, status document, the queue pauses it
/// holds, and its removal.
pub trait Node: Connection {
    /// This master's row in `drover.nodes`.
    fn node(&self) -> NodeId;
    /// Keeps this master's node row alive, with its status document (JSON) when given; true when
    /// the row was gone and was registered again (the pauses it confirmed went with it).
    fn heartbeat<'a>(&'a self, status: Option<&'a str>) -> StoreCall<'a, bool>;
    /// For a fleet restart: records that this master applied request `done` (0: none yet) and
    /// returns the newest request made of it (`rules::fleet_reload`).
    fn fleet_reload(&self, done: i64) -> StoreCall<'_, i64>;
    /// Keeps this master's status document fresh in its node row.
    fn publish_status<'a>(&'a self, status: &'a str) -> StoreCall<'a, ()>;
    /// Removes this master's node row on a clean exit.
    fn deregister(&self) -> StoreCall<'_, ()>;
    /// Records in this master's row that it holds the pauses of these versions: whoever paused
    /// those queues stops waiting for it.
    fn confirm_pauses<'a>(&'a self, versions: &'a [i64]) -> StoreCall<'a, ()>;
    /// The requests to stop jobs this master holds (`drover.stop_requests`), for the attempts
    /// it holds, not yet carried out.
    fn stop_requests(&self) -> StoreCall<'_, Vec<drover_broker::StopRequest>>;
    /// Marks the stop requests of `jobs`, attempts `tokens`, carried out by this master.
    fn stops_taken<'a>(&'a self, jobs: &'a [JobId], tokens: &'a [i64]) -> StoreCall<'a, ()>;
    /// The pool sizes the console set for this master and it has not applied yet.
    fn pool_sizes(&self) -> StoreCall<'_, Vec<drover_broker::PoolSize>>;
    /// Records what this master did with the sizes of `pools` (as read: `processes`):
    /// `outcomes`, one each. A size set again since is left for the next reading.
    fn pool_sizes_applied<'a>(
        &'a self,
        pools: &'a [String],
        processes: &'a [i32],
        outcomes: &'a [String],
    ) -> StoreCall<'a, ()>;
    /// Forgets the pool sizes set for this master (it re-read its configuration).
    fn forget_pool_sizes(&self) -> StoreCall<'_, ()>;
}

/// The duties beside the jobs' own path: reaping expired leases, compaction, retention of failed jobs and deduplication ids, and the long-wait watch over queues and groups.
pub trait Maintenance: Connection {
    /// Takes back jobs whose lease expired, whoever held them.
    fn reap_expired(&self) -> StoreCall<'_, ReapOutcome>;
    /// Gives back the space a drained backlog left.
    fn compact_when_empty(&self) -> StoreCall<'_, Vec<TableCompaction>>;
    /// Deletes failed jobs older than `older_than`, spending at most `budget`.
    fn purge_failed(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64>;
    /// Deletes deduplication ids whose window ended, spending at most `budget`.
    fn purge_dedup(&self, budget: Duration) -> StoreCall<'_, u64>;
    /// Deletes the completion rows no master learned and old recorded steps, spending at most
    /// `budget` on each.
    fn purge_completions(&self, budget: Duration) -> StoreCall<'_, u64>;
    /// Deletes workflows that ended long ago and the progress rows of jobs gone, spending at
    /// most `budget` on each.
    fn purge_workflows(&self, budget: Duration) -> StoreCall<'_, u64>;
    /// How long each queue's oldest available job has waited.
    fn oldest_waits<'a>(&'a self, queues: &'a [String]) -> StoreCall<'a, Vec<(String, Duration)>>;
    /// Per queue, its ordered groups: counts (each up to `cap`) and the oldest head's age.
    fn group_stats<'a>(&'a self, queues: &'a [String], cap: i64) -> StoreCall<'a, Vec<GroupStats>>;
    /// Forgets rate windows that are over and fair keys behind their queue; how many.
    fn purge_limits(&self) -> StoreCall<'_, u64>;
    /// The `top` keys jobs wait for (docs/limits.md), most waited for first.
    fn limit_keys(&self, top: i64) -> StoreCall<'_, Vec<drover_broker::LimitKeyStats>>;
    /// The held groups of these queues, oldest first, at most `limit`.
    fn held_groups<'a>(&'a self, queues: &'a [String], limit: i64)
        -> StoreCall<'a, Vec<HeldGroup>>;
    /// Per queue, the job that has been due longest behind its group's head or for a limit's key.
    fn oldest_held_waits<'a>(
        &'a self,
        queues: &'a [String],
    ) -> StoreCall<'a, Vec<drover_broker::HeldWait>>;
    /// What holds the database's vacuum horizon back (a held snapshot, a standby, a slot).
    fn horizon(&self) -> StoreCall<'_, drover_broker::Horizon>;
    /// The workflows of the database: pending, running, their nodes waiting for a signal or a
    /// time, failed in the last hour (each bounded: [`drover_broker::workflow_stats`]).
    fn workflow_counts(&self) -> StoreCall<'_, drover_broker::WorkflowCounts>;
    /// The latest progress reports of `jobs` (the jobs this master's workers run); a job that
    /// reported none is absent, and none is read when `jobs` is empty.
    fn job_progress<'a>(
        &'a self,
        jobs: &'a [JobId],
    ) -> StoreCall<'a, Vec<drover_broker::JobProgress>>;
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
}

/// Per-minute metrics and the history of completed jobs, and their retention.
pub trait Records: Connection {
    /// Writes (or rewrites) this master's per-minute metric rows.
    fn record_metrics<'a>(&'a self, rows: &'a [MinuteRow]) -> StoreCall<'a, ()>;
    /// Deletes metric rows older than `older_than`, spending at most `budget`.
    fn trim_metrics(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64>;
    /// Writes completed jobs to the history.
    fn record_history<'a>(&'a self, rows: &'a [HistoryRow]) -> StoreCall<'a, ()>;
    /// Deletes history rows older than `older_than`, spending at most `budget`.
    fn trim_history(&self, older_than: Duration, budget: Duration) -> StoreCall<'_, u64>;
}

/// The whole store, every role: what the master holds (`Arc<dyn Store>`), handing each part its
/// role.
pub trait Store: Claims + Settles + Node + Maintenance + Records {}

impl<T: Claims + Settles + Node + Maintenance + Records> Store for T {}

#[cfg(test)]
pub mod fake;
mod postgres;
