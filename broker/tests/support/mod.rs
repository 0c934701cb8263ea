//! A throwaway PostgreSQL for the broker's tests.

use std::os::unix::fs::PermissionsExt;

use drover_broker::{EmbeddedConfig, EmbeddedPostgres};

/// A private cluster, removed with its directory when dropped.
#[allow(dead_code)]
pub struct Db {
    pub pg: EmbeddedPostgres,
    _dir: tempfile::TempDir,
}

/// A throwaway directory under /tmp that the server's OS user can enter.
#[allow(dead_code)] // not every test binary that includes this module uses every helper
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Starts a private cluster under /tmp (fsync off: these tests prove behaviour, not durability).
#[allow(dead_code)]
pub async fn db() -> Db {
    let dir = tempdir("drover-broker-test-");
    let mut config = EmbeddedConfig::new(dir.path().join("db"));
    config.settings.push(("fsync".into(), "off".into()));
    let pg = EmbeddedPostgres::start(&config).await.unwrap();
    Db { pg, _dir: dir }
}

/// Queue names as a claim takes them.
#[allow(dead_code)]
pub fn queues(q: &[&str]) -> Vec<String> {
    q.iter().map(|s| s.to_string()).collect()
}

/// The first column of every row `sql` returns, as integers (ids, nodes).
#[allow(dead_code)]
pub async fn ids(
    client: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Vec<i64> {
    client
        .query(sql, params)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Enqueues `n` jobs (payloads `p1`..`pn`) on `queue`, available at `at` (a test clock's time) or
/// the database's now.
#[allow(dead_code)]
pub async fn enqueue(db: &Db, queue: &str, n: i64, at: Option<std::time::SystemTime>) {
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO drover.jobs (queue, payload, available_at)
             SELECT $3, 'p' || g, coalesce($2::timestamptz, now()) FROM generate_series(1, $1::bigint) g",
            &[&n, &at, &queue],
        )
        .await
        .unwrap();
}

/// Job `lease` completed inside a transaction of the application's connection, as a Laravel job
/// implementing `CompletesInTransaction` is (`drover.complete_within`, docs/exactly-once.md):
/// the transaction, left open for the caller to `COMMIT` or drop (which rolls it back).
#[allow(dead_code)]
pub async fn open_completion(db: &Db, lease: drover_broker::Lease) -> tokio_postgres::Client {
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    client
        .execute(
            "SELECT drover.complete_within($1, $2)",
            &[&lease.id, &lease.token],
        )
        .await
        .unwrap();
    client
}
