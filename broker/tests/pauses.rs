//! Queues paused by name, in the database (`migrations/0008_pause_confirmations.sql`): a claim
//! never crosses a pause, whatever the master knows of it; a pause wakes every master; whoever
//! paused waits for every master that may still hand out jobs, and for no other.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use drover_broker::connect::connect_once;
use drover_broker::{listener, Broker, BrokerConfig, Clock, ManualClock, SystemClock};
use support::{db, queues, Db};
use tokio_postgres::Client;

/// Long, so no call's deadline (half of it) is at risk on a loaded machine; the manual clock
/// moves past pauses without waiting.
const LEASE: Duration = Duration::from_secs(20);

async fn broker(db: &Db, clock: Arc<dyn Clock>) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = LEASE;
    Broker::start(config, clock).await.unwrap()
}

async fn enqueue(client: &Client, queue: &str, n: i64) {
    client
        .execute(
            "INSERT INTO drover.jobs (queue, payload, available_at)
             SELECT $1, 'p', now() - interval '1 minute' FROM generate_series(1, $2::bigint)",
            &[&queue, &n],
        )
        .await
        .unwrap();
}

async fn pause(client: &Client, queue: &str, secs: Option<f64>) -> Option<i64> {
    client
        .query_one("SELECT drover.pause_queue($1, $2)", &[&queue, &secs])
        .await
        .unwrap()
        .get(0)
}

/// The nodes `drover.pause_unconfirmed` says the pauser of `queue` still waits for.
async fn unconfirmed(client: &Client, queue: &str) -> Vec<i64> {
    support::ids(
        client,
        "SELECT node FROM drover.pause_unconfirmed($1)",
        &[&queue],
    )
    .await
}

#[tokio::test]
async fn a_claim_never_crosses_a_pause_even_from_a_master_that_never_read_it_and_a_pause_for_a_while_ends_by_itself(
) {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let master = broker(&db, clock.clone()).await;
    let client = connect_once(db.pg.url()).await.unwrap();
    for queue in ["paused", "for_a_minute", "other"] {
        enqueue(&client, queue, 2).await;
    }
    pause(&client, "paused", None).await.unwrap();
    pause(&client, "for_a_minute", Some(60.0)).await.unwrap();

    // This master has never read drover.paused_queues: the claim itself holds the pauses.
    let all = queues(&["paused", "for_a_minute", "other"]);
    let claimed = master.claim(&all, 10).await.unwrap();
    assert_eq!(
        claimed.iter().map(|j| j.queue.as_str()).collect::<Vec<_>>(),
        ["other", "other"]
    );
    // By the clock the claim goes by, the minute passes: that queue is claimed, not the other.
    clock.advance(Duration::from_secs(61));
    let claimed = master.claim(&all, 10).await.unwrap();
    assert_eq!(
        claimed.iter().map(|j| j.queue.as_str()).collect::<Vec<_>>(),
        ["for_a_minute", "for_a_minute"]
    );
    // Resumed: claimed at once.
    let resumed: bool = client
        .query_one("SELECT drover.resume_queue('paused')", &[])
        .await
        .unwrap()
        .get(0);
    assert!(resumed);
    assert_eq!(master.claim(&all, 10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn the_paused_queues_are_read_with_their_version_and_what_is_left_of_a_ttl() {
    let db = db().await;
    let master = broker(&db, Arc::new(SystemClock)).await;
    let client = connect_once(db.pg.url()).await.unwrap();
    let first = pause(&client, "a", None).await.unwrap();
    let timed = pause(&client, "b", Some(30.0)).await.unwrap();
    let read = master.paused_queues().await.unwrap();
    assert_eq!(read.len(), 2);
    assert_eq!(
        (read[0].queue.as_str(), read[0].left, read[0].version),
        ("a", None, first)
    );
    assert_eq!((read[1].queue.as_str(), read[1].version), ("b", timed));
    let left = read[1].left.unwrap();
    assert!(
        left <= Duration::from_secs(30) && left > Duration::from_secs(25),
        "{left:?}"
    );
    // Paused again: a new version. A pause already over is a resume; a queue needs a name.
    let again = pause(&client, "a", None).await.unwrap();
    assert!(again > timed);
    assert_eq!(pause(&client, "b", Some(0.0)).await, None);
    assert_eq!(pause(&client, "b", Some(-5.0)).await, None);
    assert_eq!(
        pause(&client, "b", Some(1e-9)).await,
        None,
        "under a millisecond"
    );
    for absurd in [1e12, f64::INFINITY, f64::NAN] {
        let said = refused(&client, "SELECT drover.pause_queue('b', $1)", &[&absurd]).await;
        assert!(said.contains("longer than a century"), "{absurd}: {said}");
    }
    let read = master.paused_queues().await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].version, again);
    let said = refused(&client, "SELECT drover.pause_queue('')", &[]).await;
    assert!(said.contains("name the queue to pause"), "{said}");
}

/// The server's message for a statement it refuses.
async fn refused(
    client: &Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> String {
    let e = client.query_one(sql, params).await.unwrap_err();
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

#[tokio::test]
async fn whoever_paused_waits_for_every_master_that_may_still_hand_out_jobs_and_no_other() {
    let db = db().await;
    let a = broker(&db, Arc::new(SystemClock)).await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let client = connect_once(db.pg.url()).await.unwrap();
    assert!(unconfirmed(&client, "q").await.is_empty(), "nothing paused");

    let v1 = pause(&client, "q", None).await.unwrap();
    assert_eq!(unconfirmed(&client, "q").await, [a.node(), b.node()]);
    a.confirm_pauses(&[v1]).await.unwrap();
    assert_eq!(unconfirmed(&client, "q").await, [b.node()]);
    b.confirm_pauses(&[v1]).await.unwrap();
    assert!(unconfirmed(&client, "q").await.is_empty());

    // Paused again: confirmed anew by both.
    let v2 = pause(&client, "q", Some(600.0)).await.unwrap();
    assert_eq!(unconfirmed(&client, "q").await, [a.node(), b.node()]);
    a.confirm_pauses(&[v2]).await.unwrap();

    // b falls silent: waited for while it may still hand out what it holds (two leases from its
    // last heartbeat), then not.
    let node = b.node();
    let silent_for = |secs: f64| {
        let client = &client;
        async move {
            client
                .execute(
                    "UPDATE drover.nodes SET heartbeat_at = now() - make_interval(secs => $2) WHERE id = $1",
                    &[&node, &secs],
                )
                .await
        }
    };
    silent_for(LEASE.as_secs_f64() * 2.0 - 5.0).await.unwrap();
    assert_eq!(unconfirmed(&client, "q").await, [b.node()]);
    let silent: f64 = client
        .query_one("SELECT silent_secs FROM drover.pause_unconfirmed('q')", &[])
        .await
        .unwrap()
        .get(0);
    assert!(silent > 30.0, "{silent}");
    silent_for(LEASE.as_secs_f64() * 2.0 + 1.0).await.unwrap();
    assert!(unconfirmed(&client, "q").await.is_empty());
    // A heartbeat brings it back into the wait.
    b.heartbeat(None).await.unwrap();
    assert_eq!(unconfirmed(&client, "q").await, [b.node()]);

    // Resumed, or over: nothing to wait for.
    client
        .execute("SELECT drover.resume_queue('q')", &[])
        .await
        .unwrap();
    assert!(unconfirmed(&client, "q").await.is_empty());
    // A master that leaves is not waited for.
    pause(&client, "q", None).await.unwrap();
    b.deregister().await.unwrap();
    assert_eq!(unconfirmed(&client, "q").await, [a.node()]);
}

#[tokio::test]
async fn a_pause_a_change_of_one_and_a_resume_each_wake_the_masters() {
    let db = db().await;
    // A master's start migrates the schema.
    let _master = broker(&db, Arc::new(SystemClock)).await;
    let wakes = listener::Wakes::default();
    let pauses = wakes.pauses.clone();
    let task = listener::spawn(db.pg.url().to_string(), wakes);
    tokio::time::timeout(Duration::from_secs(10), pauses.notified())
        .await
        .expect("the listener connects");
    let client = connect_once(db.pg.url()).await.unwrap();
    for sql in [
        "SELECT drover.pause_queue('q')",
        "SELECT drover.pause_queue('q', 30)",
        "SELECT drover.resume_queue('q')",
    ] {
        client.execute(sql, &[]).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), pauses.notified())
            .await
            .unwrap_or_else(|_| panic!("{sql} woke nobody"));
    }
    // Rolled back: nobody is woken.
    client
        .batch_execute("BEGIN; SELECT drover.pause_queue('q'); ROLLBACK")
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), pauses.notified())
            .await
            .is_err()
    );
    task.abort();
}

#[tokio::test]
async fn a_master_whose_row_was_taken_for_gone_registers_it_again_and_rows_go_after_ten_of_their_own_leases(
) {
    let db = db().await;
    let a = broker(&db, Arc::new(SystemClock)).await;
    let client = connect_once(db.pg.url()).await.unwrap();
    // A master with a ten-minute lease, last heard from 300 s ago: more than ten of a's leases,
    // fewer than ten of its own. It stays.
    let slow: i64 = client
        .query_one(
            "INSERT INTO drover.nodes (hostname, pid, started_at, heartbeat_at, lease_secs)
             VALUES ('slow', 1, now(), now() - interval '300 seconds', 600) RETURNING id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    a.heartbeat(None).await.unwrap();
    let kept: i64 = client
        .query_one("SELECT count(*) FROM drover.nodes WHERE id = $1", &[&slow])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1, "silent for fewer than ten of its own leases");

    // a's own row is removed (as another master would after ten silent leases): a confirmation
    // finds no row and says so; the next heartbeat registers it again, under the same id.
    client
        .execute("DELETE FROM drover.nodes WHERE id = $1", &[&a.node()])
        .await
        .unwrap();
    let e = a.confirm_pauses(&[1]).await.unwrap_err();
    assert!(e.to_string().contains("node row"), "{e}");
    a.heartbeat(None).await.unwrap();
    let lease: f64 = client
        .query_one(
            "SELECT lease_secs FROM drover.nodes WHERE id = $1",
            &[&a.node()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(lease, LEASE.as_secs_f64());
    a.confirm_pauses(&[1]).await.unwrap();

    // The row a crashed predecessor of the state directory left: removed by node, pid and host
    // only, never the master's own.
    let host: String = client
        .query_one(
            "SELECT hostname FROM drover.nodes WHERE id = $1",
            &[&a.node()],
        )
        .await
        .unwrap()
        .get(0);
    let crashed: i64 = client
        .query_one(
            "INSERT INTO drover.nodes (hostname, pid, started_at, heartbeat_at) VALUES ($1, 4242, now(), now()) RETURNING id",
            &[&host],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        !a.remove_predecessor(crashed, 4243).await.unwrap(),
        "another pid"
    );
    assert!(
        !a.remove_predecessor(slow, 1).await.unwrap(),
        "another host"
    );
    assert!(
        !a.remove_predecessor(a.node(), std::process::id() as i32)
            .await
            .unwrap(),
        "itself"
    );
    assert!(a.remove_predecessor(crashed, 4242).await.unwrap());

    // A master that left is not brought back by a heartbeat still on its way.
    a.deregister().await.unwrap();
    a.heartbeat(None).await.unwrap();
    let left: i64 = client
        .query_one(
            "SELECT count(*) FROM drover.nodes WHERE id = $1",
            &[&a.node()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
}
