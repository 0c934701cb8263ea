//! What the master records about finished jobs and about itself, in the database: per-minute
//! metric rows (`drover.metrics`, written whole per minute and replaced while the minute is open),
//! their retention, the queues' oldest waits, and the database's time by which minutes are
//! placed. The master aggregates; this module only writes and reads (docs/metrics.md).
//!
//! These statements run on a connection of their own (the "side" connection, opened on first
//! use and again after it drops), never on the one that carries claims, renewals and settles: a
//! large write after an outage or a slow backlog count must not delay a renewal.

use std::time::{Duration, SystemTime};

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

use crate::{connect, Broker, BrokerError};

/// One node's totals for one minute, queue and job class. The distributions are JSON documents
/// the master builds (`{"n","sum","max","p50","p95","buckets"}`), stored as `jsonb`.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteRow {
    /// Minutes since the Unix epoch, by the database's clock.
    pub minute: i64,
    pub queue: String,
    /// The job's class: the payload's `displayName` (empty when it has none).
    pub class: String,
    pub completed: i64,
    pub failed: i64,
    pub released: i64,
    /// Milliseconds from the worker's `started` to its report.
    pub runtime: String,
    /// Milliseconds from the job's `available_at` to its start.
    pub wait: String,
    /// CPU milliseconds the worker used while it ran the job.
    pub cpu: String,
    /// The worker's peak resident set while it ran the job, KiB.
    pub memory: String,
}

/// Metric rows deleted per statement by [`Broker::trim_metrics`].
pub const TRIM_BATCH: i64 = 10_000;

impl Broker {
    /// Now by the database's clock: a test clock's time, or this host's clock corrected by the
    /// offset to the database's seen at registration and at each heartbeat (every half lease).
    pub fn database_time(&self) -> SystemTime {
        if let Some(now) = self.clock.now() {
            return now;
        }
        let offset = self
            .clock_offset_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        let here = SystemTime::now();
        let magnitude = Duration::from_millis(offset.unsigned_abs());
        if offset >= 0 {
            here.checked_add(magnitude).unwrap_or(here)
        } else {
            here.checked_sub(magnitude).unwrap_or(here)
        }
    }

    /// Writes (or rewrites) this node's rows for these minutes, in one statement, within
    /// [`Broker::call_deadline`].
    pub async fn record_metrics(&self, rows: &[MinuteRow]) -> Result<(), BrokerError> {
        const ABOUT: &str = "recording metrics";
        if rows.is_empty() {
            return Ok(());
        }
        let column = |f: fn(&MinuteRow) -> String| rows.iter().map(f).collect::<Vec<String>>();
        let count = |f: fn(&MinuteRow) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
        let minutes = count(|r| r.minute);
        let queues = column(|r| r.queue.clone());
        let classes = column(|r| r.class.clone());
        let completed = count(|r| r.completed);
        let failed = count(|r| r.failed);
        let released = count(|r| r.released);
        let runtime = column(|r| r.runtime.clone());
        let wait = column(|r| r.wait.clone());
        let cpu = column(|r| r.cpu.clone());
        let memory = column(|r| r.memory.clone());
        let node = self.node();
        let hostname = self.hostname();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 12] = [
            &node, &hostname, &minutes, &queues, &classes, &completed, &failed, &released,
            &runtime, &wait, &cpu, &memory,
        ];
        self.side_execute(
            ABOUT,
            include_str!("../queries/record_metrics.sql"),
            &params,
        )
        .await
        .map(|_| ())
    }

    /// Retention: deletes metric rows older than `older_than` by the database's clock, oldest
    /// first, [`TRIM_BATCH`] per statement, until fewer than a batch are left or `budget` has
    /// passed; returns how many it deleted. Each statement has [`Broker::call_deadline`].
    pub async fn trim_metrics(
        &self,
        older_than: Duration,
        budget: Duration,
    ) -> Result<u64, BrokerError> {
        let minutes = i32::try_from(older_than.as_secs() / 60).unwrap_or(i32::MAX);
        self.side_trim(
            "deleting old metrics",
            include_str!("../queries/trim_metrics.sql"),
            &minutes,
            TRIM_BATCH,
            budget,
        )
        .await
    }

    /// Retention of deduplication ids (`drover.dedup`): deletes those whose window ended, in
    /// batches on the side connection, as the metrics' retention does. An expired id no longer
    /// drops a dispatch whether or not it is deleted; this keeps the table small.
    pub async fn purge_dedup(&self, budget: Duration) -> Result<u64, BrokerError> {
        self.side_trim(
            "deleting expired deduplication ids",
            include_str!("../queries/purge_dedup.sql"),
            &0.0f64,
            TRIM_BATCH,
            budget,
        )
        .await
    }

    /// Per queue, how long its oldest available job has waited (the database's clock); queues
    /// with no available job are absent. Within [`Broker::call_deadline`].
    pub async fn oldest_waits(
        &self,
        queues: &[String],
    ) -> Result<Vec<(String, Duration)>, BrokerError> {
        let now = self.clock.now();
        let rows = self
            .side_query(
                "reading the queues' oldest waits",
                include_str!("../queries/shared/oldest_wait.sql"),
                &[&queues, &now],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), crate::clock::seconds(r.get(1))))
            .collect())
    }

    /// Takes the right to alert about `queue`, whose oldest job has waited `waited`: the time
    /// taken (seconds since the epoch) when no alert about it fired within `cooldown` (by any
    /// master on this database), else `None`.
    pub async fn claim_long_wait_notice(
        &self,
        queue: &str,
        waited: Duration,
        cooldown: Duration,
    ) -> Result<Option<f64>, BrokerError> {
        let (secs, cooldown, now) = (
            waited.as_secs_f64(),
            cooldown.as_secs_f64(),
            self.clock.now(),
        );
        let rows = self
            .side_query(
                "recording a long-wait alert",
                include_str!("../queries/long_wait_notice.sql"),
                &[&queue, &secs, &cooldown, &now],
            )
            .await?;
        Ok(rows.first().map(|r| r.get(0)))
    }

    /// Gives back the right to alert taken at `taken` (an alert that could not be sent).
    pub async fn release_long_wait_notice(
        &self,
        queue: &str,
        taken: f64,
    ) -> Result<(), BrokerError> {
        self.side_execute(
            "giving back a long-wait alert",
            include_str!("../queries/long_wait_release.sql"),
            &[&queue, &taken],
        )
        .await
        .map(|_| ())
    }

    /// Writes this master's status document (JSON) into its node row (every memory tick), on
    /// the side connection, within [`Broker::call_deadline`].
    pub async fn publish_status(&self, status: &str) -> Result<(), BrokerError> {
        let (node, now) = (self.node(), self.clock.now());
        self.side_execute(
            "publishing this master's status",
            "UPDATE drover.nodes SET status = $2::text::jsonb, status_at = coalesce($3::timestamptz, now()) WHERE id = $1",
            &[&node, &status, &now],
        )
        .await
        .map(|_| ())
    }

    /// The side connection, locked and open: the lock waited for at most
    /// [`Broker::call_deadline`] (a long write holding it must not make every other caller wait
    /// without end), the connection opened if there is none or it closed.
    async fn side_connected(
        &self,
        about: &'static str,
    ) -> Result<tokio::sync::MutexGuard<'_, Option<Client>>, BrokerError> {
        let mut side = tokio::time::timeout(self.call_deadline(), self.side.lock())
            .await
            .map_err(|_| BrokerError::TimedOut { about })?;
        if side.as_ref().is_none_or(Client::is_closed) {
            let client = tokio::time::timeout(
                self.call_deadline(),
                connect::connect_once_with(&self.config.database_url, &self.config.session()),
            )
            .await
            .map_err(|_| BrokerError::TimedOut { about })??;
            *side = Some(client);
        }
        Ok(side)
    }

    /// A query on the side connection (never the lease connection), within
    /// [`Broker::call_deadline`].
    pub(crate) async fn side_query(
        &self,
        about: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, BrokerError> {
        let mut side = self.side_connected(about).await?;
        let client = side.as_ref().expect("connected");
        let done = tokio::time::timeout(self.call_deadline(), client.query(sql, params)).await;
        settle_side(&mut side, about, done)
    }

    /// [`Broker::side_query`] for a statement without rows: how many rows it changed.
    pub(crate) async fn side_execute(
        &self,
        about: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, BrokerError> {
        let mut side = self.side_connected(about).await?;
        let client = side.as_ref().expect("connected");
        let done = tokio::time::timeout(self.call_deadline(), client.execute(sql, params)).await;
        settle_side(&mut side, about, done)
    }

    /// Retention by age in batches (`sql`: `$1` the test clock's now or NULL, `$2` the age,
    /// `$3` the batch): one statement after another until fewer than `batch` go or `budget` has
    /// passed; returns how many were deleted.
    pub(crate) async fn side_trim(
        &self,
        about: &'static str,
        sql: &str,
        age: &(dyn ToSql + Sync),
        batch: i64,
        budget: Duration,
    ) -> Result<u64, BrokerError> {
        let until = std::time::Instant::now() + budget;
        let mut deleted = 0;
        loop {
            let now = self.clock.now();
            let n = self.side_execute(about, sql, &[&now, age, &batch]).await?;
            deleted += n;
            if n < batch as u64 || std::time::Instant::now() >= until {
                return Ok(deleted);
            }
        }
    }
}

/// The outcome of a statement on the side connection: a timeout or a closed connection drops
/// it, so the next call opens a fresh one (never the lease connection).
fn settle_side<T>(
    side: &mut Option<Client>,
    about: &'static str,
    done: Result<Result<T, tokio_postgres::Error>, tokio::time::error::Elapsed>,
) -> Result<T, BrokerError> {
    match done {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => {
            if side.as_ref().is_none_or(Client::is_closed) {
                *side = None;
            }
            Err(BrokerError::query(about)(e))
        }
        Err(_) => {
            *side = None;
            Err(BrokerError::TimedOut { about })
        }
    }
}
