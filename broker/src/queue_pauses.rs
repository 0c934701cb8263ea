//! Queues paused by name for every master of the database (`drover.paused_queues`: Laravel's
//! `queue:pause`): reading them (`queries/shared/paused_queues.sql`, which the dashboard runs
//! too) and confirming the pauses this master holds (`queries/confirm_pauses.sql`), so whoever
//! paused them stops waiting.

use crate::{Broker, BrokerError};

/// A queue paused by name (`drover.paused_queues`), as read.
#[derive(Debug, Clone, PartialEq)]
pub struct PausedQueue {
    /// The queue's name.
    pub queue: String,
    /// How long the pause has left, by the database's clock when it was read; `None`: until
    /// resumed.
    pub left: Option<std::time::Duration>,
    /// The pause's version: a queue paused again is a new pause, which a master confirms anew.
    pub version: i64,
}

impl Broker {
    /// The queues paused by name (`drover.paused_queues`: Laravel's `queue:pause`), each with how
    /// long its pause has left (`None`: until resumed) and its version. Within
    /// [`Broker::call_deadline`].
    pub async fn paused_queues(&self) -> Result<Vec<PausedQueue>, BrokerError> {
        const ABOUT: &str = "reading the paused queues";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(
                    include_str!("../queries/shared/paused_queues.sql"),
                    &[&self.clock.now()],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows
                .iter()
                .map(|r| {
                    let left: Option<f64> = r.get(1);
                    PausedQueue {
                        queue: r.get(0),
                        left: left.map(crate::clock::seconds),
                        version: r.get(2),
                    }
                })
                .collect())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Records that this master holds the pauses of these versions (`confirm_pauses.sql`): whoever
    /// paused their queues stops waiting for it. An error when this master's node row is gone
    /// (the next heartbeat registers it again; the confirmation is tried again then). Within
    /// [`Broker::call_deadline`].
    pub async fn confirm_pauses(&self, versions: &[i64]) -> Result<(), BrokerError> {
        const ABOUT: &str = "confirming the queue pauses this master holds";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .execute(
                    include_str!("../queries/confirm_pauses.sql"),
                    &[&self.node, &versions],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            if rows != 1 {
                return Err(BrokerError::NodeGone {
                    about: ABOUT,
                    node: self.node,
                });
            }
            Ok(())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}
