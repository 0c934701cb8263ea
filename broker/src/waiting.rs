//! The jobs that wait for a worker: how many per queue (`queries/backlog.sql`) and when the
//! earliest delayed one is due (`queries/next_due.sql`).

use std::time::Duration;

use crate::{Broker, BrokerError};

impl Broker {
    /// How long until the earliest delayed job of these queues is due, by the database's clock;
    /// `None` when no job waits. Wait for it on a monotonic clock (it is measured from when the
    /// statement ran, so a timer set on receipt fires at most a round trip late, never early
    /// by the database's reckoning). Within [`Broker::call_deadline`].
    pub async fn next_due(&self, queues: &[String]) -> Result<Option<Duration>, BrokerError> {
        const ABOUT: &str = "finding the next delayed job";
        let call = async {
            let conn = self.conn().await?;
            let row = conn
                .client
                .query_one(&conn.next_due, &[&queues, &self.clock.now()])
                .await
                .map_err(BrokerError::query(ABOUT))?;
            let seconds: Option<f64> = row.get(0);
            Ok(seconds.map(crate::clock::seconds))
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// How many jobs wait in each of these queues (available now by the database's clock, not
    /// leased), each counted up to `cap`. Within [`Broker::call_deadline`].
    pub async fn backlog(
        &self,
        queues: &[String],
        cap: i64,
    ) -> Result<Vec<(String, i64)>, BrokerError> {
        const ABOUT: &str = "counting the queues' backlog";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(
                    include_str!("../queries/backlog.sql"),
                    &[&queues, &self.clock.now(), &cap],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}
