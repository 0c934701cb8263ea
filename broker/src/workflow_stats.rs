//! Workflows as operators see them (docs/workflows.md): how many are pending and running, their
//! nodes waiting for a signal or a time, and how many failed in the last hour — for `drover
//! status` and `/metrics`, in one bounded statement (`queries/workflow_counts.sql`). The graph
//! itself moves inside the database (migration 0016).

use crate::{Broker, BrokerError};

/// Workflows are counted up to this many per figure.
pub const WORKFLOWS_COUNTED: i64 = 100_000;

/// The nodes waiting for a signal or a time are counted among those of this many running
/// workflows, the newest.
pub const WORKFLOWS_READ_FOR_WAITS: i64 = 10_000;

/// The workflows of the database, fleet-wide (sub-workflows counted as workflows of their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkflowCounts {
    /// Dispatched and not started: a sub-workflow until its node in the parent is released.
    pub pending: i64,
    pub running: i64,
    /// Nodes released once a signal is sent (`signal:` in the declaration), not yet sent.
    pub nodes_waiting_for_signal: i64,
    /// Nodes released whose steps wait in drover.jobs for their time (`wait:`).
    pub nodes_waiting_for_time: i64,
    /// Workflows that ended failed in the last hour.
    pub failed_last_hour: i64,
}

impl Broker {
    /// The [`WorkflowCounts`]: each count up to [`WORKFLOWS_COUNTED`], the waiting nodes among
    /// those of the [`WORKFLOWS_READ_FOR_WAITS`] newest running workflows. On the side
    /// connection, within [`Broker::call_deadline`].
    pub async fn workflow_counts(&self) -> Result<WorkflowCounts, BrokerError> {
        let now = self.clock.now();
        let rows = self
            .side_query(
                "counting workflows",
                include_str!("../queries/workflow_counts.sql"),
                &[&now, &WORKFLOWS_COUNTED, &WORKFLOWS_READ_FOR_WAITS],
            )
            .await?;
        Ok(rows
            .first()
            .map(|r| WorkflowCounts {
                pending: r.get(0),
                running: r.get(1),
                nodes_waiting_for_signal: r.get(2),
                nodes_waiting_for_time: r.get(3),
                failed_last_hour: r.get(4),
            })
            .unwrap_or_default())
    }
}
