//! The broker's one error type. Every variant says what was being done (`about`) and keeps the
//! underlying error as its source.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The database could not be reached or refused the connection.
    #[error("cannot connect to PostgreSQL at {address}: {source}; check that the server is running and that the URL (--database-url / DATABASE_URL) is right")]
    Connect {
        address: String,
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement failed.
    #[error("{about}: {source}")]
    Query {
        about: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database URL or one of the options does not make sense.
    #[error("invalid broker configuration:\n  - {}", .0.join("\n  - "))]
    Config(Vec<String>),
    /// Starting, supervising or stopping the embedded PostgreSQL failed.
    #[error("embedded PostgreSQL: {about}")]
    Embedded {
        about: String,
        #[source]
        source: Option<std::io::Error>,
    },
    /// A file of the state directory could not be read or written.
    #[error("{about} ({path}): {source}")]
    Io {
        about: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl BrokerError {
    pub(crate) fn query(about: &'static str) -> impl FnOnce(tokio_postgres::Error) -> Self {
        move |source| BrokerError::Query { about, source }
    }

    pub(crate) fn embedded(about: impl Into<String>) -> Self {
        BrokerError::Embedded {
            about: about.into(),
            source: None,
        }
    }

    /// True when the error means the connection is gone, so the caller should reconnect.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            BrokerError::Connect { .. } => true,
            BrokerError::Query { source, .. } => source.is_closed(),
            _ => false,
        }
    }
}
