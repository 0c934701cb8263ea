//! Fair share against a real PostgreSQL (migrations/0011_limits.sql, "Fair share";
//! queries/claim_fair.sql): a fair queue's claim takes its keys in turn — a key that arrives
//! behind another's backlog is served at once, a weight of 2 gets twice the turns — jobs
//! enqueued untagged are still served once the tagged ones do not fill a claim, a job admitted
//! from its limits is tagged where service is then, and the keys behind the queue's virtual
//! time are forgotten.

use std::sync::Arc;
use std::time::Duration;

mod support;

use drover_broker::{
    Broker, BrokerConfig, ClaimTerms, FairQueues, Lease, LeasedJob, Settle, SystemClock,
};
use support::{db, queues, Db};
use tokio_postgres::Client;

async fn broker(db: &Db) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = Duration::from_secs(10);
    Broker::start(config, Arc::new(SystemClock)).await.unwrap()
}

async fn client(db: &Db) -> Client {
    drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap()
}

/// `n` jobs of key `key` (weight `weight`) on fair queue `t`, payloads `<key><i>`.
async fn enqueue(c: &Client, key: &str, weight: f64, n: usize) {
    for i in 0..n {
        c.query_one(
            "SELECT drover.enqueue_fair('t', $1, 0, $2, $3, NULL, 300, 0::smallint, NULL)",
            &[&format!("{key}{i}"), &key, &weight],
        )
        .await
        .unwrap();
    }
}

fn fair_terms() -> ClaimTerms {
    ClaimTerms {
        fair: Arc::new(FairQueues::new(["t".to_string()])),
        ..ClaimTerms::default()
    }
}

async fn claim(b: &Broker, n: usize, terms: &ClaimTerms) -> Vec<LeasedJob> {
    b.claim_with_terms(&queues(&["t"]), n, &[], terms)
        .await
        .unwrap()
        .jobs
}

/// The keys of a claim's jobs, sorted: which jobs a claim takes is the rule under test (the
/// rows come back in id order).
fn keys(jobs: &[LeasedJob]) -> String {
    let mut keys: Vec<String> = jobs
        .iter()
        .map(|j| j.payload.trim_end_matches(char::is_numeric).to_string())
        .collect();
    keys.sort();
    keys.join(" ")
}

async fn ack(b: &Broker, jobs: &[LeasedJob]) {
    let settles: Vec<Settle> = jobs
        .iter()
        .map(|j| {
            Settle::Ack(Lease {
                id: j.id,
                token: j.token,
            })
        })
        .collect();
    b.settle(&settles).await.unwrap();
}

#[tokio::test]
async fn a_key_arriving_behind_anothers_backlog_is_served_at_once_and_the_keys_take_turns() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    enqueue(&c, "big", 1.0, 100).await;
    let first = claim(&b, 4, &fair_terms()).await;
    assert_eq!(keys(&first), "big big big big");
    ack(&b, &first).await;
    // Two small keys arrive behind 96 jobs of big: each is placed where service is.
    enqueue(&c, "a", 1.0, 3).await;
    enqueue(&c, "b", 1.0, 3).await;
    let next = claim(&b, 9, &fair_terms()).await;
    assert_eq!(
        keys(&next),
        "a a a b b b big big big",
        "the keys in turn, not the backlog first"
    );
    // The same queue claimed in due order (not declared fair) would have given big's backlog.
    enqueue(&c, "late", 1.0, 1).await;
    let fifo = claim(&b, 3, &ClaimTerms::default()).await;
    assert_eq!(keys(&fifo), "big big big");
}

#[tokio::test]
async fn a_weight_of_two_gets_twice_the_turns() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    enqueue(&c, "one", 1.0, 20).await;
    enqueue(&c, "two", 2.0, 20).await;
    let jobs = claim(&b, 12, &fair_terms()).await;
    let twos = jobs.iter().filter(|j| j.payload.starts_with("two")).count();
    assert_eq!(twos, 8, "{}", keys(&jobs));
}

#[tokio::test]
async fn untagged_jobs_of_a_fair_queue_are_served_when_the_tagged_do_not_fill_a_claim() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    c.execute(
        "INSERT INTO drover.jobs (queue, payload) VALUES ('t', 'plain0'), ('t', 'plain1')",
        &[],
    )
    .await
    .unwrap();
    enqueue(&c, "k", 1.0, 2).await;
    let jobs = claim(&b, 3, &fair_terms()).await;
    assert_eq!(keys(&jobs), "k k plain");
    assert_eq!(keys(&claim(&b, 3, &fair_terms()).await), "plain");
}

#[tokio::test]
async fn a_job_admitted_from_its_limits_is_tagged_and_keys_behind_the_queue_are_forgotten() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    enqueue(&c, "big", 1.0, 10).await;
    enqueue(&c, "a", 1.0, 1).await;
    let limited: i64 = c
        .query_one(
            "SELECT drover.enqueue_limited('t', 'small0', 0, ARRAY['c'], ARRAY[1], ARRAY[0], NULL, 300, 0::smallint, NULL, 'small', 1)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(b.admit_waiting().await.unwrap().jobs, 1);
    let tag: Option<f64> = c
        .query_one(
            "SELECT fair_tag FROM drover.jobs WHERE id = $1",
            &[&limited],
        )
        .await
        .unwrap()
        .get(0);
    assert!(tag.is_some(), "tagged at admission");
    let jobs = claim(&b, 3, &fair_terms()).await;
    assert_eq!(keys(&jobs), "a big small");
    ack(&b, &jobs).await;
    // Drain: every key but the furthest (big's) is behind the virtual time, and forgotten. (The
    // admitted job's key got no row: its admission does not make one, see fair_tag_nowait.)
    let rest = claim(&b, 100, &fair_terms()).await;
    ack(&b, &rest).await;
    assert_eq!(b.purge_limits().await.unwrap(), 1);
    let left: i64 = c
        .query_one("SELECT count(*) FROM drover.fair_keys", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 1, "the furthest key is the queue's time");
}

#[tokio::test]
async fn a_bad_fair_key_or_weight_is_refused_naming_the_rule() {
    let db = db().await;
    let _b = broker(&db).await;
    let c = client(&db).await;
    for (key, weight) in [
        ("k".to_string(), 0.0),
        ("x".repeat(256), 1.0),
        ("k".to_string(), 1001.0),
    ] {
        let err = c
            .query_one(
                "SELECT drover.enqueue_fair('t', 'p', 0, $1, $2, NULL, 300, 0::smallint, NULL)",
                &[&key, &weight],
            )
            .await
            .unwrap_err();
        let text = err
            .as_db_error()
            .map(|e| e.message().to_string())
            .unwrap_or_default();
        assert!(
            text.contains(
                "a fair key is at most 255 characters and a weight above 0 and at most 1000"
            ),
            "{text}"
        );
    }
}
