//! [`Broker`]: the statements that lease, renew and settle jobs for one node.
//!
//! Every time these statements compare or write comes from the database's clock, or from the
//! test clock when one is injected (see [`crate::clock`]). Every call has a client-side deadline
//! ([`Broker::call_deadline`], [`Broker::renew_deadline`]): a call that gets no answer in time
//! returns [`BrokerError::TimedOut`] and marks the connection suspect, so the next call opens a
//! new one instead of waiting on a half-open connection.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_postgres::{Client, Statement};

use crate::budgets::QueueBudgets;
use crate::claim_tokens::{ClaimTokens, RESERVE};
use crate::leases::{stale, JobId, Lease, LeasedJob, NodeId};
use crate::{connect, migrate, BrokerConfig, BrokerError, Clock};

/// A queue paused by name (`drover.paused_queues`), as read.
#[derive(Debug, Clone, PartialEq)]
pub struct PausedQueue {
    pub queue: String,
    /// How long the pause has left, by the database's clock when it was read; `None`: until
    /// resumed.
    pub left: Option<std::time::Duration>,
    /// The pause's version: a queue paused again is a new pause, which a master confirms anew.
    pub version: i64,
}

/// What a claim brought back.
#[derive(Debug, Default)]
pub struct Claimed {
    /// The jobs leased, in fetch order.
    pub jobs: Vec<LeasedJob>,
    /// The riding acks that changed nothing: their lease token is stale.
    pub stale_acks: Vec<JobId>,
    /// The outage grace given to these leases (the pool's, capped by what the node row holds):
    /// the reap waits that long past a lease's end, so its worker may run that long too.
    pub grace: Duration,
    /// A queue's budget left less room than the claim wanted: jobs of it may be waiting that the
    /// budget holds back, so an empty or short claim does not mean the queues are drained. The
    /// end of a budgeted lease wakes the masters (`NOTIFY drover_jobs`).
    pub held_by_budget: bool,
}

/// What a pool's claim asks of its leases beyond the jobs: the pool's outage grace and the
/// fleet's queue budgets.
#[derive(Debug, Clone, Default)]
pub struct ClaimTerms {
    /// The pool's outage grace (`Duration::ZERO`: none); see [`Broker::claim_with_terms`].
    pub grace: Duration,
    /// The queues' fleet-wide budgets (`crate::budgets`), shared by the master's pools.
    pub budgets: std::sync::Arc<QueueBudgets>,
}

/// How a held job ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// It completed: delete it. A grouped job's group goes on with its next job.
    Ack(Lease),
    /// It failed for good and the application recorded the failure itself (Laravel's failer,
    /// `failed_jobs`): delete it, as an ack does, except that a grouped job under `hold` holds
    /// its group (docs/ordered-groups.md).
    Failed(Lease),
    /// Give it back. `charged: false` returns the attempt taken at claim (the job never started)
    /// and keeps its place in line (`delay` is ignored); `charged: true` means the job ended its
    /// own attempt with a release or backoff: it becomes available `delay` after the database's
    /// now, behind what is already due, and a failure request it carried is cleared (handled).
    Release {
        lease: Lease,
        delay: Duration,
        charged: bool,
    },
    /// Taken back because the worker (or master) holding it died while it ran: the attempt stays
    /// charged (the job may have run) and the job keeps its place in line (`available_at` as it
    /// was), ahead of jobs enqueued after it — what the reap does for an expired lease. A failure
    /// request it carried stands (the worker died before handling it). `died` says how the
    /// worker died, for the next worker to name if the application's rules fail the job
    /// (Laravel's tries): kept as the note `died: <how>`, which a failure request outranks.
    TakeBack { lease: Lease, died: Option<String> },
    /// Give it back, uncharged, to be failed by the next worker with this reason (through the
    /// application's own failure path) instead of being run.
    FailLater { lease: Lease, reason: String },
    /// It failed for good: move it to `drover.failed_jobs` with the error.
    Fail { lease: Lease, error: String },
}

impl Settle {
    pub fn lease(&self) -> Lease {
        match self {
            Settle::Ack(lease)
            | Settle::Failed(lease)
            | Settle::TakeBack { lease, .. }
            | Settle::Release { lease, .. }
            | Settle::FailLater { lease, .. }
            | Settle::Fail { lease, .. } => *lease,
        }
    }
}

/// The prefix of the note a job taken back from a dead worker carries in `failure`: not a
/// request to fail it, only how its last attempt ended (`LeasedJob::died`).
pub const DIED_NOTE: &str = "died: ";

/// What a batch of settles did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SettleOutcome {
    pub acked: usize,
    pub released: usize,
    pub failed: usize,
    /// Jobs whose token no longer matched: the settle changed nothing.
    pub stale: Vec<JobId>,
}

/// What one pass of taking back expired leases did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReapOutcome {
    pub released: i64,
    pub failed: i64,
}

/// One open connection and its prepared statements.
pub(crate) struct Conn {
    pub(crate) client: Client,
    /// "host:port/db" of the server it reached (of several hosts, the writable one), for log
    /// lines.
    pub(crate) address: String,
    claim: Statement,
    /// Reserves lease tokens for claims (`reserve_tokens.sql`).
    reserve_tokens: Statement,
    /// Finds what unanswered claims leased (`unanswered_claims.sql`).
    unanswered_claims: Statement,
    ack: Statement,
    /// Deletes jobs that failed for good, recorded by the application (`ack_failed.sql`).
    ack_failed: Statement,
    /// Finishes group moves deferred behind a producer's lock (`groups_catch_up.sql`).
    catch_up: Statement,
    release: Statement,
    fail: Statement,
    renew: Statement,
    reap: Statement,
    next_due: Statement,
    heartbeat: Statement,
}

impl Conn {
    /// A new connection with the master's server-side timeouts ([`BrokerConfig::session`]), as
    /// the first one got from [`connect::connect_with_retry`].
    async fn open(config: &BrokerConfig) -> Result<Conn, BrokerError> {
        let (client, address) =
            connect::connect_once_to(&config.database_url, &config.session()).await?;
        let conn = Self::prepare(client, address).await?;
        tracing::info!(address = %conn.address, "reconnected to PostgreSQL at {}", conn.address);
        Ok(conn)
    }

    async fn prepare(client: Client, address: String) -> Result<Conn, BrokerError> {
        client
            .batch_execute(PIN_PLANS)
            .await
            .map_err(BrokerError::query(
                "pinning the job statements' plans to index scans",
            ))?;
        let p = |sql: &'static str| {
            let client = &client;
            async move {
                client
                    .prepare(sql)
                    .await
                    .map_err(BrokerError::query("preparing broker statements"))
            }
        };
        Ok(Conn {
            claim: p(include_str!("../queries/claim.sql")).await?,
            reserve_tokens: p(include_str!("../queries/reserve_tokens.sql")).await?,
            unanswered_claims: p(include_str!("../queries/unanswered_claims.sql")).await?,
            ack: p(include_str!("../queries/ack.sql")).await?,
            ack_failed: p(include_str!("../queries/ack_failed.sql")).await?,
            catch_up: p(include_str!("../queries/groups_catch_up.sql")).await?,
            release: p(include_str!("../queries/release.sql")).await?,
            fail: p(include_str!("../queries/fail.sql")).await?,
            renew: p(include_str!("../queries/renew.sql")).await?,
            reap: p(include_str!("../queries/reap_expired.sql")).await?,
            next_due: p(include_str!("../queries/next_due.sql")).await?,
            heartbeat: p(include_str!("../queries/heartbeat.sql")).await?,
            client,
            address,
        })
    }
}

/// The planner settings of the job connection, set before its statements are prepared: every
/// job statement finds its rows through an index, whatever the table's statistics say
/// (`queries/pin_plans.sql`, docs/decisions/0003-job-statements-keep-index-plans.md).
pub const PIN_PLANS: &str = include_str!("../queries/pin_plans.sql");

/// Failed jobs deleted per statement by [`Broker::purge_failed`]: small enough that no
/// statement holds many row locks or runs long.
pub const PURGE_BATCH: i64 = 10_000;

/// One node's access to the job store. Cheap to share (`Arc<Broker>`); statements issued from
/// several tasks are pipelined on one connection, which is re-opened when it drops.
pub struct Broker {
    /// Lease length, URL and timeouts.
    pub(crate) config: BrokerConfig,
    /// Where "now" comes from: `None` from the production clock, the database's.
    pub(crate) clock: Arc<dyn Clock>,
    /// This master's row in `drover.nodes`; the owner of its leases.
    node: NodeId,
    /// This host's name, as registered (metrics rows carry it).
    hostname: String,
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
    /// at most every [`CATCH_UP_EVERY`], not once per batch, so ungrouped settles do not pay a
    /// statement per batch for a move that is rarely deferred.
    last_catch_up_ms: std::sync::atomic::AtomicU64,
    /// The monotonic origin of `last_catch_up_ms`.
    epoch: Instant,
    /// Tokens reserved for claims, and the claims whose answer never came (`claim_tokens`).
    tokens: ClaimTokens,
    /// Whether this node still has its row: false once [`Broker::deregister`] ran. Held across a
    /// heartbeat's statement, so a heartbeat (which registers a missing row again) and the
    /// removal never overlap, and no heartbeat brings back the row of a master that left.
    registered: tokio::sync::Mutex<bool>,
    /// The longest outage grace this master's pools want (ms): sent with each heartbeat, which
    /// raises the row's `grace_secs` to it ([`Broker::want_grace`]).
    grace_wanted_ms: std::sync::atomic::AtomicU64,
    /// The outage grace the node row holds (ms), as of the registration or the last heartbeat:
    /// the most a claim may give its leases, since the row must outlive every lease it holds
    /// with its grace (`heartbeat.sql`).
    grace_registered_ms: std::sync::atomic::AtomicU64,
    /// Whether every other master with a row honours an outage grace (none is of release 0.1,
    /// whose reap would take a graced lease back at its end), as of the registration or the
    /// last heartbeat. While false, claims give no grace and held leases are treated as having
    /// none ([`Broker::grace_in_force`]).
    fleet_honours_grace: std::sync::atomic::AtomicBool,
    /// The node row is known to exist since the connection was last opened: a master cut off
    /// long enough may have had its row removed by another (the reap then takes its jobs back at
    /// their leases' end), so after a reconnect claims give no grace until a heartbeat has
    /// confirmed (or registered again) the row.
    row_confirmed: std::sync::atomic::AtomicBool,
}

/// How often a settle batch finishes the group moves deferred behind a producer's lock, at most.
const CATCH_UP_EVERY: Duration = Duration::from_millis(100);

impl Broker {
    /// Connects (retrying with backoff until the database answers), checks the schema (applying
    /// missing migrations when `auto_migrate`) and registers this node.
    pub async fn start(config: BrokerConfig, clock: Arc<dyn Clock>) -> Result<Broker, BrokerError> {
        config.validate()?;
        let (mut client, address) = connect::connect_with_retry_to(&config).await?;
        migrate::ensure(&mut client, config.auto_migrate).await?;
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
            clock_offset_ms: std::sync::atomic::AtomicI64::new(offset_ms(row.get(1))),
            conn: Mutex::new(Arc::new(conn)),
            suspect: std::sync::atomic::AtomicBool::new(false),
            reconnecting: tokio::sync::Mutex::new(()),
            side: tokio::sync::Mutex::new(None),
            last_catch_up_ms: std::sync::atomic::AtomicU64::new(0),
            epoch: Instant::now(),
            tokens: ClaimTokens::default(),
            registered: tokio::sync::Mutex::new(true),
            grace_wanted_ms: std::sync::atomic::AtomicU64::new(millis(config.outage_grace)),
            grace_registered_ms: std::sync::atomic::AtomicU64::new(millis(config.outage_grace)),
            fleet_honours_grace: std::sync::atomic::AtomicBool::new(row.get(2)),
            row_confirmed: std::sync::atomic::AtomicBool::new(true),
            config,
        })
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Asks for an outage grace of up to `grace` (a reload added a pool with a longer one). The
    /// node row's grace is raised at the next heartbeat; until then claims give their leases
    /// no more than the row already holds ([`Claimed::grace`]). The row's grace never shrinks
    /// while this master lives: leases it took under a longer one may still be held.
    pub fn want_grace(&self, grace: Duration) {
        self.grace_wanted_ms
            .fetch_max(millis(grace), std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether an outage grace is in force: every other master with a row honours one. While
    /// a master of release 0.1 has a row, claims give no grace, and a lease taken with one is
    /// fenced as if it had none (that master's reap takes it back at its lease's end).
    pub fn grace_in_force(&self) -> bool {
        self.fleet_honours_grace
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The outage grace the node row holds, the most a claim gives its leases.
    pub fn registered_grace(&self) -> Duration {
        Duration::from_millis(
            self.grace_registered_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        )
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

    /// Leases up to `limit` ready jobs, taking queues in the given order of priority. Each
    /// lease ends `lease` after the database's now.
    pub async fn claim(
        &self,
        queues: &[String],
        limit: usize,
    ) -> Result<Vec<LeasedJob>, BrokerError> {
        Ok(self.claim_with_acks(queues, limit, &[]).await?.jobs)
    }

    /// [`Broker::claim`], deleting the completed jobs `acks` in the first queue's statement: the
    /// acks ride with the claim, and one commit (one WAL flush) carries both. Only acks of
    /// ungrouped jobs may ride (`claim.sql` says why).
    ///
    /// Within [`Broker::call_deadline`]; one statement per queue. When a later queue's statement
    /// fails or misses the deadline after earlier queues' claims were committed, the jobs
    /// already claimed are returned (and the problem logged) rather than stranded. An error
    /// means the acks may not have been written: the caller settles them again (a repeated ack
    /// matches nothing).
    pub async fn claim_with_acks(
        &self,
        queues: &[String],
        limit: usize,
        acks: &[Lease],
    ) -> Result<Claimed, BrokerError> {
        self.claim_with_grace(queues, limit, acks, Duration::ZERO)
            .await
    }

    /// [`Broker::claim_with_acks`] for a pool with an outage grace: each lease is taken back by
    /// the reap only `grace` after it ends (unless its holder's node row is gone), since the
    /// holder's worker may run the job that long while its master cannot reach the database
    /// (`migrations/0009_outage_grace.sql`). `Duration::ZERO`: no grace.
    pub async fn claim_with_grace(
        &self,
        queues: &[String],
        limit: usize,
        acks: &[Lease],
        grace: Duration,
    ) -> Result<Claimed, BrokerError> {
        let terms = ClaimTerms {
            grace,
            ..ClaimTerms::default()
        };
        self.claim_with_terms(queues, limit, acks, &terms).await
    }

    /// [`Broker::claim_with_grace`] under the fleet's queue budgets too: a budgeted queue's
    /// statement leases no more than its budget less the jobs of it leased now, fleet-wide
    /// (`queries/claim.sql`); [`Claimed::held_by_budget`] says when a budget held jobs back.
    pub async fn claim_with_terms(
        &self,
        queues: &[String],
        limit: usize,
        acks: &[Lease],
        terms: &ClaimTerms,
    ) -> Result<Claimed, BrokerError> {
        let grace = terms.grace;
        const ABOUT: &str = "claiming jobs";
        debug_assert!(
            !queues.is_empty() || acks.is_empty(),
            "riding acks need a queue's statement to ride in"
        );
        let deadline = Instant::now() + self.call_deadline();
        let conn = self
            .bounded(ABOUT, self.call_deadline(), self.conn())
            .await?;
        let token = match self.tokens.take() {
            Some(token) => token,
            None => {
                let left = deadline.saturating_duration_since(Instant::now());
                let reserve = async {
                    conn.client
                        .query(&conn.reserve_tokens, &[&RESERVE])
                        .await
                        .map_err(BrokerError::query("reserving lease tokens"))
                };
                let rows = self.bounded(ABOUT, left, reserve).await?;
                self.tokens.add_spare(rows.iter().map(|r| r.get(0)));
                self.tokens.take().ok_or(BrokerError::Unexpected {
                    about: "reserving lease tokens",
                    problem: "the database returned no token".into(),
                })?
            }
        };
        // From here the claim may commit without its answer reaching this task.
        let sending = self.tokens.sending(token);
        let mut whole = true;
        let now = self.clock.now();
        let lease = self.config.lease.as_secs_f64();
        // No more than the node row holds (the row must outlive the lease and its grace), none
        // while a master that would reap it at the lease's end has a row, and none before a
        // heartbeat confirmed the row after a reconnect.
        let confirmed = self
            .row_confirmed
            .load(std::sync::atomic::Ordering::Relaxed);
        let grace = match self.grace_in_force() && confirmed {
            true => grace.min(self.registered_grace()),
            false => Duration::ZERO,
        };
        let mut claimed = Claimed {
            grace,
            ..Claimed::default()
        };
        let grace = (!grace.is_zero()).then_some(grace.as_secs_f64());
        let mut ack_ids: Vec<JobId> = acks.iter().map(|l| l.id).collect();
        let mut ack_tokens: Vec<i64> = acks.iter().map(|l| l.token).collect();
        let mut acked = Vec::with_capacity(acks.len());
        // The least grace any leased row got (None: no row leased).
        let mut given: Option<Duration> = None;
        let mut acks_written = acks.is_empty();
        for (i, queue) in queues.iter().enumerate() {
            let want = limit.saturating_sub(claimed.jobs.len());
            // Past the limit, the acks still need their statement.
            if want == 0 && acks_written {
                break;
            }
            if i > 0 {
                ack_ids.clear();
                ack_tokens.clear();
            }
            let budget = terms.budgets.of(queue).map(i64::from);
            let statement = async {
                conn.client
                    .query(
                        &conn.claim,
                        &[
                            &self.node,
                            &lease,
                            queue,
                            &now,
                            &(want as i64),
                            &ack_ids,
                            &ack_tokens,
                            &token,
                            &grace,
                            &budget,
                        ],
                    )
                    .await
                    .map_err(BrokerError::query(ABOUT))
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let rows = match self.bounded(ABOUT, left, statement).await {
                Ok(rows) => rows,
                // Earlier queues' claims are committed: hand those out rather than strand them.
                // This statement may have committed too: its token is asked about later.
                Err(e) if acks_written && !claimed.jobs.is_empty() => {
                    tracing::warn!(database = %conn.address, "{e}");
                    whole = false;
                    break;
                }
                Err(e) => return Err(e),
            };
            acks_written = true;
            // Under a budget: the room it left this statement.
            let mut room: Option<i64> = None;
            let mut batch: Vec<(i16, SystemTime, LeasedJob)> = Vec::with_capacity(rows.len());
            for r in &rows {
                if let Some(id) = r.get::<_, Option<i64>>(11) {
                    acked.push(id);
                    continue;
                }
                if let Some(n) = r.get::<_, Option<i64>>(13) {
                    room = Some(n);
                    continue;
                }
                // What the statement wrote decides (it may refuse the grace asked for).
                let written = r
                    .get::<_, Option<f64>>(12)
                    .and_then(|g| Duration::try_from_secs_f64(g).ok())
                    .unwrap_or_default();
                given = Some(given.map_or(written, |g: Duration| g.min(written)));
                batch.push((
                    r.get(6),
                    r.get(7),
                    LeasedJob {
                        id: r.get(0),
                        queue: r.get(1),
                        payload: r.get(2),
                        attempts: r.get(3),
                        max_attempts: r.get(4),
                        token: r.get(5),
                        failure: r.get(8),
                        waited: Duration::try_from_secs_f64(r.get::<_, f64>(9)).unwrap_or_default(),
                        grouped: r.get(10),
                    },
                ));
            }
            // The budget held jobs back when it left less room than wanted and the statement
            // filled it; fewer than the room means the queue had no more ready.
            if room.is_some_and(|n| n < want as i64 && batch.len() as i64 >= n) {
                claimed.held_by_budget = true;
            }
            // RETURNING has no order; hand jobs out in fetch order.
            batch.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.id.cmp(&b.2.id)));
            claimed
                .jobs
                .extend(batch.into_iter().map(|(_, _, job)| job));
        }
        if let Some(given) = given {
            claimed.grace = given;
        }
        claimed.stale_acks = stale(acks.iter().map(|l| l.id), acked);
        sending.answered(claimed.jobs.iter().map(|j| j.id), whole);
        Ok(claimed)
    }

    /// Whether a claim's answer was lost (see [`Broker::unanswered_claims`]).
    pub fn has_unanswered_claims(&self) -> bool {
        self.tokens.any_unanswered()
    }

    /// The jobs that claims whose answer never came leased to this node (the connection dropped
    /// after the commit, or the claim committed after its deadline), less those this master
    /// already has. No worker got them: the caller gives them back with their attempt uncharged
    /// (`claim_tokens`). A claim is asked about until two leases after it was given up on, for a
    /// statement that commits late; each job is returned once. Within [`Broker::call_deadline`].
    pub async fn unanswered_claims(&self) -> Result<Vec<Lease>, BrokerError> {
        const ABOUT: &str = "asking what unanswered claims leased";
        let asked = self.tokens.unanswered(
            std::time::Instant::now(),
            self.config.lease.saturating_mul(2),
        );
        if asked.tokens.is_empty() {
            return Ok(Vec::new());
        }
        let call = async {
            let conn = self.conn().await?;
            let (known_ids, known_tokens): (Vec<JobId>, Vec<i64>) =
                asked.known.iter().copied().unzip();
            conn.client
                .query(
                    &conn.unanswered_claims,
                    &[&self.node, &asked.tokens, &known_ids, &known_tokens],
                )
                .await
                .map_err(BrokerError::query(ABOUT))
        };
        let rows = self.bounded(ABOUT, self.call_deadline(), call).await?;
        let found: Vec<Lease> = rows
            .iter()
            .map(|r| Lease {
                id: r.get(0),
                token: r.get(1),
            })
            .collect();
        self.tokens.found(&found);
        Ok(found)
    }

    /// Settles many jobs at once: one statement per kind of outcome, pipelined, within
    /// [`Broker::call_deadline`].
    pub async fn settle(&self, batch: &[Settle]) -> Result<SettleOutcome, BrokerError> {
        self.bounded(
            "settling jobs",
            self.call_deadline(),
            self.settle_now(batch),
        )
        .await
    }

    async fn settle_now(&self, batch: &[Settle]) -> Result<SettleOutcome, BrokerError> {
        let conn = self.conn().await?;
        let now = self.clock.now();
        let (mut ack_ids, mut ack_tokens) = (Vec::new(), Vec::new());
        // Failed for good, recorded by the application: deleted like acks, holding a group.
        let (mut gone_ids, mut gone_tokens) = (Vec::new(), Vec::new());
        // Per release: the delay in ms, or None to keep the job's place in line.
        let (mut rel_ids, mut rel_tokens, mut rel_delays, mut rel_charged, mut rel_failure) = (
            Vec::new(),
            Vec::new(),
            Vec::<Option<i64>>::new(),
            Vec::new(),
            Vec::<Option<String>>::new(),
        );
        let (mut fail_ids, mut fail_tokens, mut fail_errors) = (Vec::new(), Vec::new(), Vec::new());
        for s in batch {
            match s {
                Settle::Ack(l) => {
                    ack_ids.push(l.id);
                    ack_tokens.push(l.token);
                }
                Settle::Failed(l) => {
                    gone_ids.push(l.id);
                    gone_tokens.push(l.token);
                }
                Settle::Release {
                    lease,
                    delay,
                    charged,
                } => {
                    rel_ids.push(lease.id);
                    rel_tokens.push(lease.token);
                    rel_delays
                        .push(charged.then(|| delay.as_millis().min(i64::MAX as u128) as i64));
                    rel_charged.push(*charged);
                    rel_failure.push(None);
                }
                Settle::TakeBack { lease, died } => {
                    rel_ids.push(lease.id);
                    rel_tokens.push(lease.token);
                    rel_delays.push(None);
                    rel_charged.push(true);
                    rel_failure.push(died.as_ref().map(|how| format!("{DIED_NOTE}{how}")));
                }
                Settle::FailLater { lease, reason } => {
                    rel_ids.push(lease.id);
                    rel_tokens.push(lease.token);
                    rel_delays.push(None);
                    rel_charged.push(false);
                    rel_failure.push(Some(reason.clone()));
                }
                Settle::Fail { lease, error } => {
                    fail_ids.push(lease.id);
                    fail_tokens.push(lease.token);
                    fail_errors.push(error.clone());
                }
            }
        }
        let ack = async {
            let acked = if ack_ids.is_empty() {
                Vec::new()
            } else {
                conn.client
                    .query(&conn.ack, &[&ack_ids, &ack_tokens])
                    .await?
            };
            if gone_ids.is_empty() {
                return Ok(acked);
            }
            let mut gone = conn
                .client
                .query(&conn.ack_failed, &[&gone_ids, &gone_tokens, &now])
                .await?;
            gone.extend(acked);
            Ok(gone)
        };
        let release = async {
            if rel_ids.is_empty() {
                return Ok(Vec::new());
            }
            conn.client
                .query(
                    &conn.release,
                    &[
                        &rel_ids,
                        &rel_tokens,
                        &now,
                        &rel_delays,
                        &rel_charged,
                        &rel_failure,
                    ],
                )
                .await
        };
        let fail = async {
            if fail_ids.is_empty() {
                return Ok(Vec::new());
            }
            conn.client
                .query(&conn.fail, &[&fail_ids, &fail_tokens, &fail_errors, &now])
                .await
        };
        // After the batch, on the same connection (pipelined, in order): the group moves that an
        // earlier settle had to leave to a producer holding the group's lock. Its outcome is not
        // the batch's: an error here is logged and the next batch or reap tries again.
        let now_ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let due = now_ms.saturating_sub(self.last_catch_up_ms.load(Ordering::Relaxed))
            >= CATCH_UP_EVERY.as_millis() as u64;
        if due {
            self.last_catch_up_ms.store(now_ms, Ordering::Relaxed);
        }
        let catch_up = async {
            if !due {
                return;
            }
            if let Err(e) = conn.client.query_one(&conn.catch_up, &[]).await {
                tracing::debug!("catching up on ordered groups after a settle: {e}");
            }
        };
        let (acked, released, failed, ()) =
            futures_util::future::join4(ack, release, fail, catch_up).await;
        let ids = |rows: Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>| {
            rows.map(|rows| rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>())
                .map_err(BrokerError::query("settling jobs"))
        };
        let (acked, released, failed) = (ids(acked)?, ids(released)?, ids(failed)?);
        let done: Vec<i64> = acked
            .iter()
            .chain(&released)
            .chain(&failed)
            .copied()
            .collect();
        let stale = stale(batch.iter().map(|s| s.lease().id), done);
        Ok(SettleOutcome {
            acked: acked.len(),
            released: released.len(),
            failed: failed.len(),
            stale,
        })
    }

    /// Extends the given leases to the database's now + lease; returns the ids actually renewed
    /// (a lease whose token moved on is not). Within [`Broker::renew_deadline`].
    ///
    /// A caller that tracks when its leases end should count from the moment it sent the
    /// renewal, on its own monotonic clock: the database's now is never earlier than that.
    pub async fn renew(&self, leases: &[Lease]) -> Result<Vec<JobId>, BrokerError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let call = async {
            let conn = self.conn().await?;
            let lease = self.config.lease.as_secs_f64();
            let ids: Vec<i64> = leases.iter().map(|l| l.id).collect();
            let tokens: Vec<i64> = leases.iter().map(|l| l.token).collect();
            let rows = conn
                .client
                .query(
                    &conn.renew,
                    &[&ids, &tokens, &self.node, &lease, &self.clock.now()],
                )
                .await
                .map_err(BrokerError::query("renewing leases"))?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        };
        self.bounded("renewing leases", self.renew_deadline(), call)
            .await
    }

    /// Takes back jobs whose lease expired by the database's clock (their master died or lost
    /// the database). They keep their place in line. Within [`Broker::call_deadline`].
    pub async fn reap_expired(&self) -> Result<ReapOutcome, BrokerError> {
        const ABOUT: &str = "taking back expired leases";
        let call = async {
            let conn = self.conn().await?;
            let row = conn
                .client
                .query_one(&conn.reap, &[&self.clock.now()])
                .await
                .map_err(BrokerError::query(ABOUT))?;
            // The reap tick is also when deferred group moves are finished while no settle runs.
            // The reap above is committed whatever happens here; the next tick tries again.
            if let Err(e) = conn.client.query_one(&conn.catch_up, &[]).await {
                tracing::debug!("catching up on ordered groups after a reap: {e}");
            }
            Ok(ReapOutcome {
                released: row.get(0),
                failed: row.get(1),
            })
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// For a fleet restart (`drover:restart --fleet`): records that this master applied request
    /// `done` (0: none yet) and returns the latest request made of it. Within
    /// [`Broker::call_deadline`].
    pub async fn fleet_reload(&self, done: i64) -> Result<i64, BrokerError> {
        const ABOUT: &str = "reading this master's fleet restart requests";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(
                    include_str!("../queries/fleet_reload.sql"),
                    &[&self.node, &done],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows.first().map_or(0, |r| r.get(0)))
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Marks this node alive, with its status document (JSON: pools, workers, circuits) when
    /// given, and removes the rows of nodes gone silent, by the database's clock. A row another
    /// master removed (this one was silent for ten leases) is registered again under the same id,
    /// and said so: true then (what the row said of this master, the queue pauses it confirmed
    /// among it, is gone). Within [`Broker::call_deadline`].
    pub async fn heartbeat(&self, status: Option<&str>) -> Result<bool, BrokerError> {
        const ABOUT: &str = "node heartbeat";
        let call = async {
            let registered = self.registered.lock().await;
            if !*registered {
                return Ok(false); // this master left: nothing brings its row back
            }
            let conn = self.conn().await?;
            let timeout = self.config.node_timeout.as_secs_f64();
            let pid = std::process::id() as i32;
            let lease = self.config.lease.as_secs_f64();
            let grace = self
                .grace_wanted_ms
                .load(std::sync::atomic::Ordering::Relaxed) as f64
                / 1000.0;
            let row = conn
                .client
                .query_one(
                    &conn.heartbeat,
                    &[
                        &self.node,
                        &self.clock.now(),
                        &timeout,
                        &status,
                        &self.hostname,
                        &pid,
                        &lease,
                        &grace,
                        &self.config.release,
                    ],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            let honoured: bool = row.get(3);
            self.row_confirmed
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let was = self
                .fleet_honours_grace
                .swap(honoured, std::sync::atomic::Ordering::Relaxed);
            if was != honoured {
                match honoured {
                    true => tracing::info!("every master of this database now honours an outage grace: pools with outage_grace use it"),
                    false => tracing::warn!("a master of drover 0.1 has a row in drover.nodes: no outage grace is given or relied on until it is gone (its reap would take such a lease back at its end; docs/upgrading.md)"),
                }
            }
            if let Some(held) = row.get::<_, Option<f64>>(2) {
                let held = Duration::try_from_secs_f64(held).unwrap_or_default();
                self.grace_registered_ms
                    .store(millis(held), std::sync::atomic::Ordering::Relaxed);
            }
            self.clock_offset_ms
                .store(offset_ms(row.get(0)), std::sync::atomic::Ordering::Relaxed);
            let again = row.get::<_, Option<bool>>(1) == Some(true);
            if again {
                tracing::warn!(
                    node = self.node,
                    "this master's node row had been removed (it was silent for ten leases or more, and another master took it for gone): registered again"
                );
            }
            Ok(again)
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// How long until the earliest delayed job of these queues is due, by the database's clock;
    /// `None` when no job waits. Wait for it on a monotonic clock (it is measured from when the
    /// statement ran, so a timer set on receipt fires at most a round trip late, never early
    /// by the database's reckoning). Within [`Broker::call_deadline`].
    pub async fn next_due(&self, queues: &[String]) -> Result<Option<Duration>, BrokerError> {
        const ABOUT: &str = "finding the next delayed job";
        let call = async {
            let conn = self.conn().await?;
            let row = conn
                .client
                .query_one(&conn.next_due, &[&queues, &self.clock.now()])
                .await
                .map_err(BrokerError::query(ABOUT))?;
            let seconds: Option<f64> = row.get(0);
            Ok(seconds.map(crate::clock::seconds))
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// How many jobs wait in each of these queues (available now by the database's clock, not
    /// leased), each counted up to `cap`. Within [`Broker::call_deadline`].
    pub async fn backlog(
        &self,
        queues: &[String],
        cap: i64,
    ) -> Result<Vec<(String, i64)>, BrokerError> {
        const ABOUT: &str = "counting the queues' backlog";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(
                    include_str!("../queries/backlog.sql"),
                    &[&queues, &self.clock.now(), &cap],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// The queues paused by name (`drover.paused_queues`: Laravel's `queue:pause`), each with how
    /// long its pause has left (`None`: until resumed) and its version. Within
    /// [`Broker::call_deadline`].
    pub async fn paused_queues(&self) -> Result<Vec<PausedQueue>, BrokerError> {
        const ABOUT: &str = "reading the paused queues";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(
                    include_str!("../queries/paused_queues.sql"),
                    &[&self.clock.now()],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows
                .iter()
                .map(|r| {
                    let left: Option<f64> = r.get(1);
                    PausedQueue {
                        queue: r.get(0),
                        left: left.map(crate::clock::seconds),
                        version: r.get(2),
                    }
                })
                .collect())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Records that this master holds the pauses of these versions (`confirm_pauses.sql`): whoever
    /// paused their queues stops waiting for it. An error when this master's node row is gone
    /// (the next heartbeat registers it again; the confirmation is tried again then). Within
    /// [`Broker::call_deadline`].
    pub async fn confirm_pauses(&self, versions: &[i64]) -> Result<(), BrokerError> {
        const ABOUT: &str = "confirming the queue pauses this master holds";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .execute(
                    include_str!("../queries/confirm_pauses.sql"),
                    &[&self.node, &versions],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            if rows != 1 {
                return Err(BrokerError::NodeGone {
                    about: ABOUT,
                    node: self.node,
                });
            }
            Ok(())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Compacts `drover.jobs` if it is empty but large (see [`crate::compact`]), on a connection
    /// of its own. Its deadline is the compaction's `statement_timeout` (10 minutes by default,
    /// [`BrokerConfig::compaction_session`]) plus half a lease; the main connection is not
    /// touched, so missing it marks nothing suspect.
    pub async fn compact_when_empty(&self) -> Result<crate::Compaction, BrokerError> {
        let limit = match self.config.compaction_session().statement_timeout {
            Some(t) if !t.is_zero() => t,
            _ => crate::config::COMPACTION_STATEMENT_TIMEOUT,
        } + self.call_deadline();
        tokio::time::timeout(limit, crate::compact::compact_when_empty(&self.config))
            .await
            .map_err(|_| BrokerError::TimedOut {
                about: "compacting drover.jobs",
            })?
    }

    /// Retention: deletes the rows of `drover.failed_jobs` that failed more than `older_than`
    /// ago by the database's clock, oldest first, [`PURGE_BATCH`] per statement (each its own
    /// transaction, so no statement holds many locks or runs long), until fewer than a batch
    /// are left or `budget` has passed; returns how many it deleted. Runs on a connection of its
    /// own, so the claims and settles pipelined on the main one never queue behind a batch.
    /// Each statement has [`Broker::call_deadline`]; the budget is checked between statements.
    /// What is left when the budget runs out is deleted by the next call.
    pub async fn purge_failed(
        &self,
        older_than: Duration,
        budget: Duration,
    ) -> Result<u64, BrokerError> {
        const ABOUT: &str = "deleting old failed jobs";
        let until = Instant::now() + budget;
        let limit = self.call_deadline();
        let timed_out = |_| BrokerError::TimedOut { about: ABOUT };
        let client = tokio::time::timeout(
            limit,
            connect::connect_once_with(&self.config.database_url, &self.config.session()),
        )
        .await
        .map_err(timed_out)??;
        let statement = tokio::time::timeout(
            limit,
            client.prepare(include_str!("../queries/purge_failed.sql")),
        )
        .await
        .map_err(timed_out)?
        .map_err(BrokerError::query(ABOUT))?;
        let age = older_than.as_secs_f64();
        let mut deleted = 0;
        loop {
            let batch = tokio::time::timeout(
                limit,
                client.execute(&statement, &[&self.clock.now(), &age, &PURGE_BATCH]),
            )
            .await
            .map_err(timed_out)?
            .map_err(BrokerError::query(ABOUT))?;
            deleted += batch;
            if batch < PURGE_BATCH as u64 || Instant::now() >= until {
                return Ok(deleted);
            }
        }
    }

    /// Removes the row a previous master of this state directory left behind when it did not
    /// exit cleanly (a crash, SIGKILL): `node` with `pid`, registered from this host. This master
    /// holds the state directory's lock, so that one is gone, and so are its workers (their
    /// parent-death signal); its row would only make queue pauses wait for it. True if a row was
    /// removed. Within [`Broker::call_deadline`].
    pub async fn remove_predecessor(&self, node: NodeId, pid: i32) -> Result<bool, BrokerError> {
        const ABOUT: &str = "removing the node row of this state directory's previous master";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .execute(
                    include_str!("../queries/remove_predecessor.sql"),
                    &[&node, &pid, &self.hostname, &self.node],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows == 1)
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Removes this node's row: it leaves (a clean exit, or a start that cannot go on). No
    /// heartbeat registers it again afterwards. Within [`Broker::call_deadline`].
    pub async fn deregister(&self) -> Result<(), BrokerError> {
        const ABOUT: &str = "removing this node's row";
        let call = async {
            // From here no heartbeat registers the row again, and none is in flight.
            let mut registered = self.registered.lock().await;
            *registered = false;
            let conn = self.conn().await?;
            conn.client
                .execute(
                    include_str!("../queries/deregister_node.sql"),
                    &[&self.node],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}

/// The database's time (seconds since the epoch, as a statement returned it) less this host's
/// now, in milliseconds.
fn offset_ms(database_epoch_secs: f64) -> i64 {
    let here = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let ms = (database_epoch_secs - here) * 1000.0;
    if ms.is_finite() {
        ms.clamp(i64::MIN as f64, i64::MAX as f64) as i64
    } else {
        0
    }
}

/// `d` in whole milliseconds, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
