//! What exactly-once completion leaves behind (migration 0015, docs/exactly-once.md): the
//! completion rows no master learned and the recorded steps of `once()`, trimmed by age on the
//! side connection (`queries/purge_completions.sql`, `queries/purge_steps.sql`). Learning a
//! completion is part of settling ([`crate::settle`]) and renewing ([`crate::expiry`]).

use std::time::Duration;

use crate::metrics::TRIM_BATCH;
use crate::{Broker, BrokerError};

/// How long a completion row no master learned is kept: far past any lease and outage grace,
/// so a master that comes back from an outage still learns what its workers completed.
pub const COMPLETIONS_KEPT: Duration = Duration::from_secs(24 * 3600);

/// How long a step's recorded result is kept: a job retried within it (Laravel's tries, a
/// `queue:retry` of a failed job) skips the steps it already ran.
pub const STEPS_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

impl Broker {
    /// Deletes completion rows older than [`COMPLETIONS_KEPT`] and steps older than
    /// [`STEPS_KEPT`], by the database's clock, spending at most `budget` on each; returns how
    /// many rows it deleted.
    pub async fn purge_completions(&self, budget: Duration) -> Result<u64, BrokerError> {
        let completions = self
            .side_trim(
                "deleting completion rows no master learned",
                include_str!("../queries/purge_completions.sql"),
                &COMPLETIONS_KEPT.as_secs_f64(),
                TRIM_BATCH,
                budget,
            )
            .await?;
        let steps = self
            .side_trim(
                "deleting old recorded steps",
                include_str!("../queries/purge_steps.sql"),
                &STEPS_KEPT.as_secs_f64(),
                TRIM_BATCH,
                budget,
            )
            .await?;
        Ok(completions + steps)
    }
}
