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
    /// The server closed the connection right after the login, before it answered a query.
    #[error("PostgreSQL at {address} closed the connection right after the login; check the server's log (a pooler or the server may be shutting down)")]
    ClosedAtLogin {
        /// "host:port/db".
        address: String,
    },
    /// The server answered but is a hot standby: it cannot take a write.
    #[error("PostgreSQL at {address} is a read-only standby (in recovery); point the URL at the primary, or list both hosts with target_session_attrs=read-write (docs/postgres-topologies.md)")]
    Standby {
        /// "host:port/db" of the standby.
        address: String,
        /// The URL names this host alone, so no retry reaches another: start-up gives up.
        only_host: bool,
    },
    /// The server is a primary but its sessions are read-only (`default_transaction_read_only`
    /// set for the server, the role or the database).
    #[error("PostgreSQL at {address} accepts no writes: transaction_read_only is on (default_transaction_read_only is set for the server, this role or this database); drover needs to write, so connect as a role or to a database that may")]
    ReadOnly {
        /// "host:port/db".
        address: String,
    },
    /// Several hosts in the URL and none of them is a writable primary.
    #[error("none of the {} hosts of the database URL took a writable session: {}", .failures.len(), .failures.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    NoWritableHost {
        /// Each host's own failure, in the URL's order.
        failures: Vec<BrokerError>,
    },
    /// Two of the master's connections were served by one server process: the URL goes through
    /// a pooler in transaction or statement mode, which does not keep a session per client.
    #[error("PostgreSQL at {address} is reached through a connection pooler in transaction (or statement) mode: two of drover's connections were served by one server process (pid {pid}), so a session does not keep its state. The master needs sessions of its own (LISTEN, its prepared statements, its timeouts), and would leak its settings into the application's pooled connections: point the master's own connection at PostgreSQL directly (drover.master_database in config/drover.php, else drover.database; for drover run, DROVER_DATABASE_URL), or at a pool in session mode (PgBouncer pool_mode = session); the application itself may keep the transaction pooler. See docs/postgres-topologies.md")]
    TransactionPooler {
        /// "host:port/db" of the pooler.
        address: String,
        /// The server process both connections got.
        pid: i32,
    },
    /// A statement got no answer in time; the connection is replaced.
    #[error("{about}: no answer from the database in time; reconnecting")]
    TimedOut { about: &'static str },
    /// The database URL or one of the options does not make sense.
    #[error("invalid broker configuration:\n  - {}", .0.join("\n  - "))]
    Config(Vec<String>),
    /// drover's schema in the database is one this binary may not run on: migrated by a drover
    /// more than one release newer, or older than this binary needs and not to be migrated by it
    /// (`auto_migrate` off, or a role that may not). The message names the fix.
    #[error("{0}")]
    Schema(String),
    /// The migrations could not take a lock on drover's tables in any of their tries: a long
    /// transaction holds one. It may end: trying again later can succeed.
    #[error("drover's migrations could not take a lock on drover's tables in {tries} tries of {each:?}: a long transaction holds one (a report, a pg_dump, a session idle in a transaction: see pg_stat_activity and pg_locks for drover.jobs). End it and migrate again; a migration that waited longer would stop every claim behind it")]
    MigrationLocked {
        tries: u32,
        each: std::time::Duration,
    },
    /// Starting, supervising or stopping the embedded PostgreSQL failed.
    #[error("embedded PostgreSQL: {about}")]
    Embedded {
        about: String,
        #[source]
        source: Option<std::io::Error>,
    },
    /// The database answered something a statement never returns.
    #[error(
        "{about}: {problem}; this is a bug in drover, please report it with the database's version"
    )]
    Unexpected {
        about: &'static str,
        problem: String,
    },
    /// This master's row of `drover.nodes` is gone: it was silent for ten leases and another
    /// master took it for gone. Its next heartbeat registers it again.
    #[error("{about}: this master's node row ({node}) is gone (another master took it for gone after ten silent leases); its next heartbeat registers it again")]
    NodeGone { about: &'static str, node: i64 },
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
    /// `53300` too many connections, the login refused), no answer came in time, or the server
    /// is not one that can do it while another may: a standby (`25006`, or found in recovery at
    /// connect), a read-only session, a pooler that lost or mixed up prepared statements
    /// (`26000`, `42P05`) or shares one server between sessions. The
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
            // Another connection may reach a primary (after a promotion), or the URL may be
            // fixed while the master keeps its settles.
            BrokerError::Standby { .. }
            | BrokerError::ClosedAtLogin { .. }
            | BrokerError::ReadOnly { .. }
            | BrokerError::NoWritableHost { .. }
            | BrokerError::TransactionPooler { .. } => true,
            BrokerError::Config(_)
            | BrokerError::Schema(_)
            | BrokerError::MigrationLocked { .. }
            | BrokerError::Embedded { .. }
            | BrokerError::Io { .. }
            | BrokerError::NodeGone { .. }
            | BrokerError::Unexpected { .. } => false,
        }
    }

    /// True when retrying cannot help until someone changes something: the server refused the
    /// login (`28P01` wrong password, `28000` no such role or no `pg_hba.conf` entry), the
    /// database does not exist (`3D000`), the role may not connect to it or lacks a privilege
    /// (`42501`), the server asked for a password the URL does not give, the configuration is
    /// wrong ([`BrokerError::Config`]), or the server's certificate did not verify (not trusted,
    /// wrong host name, expired) or the server refused ours. Start-up gives up on these at once
    /// with the server's message ([`crate::connect_retry::connect_with_retry`]).
    ///
    /// A refused or timed-out TCP connection, a server starting up or shutting down, too many
    /// connections, a broken handshake: all transient, never permanent.
    pub fn is_permanent(&self) -> bool {
        match self {
            BrokerError::Config(_) | BrokerError::Schema(_) => true,
            BrokerError::Connect { source, .. } | BrokerError::Query { source, .. } => {
                permanent(source)
            }
            BrokerError::Tls { source, .. } => certificate_refused(source),
            BrokerError::Standby { only_host, .. } => *only_host,
            BrokerError::ReadOnly { .. } | BrokerError::TransactionPooler { .. } => true,
            // Hosts that refuse for good, all of them; a standby among several may be promoted.
            BrokerError::NoWritableHost { failures } => failures.iter().all(Self::is_permanent),
            BrokerError::ConnectTimedOut { .. }
            | BrokerError::ClosedAtLogin { .. }
            | BrokerError::TimedOut { .. }
            | BrokerError::MigrationLocked { .. }
            | BrokerError::Embedded { .. }
            | BrokerError::Io { .. }
            | BrokerError::NodeGone { .. }
            | BrokerError::Unexpected { .. } => false,
        }
    }

    /// True when a master refused for this must not be started again until an operator changed
    /// something — its configuration ([`BrokerError::Config`], a URL through a transaction
    /// pooler) or the schema, the binary or the package ([`BrokerError::Schema`]): starting it
    /// again unchanged is refused the same way, so `drover run` exits with its own code for it,
    /// on which the units do not restart.
    ///
    /// False for everything else, the other permanent connection failures too (a password being
    /// rotated, a standby about to be promoted): a later start may succeed without anyone.
    pub fn needs_operator(&self) -> bool {
        matches!(
            self,
            BrokerError::Config(_) | BrokerError::Schema(_) | BrokerError::TransactionPooler { .. }
        )
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
                // The server is not the one to do it, another may be: it became (or is) a
                // standby, or a pooler gave this client another server that lacks its prepared
                // statement (or already has one by that name).
                | "25006" // read_only_sql_transaction
                | "26000" // invalid_sql_statement_name
                | "42P05" // duplicate_prepared_statement
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
            "57P05", "25P03", "53300", "25006", "26000", "42P05",
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
        assert!(config.needs_operator());
        let schema = BrokerError::Schema("newer than this drover".into());
        assert!(schema.is_permanent() && !schema.is_connection_lost() && schema.needs_operator());
        // A long transaction may end: starting again later may migrate.
        let locked = BrokerError::MigrationLocked {
            tries: 6,
            each: std::time::Duration::from_secs(5),
        };
        assert!(!locked.is_permanent() && !locked.is_connection_lost() && !locked.needs_operator());
        let timed_out = BrokerError::TimedOut { about: "settling" };
        assert!(timed_out.is_connection_lost() && !timed_out.is_permanent());
        let connect_timed_out = BrokerError::ConnectTimedOut {
            address: "db:5432/x".into(),
            seconds: 10,
        };
        assert!(connect_timed_out.is_connection_lost() && !connect_timed_out.is_permanent());
        let embedded = BrokerError::embedded("no postgres");
        assert!(!embedded.is_connection_lost() && !embedded.is_permanent());
        let standby = |only_host| BrokerError::Standby {
            address: "db:5432/x".into(),
            only_host,
        };
        assert!(standby(true).is_connection_lost() && standby(true).is_permanent());
        assert!(standby(false).is_connection_lost() && !standby(false).is_permanent());
        let pooler = BrokerError::TransactionPooler {
            address: "pgbouncer:6432/x".into(),
            pid: 7,
        };
        assert!(pooler.is_connection_lost() && pooler.is_permanent());
        assert!(
            pooler.to_string().contains("pool_mode = session"),
            "{pooler}"
        );
        let hosts = BrokerError::NoWritableHost {
            failures: vec![standby(false), connect_timed_out],
        };
        assert!(hosts.is_connection_lost() && !hosts.is_permanent());
        // Permanent at start-up, but not the operator's alone: a rotated password, a promotion.
        assert!(!hosts.needs_operator() && !standby(true).needs_operator());
        assert!(pooler.needs_operator(), "the URL must change");
        let message = hosts.to_string();
        assert!(
            message.contains("none of the 2 hosts") && message.contains("is a read-only standby"),
            "{message}"
        );
    }
}
