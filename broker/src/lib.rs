//! drover's broker: it leases jobs out of PostgreSQL, renews the leases while their holders live,
//! and settles them in batches.
//!
//! The parts:
//! - [`config`]: [`BrokerConfig`], every field documented with its default, validated all at once.
//! - [`clock`]: the injectable [`Clock`]. Every lease comparison and timestamp uses the
//!   database's clock (`now()` in the statements); a test clock ([`ManualClock`]) passes its own
//!   time instead, so lease expiry is testable without sleeping.
//! - [`connect`]: connecting with a clear error naming the address (never the password) and
//!   one attempt under a deadline; both connection-string forms, every connection made in one place.
//! - [`connect_retry`]: connecting at start-up until the database answers: backoff with jitter,
//!   giving up at once on a permanent error, reporting when the state changes.
//! - [`tls`]: TLS to PostgreSQL with libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`.
//! - [`migrate`]: the embedded migrations, applied under an advisory lock.
//! - [`roles`]: the least-privilege group roles, their grants, and the master's start-up check of
//!   its own.
//! - [`leases`]: what a lease is made of — [`JobId`], [`NodeId`], [`Lease`] (a job and its
//!   fencing token) and [`LeasedJob`] (what a worker needs to run it).
//! - [`broker`]: [`Broker`], one node's access to the job store: its job connection, its node
//!   row, and the client-side deadline every call keeps.
//! - [`job_connection`]: the connection that carries claims, settles, renewals and the reap,
//!   its plans pinned to index scans ([`job_connection::PIN_PLANS`]) and its statements prepared.
//! - [`budgets`]: [`QueueBudgets`], the fleet-wide budgets of queues the claim honours.
//! - [`fair`]: [`FairQueues`], the queues whose claim takes jobs by fair tag.
//! - [`claim`]: leasing ready jobs ([`ClaimTerms`] in, [`Claimed`] out), with riding acks, and
//!   finding what claims whose answer was lost leased.
//! - [`claim_cursor`]: where a queue's claim starts reading, so claims do not walk the dead index
//!   entries a held snapshot keeps (docs/decisions/0010).
//! - `claim_tokens`: the lease token each claim reserves before it is sent, so the jobs of a claim
//!   whose answer was lost can be found and given back uncharged.
//! - [`admission`]: jobs dispatched under limits (concurrency and rate per key), admitted into
//!   `drover.jobs` once they have taken every limit (the rules are SQL, `migrations/0011_limits.sql`).
//! - [`settle`]: how a held job ends ([`Settle`], [`SettleOutcome`]): ack, release, take back,
//!   fail, in pipelined batches.
//! - [`expiry`]: renewing leases, and taking back expired ones ([`ReapOutcome`]).
//! - [`nodes`]: this master's row in `drover.nodes` — heartbeat, outage grace, fleet restart
//!   requests, removal.
//! - [`pool_sizes`]: the pool sizes the console set for this master ([`PoolSize`]).
//! - [`stop_requests`]: the requests to stop a running job ([`StopRequest`]) this master holds.
//! - [`queue_pauses`]: the queues paused by name ([`PausedQueue`]) and the confirmation of the
//!   pauses this master holds.
//! - [`waiting`]: the jobs waiting per queue, and when the next delayed one is due.
//! - [`retention`]: deleting old rows of `drover.failed_jobs`.
//! - [`metrics`]: per-minute metric rows (`drover.metrics`) and their retention, and the
//!   database's time by which minutes are placed.
//! - [`history`]: completed-job history (`drover.recent_jobs`), when it is on.
//! - [`horizon`]: what holds the vacuum horizon back (a held snapshot, a standby, a slot), for
//!   status, metrics and the alert.
//! - [`schedule_runs`]: the scheduled tasks' runs (`drover.schedule_runs`): the claim of a due
//!   time ([`RunScope`]: once across masters or once per host), its end ([`RunEnd`]), the due
//!   times missed, the runs lost with their master ([`LostRun`]), retention.
//! - [`limit_stats`]: limits as operators see them ([`LimitKeyStats`]): the keys jobs wait for.
//! - [`groups`]: ordered groups as operators see them (counts, held groups, the oldest head);
//!   the groups themselves are SQL (`migrations/0005_groups.sql`).
//! - [`held_waits`]: the jobs waiting where no claim sees them — behind a group's head or for a
//!   limit's key ([`HeldWait`], [`HeldBy`]) — for long-wait alerts.
//! - [`completions`]: what exactly-once completion leaves behind (completion rows no master
//!   learned, the steps `once()` recorded), trimmed by age.
//! - [`workflows`]: what durable workflows leave behind (ended workflows, progress reports),
//!   trimmed by age; a workflow's graph itself moves inside the database (migration 0016).
//! - [`workflow_stats`]: workflows as operators see them ([`WorkflowCounts`]): pending, running,
//!   nodes waiting for a signal or a time, failed in the last hour.
//! - [`progress`]: what running jobs last said of their progress ([`JobProgress`]).
//! - [`compact`]: vacuuming and reindexing `drover.jobs`, and the rooms where jobs wait before
//!   it, once a drained backlog left them empty but large.
//! - [`listener`]: the LISTEN connection that turns `NOTIFY drover_jobs` (jobs to claim) and
//!   `NOTIFY drover_pauses` (a queue paused or resumed) into wake-ups.
//! - [`embedded`]: the private PostgreSQL cluster started when no database is configured.
//! - [`error`]: the crate's one error type, [`BrokerError`].
//!
//! Every statement has a client-side deadline, and its SQL lives in `queries/*.sql` ([`queries`]
//! puts together the claims, whose variants share a start and an answer).

pub mod admission;
pub mod broker;
pub mod budgets;
pub mod claim;
pub mod claim_cursor;
pub(crate) mod claim_tokens;
pub mod clock;
pub mod compact;
pub mod completions;
pub mod config;
pub mod connect;
pub mod connect_retry;
pub mod embedded;
pub mod error;
pub mod expiry;
pub mod fair;
pub mod groups;
pub mod held_waits;
pub mod history;
pub mod horizon;
pub mod job_connection;
pub mod leases;
pub mod limit_stats;
pub mod listener;
pub mod metrics;
pub mod migrate;
pub mod nodes;
pub mod pool_sizes;
pub mod progress;
pub mod queries;
pub mod queue_pauses;
pub mod retention;
pub mod roles;
pub mod schedule_runs;
pub mod settle;
pub mod stop_requests;
pub mod tls;
pub mod waiting;
pub mod workflow_stats;
pub mod workflows;

pub use admission::Admitted;
pub use broker::Broker;
pub use budgets::QueueBudgets;
pub use claim::{ClaimTerms, Claimed};
pub use clock::{Clock, ManualClock, SystemClock};
pub use compact::{Compaction, TableCompaction};
pub use config::BrokerConfig;
pub use embedded::{EmbeddedConfig, EmbeddedPostgres};
pub use error::BrokerError;
pub use expiry::ReapOutcome;
pub use fair::FairQueues;
pub use groups::{GroupStats, HeldGroup};
pub use held_waits::{HeldBy, HeldWait};
pub use history::HistoryRow;
pub use horizon::{HolderKind, Horizon, SnapshotHolder};
pub use leases::{JobId, Lease, LeasedJob, NodeId, Renewed};
pub use limit_stats::LimitKeyStats;
pub use metrics::MinuteRow;
pub use pool_sizes::PoolSize;
pub use progress::JobProgress;
pub use queue_pauses::PausedQueue;
pub use schedule_runs::{
    Claim as ScheduleClaim, LaravelSchedulerRun, LatestRun, LostRun, RunEnd, RunScope, RunStatus,
    TaskResults,
};
pub use settle::{Settle, SettleOutcome, DIED_NOTE};
pub use stop_requests::StopRequest;
pub use workflow_stats::WorkflowCounts;
