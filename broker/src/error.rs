//! The broker's one error type. Every variant says what was being done (`about`) and keeps the
//! underlying error as its source.
//!
//! What a failure means is decided here and nowhere else:
//! [`BrokerError::is_connection_lost`] (no working connection: send the statement again on a
//! new one) and [`BrokerError::is_permanent`] (no retry can help: start-up gives up). An error
//! that is neither is a statement that failed on its own.

use std::path::PathBuf;

use tokio_postgres::error::Severity;

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

    /// True when the call failed because there was no working connection: it closed, broke
    /// (I/O, protocol), the server ended the session (SQLSTATE class `08`, `57P01`–`57P05`,
    /// `25P03`, any `FATAL`), a connection could not be (re)opened (refused, timed out, TLS,
    /// `53300` too many connections, the login refused), or no answer came in time. The
    /// statement did not fail on its own merit, so it is worth sending again, whole, on a new
    /// connection; [`crate::Broker`] reconnects on its next call. A failed login is lost *and*
    /// [`permanent`](Self::is_permanent): at runtime, retry (the password may be being rotated);
    /// at start-up, give up.
    ///
    /// False for everything else: the statement itself failed (a constraint, a bad parameter,
    /// a lock or statement timeout of the server, a cancel), and the connection is fine.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            BrokerError::Connect { .. }
            | BrokerError::Tls { .. }
            | BrokerError::ConnectTimedOut { .. }
            | BrokerError::TimedOut { .. } => true,
            BrokerError::Query { source, .. } => connection_lost(source),
            BrokerError::Config(_) | BrokerError::Embedded { .. } | BrokerError::Io { .. } => false,
        }
    }

    /// True when retrying cannot help until someone changes something: the server refused the
    /// login (`28P01` wrong password, `28000` no such role or no `pg_hba.conf` entry), the
    /// database does not exist (`3D000`), the role may not connect to it or lacks a privilege
    /// (`42501`), the server asked for a password the URL does not give, the configuration is
    /// wrong ([`BrokerError::Config`]), or the server's certificate did not verify (not trusted,
    /// wrong host name, expired) or the server refused ours. Start-up gives up on these at once
    /// with the server's message ([`crate::connect::connect_with_retry`]).
    ///
    /// A refused or timed-out TCP connection, a server starting up or shutting down, too many
    /// connections, a broken handshake: all transient, never permanent.
    pub fn is_permanent(&self) -> bool {
        match self {
            BrokerError::Config(_) => true,
            BrokerError::Connect { source, .. } | BrokerError::Query { source, .. } => {
                permanent(source)
            }
            BrokerError::Tls { source, .. } => certificate_refused(source),
            BrokerError::ConnectTimedOut { .. }
            | BrokerError::TimedOut { .. }
            | BrokerError::Embedded { .. }
            | BrokerError::Io { .. } => false,
        }
    }
}

/// [`BrokerError::is_connection_lost`] for tokio-postgres's own error: closed, I/O or protocol
/// failure, a connect failure, or the server ending the session.
pub fn connection_lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(db) = e.as_db_error() {
        return lost_state(db.code().code())
            || matches!(
                db.parsed_severity(),
                Some(Severity::Fatal | Severity::Panic)
            );
    }
    // tokio-postgres keeps its error kind private; its text is the kind alone (the cause is
    // the source), so it is a stable name for it.
    matches!(
        e.to_string().as_str(),
        "error communicating with the server"
            | "unexpected message from server"
            | "error parsing response from server"
            | "error connecting to server"
            | "error performing TLS handshake"
            | "timeout waiting for server"
    )
}

/// [`BrokerError::is_permanent`] for tokio-postgres's own error: the server's SQLSTATE, or the
/// client's own refusal to log in (a password the server asks for and the URL lacks, an
/// authentication method or channel binding it cannot do, a connection string it cannot read).
pub fn permanent(e: &tokio_postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        return permanent_state(db.code().code());
    }
    matches!(
        e.to_string().as_str(),
        "invalid configuration" | "invalid connection string" | "authentication error"
    ) || certificate_refused(e)
}

/// SQLSTATEs meaning the session is over or could not start for now.
fn lost_state(code: &str) -> bool {
    code.starts_with("08") // connection_exception and its subclasses
        || matches!(
            code,
            "57P01" // admin_shutdown: pg_terminate_backend, a fast or smart shutdown
                | "57P02" // crash_shutdown: another backend crashed
                | "57P03" // cannot_connect_now: starting up, shutting down, in recovery
                | "57P04" // database_dropped
                | "57P05" // idle_session_timeout
                | "25P03" // idle_in_transaction_session_timeout ended the session
                | "53300" // too_many_connections, at connect
        )
}

/// SQLSTATEs that no retry fixes.
fn permanent_state(code: &str) -> bool {
    matches!(
        code,
        "28P01" // invalid_password
            | "28000" // invalid_authorization_specification: no such role, no pg_hba.conf entry
            | "3D000" // invalid_catalog_name: no such database
            | "42501" // insufficient_privilege: e.g. no CONNECT on the database
    )
}

/// True when TLS failed over a certificate: ours did not verify the server's (untrusted, wrong
/// name, expired, ...), or the server's alert says it refused ours. A handshake cut short, a
/// server without TLS or a refused TCP connection is not this.
fn certificate_refused(e: &tokio_postgres::Error) -> bool {
    use rustls::AlertDescription as A;
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        match c.downcast_ref::<rustls::Error>() {
            Some(rustls::Error::InvalidCertificate(_)) => return true,
            Some(rustls::Error::AlertReceived(
                A::BadCertificate
                | A::UnsupportedCertificate
                | A::CertificateRevoked
                | A::CertificateExpired
                | A::CertificateUnknown
                | A::UnknownCA
                | A::CertificateRequired,
            )) => return true,
            Some(_) => return false,
            None => {}
        }
        // io::Error's source() skips the error it wraps (rustls's, from tokio-rustls).
        cause = match c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner),
            None => c.source(),
        };
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_of_a_session_the_server_ended_are_lost_connections() {
        for code in [
            "08000", "08003", "08006", "08001", "08004", "57P01", "57P02", "57P03", "57P04",
            "57P05", "25P03", "53300",
        ] {
            assert!(lost_state(code), "{code}");
            assert!(!permanent_state(code), "{code}");
        }
    }

    #[test]
    fn sqlstates_no_retry_fixes_are_permanent() {
        for code in ["28P01", "28000", "3D000", "42501"] {
            assert!(permanent_state(code), "{code}");
            assert!(!lost_state(code), "{code}");
        }
    }

    #[test]
    fn a_failed_statement_is_neither() {
        // unique_violation, division_by_zero, query_canceled (statement_timeout or a cancel),
        // lock_not_available (lock_timeout), serialization_failure, deadlock_detected,
        // undefined_table, disk_full, out_of_memory.
        for code in [
            "23505", "22012", "57014", "55P03", "40001", "40P01", "42P01", "53100", "53200",
        ] {
            assert!(!lost_state(code), "{code}");
            assert!(!permanent_state(code), "{code}");
        }
    }

    #[test]
    fn errors_without_a_server_are_classified_by_variant() {
        let config = BrokerError::Config(vec!["bad".into()]);
        assert!(config.is_permanent() && !config.is_connection_lost());
        let timed_out = BrokerError::TimedOut { about: "settling" };
        assert!(timed_out.is_connection_lost() && !timed_out.is_permanent());
        let connect_timed_out = BrokerError::ConnectTimedOut {
            address: "db:5432/x".into(),
            seconds: 10,
        };
        assert!(connect_timed_out.is_connection_lost() && !connect_timed_out.is_permanent());
        let embedded = BrokerError::embedded("no postgres");
        assert!(!embedded.is_connection_lost() && !embedded.is_permanent());
    }
}
