//! Retention: failed jobs older than `failed_retention_days` (hourly, and at start) and
//! deduplication ids whose window ended (every minute). Every master does it; the deletes are
//! idempotent and batched, so two masters at once only share the work.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::Maintenance;

/// How often retention of `drover.failed_jobs` runs.
const PURGE_EVERY: Duration = Duration::from_secs(3600);
/// The most time one retention pass spends deleting; what is left goes at the next.
const PURGE_BUDGET: Duration = Duration::from_secs(10);
/// How often expired deduplication ids are deleted: each lives a window (5 minutes by default),
/// so an hourly pass would keep twelve windows of them.
const DEDUP_PURGE_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Retention {
    /// When failed jobs are next deleted.
    failed_due: Instant,
    /// When expired deduplication ids are next deleted.
    dedup_due: Instant,
}

impl Retention {
    /// Both are due at once.
    pub fn new(now: Instant) -> Retention {
        Retention {
            failed_due: now,
            dedup_due: now,
        }
    }

    /// Starts what is due. `failed_days` 0 keeps failed jobs forever.
    pub fn tick(&mut self, now: Instant, failed_days: u64, store: &Arc<dyn Maintenance>) {
        if failed_days > 0 && now >= self.failed_due {
            self.failed_due = now + PURGE_EVERY;
            // Checked by the configuration (at most MAX_RETENTION_DAYS): no overflow.
            let older_than = Duration::from_secs(failed_days.saturating_mul(86_400));
            let store = store.clone();
            tokio::spawn(async move {
                match store.purge_failed(older_than, PURGE_BUDGET).await {
                    Ok(0) => {}
                    Ok(deleted) => tracing::info!(
                        deleted,
                        days = failed_days,
                        "retention: deleted failed jobs older than {failed_days} days from drover.failed_jobs"
                    ),
                    Err(e) => {
                        tracing::warn!(database = %store.address(), "retention of drover.failed_jobs: {e}")
                    }
                }
            });
        }
        if now >= self.dedup_due {
            self.dedup_due = now + DEDUP_PURGE_EVERY;
            let store = store.clone();
            tokio::spawn(async move {
                match store.purge_dedup(PURGE_BUDGET).await {
                    Ok(0) => {}
                    Ok(deleted) => {
                        tracing::debug!(deleted, "retention: deleted expired deduplication ids")
                    }
                    Err(e) => {
                        tracing::warn!(database = %store.address(), "retention of drover.dedup: {e}")
                    }
                }
                match store.purge_completions(PURGE_BUDGET).await {
                    Ok(0) => {}
                    Ok(deleted) => tracing::debug!(
                        deleted,
                        "retention: deleted old completion rows and recorded steps"
                    ),
                    Err(e) => tracing::warn!(
                        database = %store.address(),
                        "retention of drover.completions and drover.job_steps: {e}"
                    ),
                }
                match store.purge_workflows(PURGE_BUDGET).await {
                    Ok(0) => {}
                    Ok(deleted) => tracing::debug!(
                        deleted,
                        "retention: deleted ended workflows and old progress reports"
                    ),
                    Err(e) => tracing::warn!(
                        database = %store.address(),
                        "retention of drover.workflows and drover.job_progress: {e}"
                    ),
                }
            });
        }
    }
}
