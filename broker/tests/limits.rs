//! Limits against a real PostgreSQL (migrations/0011_limits.sql, docs/limits.md): a key of
//! concurrency N never has more than N holders, a job waits outside the claim's index until it
//! has taken every limit, a settle that frees a slot admits the next job itself, a release, a
//! take-back and an expired lease keep the slot, a failure for good frees it, a rate admits R
//! per window and says when the next opens, a delayed job takes nothing until due, a job with
//! several limits takes them in order, a grouped job takes its limits as its group's head,
//! `queue:clear` frees what waiting jobs took, bad limits
//! are refused by name, and two brokers settling and claiming at once never hold N + 1 of a key.

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

/// One job under concurrency key `key` of cap `cap` on queue `default`, as the Laravel package
/// sends it.
async fn enqueue(c: &impl GenericClient, payload: &str, key: &str, cap: i32) -> i64 {
    enqueue_under(c, payload, &[(key, cap, 0)], 0.0)
        .await
        .unwrap()
}

/// One job under `limits` (key, cap, window milliseconds: 0 for concurrency), delayed `delay` s.
async fn enqueue_under(
    c: &impl GenericClient,
    payload: &str,
    limits: &[(&str, i32, i32)],
    delay: f64,
) -> Result<i64, tokio_postgres::Error> {
    let keys: Vec<&str> = limits.iter().map(|l| l.0).collect();
    let caps: Vec<i32> = limits.iter().map(|l| l.1).collect();
    let windows: Vec<i32> = limits.iter().map(|l| l.2).collect();
    Ok(c.query_one(
        "SELECT drover.enqueue_limited('default', $1, $2, $3, $4, $5, NULL, 300, 0::smallint, NULL)",
        &[&payload, &delay, &keys, &caps, &windows],
    )
    .await?
    .get(0))
}

/// Jobs admitted by one pass.
async fn pass(b: &Broker) -> u64 {
    b.admit_waiting().await.unwrap().jobs
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

/// Holders of each concurrency key.
async fn admitted(c: &Client) -> HashMap<String, i64> {
    c.query(
        "SELECT key, count(*) FROM drover.limit_holders GROUP BY 1",
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
    assert_eq!(pass(&b).await, 2, "two slots, two admitted");
    assert_eq!(pass(&b).await, 0, "the notes are consumed");
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
        count(&c, "SELECT count(*) FROM drover.limit_waiting").await,
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
    assert_eq!(pass(&b).await, 1);
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
    assert_eq!(pass(&b).await, 0);
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
            "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.limit_waiting) + (SELECT count(*) FROM drover.limit_holders)"
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
    pass(&b).await;
    let q = queues(&["default"]);
    let j = b.claim(&q, 10).await.unwrap().remove(0);

    // Another transaction holds the key's lock (as a pass or another settle would).
    let mut holder = client(&db).await;
    let tx = holder.transaction().await.unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock(x'646c696d'::int, hashtext('K'))",
        &[],
    )
    .await
    .unwrap();
    b.settle(&[Settle::Ack(lease(&j))]).await.unwrap();
    assert!(
        b.claim(&q, 10).await.unwrap().is_empty(),
        "the settle could not admit"
    );
    assert_eq!(
        count(&c, "SELECT count(*) FROM drover.limit_wakes").await,
        1
    );
    tx.commit().await.unwrap();
    assert_eq!(pass(&b).await, 1);
    assert_eq!(payloads(&b.claim(&q, 10).await.unwrap()), ["second"]);
}

#[tokio::test]
async fn a_rate_admits_its_cap_per_window_timed_from_its_first_start_once_all_have_started() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    let q = queues(&["default"]);
    for i in 0..5 {
        enqueue_under(&c, &format!("r{i}"), &[("api", 2, 1000)], 0.0)
            .await
            .unwrap();
    }
    let first = b.admit_waiting().await.unwrap();
    assert_eq!(first.jobs, 2, "two starts in the window");
    assert_eq!(
        first.next_wake, None,
        "the window is not timed until its jobs start"
    );
    // However long they wait unstarted (the workers are busy), no next window opens.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(pass(&b).await, 0, "the window's jobs have not started");
    let started = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&started), ["r0", "r1"]);
    // The last start left a note: the pass times the next window from the first start.
    let timed = b.admit_waiting().await.unwrap();
    assert_eq!(timed.jobs, 0);
    let wake = timed.next_wake.expect("the next window's opening");
    assert!(
        wake > Duration::from_millis(500) && wake <= Duration::from_secs(1),
        "{wake:?}"
    );
    tokio::time::sleep(wake).await;
    assert_eq!(pass(&b).await, 2, "the next window opened");
    // A release and a second lease count nothing more.
    b.settle(&[Settle::Release {
        lease: lease(&started[0]),
        delay: Duration::ZERO,
        charged: true,
    }])
    .await
    .unwrap();
    let again = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&again), ["r0", "r2", "r3"]);
    assert_eq!(
        count(&c, "SELECT count(*) FROM drover.limit_pending").await,
        0
    );
    // Keys whose window is over, with nothing to start, are forgotten.
    let settles: Vec<Settle> = again
        .iter()
        .chain(&started[1..])
        .map(|j| Settle::Ack(lease(j)))
        .collect();
    b.settle(&settles).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(pass(&b).await, 1);
    let last = b.claim(&q, 10).await.unwrap();
    b.settle(&[Settle::Ack(lease(&last[0]))]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(b.purge_limits().await.unwrap(), 1);
    assert_eq!(count(&c, "SELECT count(*) FROM drover.limit_keys").await, 0);
}

#[tokio::test]
async fn a_rated_job_deleted_unstarted_lets_its_window_end() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    for i in 0..2 {
        enqueue_under(&c, &format!("r{i}"), &[("api", 1, 1000)], 0.0)
            .await
            .unwrap();
    }
    assert_eq!(pass(&b).await, 1);
    // queue:clear deletes the admitted job before it started: the window had no start.
    c.execute("DELETE FROM drover.jobs WHERE lease_token IS NULL", &[])
        .await
        .unwrap();
    assert_eq!(pass(&b).await, 1, "a new window, at once");
}

#[tokio::test]
async fn a_job_with_several_limits_takes_them_in_one_order_holding_what_it_took() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    // Given in any order: taken as concurrency "a", then "b", then the rate.
    enqueue_under(
        &c,
        "first",
        &[("rate", 1, 60_000), ("b", 1, 0), ("a", 1, 0)],
        0.0,
    )
    .await
    .unwrap();
    enqueue_under(&c, "second", &[("a", 1, 0), ("rate", 1, 60_000)], 0.0)
        .await
        .unwrap();
    let mut admitted_jobs = 0;
    for _ in 0..4 {
        admitted_jobs += pass(&b).await;
    }
    assert_eq!(admitted_jobs, 1, "the rate of 1 let one in");
    let q = queues(&["default"]);
    let j = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&j), ["first"]);
    let keys: Vec<String> = c
        .query_one("SELECT keys::text FROM drover.limit_waiting", &[])
        .await
        .map(|r| vec![r.get(0)])
        .unwrap();
    assert_eq!(keys, ["{a,rate}"]);
    let held = admitted(&c).await;
    assert_eq!(
        (held.get("a"), held.get("b")),
        (Some(&1), Some(&1)),
        "the first holds a and b"
    );
    // Its end frees a: the second takes it and waits on the rate, holding a.
    b.settle(&[Settle::Ack(lease(&j[0]))]).await.unwrap();
    assert_eq!(pass(&b).await, 0);
    let step: (String, i64) = c
        .query_one(
            "SELECT waits_on, (SELECT count(*) FROM drover.limit_holders WHERE key = 'a') FROM drover.limit_waiting",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(step, ("rate".to_string(), 1));
    // queue:clear deletes it and frees the slot it took.
    let cleared: i32 = c
        .query_one("SELECT drover.limit_clear('default')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(cleared, 1);
    assert_eq!(
        count(&c, "SELECT count(*) FROM drover.limit_holders").await,
        0
    );
}

#[tokio::test]
async fn a_delayed_job_takes_nothing_until_it_is_due_and_jobs_behind_it_go_first() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    enqueue_under(&c, "later", &[("K", 1, 0)], 2.0)
        .await
        .unwrap();
    enqueue_under(&c, "now", &[("K", 1, 0)], 0.0).await.unwrap();
    let a = b.admit_waiting().await.unwrap();
    assert_eq!(a.jobs, 1);
    assert_eq!(
        payloads(&b.claim(&queues(&["default"]), 10).await.unwrap()),
        ["now"],
        "the due job took the slot"
    );
    let a = b.admit_waiting().await.unwrap();
    assert_eq!(a.jobs, 0, "the key is full");
    assert_eq!(
        a.next_wake, None,
        "a full key waits for its slot, not a time"
    );
    let only_delayed = client(&db).await;
    only_delayed
        .execute("DELETE FROM drover.limit_holders", &[])
        .await
        .unwrap();
    only_delayed
        .execute("INSERT INTO drover.limit_wakes VALUES ('K')", &[])
        .await
        .unwrap();
    let a = b.admit_waiting().await.unwrap();
    assert_eq!(a.jobs, 0, "not due yet");
    let wake = a.next_wake.expect("its due time");
    assert!(wake <= Duration::from_secs(2), "{wake:?}");
    tokio::time::sleep(wake).await;
    assert_eq!(pass(&b).await, 1);
}

/// One job of ordered group `group` (with `hold`) under concurrency key `key` of cap `cap`.
async fn enqueue_grouped(c: &Client, payload: &str, group: &str, key: &str, cap: i32, hold: bool) {
    c.execute(
        "SELECT drover.enqueue_limited('default', $1, 0, ARRAY[$2], ARRAY[$3::int], ARRAY[0], NULL, 300, 0::smallint, NULL, NULL, 1, $4, $5)",
        &[&payload, &key, &cap, &group, &hold],
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_grouped_job_takes_its_limits_as_its_groups_head_in_order_and_a_held_group_frees_its_slot(
) {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    let q = queues(&["default"]);
    enqueue(&c, "a", "K", 1).await;
    for p in ["g1", "g2", "g3"] {
        enqueue_grouped(&c, p, "G", "K", 1, true).await;
    }
    // A key of cap 5 does not let a group run two at once.
    for p in ["h1", "h2"] {
        enqueue_grouped(&c, p, "H", "K5", 5, false).await;
    }
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM drover.group_jobs WHERE keys IS NOT NULL"
        )
        .await,
        3,
        "only the heads take their limits; the jobs behind them wait in their groups"
    );
    assert_eq!(pass(&b).await, 2, "a (K's first) and h1 (H's head)");
    let out = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&out), ["a", "h1"]);
    // a's ack frees K: g1, G's head, is next in K's line and is admitted by the ack itself.
    b.settle(&[Settle::Ack(lease(&out[0])), Settle::Ack(lease(&out[1]))])
        .await
        .unwrap();
    assert_eq!(pass(&b).await, 0, "the settles admitted g1 and moved h2 in");
    let out = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&out), ["g1", "h2"]);
    // g1 fails for good under hold: G is held, and K's slot is free.
    b.settle(&[Settle::Failed(lease(&out[0])), Settle::Ack(lease(&out[1]))])
        .await
        .unwrap();
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM drover.groups WHERE name = 'G' AND head IS NULL"
        )
        .await,
        1,
        "the group is held"
    );
    assert_eq!(admitted(&c).await.get("K"), None, "its slot is free");
    enqueue(&c, "b", "K", 1).await;
    assert_eq!(pass(&b).await, 1);
    let out = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&out), ["b"], "the held group's jobs stay behind");
    b.settle(&[Settle::Ack(lease(&out[0]))]).await.unwrap();
    // Forgotten, the group goes on: g2 becomes the head and takes K.
    c.execute("SELECT drover.forget_held(NULL)", &[])
        .await
        .unwrap();
    assert_eq!(pass(&b).await, 1);
    let out = b.claim(&q, 10).await.unwrap();
    assert_eq!(payloads(&out), ["g2"]);
    b.settle(&[Settle::Ack(lease(&out[0]))]).await.unwrap();
    let out = b.claim(&q, 10).await.unwrap();
    assert_eq!(
        payloads(&out),
        ["g3"],
        "g2's ack moved g3 in and admitted it"
    );
    b.settle(&[Settle::Ack(lease(&out[0]))]).await.unwrap();
    assert_eq!(
        count(
            &c,
            "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.limit_waiting) \
             + (SELECT count(*) FROM drover.limit_holders) + (SELECT count(*) FROM drover.groups) \
             + (SELECT count(*) FROM drover.group_jobs)"
        )
        .await,
        0,
        "nothing left"
    );
}

#[tokio::test]
async fn bad_limits_are_refused_naming_them() {
    let db = db().await;
    let _b = broker(&db).await;
    let c = client(&db).await;
    for (limits, said) in [
        (vec![("k", 0, 0)], "bad limits: 'k' (cap 0, window 0 ms)"),
        (vec![("", 1, 0)], "bad limits: '' (cap 1, window 0 ms)"),
        (vec![("k", 1, -5)], "bad limits: 'k' (cap 1, window -5 ms)"),
        (vec![("k", 1, 0), ("k", 2, 0)], "the limits name k twice"),
        (vec![], "a job takes 1 to 8 limits"),
    ] {
        let err = enqueue_under(&c, "p", &limits, 0.0).await.unwrap_err();
        let text = err
            .as_db_error()
            .map(|e| e.message().to_string())
            .unwrap_or_default();
        assert!(text.contains(said), "{limits:?}: {text}");
    }
    // The same key as a concurrency limit and as a rate is two limits.
    enqueue_under(&c, "p", &[("k", 1, 0), ("k", 5, 60_000)], 0.0)
        .await
        .unwrap();
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
                    pass(&b).await;
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

#[tokio::test]
async fn a_burst_of_keys_is_admitted_and_forgotten_whole_not_a_batch_per_tick() {
    let db = db().await;
    // A pass of 10,000 admissions takes about a second on an idle 2-core machine and more than
    // LEASE's two-second call deadline on a loaded one: this scenario is about what a pass takes,
    // not how fast, so its calls get a longer deadline.
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = Duration::from_secs(20);
    let b = Broker::start(config, Arc::new(SystemClock)).await.unwrap();
    let c = client(&db).await;
    // 12,000 jobs, each under a rate key of its own: 12,000 notes, more than a pass takes.
    c.batch_execute(
        "SELECT drover.enqueue_limited('default', 'j' || g, 0, ARRAY['k' || g], '{1}', '{100}', NULL, 300, 0::smallint, NULL)
         FROM generate_series(1, 12000) g",
    )
    .await
    .unwrap();
    let first = b.admit_waiting().await.unwrap();
    assert_eq!(first.jobs, 10_000);
    assert_eq!(
        first.next_wake,
        Some(Duration::ZERO),
        "notes are left and no NOTIFY will come for them: the next pass is now"
    );
    let second = b.admit_waiting().await.unwrap();
    assert_eq!((second.jobs, second.next_wake), (2_000, None));
    // They start, their windows end: one purge forgets the 12,000 keys, a batch after another.
    let q = queues(&["default"]);
    let mut started = 0;
    while started < 12_000 {
        let jobs = b.claim(&q, 1000).await.unwrap();
        assert!(!jobs.is_empty());
        started += jobs.len();
        let acks: Vec<Settle> = jobs.iter().map(|j| Settle::Ack(lease(j))).collect();
        b.settle(&acks).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        count(&c, "SELECT count(*) FROM drover.limit_keys").await,
        12_000
    );
    assert_eq!(b.purge_limits().await.unwrap(), 12_000);
    assert_eq!(count(&c, "SELECT count(*) FROM drover.limit_keys").await, 0);
}

#[tokio::test]
async fn a_job_completed_inside_its_own_transaction_frees_its_slot_at_the_commit_and_never_lets_a_second_in_before(
) {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    for i in 0..3 {
        enqueue(&c, &format!("k{i}"), "K", 1).await;
    }
    assert_eq!(pass(&b).await, 1, "one slot");
    let first = b.claim(&queues(&["default"]), 100).await.unwrap();
    assert_eq!(payloads(&first), ["k0"]);
    // k0's transaction completes it: until it commits, nothing more of the key is let in.
    let open = support::open_completion(&db, lease(&first[0])).await;
    assert_eq!(pass(&b).await, 0);
    assert!(b
        .claim(&queues(&["default"]), 100)
        .await
        .unwrap()
        .is_empty());
    open.batch_execute("COMMIT").await.unwrap();
    // The commit freed the slot and admitted the next job, as an ack does: one out at a time.
    assert_eq!(admitted(&c).await["K"], 1);
    let second = b.claim(&queues(&["default"]), 100).await.unwrap();
    assert_eq!(payloads(&second), ["k1"]);
    // A completion rolled back (its worker killed) keeps the slot: k2 stays out.
    drop(support::open_completion(&db, lease(&second[0])).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(pass(&b).await, 0);
    assert!(b
        .claim(&queues(&["default"]), 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        count(&c, "SELECT count(*) FROM drover.limit_waiting").await,
        1
    );
}
