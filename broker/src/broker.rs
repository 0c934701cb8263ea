//! [`Broker`]: one node's access to the job store — its connection, its node row and the
//! deadline every call keeps. The statements are grouped by what they do: [`crate::claim`],
//! [`crate::settle`], [`crate::expiry`] (renew and reap), [`crate::nodes`] (this master's row),
//! [`crate::queue_pauses`], [`crate::waiting`] (backlog and next due), [`crate::retention`],
//! [`crate::metrics`], [`crate::history`], [`crate::groups`] and [`crate::compact`].
//!
//! Every time these statements compare or write comes from the database's clock, or from the
//! test clock when one is injected (see [`crate::clock`]). Every call has a client-side deadline
//! ([`Broker::call_deadline`], [`Broker::renew_deadline`]): a call that gets no answer in time
//! returns [`BrokerError::TimedOut`] and marks the connection suspect, so the next call opens a
//! new one instead of waiting on a half-open connection.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres::Client;

use crate::claim_tokens::ClaimTokens;
use crate::job_connection::Conn;
use crate::leases::NodeId;
use crate::{clock, connect_retry, migrate, BrokerConfig, BrokerError, Clock};

/// One node's access to the job store. Cheap to share (`Arc<Broker>`); statements issued from
/// several tasks are pipelined on one connection, which is re-opened when it drops.
pub struct Broker {
    /// Lease length, URL and timeouts.
    pub(crate) config: BrokerConfig,
    /// Where "now" comes from: `None` from the production clock, the database's.
    pub(crate) clock: Arc<dyn Clock>,
    /// This master's row in `drover.nodes`; the owner of its leases.
    pub(crate) node: NodeId,
    /// This host's name, as registered (metrics rows carry it).
    pub(crate) hostname: String,
    /// The database's clock less this host's, in milliseconds, as last seen (at registration and
    /// each heartbeat): [`Broker::database_time`] places metrics' minutes by the database's clock
    /// without a round trip per job.
    pub(crate) clock_offset_ms: std::sync::atomic::AtomicI64,
    /// The live connection, replaced when it closes.
    conn: Mutex<Arc<Conn>>,
    /// Set when a statement timed out: the connection may be half-open (a failover without a
    /// reset), so the next statement opens a fresh one instead of waiting on it.
    suspect: std::sync::atomic::AtomicBool,
    /// Serialises reconnects so a dropped connection is re-opened once, not by every caller.
    reconnecting: tokio::sync::Mutex<()>,
    /// The side connection for metrics and status reads (`crate::metrics`), opened on first
    /// use; one statement at a time.
    pub(crate) side: tokio::sync::Mutex<Option<Client>>,
    /// When a settle batch last pipelined `groups_catch_up` (ms since `epoch`):
    /// at most every `settle::CATCH_UP_EVERY`, not once per batch, so ungrouped settles do not pay a
    /// statement per batch for a move that is rarely deferred.
    pub(crate) last_catch_up_ms: std::sync::atomic::AtomicU64,
    /// The monotonic origin of `last_catch_up_ms`.
    pub(crate) epoch: Instant,
    /// Tokens reserved for claims, and the claims whose answer never came (`claim_tokens`).
    pub(crate) tokens: ClaimTokens,
    /// Per queue, where its claims start reading (`claim_cursor`).
    pub(crate) cursors: std::sync::Mutex<crate::claim_cursor::ClaimCursors>,
    /// Whether this node still has its row: false once [`Broker::deregister`] ran. Held across a
    /// heartbeat's statement, so a heartbeat (which registers a missing row again) and the
    /// removal never overlap, and no heartbeat brings back the row of a master that left.
    pub(crate) registered: tokio::sync::Mutex<bool>,
    /// The longest outage grace this master's pools want (ms): sent with each heartbeat, which
    /// raises the row's `grace_secs` to it ([`Broker::want_grace`]).
    pub(crate) grace_wanted_ms: std::sync::atomic::AtomicU64,
    /// The outage grace the node row holds (ms), as of the registration or the last heartbeat:
    /// the most a claim may give its leases, since the row must outlive every lease it holds
    /// with its grace (`heartbeat.sql`).
    pub(crate) grace_registered_ms: std::sync::atomic::AtomicU64,
    /// Whether every other master with a row honours an outage grace (none is of release 0.1,
    /// whose reap would take a graced lease back at its end), as of the registration or the
    /// last heartbeat. While false, claims give no grace and held leases are treated as having
    /// none ([`Broker::grace_in_force`]).
    pub(crate) fleet_honours_grace: std::sync::atomic::AtomicBool,
    /// The node row is known to exist since the connection was last opened: a master cut off
    /// long enough may have had its row removed by another (the reap then takes its jobs back at
    /// their leases' end), so after a reconnect claims give no grace until a heartbeat has
    /// confirmed (or registered again) the row.
    pub(crate) row_confirmed: std::sync::atomic::AtomicBool,
}

impl Broker {
    /// Connects (retrying with backoff until the database answers), checks the schema (applying
    /// missing migrations when `auto_migrate`), refuses a role that lacks a master's rights on it
    /// (naming them, [`crate::roles::refusal`]) and registers this node.
    pub async fn start(config: BrokerConfig, clock: Arc<dyn Clock>) -> Result<Broker, BrokerError> {
        config.validate()?;
        let (mut client, address) = connect_retry::connect_with_retry_to(&config).await?;
        // The role's rights before the schema is read (a role that may not read it is told which
        // rights it lacks, not that a read failed) and after a migration added tables.
        crate::roles::refuse_without_grants(&client).await?;
        if migrate::ensure(&mut client, config.auto_migrate).await? > 0 {
            crate::roles::refuse_without_grants(&client).await?;
        }
        let conn = Conn::prepare(client, address).await?;
        let hostname = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unknown".to_string());
        let pid = std::process::id() as i32;
        let now = clock.now();
        let lease = config.lease.as_secs_f64();
        let grace = config.outage_grace.as_secs_f64();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
            [&hostname, &pid, &now, &lease, &grace, &config.release];
        let register = conn
            .client
            .query_one(include_str!("../queries/register_node.sql"), &params);
        let row = tokio::time::timeout(config.lease / 2, register)
            .await
            .map_err(|_| BrokerError::TimedOut {
                about: "registering this node",
            })?
            .map_err(BrokerError::query("registering this node"))?;
        let node: NodeId = row.get(0);
        tracing::info!(node, "registered node");
        if !row.get::<_, bool>(2) {
            tracing::warn!("a master of drover 0.1 has a row in drover.nodes: no outage grace is given or relied on until it is gone (its reap would take such a lease back at its end; docs/upgrading.md)");
        }
        Ok(Broker {
            clock,
            node,
            hostname,
            clock_offset_ms: std::sync::atomic::AtomicI64::new(clock::offset_ms(row.get(1))),
            conn: Mutex::new(Arc::new(conn)),
            suspect: std::sync::atomic::AtomicBool::new(false),
            reconnecting: tokio::sync::Mutex::new(()),
            side: tokio::sync::Mutex::new(None),
            last_catch_up_ms: std::sync::atomic::AtomicU64::new(0),
            epoch: Instant::now(),
            tokens: ClaimTokens::default(),
            cursors: std::sync::Mutex::new(crate::claim_cursor::ClaimCursors::new(
                config.full_claim_every,
            )),
            registered: tokio::sync::Mutex::new(true),
            grace_wanted_ms: std::sync::atomic::AtomicU64::new(clock::millis(config.outage_grace)),
            grace_registered_ms: std::sync::atomic::AtomicU64::new(clock::millis(
                config.outage_grace,
            )),
            fleet_honours_grace: std::sync::atomic::AtomicBool::new(row.get(2)),
            row_confirmed: std::sync::atomic::AtomicBool::new(true),
            config,
        })
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    /// "host:port/db" of the server the job connection reached last (of several hosts in the
    /// URL, the writable one), for log lines.
    pub fn address(&self) -> String {
        self.conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .address
            .clone()
    }

    /// This host's name, as registered in `drover.nodes`.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    pub fn lease_duration(&self) -> Duration {
        self.config.lease
    }

    /// The client-side deadline of every call but [`Broker::renew`] (and the compaction and
    /// retention, which run on connections of their own): half the lease. Reconnecting, when
    /// the connection dropped, counts against it. A call still unanswered by then returns
    /// [`BrokerError::TimedOut`] and marks the connection suspect. The server ends the statement
    /// soon after ([`BrokerConfig::session`]'s `statement_timeout`, 3/5 of the lease by default).
    pub fn call_deadline(&self) -> Duration {
        self.config.lease / 2
    }

    /// The client-side deadline of [`Broker::renew`]: a third of the lease, so a renewal that
    /// fails leaves time to try again (renewals run every third of the lease) before any lease
    /// it covers ends.
    pub fn renew_deadline(&self) -> Duration {
        self.config.lease / 3
    }

    /// Marks the connection as suspect (a statement got no answer in time): the next statement
    /// reconnects. The broker does this itself when one of its own deadlines passes; a caller
    /// that gives up on a call sooner should call it too.
    pub fn suspect_connection(&self) {
        self.suspect
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) async fn conn(&self) -> Result<Arc<Conn>, BrokerError> {
        use std::sync::atomic::Ordering::Relaxed;
        let current = self.conn.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if !current.client.is_closed() && !self.suspect.load(Relaxed) {
            return Ok(current);
        }
        let _guard = self.reconnecting.lock().await;
        let current = self.conn.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if !current.client.is_closed() && !self.suspect.load(Relaxed) {
            return Ok(current);
        }
        self.suspect.store(false, Relaxed);
        // Until a heartbeat on the new connection confirms the node row, claims give no grace.
        self.row_confirmed.store(false, Relaxed);
        let fresh = Arc::new(Conn::open(&self.config).await?);
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        Ok(fresh)
    }

    /// Runs `call` within `limit`; past it, marks the connection suspect and returns
    /// [`BrokerError::TimedOut`].
    pub(crate) async fn bounded<T>(
        &self,
        about: &'static str,
        limit: Duration,
        call: impl Future<Output = Result<T, BrokerError>>,
    ) -> Result<T, BrokerError> {
        match tokio::time::timeout(limit, call).await {
            Ok(result) => result,
            Err(_) => {
                self.suspect_connection();
                Err(BrokerError::TimedOut { about })
            }
        }
    }
}
