//! Claims from a cursor (docs/decisions/0010-a-held-snapshot.md): after a full claim found a
//! queue's head, the next claims read its priority from there on, so a snapshot held by another
//! session does not make them walk every settled job's dead entry — and nothing a claim owes
//! the queue's order is lost: a higher priority enqueued later comes first, a lower one after,
//! a group's next job moved in with its old dispatch time at once, a job this master gave back
//! at once, and a job made available before the floor by anyone else within `FULL_EVERY`.

mod support;

/// The test's period between full claims: longer than the shipped 2 s, so a loaded host (CI
/// runs two suites at once on two cores) still claims from the cursor within it.
const FULL_EVERY: Duration = Duration::from_secs(5);

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_broker::{connect, Broker, BrokerConfig, Lease, Settle, SystemClock};
use support::{db, queues};

/// Inserts one job of `default` with `priority`, available `ago` seconds before now, in
/// `group` if given (as a group's next job lands, keeping its dispatch time): its id.
async fn job(client: &tokio_postgres::Client, priority: i16, ago: f64, group: Option<&str>) -> i64 {
    client
        .query_one(
            "INSERT INTO drover.jobs (queue, payload, priority, available_at, grp)
             VALUES ('default', 'p', $1, now() - make_interval(secs => $2), $3) RETURNING id",
            &[&priority, &ago, &group],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn under_a_held_snapshot_claims_keep_the_queues_order_and_leave_nothing_behind_the_floor() {
    let db = db().await;
    let config = BrokerConfig {
        full_claim_every: FULL_EVERY,
        ..BrokerConfig::new(db.pg.url())
    };
    let broker = Broker::start(config, Arc::new(SystemClock)).await.unwrap();
    let client = connect::connect_once(db.pg.url()).await.unwrap();
    let report = connect::connect_once(db.pg.url()).await.unwrap();
    report
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM drover.jobs")
        .await
        .unwrap();
    let default = queues(&["default"]);

    let mut plain = Vec::new();
    for _ in 0..3 {
        plain.push(job(&client, 0, 0.0, None).await);
    }
    // The full claim: the queue's head, and the cursor on it.
    let full_at = Instant::now();
    let first = broker.claim(&default, 1).await.unwrap();
    assert_eq!(first[0].id, plain[0]);

    // Behind the floor (a minute before the head): a plain job, a group's next job and a lower
    // priority's; and a higher priority enqueued now.
    let straggler = job(&client, 0, 60.0, None).await;
    let moved_in = job(&client, 0, 60.0, Some("order-17")).await;
    let lower = job(&client, -1, 60.0, None).await;
    let higher = job(&client, 5, 0.0, None).await;

    let next: Vec<i64> = broker
        .claim(&default, 10)
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert!(
        full_at.elapsed() < FULL_EVERY,
        "the host was too slow for a claim from the cursor to be tested"
    );
    assert_eq!(
        next,
        vec![higher, moved_in, plain[1], plain[2], lower],
        "in the queue's order, all but the plain job behind the floor"
    );
    // It is taken by the next full claim, at most FULL_EVERY after the last. The broker starts
    // that clock when the full claim's answer comes back, after `full_at`: a quarter second more,
    // so a loaded host's late answer does not make this claim one from the cursor still.
    tokio::time::sleep(FULL_EVERY.saturating_sub(full_at.elapsed()) + Duration::from_millis(250))
        .await;
    let late = broker.claim(&default, 10).await.unwrap();
    assert_eq!(
        late.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![straggler]
    );

    // A job this master gives back unstarted keeps its place, a minute before the floor of
    // the full claim that found a new head: the next claim reads the queue in full again and
    // takes it at once.
    tokio::time::sleep(FULL_EVERY).await;
    let fresh = job(&client, 0, 0.0, None).await;
    let full_at = Instant::now();
    assert_eq!(broker.claim(&default, 1).await.unwrap()[0].id, fresh);
    let outcome = broker
        .settle(&[Settle::Release {
            lease: Lease {
                id: late[0].id,
                token: late[0].token,
            },
            delay: Duration::ZERO,
            charged: false,
        }])
        .await
        .unwrap();
    assert_eq!(outcome.released, 1);
    let again = broker.claim(&default, 10).await.unwrap();
    assert!(full_at.elapsed() < FULL_EVERY, "the host was too slow");
    assert_eq!(
        again.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![straggler]
    );
    report.batch_execute("COMMIT").await.unwrap();
}
