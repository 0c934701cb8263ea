//! Connecting to PostgreSQL. Every connection of the master is made by [`open`]: one attempt
//! with the TLS the connection string asks for ([`crate::tls`]), under a deadline.
//! [`connect_once_with`] opens one, spawns its driver and sets the server-side timeouts of a
//! [`Session`]; [`connect_with_retry`] does that at start-up until it works (or fails for good:
//! [`BrokerError::is_permanent`]), and the LISTEN connection ([`crate::listener`]) drives its
//! own.
//!
//! Both connection-string forms are accepted — URLs (`postgres://u:p@host:port/db?sslmode=…`) and
//! libpq key=value strings (`host='db' sslmode='verify-full'`). [`parse`] takes the TLS keys out
//! (tokio-postgres rejects `verify-ca`, `verify-full` and the `ssl*cert` keys) and hands the rest
//! to tokio-postgres. Messages name the address and never the password ([`redact`]).

use std::ops::Range;
use std::task::Poll;
use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, Socket};

use crate::error::BrokerError;
use crate::tls::{self, TlsOptions, TlsPolicy, TlsStream};

/// How long one connection attempt (TCP, TLS, login) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection's driver: polled (or spawned) for the client to work.
pub type Connection = tokio_postgres::Connection<Socket, TlsStream>;

/// A connection string taken apart.
#[derive(Debug, Clone)]
pub struct Target {
    /// Everything but the TLS keys, as tokio-postgres parsed it, with its sslmode set from
    /// `tls` (the one part of TLS tokio-postgres does itself: whether to ask for it).
    pub config: Config,
    /// What to do about TLS, after libpq's rules.
    pub tls: TlsPolicy,
    /// "host:port/db", for messages.
    pub address: String,
}

/// Parses a URL or key=value string, TLS options included. The error is one line naming the
/// (redacted) string and the problem: a configuration error, not worth retrying.
pub fn parse(url: &str) -> Result<Target, String> {
    let problem = |p: String| format!("database URL {}: {p}", redact(url));
    let mut options = TlsOptions::default();
    let rest = if is_url(url) {
        strip_url_options(url, &mut options)
    } else {
        strip_key_value_options(url, &mut options)
    }
    .map_err(problem)?;
    let mut config: Config = rest
        .parse()
        .map_err(|e| format!("database URL {} does not parse: {e}", redact(url)))?;
    // Without a host, tokio-postgres has no name for the TLS handshake: use the address.
    if config.get_hosts().is_empty() {
        for addr in config.get_hostaddrs().to_vec() {
            config.host(addr.to_string());
        }
    }
    let hosts = config.get_hosts();
    let sockets_only = !hosts.is_empty() && hosts.iter().all(|h| matches!(h, Host::Unix(_)));
    let tls = if sockets_only {
        // PostgreSQL has no TLS on Unix sockets; libpq ignores sslmode there, so do we.
        TlsPolicy::disabled()
    } else {
        options
            .resolve(tls::home_dir().as_deref())
            .map_err(problem)?
    };
    config.ssl_mode(tls.negotiation());
    let address = describe_address(&config);
    Ok(Target {
        config,
        tls,
        address,
    })
}

fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// Takes the TLS keys out of a URL's query string (`?k=v&k=v`, percent-encoded).
fn strip_url_options(url: &str, options: &mut TlsOptions) -> Result<String, String> {
    let Some(query) = url_query_start(url) else {
        return Ok(url.to_string());
    };
    let mut kept = Vec::new();
    for pair in url[query + 1..].split('&') {
        let taken = match pair.split_once('=') {
            Some((key, value)) => options.take(&percent_decode(key)?, &percent_decode(value)?)?,
            None => false, // tokio-postgres reports it
        };
        if !taken {
            kept.push(pair);
        }
    }
    let base = &url[..query];
    Ok(if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    })
}

/// Where a URL's query string starts (its `?`), read as tokio-postgres does: the credentials
/// run to the first `@`, and the host and path end at the first `?` after them.
fn url_query_start(url: &str) -> Option<usize> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let after_creds = rest.find('@').map_or(0, |at| at + 1);
    rest[after_creds..]
        .find('?')
        .map(|q| scheme_end + after_creds + q)
}

/// Takes the TLS keys out of a key=value string; the others are kept as written.
fn strip_key_value_options(s: &str, options: &mut TlsOptions) -> Result<String, String> {
    let (params, error) = params(s);
    if let Some((at, what)) = error {
        return Err(format!("{what} at byte {at}"));
    }
    let mut kept = Vec::new();
    for p in &params {
        if !options.take(p.key, &p.value)? {
            kept.push(&s[p.start..p.raw.end]);
        }
    }
    Ok(kept.join(" "))
}

/// `%XX` decoded, as tokio-postgres reads URL parts.
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|c| (*c as char).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                // Two hex digits: at most 0xff.
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8 once percent-decoded"))
}

/// One `key = value` of a key=value string, with where it is written.
struct Param<'a> {
    /// The key.
    key: &'a str,
    /// Byte offset of the key, to copy the parameter as written.
    start: usize,
    /// Bytes of the value as written (quotes and backslashes included), to copy or hide it.
    raw: Range<usize>,
    /// The value with quotes and escapes removed.
    value: String,
}

/// Reads a key=value string as tokio-postgres and libpq do: `key = value`, the value either
/// `'quoted'` or up to the next whitespace, `\` escaping the next character in both. Returns the
/// parameters read, and where and why reading stopped early.
fn params(s: &str) -> (Vec<Param<'_>>, Option<(usize, &'static str)>) {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    let skip_ws = |chars: &mut std::iter::Peekable<std::str::CharIndices>| {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    };
    let pos = |chars: &mut std::iter::Peekable<std::str::CharIndices>| {
        chars.peek().map_or(s.len(), |(i, _)| *i)
    };
    loop {
        skip_ws(&mut chars);
        let start = pos(&mut chars);
        if start == s.len() {
            return (out, None);
        }
        while chars
            .next_if(|(_, c)| !c.is_whitespace() && *c != '=')
            .is_some()
        {}
        let key = &s[start..pos(&mut chars)];
        if key.is_empty() {
            return (out, Some((start, "a value without a key")));
        }
        skip_ws(&mut chars);
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return (out, Some((start, "a key without `=`")));
        }
        skip_ws(&mut chars);
        let value_start = pos(&mut chars);
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    None => return (out, Some((value_start, "an unterminated quoted value"))),
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                    Some((_, c)) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next().map(|(_, c)| c));
                } else {
                    value.push(c);
                }
            }
            if value.is_empty() {
                return (out, Some((value_start, "a missing value")));
            }
        }
        out.push(Param {
            key,
            start,
            raw: value_start..pos(&mut chars),
            value,
        });
    }
}

/// The connection string with any password replaced by `***`, safe for logs: the password of a
/// URL's credentials, `password=` in its query string, `password` of a key=value string, and
/// `password=` of a PDO DSN (`pgsql:host=…;password=…`, what PHP workers get). What cannot be
/// read is hidden from there on.
pub fn redact(url: &str) -> String {
    let mut hide: Vec<Range<usize>> = Vec::new();
    if let Some(rest) = url.strip_prefix("pgsql:") {
        // PDO: `key=value` pairs separated by `;`, no quoting.
        let mut offset = url.len() - rest.len();
        for pair in rest.split(';') {
            if let Some((key, _)) = pair.split_once('=') {
                if key.trim().eq_ignore_ascii_case("password") {
                    hide.push(offset + key.len() + 1..offset + pair.len());
                }
            }
            offset += pair.len() + 1;
        }
    } else if let Some(scheme_end) = url.find("://").map(|i| i + 3) {
        // As tokio-postgres reads it: credentials up to the first '@', password after the ':'.
        let rest = &url[scheme_end..];
        if let Some(at) = rest.find('@') {
            if let Some(colon) = rest[..at].find(':') {
                hide.push(scheme_end + colon + 1..scheme_end + at);
            }
        }
        if let Some(q) = rest.find('?').map(|q| scheme_end + q + 1) {
            let mut offset = q;
            for pair in url[q..].split('&') {
                if let Some((key, _)) = pair.split_once('=') {
                    if percent_decode(key).is_ok_and(|k| k == "password") {
                        hide.push(offset + key.len() + 1..offset + pair.len());
                    }
                }
                offset += pair.len() + 1;
            }
        }
    } else {
        let (params, error) = params(url);
        hide.extend(
            params
                .iter()
                .filter(|p| p.key == "password")
                .map(|p| p.raw.clone()),
        );
        if let Some((at, _)) = error {
            hide.push(at..url.len());
        }
    }
    hide.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(url.len());
    let mut copied = 0;
    for range in hide {
        if range.start < copied {
            // Overlaps what is already hidden: hide further, without a second `***`.
            copied = copied.max(range.end);
            continue;
        }
        out.push_str(&url[copied..range.start]);
        out.push_str("***");
        copied = range.end;
    }
    out.push_str(&url[copied..]);
    out
}

/// "host:port/db" (or "unix socket dir:port/db") for messages.
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

/// An open connection: the client, its driver, and the address for messages.
pub struct Connected {
    /// Statements go through it.
    pub client: Client,
    /// Must be polled (spawned, or driven for notifications) for the client to work.
    pub connection: Connection,
    /// "host:port/db" of the server, for the caller's messages.
    pub address: String,
}

/// Opens one connection to a writable primary: the one place every connection of the master is
/// made. The URL's hosts are tried in order (`host=a,b`, `postgres://a,b/db`), each under its own
/// [`CONNECT_TIMEOUT`], and the first that answers with a writable session is kept, whatever
/// `target_session_attrs` says: drover always writes, so a standby is never the answer (as
/// `target_session_attrs=read-write` would do, but naming each host and why it was passed
/// over). A single host that turns out to be a standby is named as one
/// ([`BrokerError::Standby`]). With `sslmode=prefer` (the default) a failed TLS handshake is
/// retried once without TLS, as libpq does.
pub async fn open(url: &str) -> Result<Connected, BrokerError> {
    let target = parse(url).map_err(|p| BrokerError::Config(vec![p]))?;
    let hosts = target.each_host();
    let only_host = hosts.len() == 1;
    let mut failures = Vec::new();
    for host in hosts {
        match open_host(&host, only_host).await {
            Ok(connected) => {
                if !failures.is_empty() {
                    tracing::info!(
                        address = %connected.address,
                        "connected to PostgreSQL at {} (passed over: {})",
                        connected.address,
                        failures.iter().map(|e: &BrokerError| e.to_string()).collect::<Vec<_>>().join("; ")
                    );
                }
                return Ok(connected);
            }
            Err(e) => failures.push(e),
        }
    }
    match failures.len() {
        1 => Err(failures.remove(0)),
        _ => Err(BrokerError::NoWritableHost { failures }),
    }
}

impl Target {
    /// One target per host of the URL, in its order, each with that host alone (its port, its
    /// `hostaddr` if given) and `target_session_attrs=any`: [`open_host`] checks the session.
    fn each_host(&self) -> Vec<Target> {
        let config = &self.config;
        let hosts = config.get_hosts();
        if hosts.len() <= 1 {
            return vec![self.clone()];
        }
        let ports = config.get_ports();
        let addrs = config.get_hostaddrs();
        hosts
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let mut one = Config::new();
                match host {
                    Host::Tcp(h) => one.host(h),
                    Host::Unix(p) => one.host_path(p),
                };
                if let Some(addr) = addrs.get(i) {
                    one.hostaddr(*addr);
                }
                // libpq: one port for every host, or one per host.
                if let Some(port) = ports.get(i).or(ports.first()) {
                    one.port(*port);
                }
                copy_settings(config, &mut one);
                let address = describe_address(&one);
                Target {
                    config: one,
                    tls: self.tls.clone(),
                    address,
                }
            })
            .collect()
    }
}

/// Everything of a connection string but its hosts, ports and `target_session_attrs`.
fn copy_settings(from: &Config, to: &mut Config) {
    if let Some(user) = from.get_user() {
        to.user(user);
    }
    if let Some(password) = from.get_password() {
        to.password(password);
    }
    if let Some(db) = from.get_dbname() {
        to.dbname(db);
    }
    if let Some(options) = from.get_options() {
        to.options(options);
    }
    if let Some(name) = from.get_application_name() {
        to.application_name(name);
    }
    to.ssl_mode(from.get_ssl_mode());
    to.ssl_negotiation(from.get_ssl_negotiation());
    if let Some(t) = from.get_connect_timeout() {
        to.connect_timeout(*t);
    }
    if let Some(t) = from.get_tcp_user_timeout() {
        to.tcp_user_timeout(*t);
    }
    to.keepalives(from.get_keepalives());
    to.keepalives_idle(from.get_keepalives_idle());
    if let Some(t) = from.get_keepalives_interval() {
        to.keepalives_interval(t);
    }
    if let Some(n) = from.get_keepalives_retries() {
        to.keepalives_retries(n);
    }
    to.channel_binding(from.get_channel_binding());
}

/// One host: connect, then make sure its session can write. `only_host`: the URL names no
/// other, so a standby here is a mistake to report rather than a failover to wait out.
async fn open_host(target: &Target, only_host: bool) -> Result<Connected, BrokerError> {
    let mut target = target.clone();
    // drover's own check below names the standby; tokio-postgres's would only say "database
    // does not allow writes".
    target
        .config
        .target_session_attrs(tokio_postgres::config::TargetSessionAttrs::Any);
    let address = target.address.clone();
    let attempts = async {
        match attempt(&target.config, &target.tls, &address).await {
            Err((e, true)) if target.tls.falls_back_to_plain() => {
                tracing::warn!(
                    "{e}; sslmode={} allows a plain connection, so connecting without TLS",
                    target.tls.mode.as_str()
                );
                let plain = TlsPolicy::disabled();
                let mut config = target.config.clone();
                config.ssl_mode(plain.negotiation());
                attempt(&config, &plain, &address).await
            }
            other => other,
        }
    };
    let timed_out = || BrokerError::ConnectTimedOut {
        address: address.clone(),
        seconds: CONNECT_TIMEOUT.as_secs(),
    };
    let (client, mut connection) = tokio::time::timeout(CONNECT_TIMEOUT, attempts)
        .await
        .map_err(|_| timed_out())?
        .map_err(|(e, _)| e)?;
    // The check needs the connection driven; the caller takes it over afterwards. A simple
    // query: no statement is prepared, so it is safe through any pooler.
    let check = client
        .simple_query("SELECT pg_is_in_recovery()::text, current_setting('transaction_read_only')");
    let messages = {
        // The connection's end: its error, or `None` when the server closed it cleanly.
        let drive = std::future::poll_fn(|cx| loop {
            // Notices before the answer are not the caller's yet: dropped.
            match connection.poll_message(cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(e)),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        });
        let about = "checking that the server takes writes";
        let checked = async {
            tokio::select! {
                answer = check => answer.map_err(BrokerError::query(about)),
                ended = drive => Err(match ended {
                    Some(e) => BrokerError::query(about)(e),
                    None => BrokerError::ClosedAtLogin { address: address.clone() },
                }),
            }
        };
        tokio::time::timeout(CONNECT_TIMEOUT, checked)
            .await
            .map_err(|_| timed_out())??
    };
    let row = messages.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
        _ => None,
    });
    let (in_recovery, read_only) = match row {
        Some(row) => (row.get(0) == Some("true"), row.get(1) == Some("on")),
        None => (false, false),
    };
    if in_recovery {
        return Err(BrokerError::Standby { address, only_host });
    }
    if read_only {
        return Err(BrokerError::ReadOnly { address });
    }
    Ok(Connected {
        client,
        connection,
        address,
    })
}

/// One connection attempt with `policy`'s TLS. The flag is true when the TLS handshake failed.
async fn attempt(
    config: &Config,
    policy: &TlsPolicy,
    address: &str,
) -> Result<(Client, Connection), (BrokerError, bool)> {
    let tls = policy
        .connector(config.get_ssl_negotiation())
        .map_err(|p| {
            let e = BrokerError::Config(vec![format!("TLS for PostgreSQL at {address}: {p}")]);
            (e, false)
        })?;
    let report = tls.report();
    config.connect(tls).await.map_err(|source| {
        let address = address.to_string();
        let error = match report.explain(&source, policy) {
            Some(problem) => BrokerError::Tls {
                address,
                problem,
                source,
            },
            None => BrokerError::Connect {
                hint: tls::server_hint(&source, policy).unwrap_or_else(|| {
                    "check that the server is running and that the URL (--database-url / DATABASE_URL) is right".into()
                }),
                address,
                source,
            },
        };
        (error, report.handshake_failed())
    })
}

/// Server-side limits a connection sets right after it logs in, so that the server itself ends
/// a statement, or a transaction left idle, that the client gave up on — even when the client's
/// deadline fired and the connection lingers half-open. `None` leaves the server's (or the
/// role's) setting; `Some(Duration::ZERO)` turns the limit off. The default sets nothing.
///
/// They are set with `SET` rather than in the startup packet (`options=-c …`), which connection
/// poolers such as PgBouncer refuse or drop; a later `SET` on the connection overrides them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Session {
    /// `statement_timeout`.
    pub statement_timeout: Option<Duration>,
    /// `idle_in_transaction_session_timeout`.
    pub idle_in_transaction_timeout: Option<Duration>,
}

impl Session {
    /// This session with another `statement_timeout` (e.g. a longer one for VACUUM).
    pub fn with_statement_timeout(mut self, timeout: Duration) -> Session {
        self.statement_timeout = Some(timeout);
        self
    }

    /// The `SET` statements, or `None` when there is nothing to set.
    pub fn sql(&self) -> Option<String> {
        let sets: Vec<String> = [
            ("statement_timeout", self.statement_timeout),
            (
                "idle_in_transaction_session_timeout",
                self.idle_in_transaction_timeout,
            ),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some(format!("SET {name} = {}", millis(value?))))
        .collect();
        (!sets.is_empty()).then(|| sets.join("; "))
    }
}

/// A timeout as PostgreSQL takes it: whole milliseconds (an integer), rounded up so that a
/// positive timeout never becomes 0 (off), at most `i32::MAX`.
fn millis(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128)
}

/// Connects once and spawns the connection's driver task; no server-side timeouts are set
/// ([`connect_once_with`] sets them). For tools and tests; the master's connections use
/// [`connect_once_with`].
pub async fn connect_once(url: &str) -> Result<Client, BrokerError> {
    connect_once_with(url, &Session::default()).await
}

/// How long the pooler check waits for the second connection's answer. A session pooler with no
/// free server makes it wait; that is no transaction pooler, so the check then passes.
const POOLER_CHECK_WAIT: Duration = Duration::from_secs(2);

/// Refuses a connection whose server process is shared with other client connections — a
/// pooler in transaction or statement mode (PgBouncer, RDS Proxy, …). Two sessions open at the
/// same time never share a backend directly or through a session pooler, so the same
/// `pg_backend_pid()` on a second connection opened now, or a changed one on this connection,
/// proves a shared server. PgBouncer hands out the server it used last, so in transaction mode
/// the second connection gets this one's. Simple queries only, nothing set.
async fn refuse_shared_server(
    client: &Client,
    url: &str,
    address: &str,
) -> Result<(), BrokerError> {
    let refused = |pid| BrokerError::TransactionPooler {
        address: address.to_string(),
        pid,
    };
    let first = backend_pid(client).await?;
    let second = async {
        let other = open(url).await.ok()?;
        let Connected {
            client, connection, ..
        } = other;
        let driver = tokio::spawn(connection);
        let pid = backend_pid(&client).await.ok();
        drop(client);
        driver.abort();
        pid
    };
    match tokio::time::timeout(POOLER_CHECK_WAIT, second).await {
        Ok(Some(pid)) if pid == first => return Err(refused(pid)),
        Ok(_) => {}
        Err(_) => {
            tracing::debug!(%address, "pooler check: a second connection got no server in time; taking the session as its own")
        }
    }
    match backend_pid(client).await? {
        again if again != first => Err(refused(first)),
        _ => Ok(()),
    }
}

/// The connection's server process, by a simple query.
async fn backend_pid(client: &Client) -> Result<i32, BrokerError> {
    let about = "asking the server for its process id";
    let messages = tokio::time::timeout(
        CONNECT_TIMEOUT,
        client.simple_query("SELECT pg_backend_pid()"),
    )
    .await
    .map_err(|_| BrokerError::TimedOut { about })?
    .map_err(BrokerError::query(about))?;
    Ok(messages
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
            _ => None,
        })
        .unwrap_or(0))
}

/// Connects once, spawns the connection's driver task and sets the session's server-side
/// timeouts, all within [`CONNECT_TIMEOUT`] per step. Every connection of the master is made
/// here: [`crate::BrokerConfig::session`] for its statements,
/// [`crate::BrokerConfig::compaction_session`] for VACUUM and REINDEX.
pub async fn connect_once_with(url: &str, session: &Session) -> Result<Client, BrokerError> {
    Ok(connect_once_to(url, session).await?.0)
}

/// [`connect_once_with`], with the "host:port/db" of the host that answered (of several in the
/// URL, the first writable one), for the caller's log lines.
pub async fn connect_once_to(
    url: &str,
    session: &Session,
) -> Result<(Client, String), BrokerError> {
    let Connected {
        client,
        connection,
        address,
    } = open(url).await?;
    let driver_address = address.clone();
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(address = %driver_address, error = %e, "database connection closed");
        }
    });
    if let Some(sql) = session.sql() {
        // Session settings on a pooled server connection would leak to other clients and not
        // hold for ours: refuse a pooler that shares servers between sessions before any.
        refuse_shared_server(&client, url, &address).await?;
        match tokio::time::timeout(CONNECT_TIMEOUT, client.batch_execute(&sql)).await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                return Err(BrokerError::Query {
                    about: "setting the connection's server-side timeouts",
                    source,
                })
            }
            Err(_) => {
                return Err(BrokerError::ConnectTimedOut {
                    address,
                    seconds: CONNECT_TIMEOUT.as_secs(),
                })
            }
        }
    }
    Ok((client, address))
}

/// How often [`connect_with_retry`] says that it still cannot connect.
pub const STILL_FAILING_EVERY: Duration = Duration::from_secs(30);

/// Exponential backoff with jitter: each step doubles, up to a ceiling, and each wait is drawn
/// at random between half and all of the step, so that masters that lost the same server do not
/// all come back in the same instant.
#[derive(Debug, Clone)]
pub struct Backoff {
    /// The first step, again after [`Backoff::reset`].
    min: Duration,
    /// The current step.
    step: Duration,
    /// The largest step.
    max: Duration,
}

impl Backoff {
    /// Starting at `min`, never above `max`.
    pub fn new(min: Duration, max: Duration) -> Backoff {
        let min = min.min(max);
        Backoff {
            min,
            step: min,
            max,
        }
    }

    /// The next wait.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.step;
        self.step = step.saturating_mul(2).min(self.max);
        let half = step / 2;
        half + half.mul_f64(random_fraction())
    }

    /// Back to the first step, after a success.
    pub fn reset(&mut self) {
        self.step = self.min;
    }
}

/// A number in [0, 1) from the system's random source.
fn random_fraction() -> f64 {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 8];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{ClientCert, RootCert, SslMode};

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
    fn redaction_hides_passwords_wherever_the_parser_finds_them() {
        // A '/' in the password: tokio-postgres takes credentials up to the first '@'.
        assert_eq!(
            redact("postgres://app:pa/ss@db/x?sslmode=require"),
            "postgres://app:***@db/x?sslmode=require"
        );
        // password= in the query string, percent-encoded key too.
        assert_eq!(
            redact(
                "postgres://db/x?user=a&password=s3cret&sslmode=verify-full&sslrootcert=/ca.pem"
            ),
            "postgres://db/x?user=a&password=***&sslmode=verify-full&sslrootcert=/ca.pem"
        );
        assert_eq!(
            redact("postgres://db/x?pass%77ord=s3cret"),
            "postgres://db/x?pass%77ord=***"
        );
        // An escaped space in an unquoted value.
        assert_eq!(
            redact("host=db password=s3\\ cret sslmode=require"),
            "host=db password=*** sslmode=require"
        );
        // Unreadable from some point on: hidden from there.
        assert_eq!(redact("host=db password='s3cret"), "host=db password=***");
        assert_eq!(redact("host=db =s3cret"), "host=db ***");
    }

    #[test]
    fn redacts_the_password_of_a_pdo_dsn() {
        assert_eq!(
            redact("pgsql:host=127.0.0.1;port=5432;dbname=drover;user=drover;password=abc123"),
            "pgsql:host=127.0.0.1;port=5432;dbname=drover;user=drover;password=***"
        );
        assert_eq!(
            redact("pgsql:password=abc;host=db"),
            "pgsql:password=***;host=db"
        );
        assert_eq!(
            redact("pgsql:host=/run/pg;dbname=d"),
            "pgsql:host=/run/pg;dbname=d"
        );
    }

    #[test]
    fn a_session_sets_whole_milliseconds_and_only_what_it_has() {
        assert_eq!(Session::default().sql(), None);
        let session = Session {
            statement_timeout: Some(Duration::from_millis(1500)),
            idle_in_transaction_timeout: Some(Duration::from_secs(30)),
        };
        assert_eq!(
            session.sql().unwrap(),
            "SET statement_timeout = 1500; SET idle_in_transaction_session_timeout = 30000"
        );
        let session = Session::default().with_statement_timeout(Duration::from_micros(1));
        assert_eq!(
            session.sql().unwrap(),
            "SET statement_timeout = 1",
            "never 0 (off)"
        );
        let off = Session::default().with_statement_timeout(Duration::ZERO);
        assert_eq!(off.sql().unwrap(), "SET statement_timeout = 0");
        let huge = Session::default().with_statement_timeout(Duration::from_secs(u64::MAX));
        assert_eq!(
            huge.sql().unwrap(),
            format!("SET statement_timeout = {}", i32::MAX)
        );
    }

    #[test]
    fn backoff_doubles_to_its_ceiling_with_jitter() {
        let (min, max) = (Duration::from_millis(100), Duration::from_millis(1000));
        let mut backoff = Backoff::new(min, max);
        for step in [100u64, 200, 400, 800, 1000, 1000, 1000] {
            let d = backoff.next_delay();
            let step = Duration::from_millis(step);
            assert!(
                d >= step / 2 && d <= step,
                "{d:?} not within [{:?}, {step:?}]",
                step / 2
            );
        }
        // Jitter: 20 waits at the ceiling are not all alike.
        let many: Vec<Duration> = (0..20).map(|_| backoff.next_delay()).collect();
        assert!(many.iter().any(|d| *d != many[0]), "{many:?}");
        backoff.reset();
        assert!(backoff.next_delay() <= min);
    }

    #[test]
    fn each_host_of_a_failover_url_is_tried_alone_with_its_port_and_every_other_setting() {
        let target = parse("host=a,b port=5432,5433 dbname=d user=u password=p application_name=x target_session_attrs=read-write").unwrap();
        let hosts = target.each_host();
        let addresses: Vec<&str> = hosts.iter().map(|t| t.address.as_str()).collect();
        assert_eq!(addresses, ["a:5432/d", "b:5433/d"]);
        for t in &hosts {
            assert_eq!(t.config.get_hosts().len(), 1);
            assert_eq!(t.config.get_user(), Some("u"));
            assert_eq!(t.config.get_password(), Some(&b"p"[..]));
            assert_eq!(t.config.get_application_name(), Some("x"));
        }
        // One port for every host, as libpq reads it; in a URL each host has its own.
        let one_port = parse("host=a,b port=6432 dbname=d").unwrap().each_host();
        let addresses: Vec<&str> = one_port.iter().map(|t| t.address.as_str()).collect();
        assert_eq!(addresses, ["a:6432/d", "b:6432/d"]);
        let url = parse("postgres://u@a:6432,b:6433/d").unwrap().each_host();
        let addresses: Vec<&str> = url.iter().map(|t| t.address.as_str()).collect();
        assert_eq!(addresses, ["a:6432/d", "b:6433/d"]);
        // A single host is the target itself.
        assert_eq!(parse("host=a dbname=d").unwrap().each_host().len(), 1);
    }

    #[test]
    fn describes_tcp_and_socket_addresses() {
        let c: Config = "postgres://u:p@10.1.2.3:6543/app".parse().unwrap();
        assert_eq!(describe_address(&c), "10.1.2.3:6543/app");
        let c: Config = "host=/tmp/sock dbname=d".parse().unwrap();
        assert_eq!(describe_address(&c), "unix socket /tmp/sock:5432/d");
    }

    #[test]
    fn parses_tls_options_in_the_url_form() {
        let t = parse(
            "postgres://u:p@db.example.com:6543/app?application_name=x&sslmode=verify-full&sslrootcert=/etc/ssl/my%20ca.pem&sslcert=/c.pem&sslkey=/k.pem",
        )
        .unwrap();
        assert_eq!(t.address, "db.example.com:6543/app");
        assert_eq!(t.tls.mode, SslMode::VerifyFull);
        assert_eq!(
            t.tls.root_cert,
            Some(RootCert::File("/etc/ssl/my ca.pem".into()))
        );
        assert_eq!(
            t.tls.client,
            Some(ClientCert {
                cert: "/c.pem".into(),
                key: "/k.pem".into()
            })
        );
        assert_eq!(t.config.get_application_name(), Some("x"));
        assert_eq!(t.config.get_password(), Some(&b"p"[..]));
        assert_eq!(
            t.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        // Only TLS keys: the query string goes.
        let t = parse("postgresql://db/app?sslmode=disable").unwrap();
        assert_eq!(t.tls, TlsPolicy::disabled());
        assert_eq!(
            t.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable
        );
    }

    #[test]
    fn parses_tls_options_in_the_key_value_form() {
        let t = parse(
            "host='db' port = 5432 user=app password='a b\\'c' sslmode='verify-ca' sslrootcert='/etc/my ca.pem' dbname=app",
        )
        .unwrap();
        assert_eq!(t.address, "db:5432/app");
        assert_eq!(t.tls.mode, SslMode::VerifyCa);
        assert_eq!(
            t.tls.root_cert,
            Some(RootCert::File("/etc/my ca.pem".into()))
        );
        assert_eq!(t.config.get_password(), Some(&b"a b'c"[..]));
        assert_eq!(t.config.get_user(), Some("app"));
        // sslrootcert=system alone means verify-full.
        let t = parse("host=db sslrootcert=system").unwrap();
        assert_eq!(t.tls.mode, SslMode::VerifyFull);
        assert_eq!(t.tls.root_cert, Some(RootCert::System));
    }

    #[test]
    fn a_unix_socket_never_uses_tls_as_in_libpq() {
        let t = parse("host=/run/postgresql sslmode=verify-full dbname=d").unwrap();
        assert_eq!(t.tls, TlsPolicy::disabled());
    }

    #[test]
    fn hostaddr_without_host_is_the_name_checked() {
        let t = parse("hostaddr=127.0.0.1 sslmode=require").unwrap();
        assert_eq!(t.config.get_hosts(), &[Host::Tcp("127.0.0.1".into())]);
    }

    #[test]
    fn bad_tls_options_are_configuration_errors_that_name_the_problem() {
        let err = parse("postgres://u:hunter2@db/x?sslmode=verify_full").unwrap_err();
        assert!(err.contains("\"verify_full\""), "{err}");
        assert!(err.contains("verify-ca, verify-full"), "{err}");
        assert!(!err.contains("hunter2"), "password leaked: {err}");
        let err = parse("host=db password=hunter2 sslmode=bogus").unwrap_err();
        assert!(
            err.contains("\"bogus\"") && !err.contains("hunter2"),
            "{err}"
        );
        let err = parse("host=db sslmode='verify-full").unwrap_err();
        assert!(err.contains("unterminated"), "{err}");
        let err = parse("postgres://u:hunter2@db:notaport/x").unwrap_err();
        assert!(
            err.contains("does not parse") && !err.contains("hunter2"),
            "{err}"
        );
    }
}
