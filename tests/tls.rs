//! End to end over TLS: the real `drover` binary and PHP workers against a PostgreSQL 15 that
//! accepts only TLS (`hostnossl all all all reject`), its certificate signed by a throwaway CA
//! made with the `openssl` command. The master connects with
//! `sslmode=verify-full&sslrootcert=…`, the workers' PDO with the same libpq options.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::tls::{make_pki, tls_cluster};
use support::*;

/// The master's URL: verify-full against `ca`, named so its backends can be found.
fn master_url(port: u16, ca: &Path) -> String {
    format!(
        "postgres://drover@localhost:{port}/drover?sslmode=verify-full&sslrootcert={}&application_name=drover-master",
        ca.display()
    )
}

/// The workers' and the producer's PDO DSN: libpq's verify-full.
fn pdo_dsn(port: u16, ca: &Path) -> String {
    format!(
        "pgsql:host=localhost;port={port};dbname=drover;user=drover;sslmode=verify-full;sslrootcert={}",
        ca.display()
    )
}

/// Waits until `n` jobs finished; fails at once, with the log, if the master exits.
async fn wait_finished(client: &tokio_postgres::Client, drover: &mut Drover, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let finished = count(client, "SELECT count(*) FROM runs WHERE event = 'finish'").await;
        if finished >= n {
            return;
        }
        if let Some(status) = drover.child.try_wait().unwrap() {
            panic!("drover exited ({status}):\n{}", drover.log_text());
        }
        assert!(
            Instant::now() < deadline,
            "{finished} of {n} jobs finished:\n{}",
            drover.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn two_hundred_jobs_run_exactly_once_with_every_connection_on_verified_tls() {
    let pki = make_pki();
    let (db, port) = tls_cluster(&pki).await;
    let client = db.client().await;
    let dsn = pdo_dsn(port, &pki.ca);
    let mut ids = enqueue(&dsn, 100, &["--batch=50"]);
    let mut drover = Drover::start(
        Some(&master_url(port, &pki.ca)),
        Some(&dsn),
        &["--workers", "2", "--prefetch", "2"],
    );
    wait_finished(&client, &mut drover, 100).await;
    // Enqueued while the master runs: the NOTIFY reaches it over its TLS LISTEN connection.
    ids.extend(enqueue(&dsn, 100, &["--batch=10", "--first-seq=101"]));
    wait_finished(&client, &mut drover, 200).await;

    // The master's connections (claims and settles, LISTEN) all use TLS; so does every other.
    let row = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE s.ssl),
                    count(*) FILTER (WHERE a.query LIKE 'LISTEN%')
             FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE a.application_name = 'drover-master'",
            &[],
        )
        .await
        .unwrap();
    let (master, encrypted, listening): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert!(master >= 2, "the master has {master} backends");
    assert_eq!(encrypted, master, "a master connection without TLS");
    assert_eq!(listening, 1, "the LISTEN connection is among them");
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE a.backend_type = 'client backend' AND NOT s.ssl"
        )
        .await,
        0,
        "a connection without TLS"
    );

    let log = drover.stop().await;
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        !log.contains("LISTEN connection:"),
        "the LISTEN connection failed: {log}"
    );
    assert_exactly_once(&client, &ids).await;
    db.stop().await;
    drop(pki.dir);
}

#[tokio::test]
async fn the_wrong_ca_is_permanent_the_master_exits_at_once_naming_the_ca() {
    // A certificate the configured CA did not sign will not start verifying by itself: the
    // master exits non-zero with the message (a `Type=notify` start fails instead of hanging).
    let pki = make_pki();
    let (db, port) = tls_cluster(&pki).await;
    let mut drover = Drover::start(
        Some(&master_url(port, &pki.other_ca)),
        Some(&pdo_dsn(port, &pki.ca)),
        &["--workers", "2"],
    );
    let status = drover.wait_exit(Duration::from_secs(20)).await;
    let log = drover.log_text();
    assert!(!status.success(), "{log}");
    let failed =
        format!("TLS to PostgreSQL at localhost:{port}/drover failed: certificate verify failed (");
    let message = format!(
        "): the server's certificate (CN=localhost, issued by CN=drover e2e CA) is not signed by the CA in sslrootcert={}; point sslrootcert at the CA that signed it",
        pki.other_ca.display()
    );
    assert!(log.contains(&failed) && log.contains(&message), "{log}");
    assert!(!log.contains("retrying"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    db.stop().await;
    drop(pki.dir);
}
