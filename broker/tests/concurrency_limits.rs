//! Concurrency limits against a real PostgreSQL (migrations/0011_concurrency_limits.sql,
//! docs/limits.md): a key of cap N never has more than N jobs in drover.jobs, a job waits
//! outside the claim's index until its key has room, a settle that frees a slot admits the next
//! job itself, a release, a take-back and an expired lease keep the slot, a failure for good
//! frees it, the latest dispatch's cap is the key's, and two brokers settling and claiming at
//! once never hold N + 1 of a key.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod support;

use drover_broker::{Broker, BrokerConfig, Lease, LeasedJob, Settle, SystemClock};
use support::{db, queues, Db};
use tokio_postgres::{Client, GenericClient};

/// Each call's client-side deadline is half of it, which a loaded CI machine's stalls must not
/// reach; one scenario waits for it to end.
const LEASE: Duration = Duration::from_secs(4);

async fn broker(db: &Db) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = LEASE;
    Broker::start(config, Arc::new(SystemClock)).await.unwrap()
}

async fn client(db: &Db) -> Client {
    drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap()
}

/// One job under key `key` of cap `cap` on queue `default`, as the Laravel package sends it.
async fn enqueue(c: &impl GenericClient, payload: &str, key: &str, cap: i32) -> i64 {
    c.query_one(
        "SELECT drover.enqueue_limited('default', $1, 0, $2, $3, NULL, 300, 0::smallint, NULL)",
        &[&payload, &key, &cap],
    )
    .await
    .unwrap()
    .get(0)
}

fn lease(job: &LeasedJob) -> Lease {
    Lease {
        id: job.id,
        token: job.token,
    }
}

fn payloads(jobs: &[LeasedJob]) -> Vec<&str> {
    let mut p: Vec<&str> = jobs.iter().map(|j| j.payload.as_str()).collect();
    p.sort_unstable();
    p
}

/// Jobs of each key in drover.jobs (admitted: leased or ready).
async fn admitted(c: &Client) -> HashMap<String, i64> {
    c.query(
        "SELECT slot_key, count(*) FROM drover.jobs WHERE slot_key IS NOT NULL GROUP BY 1",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_key_of_cap_two_has_two_jobs_out_at_once_and_a_finished_one_lets_the_next_in_at_its_settle(
) {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    for i in 0..5 {
        enqueue(&c, &format!("k{i}"), "K", 2).await;
    }
    c.execute(
        "INSERT INTO drover.jobs (queue, payload) VALUES ('default', 'free')",
        &[],
    )
    .await
    .unwrap();
    // Enqueued jobs wait outside drover.jobs until a pass admits them: the claim sees only the
    // unlimited job.
    assert_eq!(
        payloads(&b.claim(&queues(&["default"]), 100).await.unwrap()),
        ["free"]
    );
    assert_eq!(
        b.admit_waiting().await.unwrap(),
        2,
        "two slots, two admitted"
    );
    assert_eq!(
        b.admit_waiting().await.unwrap(),
        0,
        "the notes are consumed"
    );
    let out = b.claim(&queues(&["default"]), 100).await.unwrap();
    assert_eq!(payloads(&out), ["k0", "k1"], "in enqueue order");
    assert!(
        out.iter().all(|j| j.grouped),
        "a limited job's ack admits the next: it never rides with a claim"
    );
    // The ack frees a slot and admits the next job in its own transaction: no pass needed.
    b.settle(&[Settle::Ack(lease(&out[0]))]).await.unwrap();
    assert_eq!(admitted(&c).await["K"], 2);
    let next = b.claim(&queues(&["default"]), 100).await.unwrap();
    assert_eq!(payloads(&next), ["k2"]);
    assert_eq!(
        count(&c, "SELECT count(*) FROM drover.slot_waiting").await,
        2
    );
}

#[tokio::test]
async fn a_released_taken_back_or_expired_job_keeps_its_slot_and_a_failure_for_good_frees_it() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    enqueue(&c, "first", "K", 1).await;
    enqueue(&c, "second", "K", 1).await;
    assert_eq!(b.admit_waiting().await.unwrap(), 1);
    let q = queues(&["default"]);

    let j = b.claim(&q, 10).await.unwrap().remove(0);
    assert_eq!(j.payload, "first");
    b.settle(&[Settle::Release {
        lease: lease(&j),
        delay: Duration::ZERO,
        charged: true,
    }])
    .await
    .unwrap();
    assert_eq!(b.admit_waiting().await.unwrap(), 0);
    let j = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&j), ["first"], "a release keeps the slot");

    b.settle(&[Settle::TakeBack {
        lease: lease(&j[0]),
        died: Some("was killed by SIGKILL".into()),
    }])
    .await
    .unwrap();
    let j = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&j), ["first"], "a take-back keeps the slot");

    tokio::time::sleep(LEASE + Duration::from_millis(200)).await;
    assert_eq!(b.reap_expired().await.unwrap().released, 1);
    let j = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&j), ["first"], "an expired lease keeps the slot");

    b.settle(&[Settle::Fail {
        lease: lease(&j[0]),
        error: "boom".into(),
    }])
    .await
    .unwrap();
    let j = b.claim(&q, 10).await.unwrap();
    assert_eq!(
        payloads(&j),
        ["second"],
        "a failure for good frees the slot"
    );
    b.settle(&[Settle::Ack(lease(&j[0]))]).await.unwrap();
    assert_eq!(
        count(
            &c,
            "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.slot_waiting)"
        )
        .await,
        0
    );
}

#[tokio::test]
async fn a_settle_that_cannot_take_its_keys_lock_leaves_a_note_and_the_next_pass_admits() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    enqueue(&c, "first", "K", 1).await;
    enqueue(&c, "second", "K", 1).await;
    b.admit_waiting().await.unwrap();
    let q = queues(&["default"]);
    let j = b.claim(&q, 10).await.unwrap().remove(0);

    // Another transaction holds the key's lock (as a pass or another settle would).
    let mut holder = client(&db).await;
    let tx = holder.transaction().await.unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock(x'64736c74'::int, drover.slot_lock_id('K'))",
        &[],
    )
    .await
    .unwrap();
    b.settle(&[Settle::Ack(lease(&j))]).await.unwrap();
    assert!(
        b.claim(&q, 10).await.unwrap().is_empty(),
        "the settle could not admit"
    );
    assert_eq!(count(&c, "SELECT count(*) FROM drover.slot_wakes").await, 1);
    tx.commit().await.unwrap();
    assert_eq!(b.admit_waiting().await.unwrap(), 1);
    assert_eq!(payloads(&b.claim(&q, 10).await.unwrap()), ["second"]);
}

#[tokio::test]
async fn the_latest_dispatchs_cap_is_the_keys() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    for i in 0..4 {
        enqueue(&c, &format!("old{i}"), "K", 1).await;
    }
    assert_eq!(b.admit_waiting().await.unwrap(), 1);
    // A deploy raised the limit to 3: the waiting jobs are admitted under it.
    enqueue(&c, "new", "K", 3).await;
    assert_eq!(b.admit_waiting().await.unwrap(), 2);
    assert_eq!(admitted(&c).await["K"], 3);
    assert_eq!(
        payloads(&b.claim(&queues(&["default"]), 10).await.unwrap()),
        ["old0", "old1", "old2"]
    );
}

#[tokio::test]
async fn two_brokers_claiming_and_settling_at_once_never_hold_more_than_a_keys_cap() {
    const KEYS: usize = 3;
    const CAP: i64 = 2;
    const PER_KEY: usize = 40;
    let db = db().await;
    let brokers = [Arc::new(broker(&db).await), Arc::new(broker(&db).await)];
    let c = client(&db).await;
    for i in 0..PER_KEY {
        for k in 0..KEYS {
            enqueue(&c, &format!("{k}-{i}"), &format!("key{k}"), CAP as i32).await;
        }
    }
    brokers[0].admit_waiting().await.unwrap();
    let done = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for b in &brokers {
        let (b, done) = (b.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let q = queues(&["default"]);
            let mut idle = 0;
            while idle < 20 {
                let jobs = b.claim(&q, 3).await.unwrap();
                if jobs.is_empty() {
                    idle += 1;
                    // A pass, as a master woken by a note would run.
                    b.admit_waiting().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                idle = 0;
                let settles: Vec<Settle> = jobs.iter().map(|j| Settle::Ack(lease(j))).collect();
                b.settle(&settles).await.unwrap();
                done.lock()
                    .unwrap()
                    .extend(jobs.iter().map(|j| j.payload.clone()));
            }
        }));
    }
    // Watch the invariant from outside while they run.
    let mut most = 0;
    while !tasks.iter().all(|t| t.is_finished()) {
        for (key, n) in admitted(&c).await {
            assert!(n <= CAP, "{n} jobs of {key} admitted at once, cap {CAP}");
            most = most.max(n);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut ran = done.lock().unwrap().clone();
    ran.sort();
    let before = ran.len();
    ran.dedup();
    assert_eq!(before, ran.len(), "no job ran twice");
    assert_eq!(ran.len(), KEYS * PER_KEY, "no job lost");
    assert_eq!(
        most, CAP,
        "the cap was reached, so the watch could have failed"
    );
}
