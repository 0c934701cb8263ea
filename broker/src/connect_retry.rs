//! Connecting at start-up until the database answers ([`connect_with_retry`]): the retry policy
//! over [`crate::connect`]'s one attempt, with the backoff and the reporting a master waiting
//! for its database needs. It reads the [`BrokerConfig`]; `connect` itself knows nothing of it,
//! so the configuration may check a connection string with `connect`'s parser.

use std::time::Instant;

use tokio_postgres::Client;

use crate::config::BrokerConfig;
use crate::connect::{connect_once_to, Backoff, STILL_FAILING_EVERY};
use crate::error::BrokerError;

/// Connects for the master at start-up, with [`BrokerConfig::session`]'s timeouts.
///
/// Gives up at once, returning the error with the server's message, when it is
/// [permanent](BrokerError::is_permanent) (wrong password, unknown database or role, no
/// privilege, a configuration or certificate problem) or is a failed statement rather than a
/// missing connection; the master then exits non-zero instead of hanging in start-up. Retries
/// everything else (server down, starting up, too many connections, network) with exponential
/// backoff from `connect_backoff_min` to `connect_backoff_max`, each wait drawn between half
/// and all of the current step (jitter). Logs when the state changes rather than per attempt:
/// the first failure (error), then "still cannot connect" at most every
/// [`STILL_FAILING_EVERY`] (warning), then "connected after N attempts" (info).
pub async fn connect_with_retry(config: &BrokerConfig) -> Result<Client, BrokerError> {
    Ok(connect_with_retry_to(config).await?.0)
}

/// [`connect_with_retry`], with the "host:port/db" of the host that answered.
pub async fn connect_with_retry_to(config: &BrokerConfig) -> Result<(Client, String), BrokerError> {
    let session = config.session();
    let mut backoff = Backoff::new(config.connect_backoff_min, config.connect_backoff_max);
    let mut attempts: u32 = 0;
    let mut failing: Option<(Instant, Instant)> = None; // (first failure, last report)
    loop {
        attempts += 1;
        let e = match connect_once_to(&config.database_url, &session).await {
            Ok((client, address)) => {
                if let Some((since, _)) = failing {
                    tracing::info!(
                        "connected to PostgreSQL at {address} after {attempts} attempts ({}s)",
                        since.elapsed().as_secs()
                    );
                }
                return Ok((client, address));
            }
            Err(e) => e,
        };
        if e.is_permanent() || !e.is_connection_lost() {
            return Err(e);
        }
        let now = Instant::now();
        match &mut failing {
            None => {
                tracing::error!(
                    "{e}; retrying until it answers (backing off from {:?} to {:?} between attempts; a reminder follows every {}s)",
                    config.connect_backoff_min,
                    config.connect_backoff_max,
                    STILL_FAILING_EVERY.as_secs()
                );
                failing = Some((now, now));
            }
            Some((since, reported)) if now.duration_since(*reported) >= STILL_FAILING_EVERY => {
                tracing::warn!(
                    "still cannot connect ({attempts} attempts in {}s), last error: {e}",
                    now.duration_since(*since).as_secs()
                );
                *reported = now;
            }
            Some(_) => tracing::debug!("connection attempt {attempts} failed: {e}"),
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}
