//! The job connection: the one connection that carries claims, settles, renewals and the reap,
//! with its planner settings pinned and its statements prepared once (`queries/*.sql`).
//! [`crate::Broker`] holds it and opens a new one when it drops.

use tokio_postgres::{Client, Statement};

use crate::{connect, BrokerConfig, BrokerError};

/// The planner settings of the job connection, set before its statements are prepared: every
/// job statement finds its rows through an index, whatever the table's statistics say
/// (`queries/pin_plans.sql`, docs/decisions/0003-job-statements-keep-index-plans.md).
pub const PIN_PLANS: &str = include_str!("../queries/pin_plans.sql");

/// One open connection and its prepared statements.
pub(crate) struct Conn {
    /// The connection itself; closed once the server or the network dropped it.
    pub(crate) client: Client,
    /// "host:port/db" of the server it reached (of several hosts, the writable one), for log
    /// lines.
    pub(crate) address: String,
    /// Leases a queue's ready jobs, with the acks riding along (`claim.sql`).
    pub(crate) claim: Statement,
    /// Leases a fair queue's ready jobs by fair tag (`claim_fair.sql`).
    pub(crate) claim_fair: Statement,
    /// Leases a queue's ready jobs from its cursor (`claim_from.sql`, `claim_cursor`).
    pub(crate) claim_from: Statement,
    /// Reserves lease tokens for claims (`reserve_tokens.sql`).
    pub(crate) reserve_tokens: Statement,
    /// Finds what unanswered claims leased (`unanswered_claims.sql`).
    pub(crate) unanswered_claims: Statement,
    /// Deletes completed jobs (`ack.sql`).
    pub(crate) ack: Statement,
    /// Deletes jobs that failed for good, recorded by the application (`ack_failed.sql`).
    pub(crate) ack_failed: Statement,
    /// Learns which jobs completed inside their own transaction (`learn_completions.sql`).
    pub(crate) learn_completions: Statement,
    /// Finishes group moves deferred behind a producer's lock (`groups_catch_up.sql`).
    pub(crate) catch_up: Statement,
    /// Gives jobs back, charged or not (`release.sql`).
    pub(crate) release: Statement,
    /// Moves jobs that failed for good to `drover.failed_jobs` (`fail.sql`).
    pub(crate) fail: Statement,
    /// Extends leases (`renew.sql`).
    pub(crate) renew: Statement,
    /// Takes back expired leases (`reap_expired.sql`).
    pub(crate) reap: Statement,
    /// When the earliest delayed job is due (`next_due.sql`).
    pub(crate) next_due: Statement,
    /// Marks this node alive (`heartbeat.sql`).
    pub(crate) heartbeat: Statement,
}

impl Conn {
    /// A new connection with the master's server-side timeouts ([`BrokerConfig::session`]), as
    /// the first one got from [`crate::connect_retry::connect_with_retry`].
    pub(crate) async fn open(config: &BrokerConfig) -> Result<Conn, BrokerError> {
        let (client, address) =
            connect::connect_once_to(&config.database_url, &config.session()).await?;
        let conn = Self::prepare(client, address).await?;
        tracing::info!(address = %conn.address, "reconnected to PostgreSQL at {}", conn.address);
        Ok(conn)
    }

    pub(crate) async fn prepare(client: Client, address: String) -> Result<Conn, BrokerError> {
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
            claim: p(crate::queries::claim()).await?,
            claim_fair: p(crate::queries::claim_fair()).await?,
            claim_from: p(crate::queries::claim_from()).await?,
            reserve_tokens: p(include_str!("../queries/reserve_tokens.sql")).await?,
            unanswered_claims: p(include_str!("../queries/unanswered_claims.sql")).await?,
            ack: p(include_str!("../queries/ack.sql")).await?,
            ack_failed: p(include_str!("../queries/ack_failed.sql")).await?,
            learn_completions: p(include_str!("../queries/learn_completions.sql")).await?,
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
