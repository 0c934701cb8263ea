//! What the master records about finished jobs and about itself, in the database: per-minute
//! metric rows (`drover.metrics`, written whole per minute and replaced while the minute is open),
//! their retention, and the database's time by which minutes are placed. The master aggregates;
//! this module only writes (docs/metrics.md).

use std::time::{Duration, SystemTime};

use crate::{Broker, BrokerError};

/// One node's totals for one minute, queue and job class. The distributions are JSON documents
/// the master builds (`{"n","sum","max","p50","p95","buckets"}`), stored as `jsonb`.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteRow {
    /// Minutes since the Unix epoch, by the database's clock.
    pub minute: i64,
    pub queue: String,
    /// The job's class (Laravel's `displayName`), or the payload's `job` for plain jobs.
    pub job: String,
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
        let jobs = column(|r| r.job.clone());
        let completed = count(|r| r.completed);
        let failed = count(|r| r.failed);
        let released = count(|r| r.released);
        let runtime = column(|r| r.runtime.clone());
        let wait = column(|r| r.wait.clone());
        let cpu = column(|r| r.cpu.clone());
        let memory = column(|r| r.memory.clone());
        let call = async {
            let conn = self.conn().await?;
            conn.client
                .execute(
                    include_str!("../queries/record_metrics.sql"),
                    &[
                        &self.node(),
                        &self.hostname(),
                        &minutes,
                        &queues,
                        &jobs,
                        &completed,
                        &failed,
                        &released,
                        &runtime,
                        &wait,
                        &cpu,
                        &memory,
                    ],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Retention: deletes metric rows older than `older_than` by the database's clock, oldest
    /// first, [`TRIM_BATCH`] per statement, until fewer than a batch are left or `budget` has
    /// passed; returns how many it deleted. Each statement has [`Broker::call_deadline`].
    pub async fn trim_metrics(
        &self,
        older_than: Duration,
        budget: Duration,
    ) -> Result<u64, BrokerError> {
        const ABOUT: &str = "deleting old metrics";
        let until = std::time::Instant::now() + budget;
        let minutes = i32::try_from(older_than.as_secs() / 60).unwrap_or(i32::MAX);
        let mut deleted = 0;
        loop {
            let call = async {
                let conn = self.conn().await?;
                conn.client
                    .execute(
                        include_str!("../queries/trim_metrics.sql"),
                        &[&self.clock.now(), &minutes, &TRIM_BATCH],
                    )
                    .await
                    .map_err(BrokerError::query(ABOUT))
            };
            let batch = self.bounded(ABOUT, self.call_deadline(), call).await?;
            deleted += batch;
            if batch < TRIM_BATCH as u64 || std::time::Instant::now() >= until {
                return Ok(deleted);
            }
        }
    }

    /// Per queue, how long its oldest available job has waited (the database's clock); queues
    /// with no available job are absent. Within [`Broker::call_deadline`].
    pub async fn oldest_waits(
        &self,
        queues: &[String],
    ) -> Result<Vec<(String, Duration)>, BrokerError> {
        const ABOUT: &str = "reading the queues' oldest waits";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(
                    include_str!("../queries/oldest_wait.sql"),
                    &[&queues, &self.clock.now()],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows
                .iter()
                .map(|r| {
                    let secs: f64 = r.get(1);
                    (
                        r.get(0),
                        Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX),
                    )
                })
                .collect())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}
