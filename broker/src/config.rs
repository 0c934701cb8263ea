//! The broker's configuration.

use std::time::Duration;

use crate::BrokerError;

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
    /// A node whose heartbeat is older than this is considered gone and its row removed; its
    /// leases are taken back as they expire. Default 10 × `lease`.
    pub node_timeout: Duration,
    /// The first wait between connection attempts; doubles up to `connect_backoff_max`.
    /// Default 250 ms.
    pub connect_backoff_min: Duration,
    /// The longest wait between connection attempts. Default 10 s.
    pub connect_backoff_max: Duration,
    /// Apply missing schema migrations at start. `false`: a schema older than this binary is
    /// refused, naming the migrations and the command that applies them. Default `true`.
    pub auto_migrate: bool,
}

impl BrokerConfig {
    pub fn new(database_url: impl Into<String>) -> Self {
        let lease = Duration::from_secs(30);
        BrokerConfig {
            database_url: database_url.into(),
            lease,
            node_timeout: lease * 10,
            connect_backoff_min: Duration::from_millis(250),
            connect_backoff_max: Duration::from_secs(10),
            auto_migrate: true,
        }
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
    fn defaults_are_valid() {
        BrokerConfig::new("postgres://localhost/drover")
            .validate()
            .unwrap();
    }
}
