//! Limits as operators see them (docs/limits.md): the keys jobs wait for, most waited for first,
//! with their line, the slots held, the rate used and the oldest wait. The limits themselves are
//! SQL (`migrations/0011_limits.sql`). Read with `queries/shared/limit_keys.sql`, which the
//! dashboard runs too (php-client's LimitRepository), so both say the same of the same rows.

use std::time::Duration;

use crate::clock::seconds;
use crate::{Broker, BrokerError};

/// One key jobs wait for.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitKeyStats {
    pub key: String,
    /// Jobs in its line.
    pub waiting: i64,
    /// Concurrency slots held (jobs out under it, or still taking later limits).
    pub held: i64,
    /// Starts used in its rate's open window; `None`: no window open.
    pub rate_used: Option<i64>,
    /// When that window ends.
    pub window_ends_in: Option<Duration>,
    /// How long the oldest due job of its line has been due; `None`: none is due.
    pub oldest_wait: Option<Duration>,
}

impl Broker {
    /// The `top` keys most waited for ([`LimitKeyStats`]). On the side connection, within
    /// [`Broker::call_deadline`].
    pub async fn limit_keys(&self, top: i64) -> Result<Vec<LimitKeyStats>, BrokerError> {
        let now = self.clock.now();
        let rows = self
            .side_query(
                "reading the keys jobs wait for",
                include_str!("../queries/shared/limit_keys.sql"),
                &[&top, &now],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| LimitKeyStats {
                key: r.get(0),
                waiting: r.get(1),
                held: r.get(2),
                rate_used: r.get(3),
                window_ends_in: r.get::<_, Option<f64>>(4).map(seconds),
                oldest_wait: r.get::<_, Option<f64>>(5).map(seconds),
            })
            .collect())
    }
}
