//! Retention of `drover.failed_jobs`: old rows deleted in bounded batches, by the database's
//! clock (or the test clock that stands in for it).

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drover_broker::retention::PURGE_BATCH;
use drover_broker::{connect, Broker, BrokerConfig, Clock, ManualClock, SystemClock};
use support::db;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// Inserts `n` failed jobs that failed `age` before `at` (the database's now when `None`).
async fn failed(client: &tokio_postgres::Client, at: Option<SystemTime>, age: Duration, n: i64) {
    client
        .execute(
            "INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
             SELECT nextval('drover.jobs_id_seq'), 'default', 'p', 1, 'boom',
                    coalesce($1::timestamptz, now()) - make_interval(secs => $2)
             FROM generate_series(1, $3::bigint)",
            &[&at, &age.as_secs_f64(), &n],
        )
        .await
        .unwrap();
}

async fn count(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM drover.failed_jobs", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn failed_jobs_older_than_the_age_are_deleted_in_batches_until_none_is_left() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), clock.clone())
        .await
        .unwrap();
    let client = connect::connect_once(db.pg.url()).await.unwrap();
    let old = 2 * PURGE_BATCH + 500;
    failed(&client, clock.now(), 8 * DAY, old).await;
    failed(&client, clock.now(), 6 * DAY, 300).await;

    // A budget of nothing still deletes one batch, then stops.
    let first = broker.purge_failed(7 * DAY, Duration::ZERO).await.unwrap();
    assert_eq!(first, PURGE_BATCH as u64);
    // The rest in as many batches as it takes.
    let rest = broker
        .purge_failed(7 * DAY, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(first + rest, old as u64);
    assert_eq!(count(&client).await, 300, "the younger ones stay");
    assert_eq!(
        broker
            .purge_failed(7 * DAY, Duration::from_secs(60))
            .await
            .unwrap(),
        0
    );

    // Two days later (by the clock the statements use) the 6-day-old ones are 8 days old.
    clock.advance(2 * DAY);
    assert_eq!(
        broker
            .purge_failed(7 * DAY, Duration::from_secs(60))
            .await
            .unwrap(),
        300
    );
    assert_eq!(count(&client).await, 0);
}

#[tokio::test]
async fn with_the_production_clock_the_age_is_measured_by_the_database() {
    let db = db().await;
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    let client = connect::connect_once(db.pg.url()).await.unwrap();
    failed(&client, None, DAY + Duration::from_secs(60), 5).await;
    failed(&client, None, DAY - Duration::from_secs(60), 7).await;
    assert_eq!(
        broker
            .purge_failed(DAY, Duration::from_secs(60))
            .await
            .unwrap(),
        5
    );
    assert_eq!(count(&client).await, 7);
    // The deletes go through the index on failed_at, not a scan of the whole table.
    let plan: Vec<String> = client
        .query(
            &format!(
                "EXPLAIN {}",
                include_str!("../queries/purge_failed.sql")
                    .lines()
                    .filter(|l| !l.starts_with("--"))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .replace("$1::timestamptz", "NULL::timestamptz")
                    .replace("$2", "86400")
                    .replace("$3", "10000")
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        plan.iter().any(|l| l.contains("failed_jobs_failed_at")),
        "{}",
        plan.join("\n")
    );
}
