//! Giving back the space of a drained backlog, against a real PostgreSQL.

mod support;

use std::sync::Arc;

use drover_broker::compact::{queue_size, COMPACT_ABOVE};
use drover_broker::{connect, Broker, BrokerConfig, Compaction, SystemClock};
use support::db;

/// Enqueues `n` jobs, leases them all (as claims do: every row updated) and deletes them (as acks
/// do), leaving drover.jobs empty with the pages the backlog grew.
async fn drain_a_backlog(client: &tokio_postgres::Client, n: i64) {
    client
        .execute(
            "INSERT INTO drover.jobs (queue, payload) SELECT 'default', repeat('x', 200) || g FROM generate_series(1, $1::bigint) g",
            &[&n],
        )
        .await
        .unwrap();
    client
        .batch_execute(
            "UPDATE drover.jobs SET lease_token = nextval('drover.lease_tokens'), lease_owner = (SELECT min(id) FROM drover.nodes), lease_expires_at = now() + interval '1 minute';
             DELETE FROM drover.jobs;",
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_drained_backlog_gives_its_space_back() {
    let db = db().await;
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    let client = connect::connect_once(db.pg.url()).await.unwrap();
    let (_, fresh) = queue_size(&client).await.unwrap();

    drain_a_backlog(&client, 50_000).await;
    let (empty, drained) = queue_size(&client).await.unwrap();
    assert!(empty);
    assert!(
        drained > COMPACT_ABOVE,
        "the backlog left only {drained} bytes"
    );

    match broker.compact_when_empty().await.unwrap() {
        Compaction::Compacted { before, after } => {
            assert_eq!(before, drained);
            assert!(
                after <= fresh * 2,
                "{after} bytes after compaction, {fresh} when fresh"
            );
        }
        other => panic!("expected a compaction, got {other:?}"),
    }
    // Small now: a second pass leaves it alone.
    assert!(matches!(
        broker.compact_when_empty().await.unwrap(),
        Compaction::Small { .. }
    ));
    // The rebuilt indexes serve claims as before.
    client
        .execute(
            "INSERT INTO drover.jobs (queue, payload) VALUES ('default', 'after')",
            &[],
        )
        .await
        .unwrap();
    let jobs = broker.claim(&["default".to_string()], 10).await.unwrap();
    assert_eq!(jobs.len(), 1);
}

#[tokio::test]
async fn a_table_holding_a_job_or_an_uncommitted_enqueue_is_left_alone() {
    let db = db().await;
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    let client = connect::connect_once(db.pg.url()).await.unwrap();
    drain_a_backlog(&client, 50_000).await;

    // A producer's transaction has enqueued a job but not committed: the table looks empty, but
    // the compaction must not wait on (or rebuild under) that producer.
    let producer = connect::connect_once(db.pg.url()).await.unwrap();
    producer
        .batch_execute(
            "BEGIN; INSERT INTO drover.jobs (queue, payload) VALUES ('default', 'pending');",
        )
        .await
        .unwrap();
    assert_eq!(broker.compact_when_empty().await.unwrap(), Compaction::Busy);
    producer.batch_execute("COMMIT").await.unwrap();

    // A queued job: nothing is done.
    assert_eq!(
        broker.compact_when_empty().await.unwrap(),
        Compaction::NotEmpty
    );
    // The indexes were not rebuilt (a rebuild leaves a few pages each).
    let indexes: i64 = client
        .query_one("SELECT pg_indexes_size('drover.jobs')", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        indexes > 1024 * 1024,
        "indexes rebuilt under a live job: {indexes} bytes"
    );
    let jobs = broker.claim(&["default".to_string()], 10).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].payload, "pending");
}
