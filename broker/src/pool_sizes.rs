//! Pool sizes set from the console for one master (`drover.pool_sizes`,
//! migrations/0014_console.sql): read ([`Broker::pool_sizes`]), answered
//! ([`Broker::pool_sizes_applied`]) and forgotten when the master re-reads its configuration
//! ([`Broker::forget_pool_sizes`]). What the master does with one is `rules::pool_size`.

use crate::{Broker, BrokerError};

/// A size the console asked for one of this master's pools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSize {
    /// The pool, by its name in `drover status` (a member of a per-queue pool: `name:queue`).
    pub pool: String,
    /// The processes wanted (0 to 1000, checked by the table).
    pub processes: i32,
    /// Who asked, as the console named them.
    pub by: String,
}

impl Broker {
    /// The sizes set for this master's pools and not applied since. Within
    /// [`Broker::call_deadline`].
    pub async fn pool_sizes(&self) -> Result<Vec<PoolSize>, BrokerError> {
        const ABOUT: &str = "reading the pool sizes the console set for this master";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(include_str!("../queries/pool_sizes.sql"), &[&self.node()])
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows
                .iter()
                .map(|r| PoolSize {
                    pool: r.get(0),
                    processes: r.get(1),
                    by: r.get(2),
                })
                .collect())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Records what this master did with the sizes of `pools` (as read: `processes`):
    /// `outcomes`, one each. A row whose size was set again since is left for the next reading.
    pub async fn pool_sizes_applied(
        &self,
        pools: &[String],
        processes: &[i32],
        outcomes: &[String],
    ) -> Result<(), BrokerError> {
        const ABOUT: &str = "recording what became of the pool sizes the console set";
        let call = async {
            let conn = self.conn().await?;
            conn.client
                .execute(
                    include_str!("../queries/pool_sizes_applied.sql"),
                    &[&self.node(), &pools, &processes, &outcomes],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Forgets the sizes set for this master: it re-read its configuration.
    pub async fn forget_pool_sizes(&self) -> Result<(), BrokerError> {
        const ABOUT: &str = "forgetting the pool sizes the console set (a reload)";
        let call = async {
            let conn = self.conn().await?;
            conn.client
                .execute(
                    include_str!("../queries/pool_sizes_forget.sql"),
                    &[&self.node()],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}
