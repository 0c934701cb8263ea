//! What holds the vacuum horizon back, as `Broker::horizon` reads it for status, metrics and the
//! alert: the oldest snapshot of another session of this database, named so an operator can
//! find it.

mod support;

use std::sync::Arc;
use std::time::Duration;

use drover_broker::{connect, Broker, BrokerConfig, HolderKind, SystemClock};
use support::db;

/// A session that calls itself `name` and opens a REPEATABLE READ snapshot, left open.
async fn holder(url: &str, name: &str) -> (tokio_postgres::Client, i32) {
    let client = connect::connect_once(url).await.unwrap();
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    client
        .batch_execute(&format!(
            "SET application_name = '{name}';
             BEGIN ISOLATION LEVEL REPEATABLE READ;
             SELECT count(*) FROM drover.jobs;"
        ))
        .await
        .unwrap();
    (client, pid)
}

#[tokio::test]
async fn a_report_left_open_in_repeatable_read_is_named_as_the_oldest_snapshot_until_it_ends() {
    let db = db().await;
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    let writer = connect::connect_once(db.pg.url()).await.unwrap();

    let (report, report_pid) = holder(db.pg.url(), "nightly report").await;
    // Transactions go by; a younger snapshot is taken after them.
    for _ in 0..5 {
        writer
            .execute(
                "INSERT INTO drover.jobs (queue, payload) VALUES ('q', 'p')",
                &[],
            )
            .await
            .unwrap();
    }
    let (younger, younger_pid) = holder(db.pg.url(), "younger").await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let horizon = broker.horizon().await.unwrap();
    let oldest = horizon.oldest.expect("the report holds the horizon");
    assert_eq!(oldest.kind, HolderKind::Session);
    assert_eq!(oldest.pid, Some(report_pid), "the older of two: {oldest:?}");
    assert_eq!(oldest.name, "nightly report");
    assert_eq!(oldest.state.as_deref(), Some("idle in transaction"));
    assert!(oldest.xid_age >= 5, "five transactions went by: {oldest:?}");
    assert!(
        oldest.open_for.unwrap() >= Duration::from_millis(300),
        "{oldest:?}"
    );
    assert!(oldest.query.unwrap().contains("count(*)"));
    assert!(horizon.sees_all_sessions, "the test's role is a superuser");
    assert!(horizon.jobs_dead_tuples.is_some());

    // The report ends: the younger snapshot is the oldest now.
    report.batch_execute("COMMIT").await.unwrap();
    let oldest = broker.horizon().await.unwrap().oldest.unwrap();
    assert_eq!(oldest.pid, Some(younger_pid));

    // And when it ends too, nothing of its is left.
    younger.batch_execute("COMMIT").await.unwrap();
    let oldest = broker.horizon().await.unwrap().oldest;
    assert!(
        oldest.as_ref().and_then(|o| o.pid) != Some(younger_pid)
            && oldest.as_ref().and_then(|o| o.pid) != Some(report_pid),
        "{oldest:?}"
    );
}

#[tokio::test]
async fn a_transaction_that_wrote_and_went_idle_holds_the_horizon_by_its_id() {
    let db = db().await;
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    // READ COMMITTED keeps no snapshot between statements, but a transaction id it took by
    // writing holds the horizon until it ends (a web request that wrote and then waited).
    let request = connect::connect_once(db.pg.url()).await.unwrap();
    request
        .batch_execute(
            "SET application_name = 'php-fpm';
             BEGIN;
             INSERT INTO drover.jobs (queue, payload) VALUES ('q', 'p');",
        )
        .await
        .unwrap();
    let pid: i32 = request
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let oldest = broker.horizon().await.unwrap().oldest.unwrap();
    assert_eq!((oldest.pid, oldest.name.as_str()), (Some(pid), "php-fpm"));
    request.batch_execute("ROLLBACK").await.unwrap();
}
