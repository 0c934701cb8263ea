//! Ordered groups as operators see them: how many groups each queue has, which are held and by
//! what, and the age of the oldest head (docs/ordered-groups.md). The groups themselves live in
//! the schema (`migrations/0005_groups.sql`): enqueue, settle and the head's move are SQL.
//!
//! The counts and the held groups are read with `queries/shared/`'s statements, which the
//! dashboard runs too (php-client's GroupRepository), so both say the same of the same rows.

use std::time::Duration;

use crate::clock::seconds;
use crate::{Broker, BrokerError};

/// The groups of one queue.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupStats {
    pub queue: String,
    /// Groups that have jobs (counted up to the caller's cap).
    pub groups: i64,
    /// Of those, groups held by a job that failed for good.
    pub held: i64,
    /// Jobs waiting behind the heads.
    pub waiting: i64,
    /// How long the oldest head has been its group's head; `None` when no group has one.
    pub oldest_head: Option<Duration>,
}

/// A group held by a failed job.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldGroup {
    pub queue: String,
    pub group: String,
    /// The failed job's id in drover.
    pub job: i64,
    /// Its Laravel uuid (what `queue:retry` and `queue:forget` name), or its id as text.
    pub uuid: Option<String>,
    pub error: Option<String>,
    /// When it was held, seconds since the epoch by the database's clock.
    pub since: Option<f64>,
    /// Jobs waiting behind it.
    pub waiting: i64,
}

impl Broker {
    /// Per queue, its groups ([`GroupStats`]), each count capped at `cap`. On the side
    /// connection, within [`Broker::call_deadline`].
    pub async fn group_stats(
        &self,
        queues: &[String],
        cap: i64,
    ) -> Result<Vec<GroupStats>, BrokerError> {
        let now = self.clock.now();
        let rows = self
            .side_query(
                "reading the queues' ordered groups",
                include_str!("../queries/shared/group_stats.sql"),
                &[&queues, &now, &cap],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| GroupStats {
                queue: r.get(0),
                groups: r.get(1),
                held: r.get(2),
                waiting: r.get(3),
                oldest_head: r.get::<_, Option<f64>>(4).map(seconds),
            })
            .collect())
    }

    /// The held groups of these queues, oldest first, at most `limit`.
    pub async fn held_groups(
        &self,
        queues: &[String],
        limit: i64,
    ) -> Result<Vec<HeldGroup>, BrokerError> {
        let rows = self
            .side_query(
                "reading the held ordered groups",
                include_str!("../queries/shared/held_groups.sql"),
                &[&queues, &limit],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| HeldGroup {
                queue: r.get(0),
                group: r.get(1),
                job: r.get::<_, Option<i64>>(2).unwrap_or_default(),
                uuid: r.get(3),
                error: r.get(4),
                since: r.get(5),
                waiting: r.get(6),
            })
            .collect())
    }
}
