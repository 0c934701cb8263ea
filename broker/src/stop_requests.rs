//! Requests to stop a running job (`drover.stop_requests`, migrations/0014_console.sql): the
//! console or `drover:stop-job` writes one naming the job, the attempt (its lease token), how to
//! stop it and how to settle it; the master that holds that lease reads it
//! ([`Broker::stop_requests`]), kills exactly the worker running the job, and marks it carried
//! out ([`Broker::stops_taken`]). How the job is then settled is the master's rule
//! (`rules::stop_request`).

use crate::leases::JobId;
use crate::{Broker, BrokerError};

/// One request to stop a job, as the table holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopRequest {
    /// The job to stop.
    pub job: JobId,
    /// The attempt: the lease token of the claim that leased it. Another attempt is not stopped.
    pub token: i64,
    /// `graceful` or `kill` (checked by the table; read by `rules::stop_request`).
    pub mode: String,
    /// `fail` or `release`.
    pub outcome: String,
    /// Who asked, as the console names them.
    pub by: String,
}

impl Broker {
    /// The requests to stop jobs this master holds, for the attempts it holds, not yet carried
    /// out. Within [`Broker::call_deadline`].
    pub async fn stop_requests(&self) -> Result<Vec<StopRequest>, BrokerError> {
        const ABOUT: &str = "reading the requests to stop jobs this master holds";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(
                    include_str!("../queries/stop_requests.sql"),
                    &[&self.node()],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows
                .iter()
                .map(|r| StopRequest {
                    job: r.get(0),
                    token: r.get(1),
                    mode: r.get(2),
                    outcome: r.get(3),
                    by: r.get(4),
                })
                .collect())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Marks the requests of `jobs`, attempts `tokens`, carried out by this master (it killed
    /// their workers).
    pub async fn stops_taken(&self, jobs: &[JobId], tokens: &[i64]) -> Result<(), BrokerError> {
        const ABOUT: &str = "marking stop requests carried out";
        let call = async {
            let conn = self.conn().await?;
            conn.client
                .execute(
                    include_str!("../queries/stop_requests_taken.sql"),
                    &[&self.node(), &jobs, &tokens],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}
