//! Retention of failed jobs: deleting the rows of `drover.failed_jobs` older than the retention
//! period, in small batches on a connection of their own (`queries/purge_failed.sql`).

use std::time::Duration;

use tokio::time::Instant;

use crate::{connect, Broker, BrokerError};

/// Failed jobs deleted per statement by [`Broker::purge_failed`]: small enough that no
/// statement holds many row locks or runs long.
pub const PURGE_BATCH: i64 = 10_000;

impl Broker {
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
}
