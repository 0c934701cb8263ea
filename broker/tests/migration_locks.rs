//! A migration never stops the queue behind a long transaction: each try waits a bounded time for
//! its lock on drover's tables, rolls back and tries again, and names the cause when the
//! transaction outlasts every try (`migrate::LockWait`).

use std::time::{Duration, Instant};

mod support;

use drover_broker::connect::connect_once;
use drover_broker::migrate::{migrate, migrate_waiting, LockWait};
use support::{db, Db};

const QUICK: LockWait = LockWait {
    each: Duration::from_millis(300),
    tries: 3,
    pause: Duration::from_millis(100),
};

/// The database at schema 10: everything applied, then migration 0011 undone.
async fn at_schema_10(db: &Db) {
    let mut client = connect_once(db.pg.url()).await.unwrap();
    migrate(&mut client).await.unwrap();
    client
        .batch_execute(include_str!("fixtures/undo_migration_0011.sql"))
        .await
        .unwrap();
}

async fn schema(db: &Db) -> i32 {
    connect_once(db.pg.url())
        .await
        .unwrap()
        .query_one("SELECT max(version) FROM drover.schema_migrations", &[])
        .await
        .unwrap()
        .get(0)
}

/// A session that read drover.jobs in a transaction it keeps open (a report, a `pg_dump`).
async fn long_reader(db: &Db) -> tokio_postgres::Client {
    let reader = connect_once(db.pg.url()).await.unwrap();
    reader
        .batch_execute("BEGIN; SELECT count(*) FROM drover.jobs;")
        .await
        .unwrap();
    reader
}

#[tokio::test]
async fn a_migration_behind_a_long_transaction_gives_up_by_name_and_the_queue_runs_meanwhile() {
    let db = db().await;
    at_schema_10(&db).await;
    let _reader = long_reader(&db).await;

    let url = db.pg.url().to_string();
    let migrating = tokio::spawn(async move {
        let mut client = connect_once(&url).await.unwrap();
        migrate_waiting(&mut client, QUICK).await
    });
    // Enqueues go on while the migration waits and tries again: none waits behind it for longer
    // than one try.
    let producer = connect_once(db.pg.url()).await.unwrap();
    for _ in 0..10 {
        let at = Instant::now();
        producer
            .execute(
                "INSERT INTO drover.jobs (queue, payload) VALUES ('default', 'p')",
                &[],
            )
            .await
            .unwrap();
        assert!(
            at.elapsed() < QUICK.each + Duration::from_millis(500),
            "an enqueue waited {:?} behind the migration",
            at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = migrating.await.unwrap().unwrap_err().to_string();
    assert!(
        err.contains("could not take a lock on drover's tables in 3 tries")
            && err.contains("a long transaction holds one"),
        "{err}"
    );
    assert_eq!(schema(&db).await, 10, "nothing half-applied");
}

#[tokio::test]
async fn a_migration_applies_once_the_long_transaction_ends() {
    let db = db().await;
    at_schema_10(&db).await;
    let reader = long_reader(&db).await;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        reader.batch_execute("COMMIT").await.unwrap();
    });
    let mut client = connect_once(db.pg.url()).await.unwrap();
    let ran = migrate_waiting(&mut client, LockWait { tries: 6, ..QUICK })
        .await
        .unwrap();
    // 0011 and the migrations after it (the fixture undoes those first).
    assert_eq!(ran, drover_broker::migrate::latest() as usize - 10);
    assert_eq!(schema(&db).await, drover_broker::migrate::latest());
}
