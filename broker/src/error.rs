//! The broker's one error type. Every variant says what was being done (`about`) and keeps the
//! underlying error as its source.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The database could not be reached or refused the connection.
    #[error("cannot connect to PostgreSQL at {address}: {}; {hint}", describe(.source))]
    Connect {
        address: String,
        #[source]
        source: tokio_postgres::Error,
        /// What to check or change for this failure (e.g. the TLS setting a `pg_hba.conf`
        /// rule asks for), so the message says how to fix it.
        hint: String,
    },
    /// TLS to the database failed: the server's certificate did not verify, the handshake
    /// failed, or the server has no TLS and the sslmode requires it.
    #[error("TLS to PostgreSQL at {address} failed: {problem}")]
    Tls {
        /// "host:port/db", never the password.
        address: String,
        /// What went wrong and what to change (which sslrootcert, which host name).
        problem: String,
        /// tokio-postgres's error, with rustls's below it.
        #[source]
        source: tokio_postgres::Error,
    },
    /// No connection within the connect timeout.
    #[error("connecting to PostgreSQL at {address} timed out after {seconds}s; check that the host and port are right and that nothing (a firewall, a security group) drops the packets")]
    ConnectTimedOut {
        /// "host:port/db", never the password.
        address: String,
        /// The timeout, for the message.
        seconds: u64,
    },
    /// A statement failed.
    #[error("{about}: {}", describe(.source))]
    Query {
        about: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement got no answer in time; the connection is replaced.
    #[error("{about}: no answer from the database in time; reconnecting")]
    TimedOut { about: &'static str },
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

/// A database error with the server's own message (tokio-postgres only says "db error").
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                s += &format!(": {detail}");
            }
            s
        }
        None => match std::error::Error::source(e) {
            Some(inner) => format!("{e}: {inner}"),
            None => e.to_string(),
        },
    }
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
            BrokerError::Connect { .. }
            | BrokerError::Tls { .. }
            | BrokerError::ConnectTimedOut { .. }
            | BrokerError::TimedOut { .. } => true,
            BrokerError::Query { source, .. } => source.is_closed(),
            _ => false,
        }
    }
}
