//! Lease expiry: renewing the leases this node holds (`queries/renew.sql`), and taking back the
//! leases that expired, whoever held them (`queries/reap_expired.sql`).

use crate::leases::{Lease, Renewed};
use crate::{Broker, BrokerError};

/// What one pass of taking back expired leases did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReapOutcome {
    /// Jobs given back to their queue, their attempt charged.
    pub released: i64,
    /// Jobs out of attempts: moved to `drover.failed_jobs`.
    pub failed: i64,
}

impl Broker {
    /// Extends the given leases to the database's now + lease; returns what became of each
    /// ([`Renewed`]: renewed, completed in its job's own transaction, or busy; a lease whose
    /// token moved on is in none). Within [`Broker::renew_deadline`].
    ///
    /// A caller that tracks when its leases end should count from the moment it sent the
    /// renewal, on its own monotonic clock: the database's now is never earlier than that.
    pub async fn renew(&self, leases: &[Lease]) -> Result<Renewed, BrokerError> {
        if leases.is_empty() {
            return Ok(Renewed::default());
        }
        let call = async {
            let conn = self.conn().await?;
            let lease = self.config.lease.as_secs_f64();
            let ids: Vec<i64> = leases.iter().map(|l| l.id).collect();
            let tokens: Vec<i64> = leases.iter().map(|l| l.token).collect();
            let rows = conn
                .client
                .query(
                    &conn.renew,
                    &[&ids, &tokens, &self.node, &lease, &self.clock.now()],
                )
                .await
                .map_err(BrokerError::query("renewing leases"))?;
            let mut found = Renewed::default();
            for row in &rows {
                let id = row.get(0);
                match row.get::<_, &str>(1) {
                    "renewed" => found.renewed.push(id),
                    "completed" => found.completed.push(id),
                    _ => found.busy.push(id),
                }
            }
            Ok(found)
        };
        self.bounded("renewing leases", self.renew_deadline(), call)
            .await
    }

    /// Takes back jobs whose lease expired by the database's clock (their master died or lost
    /// the database). They keep their place in line. Within [`Broker::call_deadline`].
    pub async fn reap_expired(&self) -> Result<ReapOutcome, BrokerError> {
        const ABOUT: &str = "taking back expired leases";
        let call = async {
            let conn = self.conn().await?;
            let row = conn
                .client
                .query_one(&conn.reap, &[&self.clock.now()])
                .await
                .map_err(BrokerError::query(ABOUT))?;
            // The reap tick is also when deferred group moves are finished while no settle runs.
            // The reap above is committed whatever happens here; the next tick tries again.
            if let Err(e) = conn.client.query_one(&conn.catch_up, &[]).await {
                tracing::debug!("catching up on ordered groups after a reap: {e}");
            }
            let outcome = ReapOutcome {
                released: row.get(0),
                failed: row.get(1),
            };
            if outcome.released > 0 {
                // Back in their place, perhaps before a claim cursor's floor.
                self.forget_cursors();
            }
            Ok(outcome)
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}
