//! Admission of jobs waiting on concurrency keys (`migrations/0011_concurrency_limits.sql`,
//! docs/limits.md): a job dispatched under a key waits in `drover.slot_waiting` until the key has
//! room, then moves into `drover.jobs`, where the claim sees it like any other. A settle that
//! frees a slot admits the next job itself when it can take the key's lock at once; everything
//! else — an enqueue, a settle that could not — leaves a note whose NOTIFY asks a master for a
//! pass ([`Broker::admit_waiting`]). The reap tick runs one too, so a note whose NOTIFY was
//! missed (the LISTEN connection was down) waits no longer than half a lease.

use crate::{Broker, BrokerError};

impl Broker {
    /// Admits the waiting jobs of every noted key that has room now; returns how many moved
    /// into `drover.jobs` (their insert wakes the masters' claims). Within
    /// [`Broker::call_deadline`].
    pub async fn admit_waiting(&self) -> Result<u64, BrokerError> {
        const ABOUT: &str = "admitting jobs waiting on concurrency keys";
        let call = async {
            let conn = self.conn().await?;
            let row = conn
                .client
                .query_one(&conn.admit, &[])
                .await
                .map_err(BrokerError::query(ABOUT))?;
            let admitted: i32 = row.get(0);
            Ok(u64::try_from(admitted).unwrap_or(0))
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}
