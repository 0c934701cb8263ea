//! Connecting to PostgreSQL: one attempt ([`connect_once`]) or attempts with backoff until it works
//! ([`connect_with_retry`]). Messages name the address and never the password.

use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls};

use crate::{BrokerConfig, BrokerError};

/// The URL with any password replaced by `***`, safe for logs.
pub fn redact(url: &str) -> String {
    // postgres://user:password@host/...
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        if let Some(at) = authority.rfind('@') {
            let userinfo = &authority[..at];
            if let Some(colon) = userinfo.find(':') {
                return format!(
                    "{}{}:***{}",
                    &url[..scheme_end + 3],
                    &userinfo[..colon],
                    &rest[at..]
                );
            }
        }
        return url.to_string();
    }
    // key=value form (values may be quoted, with backslash escapes): hide password's value.
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while !rest.is_empty() {
        let trimmed = rest.trim_start();
        out.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        let key_end = rest.find('=').map(|i| i + 1).unwrap_or(rest.len());
        let (key, after) = rest.split_at(key_end);
        let value_len = value_length(after);
        let is_password = key.trim_end_matches('=').trim() == "password";
        out.push_str(key);
        out.push_str(if is_password {
            "***"
        } else {
            &after[..value_len]
        });
        rest = &after[value_len..];
    }
    out
}

/// The length of a libpq value at the start of `s`: quoted ('...' with \ escapes) or up to
/// the next whitespace.
fn value_length(s: &str) -> usize {
    let bytes = s.as_bytes();
    if bytes.first() == Some(&b'\'') {
        let mut i = 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b'\'' => return (i + 1).min(bytes.len()),
                _ => i += 1,
            }
        }
        bytes.len()
    } else {
        s.find(char::is_whitespace).unwrap_or(s.len())
    }
}

/// "host:port" (or "socket dir:port") for messages.
pub fn describe_address(config: &Config) -> String {
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => format!("unix socket {}", p.display()),
        None => "localhost".to_string(),
    };
    let db = config.get_dbname().unwrap_or("(default database)");
    format!("{host}:{port}/{db}")
}

/// Connects once and spawns the connection's driver task.
pub async fn connect_once(url: &str) -> Result<Client, BrokerError> {
    let config: Config = url.parse().map_err(|_| {
        BrokerError::Config(vec![format!("database URL {} does not parse", redact(url))])
    })?;
    let address = describe_address(&config);
    let (client, connection) = tokio::time::timeout(Duration::from_secs(10), config.connect(NoTls))
        .await
        .map_err(|_| BrokerError::Embedded {
            about: format!("connecting to PostgreSQL at {address} timed out after 10s"),
            source: None,
        })?
        .map_err(|source| BrokerError::Connect {
            address: address.clone(),
            source,
        })?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(%address, error = %e, "database connection closed");
        }
    });
    Ok(client)
}

/// Connects, retrying with exponential backoff; each failure is logged with the address and the
/// next delay. Returns only on success (or when the URL itself is invalid).
pub async fn connect_with_retry(config: &BrokerConfig) -> Result<Client, BrokerError> {
    let mut delay = config.connect_backoff_min;
    loop {
        match connect_once(&config.database_url).await {
            Ok(client) => return Ok(client),
            Err(e @ BrokerError::Config(_)) => return Err(e),
            Err(e) => {
                tracing::error!("{e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(config.connect_backoff_max);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords_in_both_forms() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(redact("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(
            redact("host=db password=s3cret user=app"),
            "host=db password=*** user=app"
        );
        assert_eq!(
            redact("host='db' password='it\\'s a secret' user='app'"),
            "host='db' password=*** user='app'"
        );
    }

    #[test]
    fn describes_tcp_and_socket_addresses() {
        let c: Config = "postgres://u:p@10.1.2.3:6543/app".parse().unwrap();
        assert_eq!(describe_address(&c), "10.1.2.3:6543/app");
        let c: Config = "host=/tmp/sock dbname=d".parse().unwrap();
        assert_eq!(describe_address(&c), "unix socket /tmp/sock:5432/d");
    }
}
