//! drover's broker: it leases jobs out of PostgreSQL, renews the leases while their holders live,
//! and settles them in batches.
//!
//! The parts:
//! - [`config`]: [`BrokerConfig`], every field documented with its default, validated all at once.
//! - [`clock`]: the injectable [`Clock`]. Every lease comparison and timestamp uses the
//!   database's clock (`now()` in the statements); a test clock ([`ManualClock`]) passes its own
//!   time instead, so lease expiry is testable without sleeping.
//! - [`connect`]: connecting with a clear error naming the address (never the password) and
//!   retrying with backoff; both connection-string forms, every connection made in one place.
//! - [`tls`]: TLS to PostgreSQL with libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`.
//! - [`migrate`]: the embedded migrations, applied under an advisory lock.
//! - [`leases`]: what a lease is made of — [`JobId`], [`NodeId`], [`Lease`] (a job and its
//!   fencing token) and [`LeasedJob`] (what a worker needs to run it).
//! - [`budgets`]: [`QueueBudgets`], the fleet-wide budgets of queues the claim honours.
//! - `claim_tokens`: the lease token each claim reserves before it is sent, so the jobs of a claim
//!   whose answer was lost can be found and given back uncharged.
//! - [`store`]: [`Broker`], the statements — claim, settle (ack, release, take back, fail), renew,
//!   reap, next due, node heartbeat, retention of failed jobs — each with a client-side deadline.
//!   SQL lives in `queries/*.sql`.
//! - [`metrics`]: per-minute metric rows (`drover.metrics`) and their retention, and the
//!   database's time by which minutes are placed.
//! - [`history`]: completed-job history (`drover.recent_jobs`), when it is on.
//! - [`groups`]: ordered groups as operators see them (counts, held groups, the oldest head);
//!   the groups themselves are SQL (`migrations/0005_groups.sql`).
//! - [`compact`]: vacuuming and reindexing `drover.jobs` once a drained backlog left it empty
//!   but large.
//! - [`listener`]: the LISTEN connection that turns `NOTIFY drover_jobs` (jobs to claim) and
//!   `NOTIFY drover_pauses` (a queue paused or resumed) into wake-ups.
//! - [`embedded`]: the private PostgreSQL cluster started when no database is configured.
//! - [`error`]: the crate's one error type, [`BrokerError`].

pub mod budgets;
pub(crate) mod claim_tokens;
pub mod clock;
pub mod compact;
pub mod config;
pub mod connect;
pub mod embedded;
pub mod error;
pub mod groups;
pub mod history;
pub mod leases;
pub mod listener;
pub mod metrics;
pub mod migrate;
pub mod store;
pub mod tls;

pub use budgets::QueueBudgets;
pub use clock::{Clock, ManualClock, SystemClock};
pub use compact::Compaction;
pub use config::BrokerConfig;
pub use embedded::{EmbeddedConfig, EmbeddedPostgres};
pub use error::BrokerError;
pub use groups::{GroupStats, HeldGroup};
pub use history::HistoryRow;
pub use leases::{JobId, Lease, LeasedJob, NodeId};
pub use metrics::MinuteRow;
pub use store::{
    Broker, ClaimTerms, Claimed, PausedQueue, ReapOutcome, Settle, SettleOutcome, DIED_NOTE,
};
