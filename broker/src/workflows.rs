//! What durable workflows leave behind (migration 0016, docs/workflows.md): workflows that ended
//! long ago, with their nodes, steps and signals, and the progress rows of jobs that left —
//! trimmed by age on the side connection (`queries/purge_workflows.sql`,
//! `queries/purge_progress.sql`). A workflow's graph moves inside the database (the trigger on
//! drover.jobs); the master only pipelines `drover.workflows_catch_up()` with the groups' catch-up
//! (`queries/groups_catch_up.sql`).

use std::time::Duration;

use crate::metrics::TRIM_BATCH;
use crate::{Broker, BrokerError};

/// How long an ended workflow is kept for the console and its results: as long as a failed job.
pub const WORKFLOWS_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a job's last progress report is kept after the job left drover.jobs: the console
/// shows where a job that just ended got to.
pub const PROGRESS_KEPT: Duration = Duration::from_secs(3600);

impl Broker {
    /// Deletes workflows that ended more than [`WORKFLOWS_KEPT`] ago and progress rows of jobs
    /// gone for [`PROGRESS_KEPT`], by the database's clock, spending at most `budget` on each;
    /// returns how many rows (workflows, progress reports) it deleted.
    pub async fn purge_workflows(&self, budget: Duration) -> Result<u64, BrokerError> {
        let workflows = self
            .side_trim(
                "deleting workflows that ended long ago",
                include_str!("../queries/purge_workflows.sql"),
                &WORKFLOWS_KEPT.as_secs_f64(),
                TRIM_BATCH,
                budget,
            )
            .await?;
        let progress = self
            .side_trim(
                "deleting the progress of jobs that ended",
                include_str!("../queries/purge_progress.sql"),
                &PROGRESS_KEPT.as_secs_f64(),
                TRIM_BATCH,
                budget,
            )
            .await?;
        Ok(workflows + progress)
    }
}
