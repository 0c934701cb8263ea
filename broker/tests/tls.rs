//! TLS to a real PostgreSQL 15 that accepts only TLS (`hostnossl … reject`): a throwaway CA signs
//! the server's certificate (localhost, 127.0.0.1) and a client certificate; a second, unrelated
//! CA is the wrong one (made with rcgen). Server certificates of the kinds PostgreSQL's
//! documentation makes with the `openssl` command (self-signed with CA:TRUE, X.509 v1) and an
//! expired one are tested too. Every test starts its own cluster and stops it; the directory
//! goes with the test.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use drover_broker::connect::connect_once;
use drover_broker::connect_retry::connect_with_retry;
use drover_broker::{listener, BrokerConfig, BrokerError, EmbeddedConfig, EmbeddedPostgres};
use rcgen::{
    date_time_ymd, BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use tokio_postgres::Client;

/// A certificate and its key.
struct Issued {
    /// Written as PEM for the server, the client or sslrootcert.
    cert: Certificate,
    /// Its private key (ECDSA P-256): signs what a CA issues, or is the server's or the
    /// client's key.
    key: KeyPair,
}

/// Parameters for a certificate for `cn`, valid from 2020 to 2099, not yet signed.
fn params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, cn);
    p.distinguished_name = name;
    p.not_before = date_time_ymd(2020, 1, 1);
    p.not_after = date_time_ymd(2099, 12, 31);
    p
}

fn make_ca(cn: &str) -> Issued {
    let key = KeyPair::generate().unwrap();
    let mut p = params(cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Issued {
        cert: p.self_signed(&key).unwrap(),
        key,
    }
}

/// A leaf certificate for `cn` signed by `ca`; `dns` and `ips` become its subject alternative
/// names. `expired`: it was valid in 2020 only.
fn leaf(cn: &str, dns: &[&str], ips: &[&str], ca: &Issued, expired: bool) -> Issued {
    let key = KeyPair::generate().unwrap();
    let mut p = params(cn);
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.subject_alt_names = dns
        .iter()
        .map(|d| SanType::DnsName((*d).try_into().unwrap()))
        .chain(ips.iter().map(|ip| SanType::IpAddress(ip.parse().unwrap())))
        .collect();
    p.use_authority_key_identifier_extension = true;
    if expired {
        p.not_after = date_time_ymd(2021, 1, 1);
    }
    Issued {
        cert: p.signed_by(&key, &ca.cert, &ca.key).unwrap(),
        key,
    }
}

fn write(path: &Path, bytes: &[u8], mode: u32) -> PathBuf {
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_path_buf()
}

/// Which certificate the server presents.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ServerCert {
    /// Signed by the test CA: CN and SAN localhost, IP SAN 127.0.0.1.
    Standard,
    /// The same, expired on 2021-01-01.
    Expired,
    /// Self-signed with CA:TRUE (PostgreSQL's documentation: `openssl req -new -x509`), and
    /// copied into sslrootcert as the trusted certificate.
    SelfSigned,
    /// X.509 v1, CN=localhost and no SAN, signed by the test CA (PostgreSQL's documentation:
    /// `openssl x509 -req` without extensions).
    V1,
}

/// The files of one test's PKI.
struct Pki {
    /// The CA that signed the server's and the client's certificates (for
    /// [`ServerCert::SelfSigned`], the server's certificate itself).
    ca: PathBuf,
    /// An unrelated CA: the wrong sslrootcert.
    other_ca: PathBuf,
    /// `ssl_cert_file`.
    server_cert: PathBuf,
    /// `ssl_key_file`: 0600, owned by the user PostgreSQL runs as (it refuses it otherwise).
    server_key: PathBuf,
    /// `sslcert` for the user `certuser` (`cert` authentication).
    client_cert: PathBuf,
    /// `sslkey` for it, 0600 as libpq's rule wants.
    client_key: PathBuf,
}

/// Runs the `openssl` command in `dir` (Debian's openssl package: scripts/setup installs it).
fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_pki(dir: &Path, server: ServerCert) -> Pki {
    std::fs::create_dir(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ca = make_ca("drover test CA");
    let other = make_ca("unrelated CA");
    let client = leaf("certuser", &[], &[], &ca, false);
    let pem = |i: &Issued| i.cert.pem();
    let key = |i: &Issued| i.key.serialize_pem();
    let mut pki = Pki {
        ca: write(&dir.join("ca.pem"), pem(&ca).as_bytes(), 0o644),
        other_ca: write(&dir.join("other-ca.pem"), pem(&other).as_bytes(), 0o644),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        client_cert: write(&dir.join("client.pem"), pem(&client).as_bytes(), 0o644),
        client_key: write(&dir.join("client.key"), key(&client).as_bytes(), 0o600),
    };
    match server {
        ServerCert::Standard | ServerCert::Expired => {
            let expired = server == ServerCert::Expired;
            let s = leaf("localhost", &["localhost"], &["127.0.0.1"], &ca, expired);
            write(&pki.server_cert, pem(&s).as_bytes(), 0o644);
            write(&pki.server_key, key(&s).as_bytes(), 0o600);
        }
        ServerCert::SelfSigned => {
            let ec = [
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
            ];
            let mut args = vec![
                "req",
                "-new",
                "-x509",
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
            ];
            args.extend(ec);
            args.extend(["-keyout", "server.key", "-out", "server.pem"]);
            openssl(dir, &args);
            std::fs::copy(&pki.server_cert, dir.join("self-signed.pem")).unwrap();
            pki.ca = dir.join("self-signed.pem");
        }
        ServerCert::V1 => {
            write(&dir.join("ca.key"), key(&ca).as_bytes(), 0o600);
            let ec = [
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
            ];
            let mut args = vec!["req", "-new", "-subj", "/CN=localhost"];
            args.extend(ec);
            args.extend(["-keyout", "server.key", "-out", "server.csr"]);
            openssl(dir, &args);
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    "server.csr",
                    "-days",
                    "2",
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-out",
                    "server.pem",
                ],
            );
        }
    }
    std::fs::set_permissions(&pki.server_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    // PostgreSQL wants its key private to the user it runs as.
    if nix::unistd::geteuid().is_root() {
        let user = nix::unistd::User::from_name("postgres")
            .unwrap()
            .expect("the postgres OS user exists");
        nix::unistd::chown(&pki.server_key, Some(user.uid), Some(user.gid)).unwrap();
    }
    pki
}

/// A running cluster that is stopped however the test ends: [`Running::stop`] after the
/// assertions, or, when one fails, `Drop` (fast shutdown, waited for) before its directory goes.
struct Running(
    /// The cluster; `None` once stopped.
    Option<EmbeddedPostgres>,
);

impl Running {
    async fn stop(mut self) {
        if let Some(pg) = self.0.take() {
            pg.stop().await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(pg) = self.0.take() else { return };
        let pid = pg.pid();
        drop(pg); // sends the fast-shutdown signal
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while let Some(pid) = pid {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            if matches!(state, None | Some('Z')) || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A PostgreSQL on 127.0.0.1 that accepts TLS only: `drover` by trust, `certuser` by client
/// certificate, `scramuser` by password (SCRAM).
struct TlsDb {
    /// Declared before `_dir`, so it is stopped before the directory is removed.
    pg: Running,
    /// The TCP port on 127.0.0.1, for the URLs.
    port: u16,
    /// The certificates the URLs point at.
    pki: Pki,
    /// Holds the cluster, the certificates and pg_hba.conf; removed with the test.
    _dir: tempfile::TempDir,
}

impl TlsDb {
    async fn start() -> TlsDb {
        TlsDb::start_with(ServerCert::Standard).await
    }

    async fn start_with(server: ServerCert) -> TlsDb {
        let dir = tempfile::Builder::new()
            .prefix("drover-tls-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let pki = make_pki(&dir.path().join("pki"), server);
        let hba = write(
            &dir.path().join("pg_hba.conf"),
            b"hostnossl all all all reject\n\
              hostssl all drover 127.0.0.1/32 trust\n\
              hostssl all certuser 127.0.0.1/32 cert\n\
              hostssl all scramuser 127.0.0.1/32 scram-sha-256\n",
            0o644,
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut config = EmbeddedConfig::new(dir.path().join("db"));
        config.tcp_port = Some(port);
        let path = |p: &Path| p.display().to_string();
        for (name, value) in [
            ("fsync", "off".to_string()),
            ("ssl", "on".to_string()),
            ("ssl_cert_file", path(&pki.server_cert)),
            ("ssl_key_file", path(&pki.server_key)),
            ("ssl_ca_file", path(&pki.ca)),
            ("hba_file", path(&hba)),
        ] {
            config.settings.push((name.into(), value));
        }
        let pg = EmbeddedPostgres::start(&config).await.unwrap();
        connect_once(pg.url())
            .await
            .unwrap()
            .batch_execute(
                "CREATE ROLE certuser LOGIN; CREATE ROLE scramuser LOGIN PASSWORD 'sekrit'",
            )
            .await
            .unwrap();
        TlsDb {
            pg: Running(Some(pg)),
            port,
            pki,
            _dir: dir,
        }
    }

    /// `postgres://drover:hunter2@HOST:PORT/drover?QUERY` (trust: the password only has to
    /// stay out of messages).
    fn url(&self, host: &str, query: &str) -> String {
        format!(
            "postgres://drover:hunter2@{host}:{}/drover?{query}",
            self.port
        )
    }

    /// `host='localhost' port='PORT' user='drover' dbname='drover' password='hunter2' EXTRA`.
    fn kv(&self, extra: &str) -> String {
        format!(
            "host='localhost' port='{}' user='drover' dbname='drover' password='hunter2' {extra}",
            self.port
        )
    }

    fn address(&self, host: &str) -> String {
        format!("{host}:{}/drover", self.port)
    }

    async fn stop(self) {
        self.pg.stop().await;
    }
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// pg_stat_ssl's view of the client's own backend.
async fn uses_tls(client: &Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

async fn connect_err(url: &str) -> BrokerError {
    match connect_once(url).await {
        Ok(_) => panic!("connected with {url}"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn verify_full_with_the_right_ca_connects_over_tls_in_both_forms() {
    let db = TlsDb::start().await;
    let ca = p(&db.pki.ca);
    for url in [
        db.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        db.kv(&format!("sslmode='verify-full' sslrootcert='{ca}'")),
        // An IP address is checked against the certificate's IP SAN.
        db.url(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        // require without a CA: encrypted, nothing checked (as libpq).
        db.url("localhost", "sslmode=require"),
        db.kv("sslmode=require"),
        // The default, prefer, takes TLS when offered.
        db.url("localhost", "application_name=x"),
    ] {
        let client = connect_once(&url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(uses_tls(&client).await, "{url} is not encrypted");
    }
    // A password login bound to the TLS session (SCRAM-SHA-256-PLUS, tls-server-end-point).
    let scram = |password: &str| {
        format!(
            "postgres://scramuser:{password}@localhost:{}/drover?sslmode=verify-full&sslrootcert={ca}&channel_binding=require",
            db.port
        )
    };
    let client = connect_once(&scram("sekrit")).await.unwrap();
    assert!(uses_tls(&client).await);
    let message = connect_err(&scram("wrong")).await.to_string();
    assert!(
        message.contains("password authentication failed for user \"scramuser\""),
        "{message}"
    );
    assert!(!message.contains("wrong@"), "password leaked: {message}");
    db.stop().await;
}

#[tokio::test]
async fn the_wrong_ca_is_named_with_what_to_fix() {
    let db = TlsDb::start().await;
    let other = p(&db.pki.other_ca);
    for url in [
        db.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={other}"),
        ),
        db.kv(&format!("sslmode=verify-full sslrootcert={other}")),
        // libpq's rule: require with a root certificate is verify-ca.
        db.url("localhost", &format!("sslmode=require&sslrootcert={other}")),
    ] {
        let e = connect_err(&url).await;
        assert!(matches!(e, BrokerError::Tls { .. }), "{e:?}");
        let message = e.to_string();
        for words in [
            format!(
                "TLS to PostgreSQL at {} failed: certificate verify failed (",
                db.address("localhost")
            ),
            "CN=localhost, issued by CN=drover test CA".to_string(),
            format!("is not signed by the CA in sslrootcert={other}; point sslrootcert at the CA that signed it"),
        ] {
            assert!(message.contains(&words), "{words:?} not in: {message}");
        }
        assert!(!message.contains("hunter2"), "password leaked: {message}");
        assert!(e.is_connection_lost(), "a TLS failure is retried");
    }
    // prefer falls back to plain after a failed handshake, as libpq; this server refuses plain.
    let e = connect_err(&db.url("localhost", &format!("sslmode=prefer&sslrootcert={other}"))).await;
    assert!(e.to_string().contains("no encryption"), "{e}");
    db.stop().await;
}

#[tokio::test]
async fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let db = TlsDb::start().await;
    let ca = p(&db.pki.ca);
    // A name the certificate does not list, reaching the same server through hostaddr.
    let kv = |mode: &str| {
        format!(
            "host=db.invalid hostaddr=127.0.0.1 port={} user=drover dbname=drover sslmode={mode} sslrootcert={ca}",
            db.port
        )
    };
    let url = |mode: &str| {
        db.url(
            "db.invalid",
            &format!("hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={ca}"),
        )
    };
    for wrong in [kv("verify-full"), url("verify-full")] {
        let e = connect_err(&wrong).await;
        let message = e.to_string();
        assert!(matches!(e, BrokerError::Tls { .. }), "{e:?}");
        for words in [
            format!("TLS to PostgreSQL at {} failed", db.address("db.invalid")),
            "hostname mismatch".to_string(),
            "the server's certificate is for localhost, 127.0.0.1, not for db.invalid".to_string(),
            "or use sslmode=verify-ca".to_string(),
        ] {
            assert!(message.contains(&words), "{words:?} not in: {message}");
        }
    }
    for right in [kv("verify-ca"), url("verify-ca")] {
        let client = connect_once(&right)
            .await
            .unwrap_or_else(|e| panic!("{right}: {e}"));
        assert!(uses_tls(&client).await);
    }
    db.stop().await;
}

#[tokio::test]
async fn disable_is_refused_by_the_server_with_its_own_message() {
    let db = TlsDb::start().await;
    for url in [
        db.url("localhost", "sslmode=disable"),
        db.kv("sslmode=disable"),
    ] {
        let e = connect_err(&url).await;
        assert!(matches!(e, BrokerError::Connect { .. }), "{e:?}");
        let message = e.to_string();
        for words in [
            format!(
                "cannot connect to PostgreSQL at {}",
                db.address("localhost")
            ),
            "pg_hba.conf rejects connection".to_string(),
            "no encryption".to_string(),
            "use sslmode=require or verify-full instead of sslmode=disable".to_string(),
        ] {
            assert!(message.contains(&words), "{words:?} not in: {message}");
        }
        assert!(!message.contains("hunter2"), "password leaked: {message}");
    }
    db.stop().await;
}

#[tokio::test]
async fn client_certificates_log_in_and_their_absence_is_explained() {
    let db = TlsDb::start().await;
    let (ca, cert, key) = (p(&db.pki.ca), p(&db.pki.client_cert), p(&db.pki.client_key));
    let url = format!(
        "postgres://certuser@localhost:{}/drover?sslmode=verify-full&sslrootcert={ca}&sslcert={cert}&sslkey={key}",
        db.port
    );
    let kv = format!(
        "host=localhost port={} user=certuser dbname=drover sslmode=verify-full sslrootcert='{ca}' sslcert='{cert}' sslkey='{key}'",
        db.port
    );
    for with_cert in [&url, &kv] {
        let client = connect_once(with_cert)
            .await
            .unwrap_or_else(|e| panic!("{with_cert}: {e}"));
        let row = client
            .query_one(
                "SELECT current_user::text, ssl, client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(0), "certuser");
        assert!(row.get::<_, bool>(1));
        assert_eq!(row.get::<_, String>(2), "/CN=certuser");
    }

    // Without a certificate the server refuses, and the message says what to set.
    let without = format!(
        "postgres://certuser@localhost:{}/drover?sslmode=verify-full&sslrootcert={ca}",
        db.port
    );
    let message = connect_err(&without).await.to_string();
    for words in [
        "connection requires a valid client certificate",
        "set sslcert and sslkey",
    ] {
        assert!(message.contains(words), "{words:?} not in: {message}");
    }

    // Files that cannot be used are configuration errors: named, with the OS error, not retried.
    let missing = db.pki.client_key.with_file_name("missing.key");
    let config = BrokerConfig::new(url.replace(&key, &p(&missing)));
    let e = tokio::time::timeout(Duration::from_secs(5), connect_with_retry(&config))
        .await
        .expect("a configuration error is not retried")
        .unwrap_err();
    assert!(matches!(e, BrokerError::Config(_)), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains(&format!(
            "sslkey={} cannot be read: No such file or directory",
            missing.display()
        )),
        "{message}"
    );
    std::fs::set_permissions(&db.pki.client_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let message = connect_err(&url).await.to_string();
    assert!(message.contains("group or world access"), "{message}");
    let message = connect_err(&db.url("localhost", "sslmode=verify_full"))
        .await
        .to_string();
    assert!(
        message.contains("sslmode=\"verify_full\" is not a valid sslmode; use one of disable, allow, prefer, require, verify-ca, verify-full"),
        "{message}"
    );
    db.stop().await;
}

#[tokio::test]
async fn the_listen_connection_works_over_tls() {
    let db = TlsDb::start().await;
    let url = db.url(
        "localhost",
        &format!(
            "sslmode=verify-full&sslrootcert={}&application_name=drover-listen-test",
            p(&db.pki.ca)
        ),
    );
    let wakes = listener::Wakes::default();
    let wake = wakes.jobs.clone();
    let task = listener::spawn(url.clone(), wakes);
    tokio::time::timeout(Duration::from_secs(10), wake.notified())
        .await
        .expect("the listener connects and wakes the master");

    let client = connect_once(&url).await.unwrap();
    let listening: Option<bool> = client
        .query_one(
            "SELECT bool_and(s.ssl) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE a.application_name = 'drover-listen-test' AND a.query LIKE 'LISTEN%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(listening, Some(true), "the LISTEN backend uses TLS");

    client
        .batch_execute(&format!("NOTIFY {}", listener::CHANNEL))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), wake.notified())
        .await
        .expect("a NOTIFY reaches the wake-up");
    task.abort();
    db.stop().await;
}

#[tokio::test]
async fn require_against_a_server_without_tls_says_so_and_prefer_goes_plain() {
    // ssl = off (the default), plain TCP on 127.0.0.1, initdb's trust rules.
    let dir = tempfile::Builder::new()
        .prefix("drover-notls-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = EmbeddedConfig::new(dir.path().join("db"));
    config.tcp_port = Some(port);
    config.settings.push(("fsync".into(), "off".into()));
    let pg = Running(Some(EmbeddedPostgres::start(&config).await.unwrap()));

    for mode in ["require", "verify-full&sslrootcert=/nonexistent/ca.pem"] {
        let url = format!("postgres://drover:hunter2@localhost:{port}/drover?sslmode={mode}");
        let e = match connect_once(&url).await {
            Ok(_) => panic!("connected without TLS with {url}"),
            Err(e) => e,
        };
        let message = e.to_string();
        if mode == "require" {
            assert!(matches!(e, BrokerError::Tls { .. }), "{e:?}");
            for words in [
                format!("TLS to PostgreSQL at localhost:{port}/drover failed"),
                "the server does not accept TLS (its ssl setting is off) and sslmode=require requires it".to_string(),
            ] {
                assert!(message.contains(&words), "{words:?} not in: {message}");
            }
        } else {
            // A CA file that cannot be read is a configuration error before anything is sent.
            assert!(matches!(e, BrokerError::Config(_)), "{e:?}");
            assert!(message.contains("No such file or directory"), "{message}");
        }
        assert!(!message.contains("hunter2"), "password leaked: {message}");
    }
    let client = connect_once(&format!(
        "host=localhost port={port} user=drover dbname=drover sslmode=prefer"
    ))
    .await
    .unwrap();
    assert!(!uses_tls(&client).await, "prefer falls back to plain");
    pg.stop().await;
}

#[tokio::test]
async fn an_expired_server_certificate_says_when_and_require_does_not_check_it() {
    let db = TlsDb::start_with(ServerCert::Expired).await;
    let ca = p(&db.pki.ca);
    let e = connect_err(&db.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await;
    assert!(matches!(e, BrokerError::Tls { .. }), "{e:?}");
    let message = e.to_string();
    for words in [
        "certificate verify failed (certificate has expired)",
        "the certificate CN=localhost expired on Jan  1 00:00:00 2021 GMT",
        "renew the server's certificate",
    ] {
        assert!(message.contains(words), "{words:?} not in: {message}");
    }
    // require without a root certificate checks nothing, as libpq.
    let client = connect_once(&db.url("localhost", "sslmode=require"))
        .await
        .unwrap();
    assert!(uses_tls(&client).await);
    db.stop().await;
}

#[tokio::test]
async fn a_self_signed_server_certificate_in_sslrootcert_is_trusted() {
    // PostgreSQL's documentation: `openssl req -new -x509 … -subj /CN=host`, then the server's
    // certificate is the client's root.crt. It has CA:TRUE and no SAN (webpki refuses that).
    let db = TlsDb::start_with(ServerCert::SelfSigned).await;
    let ca = p(&db.pki.ca);
    for url in [
        db.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        db.url("localhost", &format!("sslmode=verify-ca&sslrootcert={ca}")),
        db.url("localhost", "sslmode=require"),
    ] {
        let client = connect_once(&url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(uses_tls(&client).await, "{url}");
    }
    // Its CN names localhost, not 127.0.0.1 (an address is checked against IP SANs only).
    let message = connect_err(&db.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await
    .to_string();
    assert!(
        message.contains(
            "(IP address mismatch): the server's certificate is for localhost, not for 127.0.0.1"
        ),
        "{message}"
    );
    // Another CA does not vouch for it.
    let message = connect_err(&db.url(
        "localhost",
        &format!("sslmode=verify-ca&sslrootcert={}", p(&db.pki.other_ca)),
    ))
    .await
    .to_string();
    assert!(
        message.contains("issued by CN=localhost) is not signed by the CA in sslrootcert="),
        "{message}"
    );
    db.stop().await;
}

#[tokio::test]
async fn an_x509_v1_server_certificate_signed_by_the_ca_verifies_by_its_cn() {
    // PostgreSQL's documentation: `openssl x509 -req -in server.csr -CA root.crt …` without
    // extensions makes an X.509 v1 certificate, CN only (webpki reads only v3).
    let db = TlsDb::start_with(ServerCert::V1).await;
    let ca = p(&db.pki.ca);
    for url in [
        db.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        db.kv(&format!("sslmode=verify-ca sslrootcert={ca}")),
        db.url("localhost", "sslmode=require"),
    ] {
        let client = connect_once(&url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(uses_tls(&client).await, "{url}");
    }
    // Channel binding with its signature's hash.
    let client = connect_once(&format!(
        "postgres://scramuser:sekrit@localhost:{}/drover?sslmode=verify-full&sslrootcert={ca}&channel_binding=require",
        db.port
    ))
    .await
    .unwrap();
    assert!(uses_tls(&client).await);
    // The CN is the only name: another host name is refused, naming it.
    let message = connect_err(&format!(
        "host=db.invalid hostaddr=127.0.0.1 port={} user=drover dbname=drover sslmode=verify-full sslrootcert={ca}",
        db.port
    ))
    .await
    .to_string();
    assert!(
        message.contains(
            "(hostname mismatch): the server's certificate is for localhost, not for db.invalid"
        ),
        "{message}"
    );
    // Signed by an unknown CA: refused, saying what rustls accepts.
    let message = connect_err(&db.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", p(&db.pki.other_ca)),
    ))
    .await
    .to_string();
    assert!(
        message.contains("(X.509 v1 certificate): the server's certificate (CN=localhost, issued by CN=drover test CA) is X.509 v1"),
        "{message}"
    );
    db.stop().await;
}
