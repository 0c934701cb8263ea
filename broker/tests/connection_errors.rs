//! What a failure means, decided by `BrokerError::is_connection_lost` and
//! `BrokerError::is_permanent`, checked against the errors a real PostgreSQL 15 gives: a wrong
//! password, an unknown role or database, a role without CONNECT, a certificate that does not
//! verify (permanent); a refused connection, too many connections (53300), a terminated backend
//! (57P01), a fast restart with `pg_ctl restart -m fast`, a session ended for idling in a
//! transaction (lost); a failed or cancelled statement (neither). And what start-up does with
//! them (`connect_with_retry`), that its connection carries the master's server-side timeouts,
//! and that the LISTEN connection comes back.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;

use drover_broker::connect::{connect_once, connect_once_with, Session};
use drover_broker::connect_retry::connect_with_retry;
use drover_broker::{
    listener, Broker, BrokerConfig, BrokerError, EmbeddedConfig, EmbeddedPostgres, SystemClock,
};
use support::{db, tempdir};
use tokio_postgres::error::SqlState;

/// A statement's error as the broker reports it.
fn query_error(e: tokio_postgres::Error) -> BrokerError {
    BrokerError::Query {
        about: "testing",
        source: e,
    }
}

async fn connect_err(url: &str) -> BrokerError {
    match connect_once(url).await {
        Ok(_) => panic!("connected with {url}"),
        Err(e) => e,
    }
}

fn sqlstate(e: &BrokerError) -> Option<String> {
    let source = match e {
        BrokerError::Connect { source, .. }
        | BrokerError::Query { source, .. }
        | BrokerError::Tls { source, .. } => source,
        _ => return None,
    };
    source.code().map(|c| c.code().to_string())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A config whose backoff would make a second attempt obvious.
fn slow_retry_config(url: &str) -> BrokerConfig {
    let mut config = BrokerConfig::new(url);
    config.connect_backoff_min = Duration::from_secs(5);
    config.connect_backoff_max = Duration::from_secs(5);
    config
}

/// Start-up gives up at once on `url`, with this SQLSTATE and the server's words.
async fn start_up_gives_up(url: &str, code: &str, words: &str) {
    let at = Instant::now();
    let e = tokio::time::timeout(
        Duration::from_secs(4),
        connect_with_retry(&slow_retry_config(url)),
    )
    .await
    .unwrap_or_else(|_| panic!("start-up kept retrying {url}"))
    .err()
    .unwrap_or_else(|| panic!("connected with {url}"));
    assert!(at.elapsed() < Duration::from_secs(4));
    assert!(e.is_permanent(), "{e:?}");
    assert_eq!(sqlstate(&e).as_deref(), Some(code), "{e:?}");
    let message = e.to_string();
    assert!(message.contains(words), "{words:?} not in: {message}");
}

#[tokio::test]
async fn an_unknown_role_or_database_and_a_role_without_connect_are_permanent() {
    let db = db().await;
    let url = db.pg.url().to_string();
    let admin = connect_once(&url).await.unwrap();
    for sql in [
        "CREATE ROLE outsider LOGIN",
        "CREATE DATABASE closed",
        "REVOKE CONNECT ON DATABASE closed FROM PUBLIC",
    ] {
        admin.batch_execute(sql).await.unwrap();
    }
    let with = |from: &str, to: &str| url.replace(from, to);

    let cases = [
        (
            with("dbname=drover", "dbname=nosuchdb"),
            "3D000",
            "database \"nosuchdb\" does not exist",
        ),
        (
            with("user=drover", "user=nosuchrole"),
            "28000",
            "role \"nosuchrole\" does not exist",
        ),
        (
            with("user=drover dbname=drover", "user=outsider dbname=closed"),
            "42501",
            "permission denied for database \"closed\"",
        ),
    ];
    for (url, code, words) in &cases {
        let e = connect_err(url).await;
        assert!(matches!(e, BrokerError::Connect { .. }), "{e:?}");
        assert!(e.is_permanent(), "{code}: {e:?}");
        // No connection came of it: at runtime this is retried like any lost connection.
        assert!(e.is_connection_lost(), "{code}: {e:?}");
        start_up_gives_up(url, code, words).await;
    }
}

#[tokio::test]
async fn a_refused_connection_is_transient_and_start_up_waits_for_the_server() {
    let port = free_port();
    let url = format!("host=127.0.0.1 port={port} user=drover dbname=drover");
    let e = connect_err(&url).await;
    assert!(e.is_connection_lost() && !e.is_permanent(), "{e:?}");

    let mut config = BrokerConfig::new(url.clone());
    config.connect_backoff_min = Duration::from_millis(50);
    config.connect_backoff_max = Duration::from_millis(200);
    let retrying = tokio::spawn(async move { connect_with_retry(&config).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !retrying.is_finished(),
        "start-up gave up on a server that is down"
    );

    let dir = tempdir("drover-refused-");
    let mut embedded = EmbeddedConfig::new(dir.path().join("db"));
    embedded.tcp_port = Some(port);
    embedded.settings.push(("fsync".into(), "off".into()));
    let pg = EmbeddedPostgres::start(&embedded).await.unwrap();
    let client = tokio::time::timeout(Duration::from_secs(20), retrying)
        .await
        .expect("connected once the server came")
        .unwrap()
        .unwrap();
    // The start-up connection carries the master's server-side timeouts: 3/5 of the 30 s
    // lease, and the lease.
    assert_eq!(show(&client, "statement_timeout").await, "18s");
    assert_eq!(
        show(&client, "idle_in_transaction_session_timeout").await,
        "30s"
    );
    drop(client);
    pg.stop().await;
}

async fn show(client: &tokio_postgres::Client, name: &str) -> String {
    client
        .query_one(&format!("SHOW {name}"), &[])
        .await
        .unwrap()
        .get(0)
}

async fn backend_pid(client: &tokio_postgres::Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

/// Runs `SELECT pg_sleep(60)` on a new connection; returns its outcome to come and its
/// backend's PID, once it runs.
async fn sleeping_statement(
    url: &str,
    admin: &tokio_postgres::Client,
) -> (
    tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
    i32,
) {
    let sleeper = connect_once(url).await.unwrap();
    let sleeper_pid = backend_pid(&sleeper).await;
    let task = tokio::spawn(async move {
        sleeper
            .batch_execute("SELECT pg_sleep(60)")
            .await
            .map(|_| ())
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let active: bool = admin
            .query_one(
                "SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE 'SELECT pg_sleep%' AND state = 'active'",
                &[&sleeper_pid],
            )
            .await
            .unwrap()
            .get(0);
        if active {
            break;
        }
        assert!(Instant::now() < deadline, "pg_sleep never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (task, sleeper_pid)
}

#[tokio::test]
async fn a_terminated_backend_is_a_lost_connection_not_a_failed_statement() {
    let db = db().await;
    let url = db.pg.url();
    let admin = connect_once(url).await.unwrap();

    // Terminated while running a statement: the statement gets 57P01.
    let (sleeping, pid) = sleeping_statement(url, &admin).await;
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    let e = query_error(sleeping.await.unwrap().unwrap_err());
    assert_eq!(sqlstate(&e).as_deref(), Some("57P01"), "{e:?}");
    assert!(e.is_connection_lost(), "{e:?}");
    assert!(!e.is_permanent(), "{e:?}");

    // Terminated while idle: the next statement finds the connection gone.
    let idle = connect_once(url).await.unwrap();
    let pid = backend_pid(&idle).await;
    admin
        // Waits (up to 10 s) until the backend is gone.
        .execute("SELECT pg_terminate_backend($1, 10000)", &[&pid])
        .await
        .unwrap();
    let e = query_error(idle.batch_execute("SELECT 1").await.unwrap_err());
    assert!(e.is_connection_lost(), "{e:?}");
    assert!(!e.is_permanent(), "{e:?}");
}

#[tokio::test]
async fn a_failed_or_cancelled_statement_is_neither_lost_nor_permanent() {
    let db = db().await;
    let client = connect_once_with(
        db.pg.url(),
        // 1 s: the quick statements below must not run into it on a loaded machine.
        &Session::default().with_statement_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let e = query_error(client.batch_execute("SELECT 1/0").await.unwrap_err());
    assert_eq!(sqlstate(&e).as_deref(), Some("22012"));
    assert!(!e.is_connection_lost() && !e.is_permanent(), "{e:?}");
    let e = query_error(
        client
            .batch_execute("SELECT * FROM nosuchtable")
            .await
            .unwrap_err(),
    );
    assert!(!e.is_connection_lost() && !e.is_permanent(), "{e:?}");
    // The server-side statement_timeout cancels the statement; the connection stays.
    let e = query_error(
        client
            .batch_execute("SELECT pg_sleep(5)")
            .await
            .unwrap_err(),
    );
    assert_eq!(
        sqlstate(&e).as_deref(),
        Some(SqlState::QUERY_CANCELED.code())
    );
    assert!(!e.is_connection_lost() && !e.is_permanent(), "{e:?}");
    client.batch_execute("SELECT 1").await.unwrap();
}

#[tokio::test]
async fn a_transaction_left_idle_is_ended_by_the_server_and_that_is_a_lost_connection() {
    let db = db().await;
    let admin = connect_once(db.pg.url()).await.unwrap();
    admin
        .batch_execute("CREATE TABLE locked (id int); INSERT INTO locked VALUES (1)")
        .await
        .unwrap();
    let session = Session {
        statement_timeout: Some(Duration::from_secs(5)),
        idle_in_transaction_timeout: Some(Duration::from_millis(300)),
    };
    let client = connect_once_with(db.pg.url(), &session).await.unwrap();
    client
        .batch_execute("BEGIN; SELECT * FROM locked FOR UPDATE")
        .await
        .unwrap();
    // The client goes quiet with the row locked; the server ends the session and the lock goes
    // (300 ms on; a loaded server may take longer to act, not forever).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let locked: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'locked' AND l.pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if locked == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the idle transaction still holds its lock after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e = query_error(client.batch_execute("SELECT 1").await.unwrap_err());
    assert!(e.is_connection_lost(), "{e:?}");
}

/// Where `pg_ctl` is: the newest /usr/lib/postgresql/*/bin, as the embedded cluster finds it.
fn pg_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions.pop().expect("PostgreSQL installed").1
}

/// `pg_ctl` on the cluster's data directory, as the cluster's OS user.
fn pg_ctl(data_dir: &Path, args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = std::process::Command::new(pg_bin().join("pg_ctl"));
    cmd.arg("-D").arg(data_dir).args(args).current_dir("/");
    if nix::unistd::geteuid().is_root() {
        let user = nix::unistd::User::from_name("postgres").unwrap().unwrap();
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    cmd.output().unwrap()
}

/// Stops the server `pg_ctl restart` started (not the test's child) however the test ends.
struct Restarted<'a>(&'a Path);

impl Drop for Restarted<'_> {
    fn drop(&mut self) {
        pg_ctl(self.0, &["stop", "-m", "immediate", "-w"]);
    }
}

#[tokio::test]
async fn a_fast_restart_is_a_lost_connection_and_the_broker_carries_on() {
    let db = db().await;
    let url = db.pg.url().to_string();
    let data_dir = db.pg.data_dir().to_path_buf();
    let admin = connect_once(&url).await.unwrap();
    let mut config = BrokerConfig::new(url.clone());
    // Each call has half the lease: room for a loaded machine.
    config.lease = Duration::from_secs(10);
    let broker = Broker::start(config, Arc::new(SystemClock)).await.unwrap();
    broker.claim(&["default".to_string()], 1).await.unwrap();
    let (sleeping, _) = sleeping_statement(&url, &admin).await;

    // In the data directory: the server's OS user writes it.
    let log = data_dir.join("restart.log");
    let out = pg_ctl(
        &data_dir,
        &["restart", "-m", "fast", "-w", "-l", log.to_str().unwrap()],
    );
    let _restarted = Restarted(&data_dir);
    assert!(
        out.status.success(),
        "pg_ctl restart: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // What was running when the server went down: 57P01, a lost connection.
    let e = query_error(sleeping.await.unwrap().unwrap_err());
    assert_eq!(sqlstate(&e).as_deref(), Some("57P01"), "{e:?}");
    assert!(e.is_connection_lost() && !e.is_permanent(), "{e:?}");
    // An idle connection of that server: lost too.
    let e = query_error(admin.batch_execute("SELECT 1").await.unwrap_err());
    assert!(e.is_connection_lost() && !e.is_permanent(), "{e:?}");

    // The broker's statements fail only as lost connections, then work on a new connection.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match broker.claim(&["default".to_string()], 1).await {
            Ok(_) => break,
            Err(e) => {
                assert!(e.is_connection_lost(), "{e:?}");
                assert!(Instant::now() < deadline, "no reconnect: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// A cluster on 127.0.0.1 with TLS on, presenting a certificate for `localhost` that a
/// throwaway CA signed.
struct TlsCluster {
    pg: Option<EmbeddedPostgres>,
    port: u16,
    ca: PathBuf,
    other_ca: PathBuf,
    _dir: tempfile::TempDir,
}

impl TlsCluster {
    async fn start() -> TlsCluster {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let dir = tempdir("drover-certs-");
        let make_ca = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            (params.self_signed(&key).unwrap(), key)
        };
        let (ca, ca_key) = make_ca("drover test CA");
        let (other, _) = make_ca("unrelated CA");
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&server_key, &ca, &ca_key)
            .unwrap();
        let write = |name: &str, text: String, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path
        };
        let ca_path = write("ca.pem", ca.pem(), 0o644);
        let other_ca = write("other.pem", other.pem(), 0o644);
        let cert = write("server.pem", server.pem(), 0o644);
        let key = write("server.key", server_key.serialize_pem(), 0o600);
        if nix::unistd::geteuid().is_root() {
            // The server, running as postgres, reads its key, which must be 0600 and its own.
            let user = nix::unistd::User::from_name("postgres").unwrap().unwrap();
            nix::unistd::chown(&key, Some(user.uid), Some(user.gid)).unwrap();
        }
        let port = free_port();
        let mut config = EmbeddedConfig::new(dir.path().join("db"));
        config.tcp_port = Some(port);
        for (name, value) in [
            ("fsync", "off".to_string()),
            ("ssl", "on".to_string()),
            ("ssl_cert_file", cert.display().to_string()),
            ("ssl_key_file", key.display().to_string()),
        ] {
            config.settings.push((name.into(), value));
        }
        let pg = EmbeddedPostgres::start(&config).await.unwrap();
        TlsCluster {
            pg: Some(pg),
            port,
            ca: ca_path,
            other_ca,
            _dir: dir,
        }
    }
}

#[tokio::test]
async fn a_certificate_that_does_not_verify_is_permanent_a_server_without_tls_is_not() {
    let mut db = TlsCluster::start().await;
    let url = |host: &str, ca: &Path| {
        format!(
            "host={host} hostaddr=127.0.0.1 port={} user=drover dbname=drover sslmode=verify-full sslrootcert={}",
            db.port,
            ca.display()
        )
    };
    // The right CA and name: fine.
    connect_once(&url("localhost", &db.ca)).await.unwrap();
    // Not trusted, and the wrong host name.
    for bad in [url("localhost", &db.other_ca), url("db.invalid", &db.ca)] {
        let e = connect_err(&bad).await;
        assert!(matches!(e, BrokerError::Tls { .. }), "{e:?}");
        assert!(e.is_permanent(), "{e:?}");
        let at = Instant::now();
        let e = tokio::time::timeout(
            Duration::from_secs(4),
            connect_with_retry(&slow_retry_config(&bad)),
        )
        .await
        .expect("start-up kept retrying a certificate that does not verify")
        .err()
        .unwrap();
        assert!(e.to_string().contains("certificate verify failed"), "{e}");
        assert!(at.elapsed() < Duration::from_secs(4));
    }
    db.pg.take().unwrap().stop().await;

    // A server without TLS where TLS is required: a TLS error, but not a certificate one.
    let dir = tempdir("drover-plain-");
    let mut config = EmbeddedConfig::new(dir.path().join("db"));
    config.tcp_port = Some(db.port);
    config.settings.push(("fsync".into(), "off".into()));
    let plain = EmbeddedPostgres::start(&config).await.unwrap();
    let e = connect_err(&format!(
        "host=localhost port={} user=drover dbname=drover sslmode=require",
        db.port
    ))
    .await;
    assert!(matches!(e, BrokerError::Tls { .. }), "{e:?}");
    assert!(e.is_connection_lost() && !e.is_permanent(), "{e:?}");
    plain.stop().await;
}

#[tokio::test]
async fn the_listen_connection_comes_back_after_its_backend_is_terminated() {
    let db = db().await;
    let admin = connect_once(db.pg.url()).await.unwrap();
    let wakes = listener::Wakes::default();
    let (wake, pauses) = (wakes.jobs.clone(), wakes.pauses.clone());
    let task = listener::spawn(db.pg.url().to_string(), wakes);
    let listening = || async {
        admin
            .query_opt(
                "SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN drover_jobs'",
                &[],
            )
            .await
            .unwrap()
            .map(|r| r.get::<_, i32>(0))
    };
    tokio::time::timeout(Duration::from_secs(10), wake.notified())
        .await
        .expect("the listener connects and wakes the master");
    tokio::time::timeout(Duration::from_secs(1), pauses.notified())
        .await
        .expect("and has it read the paused queues");
    let pid = listening().await.expect("a LISTEN backend");
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    // A reconnect wakes the master (notifications may have been missed meanwhile).
    tokio::time::timeout(Duration::from_secs(10), wake.notified())
        .await
        .expect("the listener reconnects");
    let again = listening().await.expect("a LISTEN backend again");
    assert_ne!(again, pid);
    tokio::time::timeout(Duration::from_secs(1), pauses.notified())
        .await
        .expect("and the paused queues' wake-up, too");
    admin.batch_execute("NOTIFY drover_jobs").await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), wake.notified())
        .await
        .expect("a NOTIFY reaches the wake-up");
    // A pause wakes the re-read of the paused queues, and only that.
    admin.batch_execute("NOTIFY drover_pauses").await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), pauses.notified())
        .await
        .expect("a pause's NOTIFY reaches its wake-up");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), wake.notified())
            .await
            .is_err(),
        "a pause is not a job to claim"
    );
    task.abort();
}

#[tokio::test]
async fn too_many_connections_is_transient_and_start_up_waits_for_a_free_one() {
    let db = db().await;
    let admin = connect_once(db.pg.url()).await.unwrap();
    admin
        .batch_execute("CREATE ROLE limited LOGIN CONNECTION LIMIT 1")
        .await
        .unwrap();
    let url = db.pg.url().replace("user=drover", "user=limited");
    let held = connect_once(&url).await.unwrap();
    let e = connect_err(&url).await;
    assert_eq!(sqlstate(&e).as_deref(), Some("53300"), "{e:?}");
    assert!(e.is_connection_lost() && !e.is_permanent(), "{e:?}");

    let mut config = BrokerConfig::new(url);
    config.connect_backoff_min = Duration::from_millis(50);
    config.connect_backoff_max = Duration::from_millis(200);
    let retrying = tokio::spawn(async move { connect_with_retry(&config).await });
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!retrying.is_finished(), "start-up gave up on a full server");
    drop(held);
    tokio::time::timeout(Duration::from_secs(10), retrying)
        .await
        .expect("connected once a connection was free")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn the_master_and_the_compaction_get_their_server_side_timeouts() {
    let db = db().await;
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = Duration::from_secs(10);
    let master = connect_once_with(db.pg.url(), &config.session())
        .await
        .unwrap();
    assert_eq!(show(&master, "statement_timeout").await, "6s");
    assert_eq!(
        show(&master, "idle_in_transaction_session_timeout").await,
        "10s"
    );
    let compaction = connect_once_with(db.pg.url(), &config.compaction_session())
        .await
        .unwrap();
    assert_eq!(show(&compaction, "statement_timeout").await, "10min");
    assert_eq!(
        show(&compaction, "idle_in_transaction_session_timeout").await,
        "10s"
    );
    // Tools and tests without a session keep the server's defaults.
    let plain = connect_once(db.pg.url()).await.unwrap();
    assert_eq!(show(&plain, "statement_timeout").await, "0");
}
