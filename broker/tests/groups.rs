//! Ordered groups and deduplication against a real PostgreSQL: the claim hands out only a group's
//! head, the head is decided at enqueue and at settle (docs/ordered-groups.md), a retried head
//! keeps its place, a failure lets the group go on or holds it, and a deduplication id drops a
//! second dispatch within its window. The production clock throughout: drover.enqueue stamps
//! jobs with the database's clock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod support;

use drover_broker::{Broker, BrokerConfig, Lease, LeasedJob, Settle, SystemClock};
use support::{db, Db};
use tokio_postgres::{Client, GenericClient};

/// The lease of these tests: one scenario waits for it to end, and each call's client-side
/// deadline is half of it, which a loaded CI machine's stalls must not reach.
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

/// One job through drover.enqueue, as the Laravel package and the Producer send a grouped or
/// deduplicated one; its id, or None when deduplicated.
struct Enqueue<'a> {
    payload: &'a str,
    group: Option<&'a str>,
    hold: bool,
    dedup: Option<&'a str>,
    window_secs: f64,
    delay_secs: f64,
}

impl<'a> Enqueue<'a> {
    fn job(payload: &'a str) -> Self {
        Enqueue {
            payload,
            group: None,
            hold: false,
            dedup: None,
            window_secs: 300.0,
            delay_secs: 0.0,
        }
    }
    fn group(mut self, group: &'a str) -> Self {
        self.group = Some(group);
        self
    }
    fn hold(mut self) -> Self {
        self.hold = true;
        self
    }
    fn dedup(mut self, id: &'a str, window_secs: f64) -> Self {
        self.dedup = Some(id);
        self.window_secs = window_secs;
        self
    }
    fn delay(mut self, secs: f64) -> Self {
        self.delay_secs = secs;
        self
    }
    async fn on(self, client: &impl GenericClient) -> Option<i64> {
        client
            .query_one(
                "SELECT drover.enqueue('default', $1, $2, $3, $4, $5, $6, 0::smallint, NULL)",
                &[
                    &self.payload,
                    &self.delay_secs,
                    &self.group,
                    &self.hold,
                    &self.dedup,
                    &self.window_secs,
                ],
            )
            .await
            .unwrap()
            .get(0)
    }
}

fn default_queue() -> Vec<String> {
    vec!["default".to_string()]
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

#[tokio::test]
async fn each_group_runs_one_job_at_a_time_in_enqueue_order_beside_ungrouped_jobs() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    for i in 0..5 {
        Enqueue::job(&format!("a{i}")).group("A").on(&c).await;
        Enqueue::job(&format!("b{i}")).group("B").on(&c).await;
        Enqueue::job(&format!("u{i}")).on(&c).await;
    }
    // The first claim sees both heads and every ungrouped job, never a job behind a head.
    let first = b.claim(&default_queue(), 100).await.unwrap();
    assert_eq!(
        payloads(&first),
        ["a0", "b0", "u0", "u1", "u2", "u3", "u4"],
        "only the heads of the groups are claimable"
    );
    // The master writes a grouped job's ack on its own (it moves the group on): the claim says
    // which jobs are grouped.
    assert_eq!(
        first.iter().map(|j| j.grouped).collect::<Vec<_>>(),
        [true, true, false, false, false, false, false]
    );
    assert!(b.claim(&default_queue(), 100).await.unwrap().is_empty());

    // Settle and claim until drained: per group, the order of enqueue, one at a time.
    let mut ran: HashMap<char, Vec<String>> = HashMap::new();
    let mut held = first;
    while !held.is_empty() {
        let mut in_flight: HashMap<char, usize> = HashMap::new();
        for j in &held {
            let group = j.payload.chars().next().unwrap();
            *in_flight.entry(group).or_default() += 1;
            ran.entry(group).or_default().push(j.payload.clone());
        }
        for (group, n) in &in_flight {
            assert!(
                *group == 'u' || *n == 1,
                "two jobs of group {group} held at once"
            );
        }
        let settles: Vec<Settle> = held.iter().map(|j| Settle::Ack(lease(j))).collect();
        assert_eq!(b.settle(&settles).await.unwrap().acked, settles.len());
        held = b.claim(&default_queue(), 100).await.unwrap();
    }
    for g in ['a', 'b'] {
        let want: Vec<String> = (0..5).map(|i| format!("{g}{i}")).collect();
        assert_eq!(ran[&g], want, "group {g} ran in enqueue order");
    }
    let left: i64 = c
        .query_one(
            "SELECT (SELECT count(*) FROM drover.groups) + (SELECT count(*) FROM drover.group_jobs)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "a group is gone with its last settle");
}

#[tokio::test]
async fn a_released_taken_back_or_expired_head_keeps_its_place_at_the_head_of_its_group() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    Enqueue::job("first").group("G").on(&c).await;
    Enqueue::job("second").group("G").on(&c).await;

    // Released with a backoff: the group waits for it, the second never overtakes it. (3 s: the
    // claim that must find nothing follows the settle at once, but a loaded machine can stall.)
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    assert_eq!(j.payload, "first");
    b.settle(&[Settle::Release {
        lease: lease(&j),
        delay: Duration::from_secs(3),
        charged: true,
    }])
    .await
    .unwrap();
    assert!(
        b.claim(&default_queue(), 10).await.unwrap().is_empty(),
        "nothing of the group is ready while its head waits out its backoff"
    );
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    assert_eq!(j.payload, "first");

    // Its worker died: taken back, still the head.
    b.settle(&[Settle::TakeBack {
        lease: lease(&j),
        died: Some("was killed by SIGKILL".into()),
    }])
    .await
    .unwrap();
    let j = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&j), ["first"]);

    // Its master stopped renewing: the lease expires and the reap gives it back as the head.
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    assert_eq!(b.reap_expired().await.unwrap().released, 1);
    let j = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&j), ["first"]);
    assert_eq!(j[0].attempts, 4, "every attempt stays counted");

    b.settle(&[Settle::Ack(lease(&j[0]))]).await.unwrap();
    let j = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&j), ["second"]);
}

#[tokio::test]
async fn a_delayed_job_holds_the_jobs_behind_it_until_it_is_due() {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    // 3 s: the claim that must find nothing follows at once, but a loaded machine can stall.
    Enqueue::job("later")
        .group("G")
        .delay(3.0)
        .on(&c)
        .await
        .unwrap();
    Enqueue::job("now").group("G").on(&c).await.unwrap();
    assert!(b.claim(&default_queue(), 10).await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let j = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&j), ["later"]);
}

#[tokio::test]
async fn a_head_that_fails_for_good_lets_its_group_go_on_and_under_hold_stops_it_until_retried_or_forgotten(
) {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    // Without hold: drover's own failure and the application's recorded one both let it go on.
    Enqueue::job("p1").group("P").on(&c).await;
    Enqueue::job("p2").group("P").on(&c).await;
    Enqueue::job("p3").group("P").on(&c).await;
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    b.settle(&[Settle::Fail {
        lease: lease(&j),
        error: "boom".into(),
    }])
    .await
    .unwrap();
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    assert_eq!(j.payload, "p2");
    b.settle(&[Settle::Failed(lease(&j))]).await.unwrap();
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    assert_eq!(j.payload, "p3");
    b.settle(&[Settle::Ack(lease(&j))]).await.unwrap();

    // Under hold: the group stops at the failed job, shown as held by it.
    let uuid = "0b4ed1f2-9c33-4f6e-8a0e-2a6f3c1d5e7b";
    let poison = format!(r#"{{"uuid":"{uuid}","job":"x"}}"#);
    let held_id = Enqueue::job(&poison)
        .group("H")
        .hold()
        .on(&c)
        .await
        .unwrap();
    Enqueue::job("h2").group("H").hold().on(&c).await;
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    b.settle(&[Settle::Failed(lease(&j))]).await.unwrap();
    assert!(b.claim(&default_queue(), 10).await.unwrap().is_empty());
    let row = c
        .query_one(
            "SELECT head, held_by, held_uuid, waiting FROM drover.groups WHERE name = 'H'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<i64>>(0), None);
    assert_eq!(row.get::<_, Option<i64>>(1), Some(held_id));
    assert_eq!(row.get::<_, Option<String>>(2).as_deref(), Some(uuid));
    assert_eq!(row.get::<_, i64>(3), 1);
    // A job enqueued meanwhile waits behind; the retry (the same uuid again) goes first.
    Enqueue::job("h3").group("H").hold().on(&c).await;
    Enqueue::job(&poison).group("H").hold().on(&c).await;
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    assert_eq!(
        j.payload, poison,
        "the retried job runs before the jobs it held"
    );
    b.settle(&[Settle::Ack(lease(&j))]).await.unwrap();
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    assert_eq!(j.payload, "h2");

    // Held again by drover's own failure; forgetting the failed job lets the group go on.
    b.settle(&[Settle::Fail {
        lease: lease(&j),
        error: "again".into(),
    }])
    .await
    .unwrap();
    assert!(b.claim(&default_queue(), 10).await.unwrap().is_empty());
    let forgotten: i32 = c
        .query_one("SELECT drover.forget_held($1)", &[&j.id.to_string()])
        .await
        .unwrap()
        .get(0);
    assert_eq!(forgotten, 1, "a payload without a uuid is named by its id");
    let j = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&j), ["h3"]);
}

#[tokio::test]
async fn a_deduplication_id_drops_a_second_dispatch_within_its_window_and_a_rolled_back_one_reserves_nothing(
) {
    // The window, seconds: what must fall inside one follows at once, but a loaded machine can
    // stall between two statements.
    const WINDOW: f64 = 3.0;
    let db = db().await;
    let b = broker(&db).await;
    let mut c = client(&db).await;
    {
        let tx = c.transaction().await.unwrap();
        let rolled_back = Enqueue::job("x").dedup("order-1", WINDOW).on(&tx).await;
        assert!(rolled_back.is_some());
        tx.rollback().await.unwrap();
    }
    let first = Enqueue::job("x").dedup("order-1", WINDOW).on(&c).await;
    assert!(first.is_some(), "a rolled-back dispatch reserved nothing");
    assert_eq!(
        Enqueue::job("x").dedup("order-1", WINDOW).on(&c).await,
        None
    );
    // Still dropped after the job completed: the window counts from the first enqueue.
    let j = b.claim(&default_queue(), 10).await.unwrap().remove(0);
    b.settle(&[Settle::Ack(lease(&j))]).await.unwrap();
    assert_eq!(
        Enqueue::job("x").dedup("order-1", WINDOW).on(&c).await,
        None
    );
    // Another id, and the same one grouped, are their own.
    assert!(Enqueue::job("y")
        .dedup("order-2", WINDOW)
        .on(&c)
        .await
        .is_some());
    tokio::time::sleep(Duration::from_secs_f64(WINDOW + 0.2)).await;
    assert!(
        Enqueue::job("x")
            .dedup("order-1", WINDOW)
            .on(&c)
            .await
            .is_some(),
        "accepted again once its window ended"
    );
    assert_eq!(
        Enqueue::job("z")
            .group("G")
            .dedup("order-1", WINDOW)
            .on(&c)
            .await,
        None,
        "grouped and deduplicated"
    );
    tokio::time::sleep(Duration::from_secs_f64(WINDOW + 0.2)).await;
    assert_eq!(b.purge_dedup(Duration::from_secs(5)).await.unwrap(), 2);
}

#[tokio::test]
async fn producers_racing_on_one_group_get_one_order_that_follows_their_commits() {
    let db = db().await;
    let b = broker(&db).await;
    // Four producers, each enqueuing 25 jobs into one group in transactions of its own.
    let mut producers = Vec::new();
    for p in 0..4 {
        let c = client(&db).await;
        producers.push(tokio::spawn(async move {
            for i in 0..25 {
                c.batch_execute("BEGIN").await.unwrap();
                Enqueue::job(&format!("{p}:{i:02}"))
                    .group("R")
                    .on(&c)
                    .await
                    .unwrap();
                c.batch_execute("COMMIT").await.unwrap();
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    let mut ran = Vec::new();
    loop {
        let held = b.claim(&default_queue(), 10).await.unwrap();
        if held.is_empty() {
            break;
        }
        assert_eq!(held.len(), 1, "one job of the group at a time");
        ran.push(held[0].payload.clone());
        b.settle(&[Settle::Ack(lease(&held[0]))]).await.unwrap();
    }
    assert_eq!(ran.len(), 100);
    for p in 0..4 {
        let mine: Vec<&String> = ran
            .iter()
            .filter(|r| r.starts_with(&format!("{p}:")))
            .collect();
        let mut sorted = mine.clone();
        sorted.sort();
        assert_eq!(mine, sorted, "producer {p}'s jobs ran in its commit order");
    }
}

#[tokio::test]
async fn a_settle_never_waits_for_a_producer_holding_its_groups_lock_and_the_move_is_finished_after(
) {
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    let producer = client(&db).await;
    Enqueue::job("g1").group("G").on(&c).await;
    Enqueue::job("h1").group("H").hold().on(&c).await;
    Enqueue::job("h2").group("H").hold().on(&c).await;
    let heads = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&heads), ["g1", "h1"]);

    // A producer enqueues into both groups inside a transaction it keeps open: it holds their
    // row locks.
    producer.batch_execute("BEGIN").await.unwrap();
    Enqueue::job("g2").group("G").on(&producer).await.unwrap();
    Enqueue::job("h3")
        .group("H")
        .hold()
        .on(&producer)
        .await
        .unwrap();

    // The heads settle meanwhile (one completed, one failed under hold): at once, not after the
    // producer's commit.
    let by = |p: &str| heads.iter().find(|j| j.payload == p).unwrap();
    let settled = tokio::time::timeout(
        Duration::from_secs(10),
        b.settle(&[
            Settle::Ack(lease(by("g1"))),
            Settle::Failed(lease(by("h1"))),
        ]),
    )
    .await
    .expect("the settle waited for the producer's transaction")
    .unwrap();
    assert_eq!(settled.acked, 2);
    let pending: i64 = c
        .query_one("SELECT count(*) FROM drover.group_pending", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(pending, 2, "both moves are left for later");
    assert!(b.claim(&default_queue(), 10).await.unwrap().is_empty());

    // Committed: the next reap (or settle) finishes both moves. G goes on with g2 — not with
    // g2 overtaken or lost — and H is held by h1, with h2 and h3 behind it.
    producer.batch_execute("COMMIT").await.unwrap();
    b.reap_expired().await.unwrap();
    let next = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&next), ["g2"]);
    let row = c
        .query_one(
            "SELECT head, held_by, waiting FROM drover.groups WHERE name = 'H'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<i64>>(0), None);
    assert_eq!(row.get::<_, Option<i64>>(1), Some(by("h1").id));
    assert_eq!(row.get::<_, i64>(2), 2);
    let left: i64 = c
        .query_one(
            "SELECT (SELECT count(*) FROM drover.group_pending) + (SELECT count(*) FROM drover.group_failures)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);

    // A producer that enqueues into a group whose move was deferred finishes it itself.
    b.settle(&[Settle::Ack(lease(&next[0]))]).await.unwrap();
    Enqueue::job("g3").group("G").on(&c).await.unwrap();
    let next = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&next), ["g3"]);
    producer.batch_execute("BEGIN").await.unwrap();
    Enqueue::job("g4").group("G").on(&producer).await.unwrap();
    b.settle(&[Settle::Ack(lease(&next[0]))]).await.unwrap();
    producer.batch_execute("COMMIT").await.unwrap();
    Enqueue::job("g5").group("G").on(&c).await.unwrap();
    let next = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(
        payloads(&next),
        ["g4"],
        "g4 became the head when g5 was enqueued"
    );
}

#[tokio::test]
async fn a_head_completed_inside_its_own_transaction_lets_its_group_go_on_in_order_once_it_commits()
{
    let db = db().await;
    let b = broker(&db).await;
    let c = client(&db).await;
    for p in ["a", "b", "c"] {
        Enqueue::job(p).group("g").on(&c).await;
    }
    let first = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(payloads(&first), ["a"], "one at a time");
    support::open_completion(&db, lease(&first[0]))
        .await
        .batch_execute("COMMIT")
        .await
        .unwrap();
    let second = b.claim(&default_queue(), 10).await.unwrap();
    assert_eq!(
        payloads(&second),
        ["b"],
        "the group went on at the commit, in order"
    );
    let outcome = b
        .settle(&[Settle::CompletedWithin(lease(&first[0]))])
        .await
        .unwrap();
    assert_eq!(
        (outcome.completed_within, outcome.stale),
        (vec![first[0].id], vec![])
    );
    // While b's completion is not committed, c waits; rolled back, b is still the head.
    let open = support::open_completion(&db, lease(&second[0])).await;
    assert!(b.claim(&default_queue(), 10).await.unwrap().is_empty());
    drop(open);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(b.claim(&default_queue(), 10).await.unwrap().is_empty());
    support::open_completion(&db, lease(&second[0]))
        .await
        .batch_execute("COMMIT")
        .await
        .unwrap();
    assert_eq!(
        payloads(&b.claim(&default_queue(), 10).await.unwrap()),
        ["c"]
    );
}
