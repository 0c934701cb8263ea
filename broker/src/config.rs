//! The broker's configuration.

use std::time::Duration;

use crate::connect::Session;
use crate::BrokerError;

/// The `statement_timeout` of the connection that compacts `drover.jobs`
/// ([`BrokerConfig::compaction_session`]): VACUUM and REINDEX of a table a large backlog left
/// behind take far longer than a claim.
pub const COMPACTION_STATEMENT_TIMEOUT: Duration = Duration::from_secs(600);

/// Everything the broker needs to know. Build it, then call [`BrokerConfig::validate`], which
/// reports every problem at once.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The PostgreSQL URL (`postgres://user:pass@host:port/db`) or key=value string.
    /// No default: the master starts an embedded cluster when none is given.
    pub database_url: String,
    /// How long a claimed job belongs to this node without renewal. Renewal runs every third of
    /// it. Default 30 s.
    pub lease: Duration,
    /// A node whose heartbeat is older than this, and than ten of its own leases, is considered
    /// gone and its row removed (a master that comes back registers its row again); its leases
    /// are taken back as they expire. Default 10 × `lease`.
    pub node_timeout: Duration,
    /// The longest outage grace of this master's pools, registered with its node row so the row
    /// outlives every lease it holds with its grace (`migrations/0009_outage_grace.sql`);
    /// [`crate::Broker::want_grace`] raises it later. Default zero.
    pub outage_grace: Duration,
    /// The drover release this master is, registered with its node row (`nodes.release`):
    /// other masters read from it what it honours (an outage grace, a queue pause's
    /// confirmation). Default: this crate's version.
    pub release: String,
    /// The first wait between connection attempts at start-up; doubles up to
    /// `connect_backoff_max`, each wait drawn at random between half and all of it (jitter, so
    /// masters restarted together do not knock together). Default 250 ms.
    pub connect_backoff_min: Duration,
    /// The longest wait between connection attempts. Default 10 s.
    pub connect_backoff_max: Duration,
    /// The server-side `statement_timeout` of the master's connections: the server cancels a
    /// statement still running after this long, even when the master already gave up on it and
    /// the connection lingers, so no statement holds its locks for long. `None` (the default):
    /// 3/5 of `lease`, just past the master's own deadline for a call (half the lease), so the
    /// master normally gives up first and the server ends whatever is left. `Some(ZERO)`: none
    /// (the server's or the role's setting applies).
    pub statement_timeout: Option<Duration>,
    /// The server-side `idle_in_transaction_session_timeout` of the master's connections: a
    /// session left idle inside a transaction this long is ended by the server, releasing its
    /// locks. `None` (the default): `lease`. `Some(ZERO)`: none.
    pub idle_in_transaction_timeout: Option<Duration>,
    /// Apply missing schema migrations at start. `false`: a schema older than this binary is
    /// refused, naming the migrations and the command that applies them. Default `true`.
    pub auto_migrate: bool,
    /// How often a queue's claim reads it in full rather than from where its head was
    /// (`claim_cursor`, docs/decisions/0010-a-held-snapshot.md): the longest a job made
    /// available behind the cursor waits. Zero: always in full. Default
    /// [`crate::claim_cursor::FULL_EVERY`] (2 s).
    pub full_claim_every: Duration,
}

impl BrokerConfig {
    pub fn new(database_url: impl Into<String>) -> Self {
        let lease = Duration::from_secs(30);
        BrokerConfig {
            database_url: database_url.into(),
            lease,
            node_timeout: lease * 10,
            outage_grace: Duration::ZERO,
            release: env!("CARGO_PKG_VERSION").to_string(),
            connect_backoff_min: Duration::from_millis(250),
            connect_backoff_max: Duration::from_secs(10),
            statement_timeout: None,
            idle_in_transaction_timeout: None,
            auto_migrate: true,
            full_claim_every: crate::claim_cursor::FULL_EVERY,
        }
    }

    /// The server-side timeouts of the master's connections, from `statement_timeout` and
    /// `idle_in_transaction_timeout` (or the lease): what [`crate::connect_retry::connect_with_retry`]
    /// sets, and what every other connection of the master should ask for with
    /// [`crate::connect::connect_once_with`].
    pub fn session(&self) -> Session {
        Session {
            statement_timeout: Some(
                self.statement_timeout
                    .unwrap_or(self.lease / 2 + self.lease / 10),
            ),
            idle_in_transaction_timeout: Some(
                self.idle_in_transaction_timeout.unwrap_or(self.lease),
            ),
        }
    }

    /// [`BrokerConfig::session`] with the longer `statement_timeout` that vacuuming and
    /// reindexing need ([`COMPACTION_STATEMENT_TIMEOUT`], or the configured one if that is
    /// longer or off): for the compaction's own connection.
    pub fn compaction_session(&self) -> Session {
        let session = self.session();
        let statement = match session.statement_timeout {
            Some(t) if t.is_zero() => t,
            Some(t) => t.max(COMPACTION_STATEMENT_TIMEOUT),
            None => COMPACTION_STATEMENT_TIMEOUT,
        };
        session.with_statement_timeout(statement)
    }

    /// Checks every field and returns all problems together.
    pub fn validate(&self) -> Result<(), BrokerError> {
        let mut problems = Vec::new();
        if self.database_url.trim().is_empty() {
            problems.push("database_url is empty; give a postgres:// URL or leave it unset for the embedded default".to_string());
        } else if let Err(problem) = crate::connect::parse(&self.database_url) {
            problems.push(problem);
        }
        if self.lease < Duration::from_millis(300) {
            problems.push(format!(
                "lease is {:?}; it must be at least 300ms",
                self.lease
            ));
        }
        if self.node_timeout < self.lease {
            problems.push(format!(
                "node_timeout ({:?}) must not be shorter than lease ({:?})",
                self.node_timeout, self.lease
            ));
        }
        if self.connect_backoff_min.is_zero() || self.connect_backoff_min > self.connect_backoff_max
        {
            problems.push(
                "connect_backoff_min must be positive and not above connect_backoff_max"
                    .to_string(),
            );
        }
        for (name, value) in [
            ("statement_timeout", self.statement_timeout),
            (
                "idle_in_transaction_timeout",
                self.idle_in_transaction_timeout,
            ),
        ] {
            if let Some(t) = value.filter(|t| !t.is_zero()) {
                if t < Duration::from_millis(1) || t.as_millis() > i32::MAX as u128 {
                    problems.push(format!(
                        "{name} is {t:?}; it must be zero (none) or between 1ms and {}s",
                        i32::MAX / 1000
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(BrokerError::Config(problems))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_reports_every_problem_at_once() {
        let mut config = BrokerConfig::new("postgres://u:hunter2@host:notaport/db");
        config.lease = Duration::from_millis(10);
        config.node_timeout = Duration::from_millis(1);
        let message = config.validate().unwrap_err().to_string();
        assert!(message.contains("does not parse"), "{message}");
        assert!(message.contains("at least 300ms"), "{message}");
        assert!(message.contains("node_timeout"), "{message}");
        assert!(!message.contains("hunter2"), "password leaked: {message}");
    }

    #[test]
    fn server_timeouts_follow_the_lease_unless_set() {
        let mut config = BrokerConfig::new("postgres://localhost/drover");
        config.lease = Duration::from_secs(10);
        let session = config.session();
        assert_eq!(session.statement_timeout, Some(Duration::from_secs(6)));
        assert_eq!(
            session.idle_in_transaction_timeout,
            Some(Duration::from_secs(10))
        );
        let compaction = config.compaction_session();
        assert_eq!(
            compaction.statement_timeout,
            Some(COMPACTION_STATEMENT_TIMEOUT)
        );
        assert_eq!(
            compaction.idle_in_transaction_timeout,
            session.idle_in_transaction_timeout
        );
        config.statement_timeout = Some(Duration::ZERO);
        config.idle_in_transaction_timeout = Some(Duration::from_secs(90));
        let session = config.session();
        assert_eq!(session.statement_timeout, Some(Duration::ZERO));
        assert_eq!(
            session.idle_in_transaction_timeout,
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            config.compaction_session().statement_timeout,
            Some(Duration::ZERO),
            "off stays off"
        );
        config.validate().unwrap();
        config.statement_timeout = Some(Duration::from_micros(10));
        let message = config.validate().unwrap_err().to_string();
        assert!(message.contains("statement_timeout"), "{message}");
    }

    #[test]
    fn defaults_are_valid() {
        BrokerConfig::new("postgres://localhost/drover")
            .validate()
            .unwrap();
    }
}
