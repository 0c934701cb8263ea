//! Metric rows, node status and queue waits against a real PostgreSQL, with a manual clock.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use drover_broker::{Broker, BrokerConfig, Clock, ManualClock, MinuteRow};
use support::{db, Db};

async fn broker(db: &Db, clock: Arc<dyn Clock>) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    // Nothing here waits for a lease; a long one gives each call's client-side deadline (half the
    // lease) room for a loaded CI machine's stalls.
    config.lease = Duration::from_secs(20);
    Broker::start(config, clock).await.unwrap()
}

fn row(minute: i64, completed: i64) -> MinuteRow {
    MinuteRow {
        minute,
        queue: "default".into(),
        class: "App\\Jobs\\Send".into(),
        completed,
        failed: 0,
        released: 0,
        runtime: r#"{"n":1}"#.into(),
        wait: "{}".into(),
        cpu: "{}".into(),
        memory: "{}".into(),
    }
}

fn minute_of(t: SystemTime) -> i64 {
    (t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() / 60) as i64
}

#[tokio::test]
async fn a_minute_written_again_is_replaced_not_added_and_retention_keeps_recent_rows() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let b = broker(&db, clock.clone()).await;
    let now = minute_of(clock.time());
    a.record_metrics(&[row(now - 100, 1), row(now, 2)])
        .await
        .unwrap();
    // The open minute again, with its new totals; and another node's row for the same minute.
    a.record_metrics(&[row(now, 5)]).await.unwrap();
    b.record_metrics(&[row(now, 7)]).await.unwrap();
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let totals: Vec<(i64, i64)> = client
        .query(
            "SELECT node, completed FROM drover.metrics WHERE minute = to_timestamp($1::int8 * 60) ORDER BY node",
            &[&now],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(totals, vec![(a.node(), 5), (b.node(), 7)]);

    // Keep an hour: the row 100 minutes old goes, the rest stay.
    let deleted = a
        .trim_metrics(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let left: i64 = client
        .query_one("SELECT count(*) FROM drover.metrics", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 2);
}

#[tokio::test]
async fn the_node_row_keeps_the_last_status_given_and_database_time_follows_the_clock() {
    let db = db().await;
    let start = SystemTime::now() - Duration::from_secs(7200);
    let clock = Arc::new(ManualClock::new(start));
    let a = broker(&db, clock.clone()).await;
    a.heartbeat(Some(r#"{"pools":[{"name":"default"}]}"#))
        .await
        .unwrap();
    a.heartbeat(None).await.unwrap();
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let status: String = client
        .query_one(
            "SELECT status->'pools'->0->>'name' FROM drover.nodes WHERE id = $1",
            &[&a.node()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "default");
    assert_eq!(
        a.database_time(),
        start,
        "a test clock's time is the database's"
    );
}

#[tokio::test]
async fn the_oldest_wait_of_each_queue_spans_its_priorities_and_ignores_delayed_and_leased_jobs() {
    let db = db().await;
    let now = SystemTime::now();
    let clock = Arc::new(ManualClock::new(now));
    let a = broker(&db, clock.clone()).await;
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    // default: a low-priority job 50 s old, a high-priority one 10 s old, one due in the future.
    // other: only a leased job. empty: nothing.
    for (queue, priority, age) in [
        ("default", 0i16, 50.0f64),
        ("default", 5, 10.0),
        ("default", 9, -30.0),
        ("other", 0, 99.0),
    ] {
        client
            .execute(
                "INSERT INTO drover.jobs (queue, priority, payload, available_at) VALUES ($1, $2, 'p', $3::timestamptz - make_interval(secs => $4))",
                &[&queue, &priority, &now, &age],
            )
            .await
            .unwrap();
    }
    let leased = a.claim(&["other".to_string()], 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    let waits = a
        .oldest_waits(&["default".into(), "other".into(), "empty".into()])
        .await
        .unwrap();
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert_eq!(waits[0].0, "default");
    assert!((waits[0].1.as_secs_f64() - 50.0).abs() < 0.01, "{waits:?}");
    // The claim reports how long the job had waited.
    assert!(
        (leased[0].waited.as_secs_f64() - 99.0).abs() < 0.01,
        "{leased:?}"
    );
}

#[tokio::test]
async fn of_two_masters_one_alerts_about_a_long_wait_and_again_only_after_the_cooldown() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let b = broker(&db, clock.clone()).await;
    let cooldown = Duration::from_secs(300);
    let waited = Duration::from_secs(90);
    let first = (
        a.claim_long_wait_notice("default", waited, cooldown)
            .await
            .unwrap(),
        b.claim_long_wait_notice("default", waited, cooldown)
            .await
            .unwrap(),
    );
    assert!(
        first.0.is_some() && first.1.is_none(),
        "one of the two alerts: {first:?}"
    );
    assert!(
        b.claim_long_wait_notice("emails", waited, cooldown)
            .await
            .unwrap()
            .is_some(),
        "another queue has its own cooldown"
    );
    clock.advance(Duration::from_secs(299));
    assert!(a
        .claim_long_wait_notice("default", waited, cooldown)
        .await
        .unwrap()
        .is_none());
    clock.advance(Duration::from_secs(2));
    let taken = b
        .claim_long_wait_notice("default", waited, cooldown)
        .await
        .unwrap();
    assert!(taken.is_some(), "after the cooldown one alerts again");
    // An alert that could not be sent gives its right back: the next check alerts again.
    b.release_long_wait_notice("default", taken.unwrap())
        .await
        .unwrap();
    assert!(a
        .claim_long_wait_notice("default", waited, cooldown)
        .await
        .unwrap()
        .is_some());
}
