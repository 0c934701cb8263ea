//! Lease rules against a real PostgreSQL, with a manual clock instead of sleeps.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use drover_broker::{Broker, BrokerConfig, Clock, Lease, ManualClock, Settle};
use support::{db, Db};

async fn broker(db: &Db, clock: Arc<dyn Clock>) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = Duration::from_secs(2);
    Broker::start(config, clock).await.unwrap()
}

/// Enqueues `n` jobs available as of the test clock's "now".
async fn enqueue(
    db: &Db,
    clock: &dyn Clock,
    queue: &str,
    n: i64,
    max_attempts: Option<i32>,
) -> Vec<i64> {
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .query(
            "INSERT INTO drover.jobs (queue, payload, max_attempts, available_at)
             SELECT $1, 'p' || g, $3, $4 FROM generate_series(1, $2::bigint) g RETURNING id",
            &[&queue, &n, &max_attempts, &clock.now()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn queues(q: &[&str]) -> Vec<String> {
    q.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn an_expired_lease_is_taken_back_and_a_settle_with_its_stale_token_changes_nothing() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let b = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 1, None).await;

    let first = a.claim(&queues(&["default"]), 10).await.unwrap();
    assert_eq!(first.len(), 1);
    let old = Lease {
        id: first[0].id,
        token: first[0].token,
    };
    assert!(
        b.claim(&queues(&["default"]), 10).await.unwrap().is_empty(),
        "a held job is not claimable"
    );

    // Not expired yet: nothing to take back.
    clock.advance(Duration::from_millis(1900));
    assert_eq!(b.reap_expired().await.unwrap().released, 0);
    // Past the lease: taken back, attempt still charged.
    clock.advance(Duration::from_millis(200));
    assert_eq!(b.reap_expired().await.unwrap().released, 1);
    let second = b.claim(&queues(&["default"]), 10).await.unwrap();
    assert_eq!(second.len(), 1);
    assert!(second[0].token > old.token, "fencing tokens only grow");
    assert_eq!(second[0].attempts, 2);

    // The first holder comes back late: its renew and settles match nothing.
    assert!(a.renew(&[old]).await.unwrap().is_empty());
    let outcome = a.settle(&[Settle::Ack(old)]).await.unwrap();
    assert_eq!(outcome.acked, 0);
    assert_eq!(outcome.stale, vec![old.id]);
    let outcome = a
        .settle(&[
            Settle::Fail {
                lease: old,
                error: "late".into(),
            },
            Settle::Release {
                lease: old,
                delay: Duration::ZERO,
                charged: true,
            },
        ])
        .await
        .unwrap();
    assert_eq!(
        (outcome.failed, outcome.released, outcome.stale.len()),
        (0, 0, 2)
    );

    // The current holder settles fine.
    let current = Lease {
        id: second[0].id,
        token: second[0].token,
    };
    assert_eq!(b.settle(&[Settle::Ack(current)]).await.unwrap().acked, 1);
}

#[tokio::test]
async fn renewal_keeps_a_lease_alive_past_its_first_expiry() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 1, None).await;
    let job = a.claim(&queues(&["default"]), 1).await.unwrap().remove(0);
    let lease = Lease {
        id: job.id,
        token: job.token,
    };
    for _ in 0..5 {
        clock.advance(Duration::from_millis(700)); // every lease/3
        assert_eq!(a.renew(&[lease]).await.unwrap(), vec![job.id]);
        assert_eq!(a.reap_expired().await.unwrap().released, 0);
    }
    // 3.5 s after the claim, far past the 2 s lease, the job is still ours.
    assert_eq!(a.settle(&[Settle::Ack(lease)]).await.unwrap().acked, 1);
}

#[tokio::test]
async fn an_unstarted_release_gives_the_attempt_back_and_keeps_the_place_in_line() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let ids = enqueue(&db, clock.as_ref(), "default", 3, Some(1)).await;
    let jobs = a.claim(&queues(&["default"]), 3).await.unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        ids,
        "claimed in fetch order"
    );
    let settles: Vec<Settle> = jobs
        .iter()
        .map(|j| Settle::Release {
            lease: Lease {
                id: j.id,
                token: j.token,
            },
            delay: Duration::ZERO,
            charged: false,
        })
        .collect();
    assert_eq!(a.settle(&settles).await.unwrap().released, 3);
    let again = a.claim(&queues(&["default"]), 1).await.unwrap();
    assert_eq!(again[0].id, ids[0], "the first job is still first");
    assert_eq!(again[0].attempts, 1, "uncharged: this is attempt 1 again");
}

#[tokio::test]
async fn a_charged_release_waits_for_its_delay_and_the_next_due_time_is_known() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 1, None).await;
    let job = a.claim(&queues(&["default"]), 1).await.unwrap().remove(0);
    let lease = Lease {
        id: job.id,
        token: job.token,
    };
    a.settle(&[Settle::Release {
        lease,
        delay: Duration::from_secs(30),
        charged: true,
    }])
    .await
    .unwrap();
    assert!(a.claim(&queues(&["default"]), 1).await.unwrap().is_empty());
    let due = a
        .next_due(&queues(&["default"]))
        .await
        .unwrap()
        .expect("a due time");
    let wait = due.duration_since(clock.now()).unwrap();
    assert!(
        wait > Duration::from_secs(29) && wait <= Duration::from_secs(30),
        "{wait:?}"
    );
    clock.advance(Duration::from_secs(31));
    let again = a.claim(&queues(&["default"]), 1).await.unwrap();
    assert_eq!(again[0].attempts, 2);
}

#[tokio::test]
async fn queues_are_served_in_priority_order_and_concurrent_claims_never_overlap() {
    let db = db().await;
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(SystemTime::now()));
    let a = Arc::new(broker(&db, clock.clone()).await);
    let b = Arc::new(broker(&db, clock.clone()).await);
    let low = enqueue(&db, clock.as_ref(), "low", 100, None).await;
    let high = enqueue(&db, clock.as_ref(), "high", 100, None).await;
    let order = queues(&["high", "low"]);
    let first = a.claim(&order, 150).await.unwrap();
    assert!(first[..100].iter().all(|j| j.queue == "high"));
    assert!(first[100..].iter().all(|j| j.queue == "low"));
    // The rest, claimed by two nodes at once, split without overlap.
    let (x, y) = tokio::join!(a.claim(&order, 40), b.claim(&order, 40));
    let mut got: Vec<i64> = first
        .iter()
        .chain(x.unwrap().iter())
        .chain(y.unwrap().iter())
        .map(|j| j.id)
        .collect();
    got.sort();
    let before = got.len();
    got.dedup();
    assert_eq!(before, got.len(), "a job was leased twice");
    let mut all: Vec<i64> = low.into_iter().chain(high).collect();
    all.sort();
    assert_eq!(got, all);
}

#[tokio::test]
async fn an_expired_job_without_attempts_left_fails_instead_of_running_again() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 1, Some(1)).await;
    a.claim(&queues(&["default"]), 1).await.unwrap();
    clock.advance(Duration::from_secs(3));
    let reaped = a.reap_expired().await.unwrap();
    assert_eq!((reaped.released, reaped.failed), (0, 1));
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let error: String = client
        .query_one("SELECT error FROM drover.failed_jobs", &[])
        .await
        .unwrap()
        .get(0);
    assert!(error.contains("lease expired"), "{error}");
}
