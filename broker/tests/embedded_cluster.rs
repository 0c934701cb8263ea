//! The embedded cluster's defences: on loopback TCP (a state directory too deep for a Unix
//! socket) the superuser needs the password drover generated, which the URL and the PDO DSN
//! carry and nothing else writes down; and the server's log stays bounded.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use drover_broker::connect::connect_once;
use drover_broker::embedded::PASSWORD_FILE;
use drover_broker::{BrokerError, EmbeddedConfig, EmbeddedPostgres};

mod support;
use support::tempdir;

fn config(state_dir: &Path) -> EmbeddedConfig {
    let mut config = EmbeddedConfig::new(state_dir);
    config.settings.push(("fsync".into(), "off".into()));
    config
}

/// The value of `key` in a key=value connection string.
fn value_of<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    url.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

async fn connect_err(url: &str) -> BrokerError {
    match connect_once(url).await {
        Ok(_) => panic!("connected with {url}"),
        Err(e) => e,
    }
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// Runs PHP's PDO with `dsn` (the way workers and producers connect), if PHP with pdo_pgsql is
/// here: `Some(Ok(answer of SELECT 1))`, `Some(Err(message))`, or `None` without PHP.
fn php_pdo(dsn: &str) -> Option<Result<String, String>> {
    let out = std::process::Command::new("php")
        .args([
            "-r",
            r#"try { $p = new PDO(getenv('DSN')); echo $p->query('SELECT 1')->fetchColumn(); } catch (Throwable $e) { fwrite(STDERR, $e->getMessage()); exit(1); }"#,
        ])
        .env("DSN", dsn)
        .output()
        .ok()?;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if stderr.contains("could not find driver") {
        return None;
    }
    Some(if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        Err(stderr)
    })
}

#[tokio::test]
async fn a_state_dir_too_deep_for_a_socket_gets_loopback_tcp_with_a_password() {
    let dir = tempdir("drover-deep-");
    // <state>/postgres/.s.PGSQL.5432 would be longer than a socket path may be.
    let state = dir
        .path()
        .join("a-state-directory-deep-enough-that-no-unix-socket-fits-in-it-0123456789");
    let pg = EmbeddedPostgres::start(&config(&state)).await.unwrap();
    let url = pg.url().to_string();
    let dsn = pg.pdo_dsn().to_string();
    assert_eq!(value_of(&url, "host"), Some("127.0.0.1"), "{url}");
    let password = value_of(&url, "password")
        .expect("the URL carries the password")
        .to_string();
    assert!(password.len() >= 32, "a long random password: {password}");
    assert!(
        dsn.ends_with(&format!(";password={password}")),
        "the PDO DSN carries it too: {dsn}"
    );
    assert!(
        !drover_broker::connect::redact(&dsn).contains(&password)
            && !drover_broker::connect::redact(&url).contains(&password),
        "redact hides it"
    );
    // Kept 0600 in the state directory, and written nowhere else.
    let file = state.join(PASSWORD_FILE);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), password);
    assert_eq!(
        files_containing(&state, password.as_bytes()),
        vec![file.clone()]
    );

    // The URL given out works; the server stores a SCRAM verifier and asks every TCP client
    // for the password.
    let client = connect_once(&url).await.unwrap();
    let scram: bool = client
        .query_one(
            "SELECT rolpassword LIKE 'SCRAM-SHA-256$%' FROM pg_authid WHERE rolname = 'drover'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(scram);
    let lax: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_hba_file_rules WHERE type LIKE 'host%' AND auth_method <> 'scram-sha-256'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(lax, 0, "a TCP rule without a password");
    let without = url.replace(&format!(" password={password}"), "");
    let e = connect_err(&without).await;
    assert!(e.is_permanent(), "{e:?}");
    let e = connect_err(&url.replace(&password, "0123456789abcdef0123")).await;
    assert!(e.is_permanent(), "{e:?}");
    assert!(
        e.to_string()
            .contains("password authentication failed for user \"drover\""),
        "{e}"
    );
    // PHP gets in with the DSN, and not without its password.
    match php_pdo(&dsn) {
        Some(answer) => {
            assert_eq!(answer.unwrap(), "1");
            let refused = php_pdo(&dsn.replace(&format!(";password={password}"), ""))
                .unwrap()
                .unwrap_err();
            assert!(refused.contains("password"), "{refused}");
        }
        None => eprintln!("no PHP with pdo_pgsql here: the DSN was not tried from PHP"),
    }
    drop(client);

    // A restart keeps the password.
    pg.stop().await;
    let pg = EmbeddedPostgres::start(&config(&state)).await.unwrap();
    assert_eq!(value_of(pg.url(), "password"), Some(password.as_str()));
    connect_once(pg.url()).await.unwrap();
    pg.stop().await;

    // A cluster an older drover left with trust rules and no password file: it gets a new
    // password before it listens, and the trust rules go.
    std::fs::remove_file(&file).unwrap();
    let hba = pg_data(&state).join("pg_hba.conf");
    std::fs::write(
        &hba,
        "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n",
    )
    .unwrap();
    let pg = EmbeddedPostgres::start(&config(&state)).await.unwrap();
    let renewed = value_of(pg.url(), "password").unwrap().to_string();
    assert_ne!(renewed, password);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), renewed);
    connect_once(pg.url()).await.unwrap();
    let new_url = pg.url().to_string();
    let e = connect_err(&new_url.replace(&format!(" password={renewed}"), "")).await;
    assert!(e.is_permanent(), "{e:?}");
    let e = connect_err(&new_url.replace(&renewed, &password)).await;
    assert!(e.is_permanent(), "the old password: {e:?}");
    pg.stop().await;
}

fn pg_data(state: &Path) -> PathBuf {
    state.canonicalize().unwrap().join("postgres")
}

/// `postgres.log*` in the state directory, with their sizes.
fn log_files(state: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(state)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.starts_with("postgres.log")
                .then(|| (name, e.metadata().unwrap().len()))
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn the_server_log_is_bounded() {
    let dir = tempdir("drover-log-");
    let state = dir.path().join("db");
    // A log grown large under an older drover.
    std::fs::create_dir_all(&state).unwrap();
    let line = "an old line of the server's log, from before drover bounded it\n";
    std::fs::write(state.join("postgres.log"), line.repeat(50_000)).unwrap(); // 3.2 MB

    let mut config = config(&state);
    config.log_file_size = 64 * 1024;
    config.log_files = 3;
    let pg = EmbeddedPostgres::start(&config).await.unwrap();
    let files = log_files(&state);
    assert!(
        files.iter().all(|(_, size)| *size <= 64 * 1024),
        "{files:?}"
    );

    // 2 MB of log lines: about 30 files' worth.
    let client = connect_once(pg.url()).await.unwrap();
    client
        .batch_execute(
            "DO $$ BEGIN FOR i IN 1..8000 LOOP RAISE LOG 'filler %', repeat('x', 200); END LOOP; END $$",
        )
        .await
        .unwrap();
    drop(client);
    pg.stop().await; // the server's last words are written

    let files = log_files(&state);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["postgres.log", "postgres.log.1", "postgres.log.2"],
        "{files:?}"
    );
    assert!(
        files.iter().all(|(_, size)| *size <= 64 * 1024),
        "{files:?}"
    );
    let previous = std::fs::read_to_string(state.join("postgres.log.1")).unwrap();
    assert!(previous.contains("filler"), "the newest lines are kept");
    assert!(
        previous.lines().all(|l| l.contains("LOG:")
            || l.contains("STATEMENT:")
            || l.contains("CONTEXT:")
            || l.starts_with('\t')),
        "whole lines only"
    );
    let last = std::fs::read_to_string(state.join("postgres.log")).unwrap();
    assert!(last.contains("database system is shut down"), "{last}");
    assert!(
        !files.iter().any(|(n, _)| n.ends_with(".3")),
        "no more files than configured"
    );
}
