//! The jobs that wait where no claim sees them — behind their ordered group's head, or for a
//! limit's key — and how long the longest of them has been due, per queue
//! (`queries/oldest_held_wait.sql`). For long-wait alerts: such a job waits for its group or its
//! key, not for a worker, so the queue's own oldest wait never counts it, and the alert names
//! what it waits for.

use std::time::Duration;

use crate::clock::seconds;
use crate::{Broker, BrokerError};

/// What a held job waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldBy {
    /// Its ordered group's head (docs/ordered-groups.md).
    Group(String),
    /// A limit's key (docs/limits.md).
    Key(String),
}

/// Per queue, the held job that has been due longest.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldWait {
    pub queue: String,
    /// What it waits for.
    pub held_by: HeldBy,
    /// How long it has been due.
    pub waited: Duration,
}

impl Broker {
    /// Per queue of `queues`, the held job that has been due longest ([`HeldWait`]); queues
    /// with none are absent. On the side connection, within [`Broker::call_deadline`].
    pub async fn oldest_held_waits(&self, queues: &[String]) -> Result<Vec<HeldWait>, BrokerError> {
        let now = self.clock.now();
        let rows = self
            .side_query(
                "reading the oldest waits behind groups and limits",
                include_str!("../queries/oldest_held_wait.sql"),
                &[&queues, &now],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let name: String = r.get(2);
                HeldWait {
                    queue: r.get(0),
                    held_by: if r.get::<_, &str>(1) == "key" {
                        HeldBy::Key(name)
                    } else {
                        HeldBy::Group(name)
                    },
                    waited: seconds(r.get(3)),
                }
            })
            .collect())
    }
}
