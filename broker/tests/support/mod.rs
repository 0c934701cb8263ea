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

/// A sub-workflow to dispatch: its name, its nodes (drover.workflow_create's JSON), its steps as
/// `(node, payload)`, and the parent's node it stands for.
#[allow(dead_code)]
pub type SubWorkflow<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);

/// A workflow as the package dispatches it, in one transaction: `name` with `nodes`
/// (drover.workflow_create's JSON) and its steps as `(node, payload)`, then each sub-workflow
/// `(name, nodes, steps, the parent's node it stands for)`, then the start. Its id and its
/// sub-workflows' ids, in order.
#[allow(dead_code)]
pub async fn dispatch_workflow(
    c: &tokio_postgres::Client,
    name: &str,
    nodes: &str,
    steps: &[(&str, &str)],
    children: &[SubWorkflow<'_>],
) -> (i64, Vec<i64>) {
    async fn create(
        c: &tokio_postgres::Client,
        name: &str,
        nodes: &str,
        steps: &[(&str, &str)],
        parent: Option<(i64, &str)>,
    ) -> i64 {
        let wf: i64 = c
            .query_one(
                "SELECT drover.workflow_create($1, true, $2::text::jsonb, $3, $4)",
                &[&name, &nodes, &parent.map(|p| p.0), &parent.map(|p| p.1)],
            )
            .await
            .unwrap()
            .get(0);
        let names: Vec<&str> = steps.iter().map(|s| s.0).collect();
        let payloads: Vec<&str> = steps.iter().map(|s| s.1).collect();
        let queues = vec!["default"; steps.len()];
        c.execute(
            "SELECT drover.workflow_add_steps($1, $2, $3, $4, NULL, NULL)",
            &[&wf, &names, &queues, &payloads],
        )
        .await
        .unwrap();
        wf
    }
    c.batch_execute("BEGIN").await.unwrap();
    let wf = create(c, name, nodes, steps, None).await;
    let mut ids = Vec::new();
    for (child, child_nodes, child_steps, node) in children {
        ids.push(create(c, child, child_nodes, child_steps, Some((wf, node))).await);
    }
    c.execute("SELECT drover.workflow_start($1)", &[&wf])
        .await
        .unwrap();
    c.batch_execute("COMMIT").await.unwrap();
    (wf, ids)
}
