//! A queue's fleet-wide budget, in the database (`migrations/0010_queue_budgets.sql`,
//! `queries/claim.sql`): masters claiming at once never hold more of the queue's jobs than its
//! budget (ordered groups keep their order under it), a claim says when the budget (not an empty
//! queue) held jobs back, and the end of a budgeted lease wakes the masters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use drover_broker::listener::{self, Wakes};
use drover_broker::{
    Broker, BrokerConfig, ClaimTerms, Clock, Lease, ManualClock, QueueBudgets, Settle, SystemClock,
};
use support::{db, enqueue, queues, Db};

const LEASE: Duration = Duration::from_secs(20);

async fn broker(db: &Db, clock: Arc<dyn Clock>) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = LEASE;
    Broker::start(config, clock).await.unwrap()
}

fn terms(budget: Option<u32>) -> ClaimTerms {
    ClaimTerms {
        grace: Duration::ZERO,
        budgets: Arc::new(QueueBudgets::new(
            budget
                .map(|n| BTreeMap::from([("api".to_string(), n)]))
                .unwrap_or_default(),
        )),
        ..ClaimTerms::default()
    }
}

fn leases(claimed: &drover_broker::Claimed) -> Vec<Lease> {
    claimed
        .jobs
        .iter()
        .map(|j| Lease {
            id: j.id,
            token: j.token,
        })
        .collect()
}

/// Four masters claim and ack `api`'s 300 jobs as fast as they can, each asking for up to three
/// jobs a claim; every lease is counted from the moment its claim returns until just before
/// its ack is sent — a window inside the lease's life in the database. Returns the most leases
/// counted at once, and how many jobs were acked.
async fn race(db: &Db, budget: Option<u32>) -> (i64, usize) {
    let held = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let mut brokers = Vec::new();
    for _ in 0..4 {
        brokers.push(broker(db, Arc::new(SystemClock)).await);
    }
    enqueue(db, "api", 300, None).await;
    let mut masters = Vec::new();
    for (m, b) in (0u64..).zip(brokers) {
        let (held, most) = (held.clone(), most.clone());
        masters.push(tokio::spawn(async move {
            let terms = terms(budget);
            let mut acked = 0;
            let mut empty = 0;
            while empty < 50 {
                let claimed = b
                    .claim_with_terms(&queues(&["api"]), 3, &[], &terms)
                    .await
                    .unwrap();
                if claimed.jobs.is_empty() {
                    empty += if claimed.held_by_budget { 0 } else { 1 };
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    continue;
                }
                let n = claimed.jobs.len() as i64;
                let now = held.fetch_add(n, Ordering::SeqCst) + n;
                most.fetch_max(now, Ordering::SeqCst);
                // Hold the jobs a moment, as a worker runs them (the masters in turn).
                tokio::time::sleep(Duration::from_millis(1 + m)).await;
                held.fetch_sub(n, Ordering::SeqCst);
                let settles: Vec<Settle> = leases(&claimed).into_iter().map(Settle::Ack).collect();
                b.settle(&settles).await.unwrap();
                acked += settles.len();
            }
            acked
        }));
    }
    let mut acked = 0;
    for m in masters {
        acked += m.await.unwrap();
    }
    (most.load(Ordering::SeqCst), acked)
}

#[tokio::test]
async fn four_masters_claiming_at_once_never_hold_more_of_a_queue_than_its_budget() {
    let db = db().await;
    let (most, acked) = race(&db, Some(3)).await;
    assert_eq!(acked, 300, "every job ran once");
    assert_eq!(
        most, 3,
        "at most the budget held at once, and the budget reached"
    );
}

#[tokio::test]
async fn without_a_budget_the_same_masters_hold_more_than_three_at_once() {
    // The control of the test above: the race it runs does exceed three when nothing holds it.
    let db = db().await;
    let (most, acked) = race(&db, None).await;
    assert_eq!(acked, 300);
    assert!(most > 3, "four masters asking for three each held {most}");
}

#[tokio::test]
async fn a_claim_says_when_its_budget_held_jobs_back_and_not_when_the_queue_ran_out() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let b = broker(&db, clock.clone()).await;
    enqueue(&db, "api", 3, clock.now()).await;
    enqueue(&db, "default", 3, clock.now()).await;
    let api = queues(&["api"]);

    let first = a
        .claim_with_terms(&api, 5, &[], &terms(Some(2)))
        .await
        .unwrap();
    assert_eq!(first.jobs.len(), 2, "the budget's two");
    assert!(first.held_by_budget);
    let second = b
        .claim_with_terms(&api, 5, &[], &terms(Some(2)))
        .await
        .unwrap();
    assert!(second.jobs.is_empty(), "another master gets none");
    assert!(second.held_by_budget, "and is told the budget held it back");
    // An unbudgeted queue of the same claim is not held.
    let other = b
        .claim_with_terms(&queues(&["default"]), 5, &[], &terms(Some(2)))
        .await
        .unwrap();
    assert_eq!(other.jobs.len(), 3);
    assert!(!other.held_by_budget);

    // A lease that expired holds its room until the reap takes it back.
    clock.advance(LEASE + Duration::from_secs(1));
    let blocked = b
        .claim_with_terms(&api, 5, &[], &terms(Some(2)))
        .await
        .unwrap();
    assert!(blocked.jobs.is_empty() && blocked.held_by_budget);
    a.reap_expired().await.unwrap();
    let after = b
        .claim_with_terms(&api, 5, &[], &terms(Some(2)))
        .await
        .unwrap();
    assert_eq!(
        after.jobs.len(),
        2,
        "both expired leases reaped and claimed again"
    );

    let acks: Vec<Settle> = leases(&after).into_iter().map(Settle::Ack).collect();
    b.settle(&acks).await.unwrap();
    let last = b
        .claim_with_terms(&api, 5, &[], &terms(Some(2)))
        .await
        .unwrap();
    assert_eq!(last.jobs.len(), 1, "the room the acks freed: the last job");
    b.settle(&[Settle::Ack(leases(&last)[0])]).await.unwrap();
    let none = b
        .claim_with_terms(&api, 5, &[], &terms(Some(2)))
        .await
        .unwrap();
    assert!(none.jobs.is_empty());
    assert!(
        !none.held_by_budget,
        "room for two and nothing ready: the queue ran out, not the budget"
    );
}

#[tokio::test]
async fn the_end_of_a_budgeted_lease_wakes_the_masters_and_an_unbudgeted_one_does_not() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let b = broker(&db, clock.clone()).await;
    enqueue(&db, "api", 3, clock.now()).await;
    let wakes = Wakes::default();
    let task = listener::spawn(db.pg.url().to_string(), wakes.clone());
    // The listener wakes everyone once it is subscribed.
    tokio::time::timeout(Duration::from_secs(30), wakes.jobs.notified())
        .await
        .expect("the listener subscribed");

    let plain = b
        .claim_with_terms(&queues(&["api"]), 1, &[], &terms(None))
        .await
        .unwrap();
    b.settle(&[Settle::Ack(leases(&plain)[0])]).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(500), wakes.jobs.notified())
            .await
            .is_err(),
        "an unbudgeted ack wakes nobody"
    );

    let budgeted = b
        .claim_with_terms(&queues(&["api"]), 2, &[], &terms(Some(5)))
        .await
        .unwrap();
    let [done, given_back] = leases(&budgeted)[..] else {
        panic!("two jobs claimed")
    };
    b.settle(&[Settle::Ack(done)]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), wakes.jobs.notified())
        .await
        .expect("a budgeted ack wakes the masters");
    b.settle(&[Settle::Release {
        lease: given_back,
        delay: Duration::ZERO,
        charged: false,
    }])
    .await
    .unwrap();
    tokio::time::timeout(Duration::from_secs(5), wakes.jobs.notified())
        .await
        .expect("a budgeted lease given back wakes the masters");
    task.abort();
}

/// Ordered groups on a budgeted queue, two masters racing: four groups of ten jobs under a budget
/// of two. Every group runs in enqueue order, one job at a time, and no more than two jobs of the
/// queue are held at once — the budget counts a group's head like any lease.
#[tokio::test]
async fn grouped_jobs_under_a_budget_keep_their_order_one_at_a_time_and_the_budget() {
    use std::sync::Mutex;
    let db = db().await;
    let a = broker(&db, Arc::new(SystemClock)).await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    for i in 0..10 {
        for g in 0..4 {
            client
                .execute(
                    "SELECT drover.enqueue('api', $1, 0::float8, $2, false, NULL, 300::float8, 0::smallint, NULL)",
                    &[&format!("g{g}-{i:02}"), &format!("g{g}")],
                )
                .await
                .unwrap();
        }
    }
    // (group, index, started: true / ended: false), in the order the masters saw them.
    let log = Arc::new(Mutex::new(Vec::<(String, u32, bool)>::new()));
    let held = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let mut masters = Vec::new();
    for b in [a, b] {
        let (log, held, most) = (log.clone(), held.clone(), most.clone());
        masters.push(tokio::spawn(async move {
            let terms = terms(Some(2));
            let mut idle = 0;
            while idle < 100 {
                let claimed = b
                    .claim_with_terms(&queues(&["api"]), 3, &[], &terms)
                    .await
                    .unwrap();
                if claimed.jobs.is_empty() {
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                idle = 0;
                let n = claimed.jobs.len() as i64;
                most.fetch_max(held.fetch_add(n, Ordering::SeqCst) + n, Ordering::SeqCst);
                let key = |p: &str| {
                    let (g, i) = p.split_once('-').unwrap();
                    (g.to_string(), i.parse::<u32>().unwrap())
                };
                for j in &claimed.jobs {
                    let (g, i) = key(&j.payload);
                    log.lock().unwrap().push((g, i, true));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                for j in &claimed.jobs {
                    let (g, i) = key(&j.payload);
                    log.lock().unwrap().push((g, i, false));
                }
                held.fetch_sub(n, Ordering::SeqCst);
                let settles: Vec<Settle> = leases(&claimed).into_iter().map(Settle::Ack).collect();
                b.settle(&settles).await.unwrap();
            }
        }));
    }
    for m in masters {
        m.await.unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 2, "the budget of two, reached");
    let log = log.lock().unwrap().clone();
    for g in 0..4 {
        let g = format!("g{g}");
        let events: Vec<(u32, bool)> = log
            .iter()
            .filter(|(group, _, _)| *group == g)
            .map(|(_, i, start)| (*i, *start))
            .collect();
        // start 0, end 0, start 1, end 1, ...: in order, never two of the group at once.
        let want: Vec<(u32, bool)> = (0..10).flat_map(|i| [(i, true), (i, false)]).collect();
        assert_eq!(events, want, "group {g}");
    }
}
