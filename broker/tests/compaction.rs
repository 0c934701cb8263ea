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

/// What a compaction pass did to `drover.jobs` (its first table), and to `table`.
async fn outcome_of(broker: &Broker, table: &str) -> Compaction {
    let done = broker.compact_when_empty().await.unwrap();
    assert_eq!(done.len(), 3, "{done:?}");
    done.into_iter()
        .find(|t| t.table == table)
        .unwrap_or_else(|| panic!("no {table} in the pass"))
        .outcome
}

async fn jobs_outcome(broker: &Broker) -> Compaction {
    outcome_of(broker, "drover.jobs").await
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

    match jobs_outcome(&broker).await {
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
        jobs_outcome(&broker).await,
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
    assert_eq!(jobs_outcome(&broker).await, Compaction::Busy);
    producer.batch_execute("COMMIT").await.unwrap();

    // A queued job: nothing is done.
    assert_eq!(jobs_outcome(&broker).await, Compaction::NotEmpty);
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

#[tokio::test]
async fn a_drained_line_of_jobs_waiting_for_their_limits_gives_its_space_back_and_a_live_one_is_left(
) {
    let db = db().await;
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    let client = connect::connect_once(db.pg.url()).await.unwrap();
    let size = "SELECT pg_total_relation_size('drover.limit_waiting')";
    let fresh: i64 = client.query_one(size, &[]).await.unwrap().get(0);
    // 50,000 jobs wait behind a full key, and go (as a `queue:clear` would take them).
    let fill = "INSERT INTO drover.limit_waiting (id, queue, priority, payload, max_attempts, available_at, created_at, keys, caps, windows, waits_on)
                SELECT nextval('drover.jobs_id_seq'), 'default', 0, repeat('x', 200) || g, 3, now(), now(), '{k}', '{1}', '{0}', 'k'
                FROM generate_series(1, 50000) g";
    client.batch_execute(fill).await.unwrap();
    client
        .batch_execute("DELETE FROM drover.limit_waiting")
        .await
        .unwrap();
    let drained: i64 = client.query_one(size, &[]).await.unwrap().get(0);
    assert!(drained > COMPACT_ABOVE, "only {drained} bytes");

    // One job waits: the table is left as it is.
    client
        .batch_execute(&fill.replace("50000", "1"))
        .await
        .unwrap();
    assert_eq!(
        outcome_of(&broker, "drover.limit_waiting").await,
        Compaction::NotEmpty
    );
    client
        .batch_execute("DELETE FROM drover.limit_waiting")
        .await
        .unwrap();

    match outcome_of(&broker, "drover.limit_waiting").await {
        Compaction::Compacted { before, after } => {
            assert!(before >= drained, "{before} < {drained}");
            assert!(after <= fresh * 2, "{after} bytes after, {fresh} fresh");
        }
        other => panic!("expected a compaction, got {other:?}"),
    }
    // The empty jobs table beside it was small all along.
    assert!(matches!(
        jobs_outcome(&broker).await,
        Compaction::Small { .. }
    ));
}
