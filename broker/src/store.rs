//! [`Broker`]: the statements that lease, renew and settle jobs for one node.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio_postgres::{Client, Statement};

use crate::{connect, migrate, BrokerConfig, BrokerError, Clock};

/// A job's primary key in `drover.jobs`.
pub type JobId = i64;
/// A master's row in `drover.nodes`.
pub type NodeId = i64;

/// A job this node holds: what a worker needs to run it, and the token that proves the lease.
#[derive(Debug, Clone)]
pub struct LeasedJob {
    pub id: JobId,
    pub queue: String,
    pub payload: String,
    /// Attempts so far, this one included.
    pub attempts: i32,
    /// How many attempts the producer allowed; `None` = no limit.
    pub max_attempts: Option<i32>,
    /// The fencing token of this lease.
    pub token: i64,
    /// Set when the job must not run again but be failed by the worker with this reason.
    pub failure: Option<String>,
}

/// The identity of a lease: a job and the token it was claimed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    pub id: JobId,
    pub token: i64,
}

/// How a held job ends.
#[derive(Debug, Clone)]
pub enum Settle {
    /// It completed: delete it.
    Ack(Lease),
    /// Give it back. `charged: false` returns the attempt taken at claim (the job never started)
    /// and keeps its place in line; `charged: true` makes it available again after `delay`.
    Release {
        lease: Lease,
        delay: Duration,
        charged: bool,
    },
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
            | Settle::Release { lease, .. }
            | Settle::FailLater { lease, .. }
            | Settle::Fail { lease, .. } => *lease,
        }
    }
}

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
struct Conn {
    client: Client,
    claim: Statement,
    ack: Statement,
    release: Statement,
    fail: Statement,
    renew: Statement,
    reap: Statement,
    next_due: Statement,
    heartbeat: Statement,
}

impl Conn {
    async fn open(url: &str) -> Result<Conn, BrokerError> {
        let client = connect::connect_once(url).await?;
        Self::prepare(client).await
    }

    async fn prepare(client: Client) -> Result<Conn, BrokerError> {
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
            ack: p(include_str!("../queries/ack.sql")).await?,
            release: p(include_str!("../queries/release.sql")).await?,
            fail: p(include_str!("../queries/fail.sql")).await?,
            renew: p(include_str!("../queries/renew.sql")).await?,
            reap: p(include_str!("../queries/reap_expired.sql")).await?,
            next_due: p(include_str!("../queries/next_due.sql")).await?,
            heartbeat: p(include_str!("../queries/heartbeat.sql")).await?,
            client,
        })
    }
}

/// One node's access to the job store. Cheap to share (`Arc<Broker>`); statements issued from
/// several tasks are pipelined on one connection, which is re-opened when it drops.
pub struct Broker {
    /// Lease length, URL and timeouts.
    config: BrokerConfig,
    /// Where "now" comes from.
    clock: Arc<dyn Clock>,
    /// This master's row in `drover.nodes`; the owner of its leases.
    node: NodeId,
    /// The live connection, replaced when it closes.
    conn: Mutex<Arc<Conn>>,
    /// Set when a statement timed out: the connection may be half-open (a failover without a
    /// reset), so the next statement opens a fresh one instead of waiting on it.
    suspect: std::sync::atomic::AtomicBool,
    /// Serialises reconnects so a dropped connection is re-opened once, not by every caller.
    reconnecting: tokio::sync::Mutex<()>,
}

impl Broker {
    /// Connects (retrying with backoff until the database answers), checks the schema (applying
    /// missing migrations when `auto_migrate`) and registers this node.
    pub async fn start(config: BrokerConfig, clock: Arc<dyn Clock>) -> Result<Broker, BrokerError> {
        config.validate()?;
        let mut client = connect::connect_with_retry(&config).await?;
        migrate::ensure(&mut client, config.auto_migrate).await?;
        let conn = Conn::prepare(client).await?;
        let hostname = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unknown".to_string());
        let pid = std::process::id() as i32;
        let now = clock.now();
        let node: NodeId = conn
            .client
            .query_one(
                include_str!("../queries/register_node.sql"),
                &[&hostname, &pid, &now],
            )
            .await
            .map_err(BrokerError::query("registering this node"))?
            .get(0);
        tracing::info!(node, "registered node");
        Ok(Broker {
            config,
            clock,
            node,
            conn: Mutex::new(Arc::new(conn)),
            suspect: std::sync::atomic::AtomicBool::new(false),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    pub fn lease_duration(&self) -> Duration {
        self.config.lease
    }

    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// Marks the connection as suspect (a statement got no answer in time): the next statement
    /// reconnects.
    pub fn suspect_connection(&self) {
        self.suspect
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    async fn conn(&self) -> Result<Arc<Conn>, BrokerError> {
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
        let fresh = Arc::new(Conn::open(&self.config.database_url).await?);
        tracing::info!("reconnected to the database");
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        Ok(fresh)
    }

    /// Leases up to `limit` ready jobs, taking queues in the given order of priority.
    pub async fn claim(
        &self,
        queues: &[String],
        limit: usize,
    ) -> Result<Vec<LeasedJob>, BrokerError> {
        let conn = self.conn().await?;
        let now = self.clock.now();
        let expires = now + self.config.lease;
        let mut jobs = Vec::new();
        for queue in queues {
            let want = limit.saturating_sub(jobs.len());
            if want == 0 {
                break;
            }
            let rows = match conn
                .client
                .query(
                    &conn.claim,
                    &[&self.node, &expires, queue, &now, &(want as i64)],
                )
                .await
            {
                Ok(rows) => rows,
                // Earlier queues' claims are committed: hand those out rather than strand them.
                Err(e) if !jobs.is_empty() => {
                    tracing::warn!("{}", BrokerError::query("claiming jobs")(e));
                    break;
                }
                Err(e) => return Err(BrokerError::query("claiming jobs")(e)),
            };
            let mut batch: Vec<(i16, SystemTime, LeasedJob)> = rows
                .iter()
                .map(|r| {
                    (
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
                        },
                    )
                })
                .collect();
            // RETURNING has no order; hand jobs out in fetch order.
            batch.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.id.cmp(&b.2.id)));
            jobs.extend(batch.into_iter().map(|(_, _, job)| job));
        }
        Ok(jobs)
    }

    /// Settles many jobs at once: one statement per kind of outcome, pipelined.
    pub async fn settle(&self, batch: &[Settle]) -> Result<SettleOutcome, BrokerError> {
        let conn = self.conn().await?;
        let now = self.clock.now();
        let (mut ack_ids, mut ack_tokens) = (Vec::new(), Vec::new());
        let (mut rel_ids, mut rel_tokens, mut rel_delays, mut rel_charged, mut rel_failure) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
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
                Settle::Release {
                    lease,
                    delay,
                    charged,
                } => {
                    rel_ids.push(lease.id);
                    rel_tokens.push(lease.token);
                    rel_delays.push(delay.as_millis().min(i64::MAX as u128) as i64);
                    rel_charged.push(*charged);
                    rel_failure.push(None);
                }
                Settle::FailLater { lease, reason } => {
                    rel_ids.push(lease.id);
                    rel_tokens.push(lease.token);
                    rel_delays.push(0);
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
            if ack_ids.is_empty() {
                return Ok(Vec::new());
            }
            conn.client.query(&conn.ack, &[&ack_ids, &ack_tokens]).await
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
        let (acked, released, failed) = futures_util::future::join3(ack, release, fail).await;
        let ids = |rows: Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>| {
            rows.map(|rows| rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>())
                .map_err(BrokerError::query("settling jobs"))
        };
        let (acked, released, failed) = (ids(acked)?, ids(released)?, ids(failed)?);
        let mut done: Vec<i64> = acked
            .iter()
            .chain(&released)
            .chain(&failed)
            .copied()
            .collect();
        done.sort_unstable();
        let stale = batch
            .iter()
            .map(|s| s.lease().id)
            .filter(|id| done.binary_search(id).is_err())
            .collect();
        Ok(SettleOutcome {
            acked: acked.len(),
            released: released.len(),
            failed: failed.len(),
            stale,
        })
    }

    /// Extends the given leases to now + lease; returns the ids actually renewed (a lease whose
    /// token moved on is not).
    pub async fn renew(&self, leases: &[Lease]) -> Result<Vec<JobId>, BrokerError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let conn = self.conn().await?;
        let expires = self.clock.now() + self.config.lease;
        let ids: Vec<i64> = leases.iter().map(|l| l.id).collect();
        let tokens: Vec<i64> = leases.iter().map(|l| l.token).collect();
        let rows = conn
            .client
            .query(&conn.renew, &[&ids, &tokens, &self.node, &expires])
            .await
            .map_err(BrokerError::query("renewing leases"))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Takes back jobs whose lease expired (their master died or lost the database).
    pub async fn reap_expired(&self) -> Result<ReapOutcome, BrokerError> {
        let conn = self.conn().await?;
        let now = self.clock.now();
        let row = conn
            .client
            .query_one(&conn.reap, &[&now])
            .await
            .map_err(BrokerError::query("taking back expired leases"))?;
        Ok(ReapOutcome {
            released: row.get(0),
            failed: row.get(1),
        })
    }

    /// Marks this node alive and removes the rows of nodes gone silent.
    pub async fn heartbeat(&self) -> Result<(), BrokerError> {
        let conn = self.conn().await?;
        let timeout = self.config.node_timeout.as_secs_f64();
        conn.client
            .execute(&conn.heartbeat, &[&self.node, &self.clock.now(), &timeout])
            .await
            .map_err(BrokerError::query("node heartbeat"))?;
        Ok(())
    }

    /// When the earliest delayed job of these queues becomes due, if any.
    pub async fn next_due(&self, queues: &[String]) -> Result<Option<SystemTime>, BrokerError> {
        let conn = self.conn().await?;
        let row = conn
            .client
            .query_one(&conn.next_due, &[&queues, &self.clock.now()])
            .await
            .map_err(BrokerError::query("finding the next delayed job"))?;
        Ok(row.get(0))
    }

    /// How many jobs wait in each of these queues (available now, not leased), each counted up to
    /// `cap`.
    pub async fn backlog(
        &self,
        queues: &[String],
        cap: i64,
    ) -> Result<Vec<(String, i64)>, BrokerError> {
        let conn = self.conn().await?;
        let rows = conn
            .client
            .query(
                include_str!("../queries/backlog.sql"),
                &[&queues, &self.clock.now(), &cap],
            )
            .await
            .map_err(BrokerError::query("counting the queues' backlog"))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Compacts `drover.jobs` if it is empty but large (see [`crate::compact`]), on a connection
    /// of its own.
    pub async fn compact_when_empty(&self) -> Result<crate::Compaction, BrokerError> {
        crate::compact::compact_when_empty(&self.config.database_url).await
    }

    /// Removes this node's row on a clean exit.
    pub async fn deregister(&self) -> Result<(), BrokerError> {
        let conn = self.conn().await?;
        conn.client
            .execute(
                include_str!("../queries/deregister_node.sql"),
                &[&self.node],
            )
            .await
            .map_err(BrokerError::query("removing this node's row"))?;
        Ok(())
    }
}
