//! A pool's outage grace, in the database (`migrations/0009_outage_grace.sql`): the reap leaves a
//! lease with a grace alone until the grace after its end has passed too, unless its holder's
//! node row is gone; a node row outlives its leases and their grace; a claim gives no more grace
//! than the node row holds. A manual clock moves time without sleeping.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use drover_broker::{Broker, BrokerConfig, Clock, Lease, ManualClock};
use support::{db, enqueue, ids, queues, Db};

/// Long enough that a call's client deadline (half of it, in real time) survives a loaded CI
/// machine; the manual clock moves past it without waiting.
const LEASE: Duration = Duration::from_secs(20);
const GRACE: Duration = Duration::from_secs(60);

async fn broker(db: &Db, clock: Arc<dyn Clock>, grace: Duration) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = LEASE;
    config.outage_grace = grace;
    Broker::start(config, clock).await.unwrap()
}

/// The node holding job `id`'s lease, if any.
async fn holder_of(db: &Db, id: i64) -> Option<i64> {
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .query_one("SELECT lease_owner FROM drover.jobs WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

async fn node_rows(db: &Db) -> Vec<i64> {
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    ids(&client, "SELECT id FROM drover.nodes ORDER BY id", &[]).await
}

#[tokio::test]
async fn a_lease_with_a_grace_is_renewed_after_an_outage_shorter_than_it_and_taken_back_after_a_longer_one(
) {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let holder = broker(&db, clock.clone(), GRACE).await;
    let other = broker(&db, clock.clone(), Duration::ZERO).await;
    enqueue(&db, "default", 2, clock.now()).await;

    let graced = holder
        .claim_with_grace(&queues(&["default"]), 1, &[], GRACE)
        .await
        .unwrap();
    assert_eq!(graced.grace, GRACE);
    let plain = other.claim(&queues(&["default"]), 1).await.unwrap();
    let lease = Lease {
        id: graced.jobs[0].id,
        token: graced.jobs[0].token,
    };

    // The database "comes back" half a grace after both leases ended: the plain one is taken
    // back, the graced one is not (its worker may still run the job), and its holder renews it.
    clock.advance(LEASE + GRACE / 2);
    assert_eq!(other.reap_expired().await.unwrap().released, 1);
    assert_eq!(
        holder_of(&db, lease.id).await,
        Some(holder.node()),
        "the graced job is still its holder's, not claimable by another master"
    );
    assert_eq!(holder_of(&db, plain[0].id).await, None);
    assert_eq!(
        holder.renew(&[lease]).await.unwrap().renewed,
        vec![lease.id]
    );

    // Now an outage longer than lease + grace: taken back at the grace's end, not before.
    clock.advance(LEASE + GRACE - Duration::from_millis(100));
    assert_eq!(other.reap_expired().await.unwrap().released, 0);
    clock.advance(Duration::from_millis(200));
    let reaped = other.reap_expired().await.unwrap();
    assert_eq!(reaped.released, 1);
    assert_eq!(
        holder.renew(&[lease]).await.unwrap(),
        drover_broker::Renewed::default(),
        "its holder's renewal finds it gone (its worker was stopped before this)"
    );
}

#[tokio::test]
async fn the_jobs_of_a_holder_whose_row_is_gone_come_back_when_their_lease_ends_grace_or_not() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let crashed = broker(&db, clock.clone(), GRACE).await;
    let successor = broker(&db, clock.clone(), GRACE).await;
    enqueue(&db, "default", 1, clock.now()).await;
    let held = crashed
        .claim_with_grace(&queues(&["default"]), 1, &[], GRACE)
        .await
        .unwrap();
    assert_eq!(held.jobs.len(), 1);
    // The master restarted in the same state directory removes its predecessor's row: nothing
    // of the predecessor runs any more, so its jobs need not wait out their grace.
    assert!(successor
        .remove_predecessor(crashed.node(), std::process::id() as i32)
        .await
        .unwrap());
    clock.advance(LEASE - Duration::from_millis(100));
    assert_eq!(successor.reap_expired().await.unwrap().released, 0);
    clock.advance(Duration::from_millis(200));
    assert_eq!(successor.reap_expired().await.unwrap().released, 1);
}

#[tokio::test]
async fn a_node_row_outlives_its_leases_and_their_grace_and_a_claim_never_gives_more_grace_than_it_holds(
) {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    // Registered without a grace; a reload then asks for a long one (300 s: longer than the ten
    // leases after which a silent row goes).
    let long = broker(&db, clock.clone(), Duration::ZERO).await;
    let watcher = broker(&db, clock.clone(), Duration::ZERO).await;
    enqueue(&db, "default", 3, clock.now()).await;
    let wanted = Duration::from_secs(300);
    long.want_grace(wanted);
    let early = long
        .claim_with_grace(&queues(&["default"]), 1, &[], wanted)
        .await
        .unwrap();
    assert_eq!(
        early.grace,
        Duration::ZERO,
        "before a heartbeat wrote it, the row holds no grace, and neither does the claim"
    );
    long.heartbeat(None).await.unwrap();
    assert_eq!(long.registered_grace(), wanted);
    let later = long
        .claim_with_grace(&queues(&["default"]), 1, &[], wanted)
        .await
        .unwrap();
    assert_eq!(later.grace, wanted);

    // Silent past ten leases (200 s), within three leases and its grace (360 s): kept.
    clock.advance(Duration::from_secs(250));
    watcher.heartbeat(None).await.unwrap();
    assert!(node_rows(&db).await.contains(&long.node()));
    clock.advance(Duration::from_secs(120));
    watcher.heartbeat(None).await.unwrap();
    assert!(!node_rows(&db).await.contains(&long.node()));
    // Back from its silence (its connection opened anew), before its own heartbeat registers the
    // row again: its claims give no grace (its jobs could be reaped at the lease's end); once the
    // heartbeat has registered the row again, they do.
    long.suspect_connection();
    let unrowed = long
        .claim_with_grace(&queues(&["default"]), 1, &[], wanted)
        .await
        .unwrap();
    assert_eq!(unrowed.jobs.len(), 1);
    assert_eq!(unrowed.grace, Duration::ZERO);
    assert!(long.heartbeat(None).await.unwrap(), "registered again");
    enqueue(&db, "default", 1, clock.now()).await;
    let rowed = long
        .claim_with_grace(&queues(&["default"]), 1, &[], wanted)
        .await
        .unwrap();
    assert_eq!(rowed.grace, wanted);
}

#[tokio::test]
async fn while_a_master_of_release_0_1_has_a_row_no_grace_is_given_or_relied_on_and_no_pause_waits_for_it(
) {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let new = broker(&db, clock.clone(), GRACE).await;
    assert!(new.grace_in_force());
    enqueue(&db, "default", 2, clock.now()).await;
    // A master of 0.1 registers as its register_node.sql did: no release, no grace.
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let old: i64 = client
        .query_one(
            "INSERT INTO drover.nodes (hostname, pid, started_at, heartbeat_at)
             VALUES ('old-host', 4242, $1::timestamptz, $1::timestamptz) RETURNING id",
            &[&clock.now()],
        )
        .await
        .unwrap()
        .get(0);
    new.heartbeat(None).await.unwrap();
    assert!(!new.grace_in_force());
    // Its row is never removed by a newer master, however long it is silent: a 0.1 master back
    // from a partition does not register it again, and would reap graced leases unseen.
    clock.advance(Duration::from_secs(3600));
    new.heartbeat(None).await.unwrap();
    assert!(node_rows(&db).await.contains(&old));
    let claimed = new
        .claim_with_grace(&queues(&["default"]), 1, &[], GRACE)
        .await
        .unwrap();
    assert_eq!(
        claimed.grace,
        Duration::ZERO,
        "its reap would ignore a grace"
    );
    // It never confirms a pause (0.1 has no confirmations; it reads paused_queues each second),
    // so a pause does not wait for it: only for this master, until it confirms.
    client
        .execute("SELECT drover.pause_queue('default')", &[])
        .await
        .unwrap();
    let waiting = ids(
        &client,
        "SELECT node FROM drover.pause_unconfirmed('default')",
        &[],
    )
    .await;
    assert_eq!(waiting, vec![new.node()]);
    // Gone: the grace is in force again.
    client
        .execute("DELETE FROM drover.nodes WHERE id = $1", &[&old])
        .await
        .unwrap();
    new.heartbeat(None).await.unwrap();
    assert!(new.grace_in_force());
    client
        .execute("SELECT drover.resume_queue('default')", &[])
        .await
        .unwrap();
    let claimed = new
        .claim_with_grace(&queues(&["default"]), 1, &[], GRACE)
        .await
        .unwrap();
    assert_eq!(claimed.grace, GRACE);
}
