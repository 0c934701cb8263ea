//! The job statements keep their index plans when drover.jobs grows after they were planned, as
//! a queue table does between two visits of autoanalyze
//! (docs/decisions/0003-job-statements-keep-index-plans.md).
//!
//! Each statement of the master's job connection is prepared and run while drover.jobs holds a
//! few rows, with PostgreSQL keeping the generic plan it makes then (`force_generic_plan`: what it
//! does on its own after five runs when that plan looks no dearer); then the table grows to
//! 50,000 jobs, 5,000 of them leased, with autovacuum off for it so that no ANALYZE replaces the
//! plans; then each plan is read back with EXPLAIN. On a plain session the ack keeps a plan that
//! reads all of drover.jobs (this is what made bench shape 6's drain fall behind); on a session
//! with the job connection's settings (`drover_broker::job_connection::PIN_PLANS`) every scan of
//! drover.jobs goes through an index with a condition, and nothing is sorted or hashed.

mod support;

use std::sync::Arc;

use drover_broker::{Broker, BrokerConfig, SystemClock};
use serde_json::Value;
use support::db;

/// The statements the job connection prepares (`broker/src/job_connection.rs`, `Conn::prepare`).
fn statements() -> [(&'static str, &'static str); 11] {
    [
        ("claim", drover_broker::queries::claim()),
        ("claim_fair", drover_broker::queries::claim_fair()),
        ("ack", include_str!("../queries/ack.sql")),
        ("ack_failed", include_str!("../queries/ack_failed.sql")),
        ("catch_up", include_str!("../queries/groups_catch_up.sql")),
        ("release", include_str!("../queries/release.sql")),
        ("fail", include_str!("../queries/fail.sql")),
        ("renew", include_str!("../queries/renew.sql")),
        ("reap", include_str!("../queries/reap_expired.sql")),
        ("next_due", include_str!("../queries/next_due.sql")),
        ("heartbeat", include_str!("../queries/heartbeat.sql")),
    ]
}

/// How many parameters a statement takes: its highest `$n`.
fn parameters(sql: &str) -> usize {
    let mut most = 0;
    let bytes = sql.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'$' {
            let digits: String = sql[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            if let Ok(n) = digits.parse::<usize>() {
                most = most.max(n);
            }
        }
    }
    most
}

/// `EXECUTE name(NULL, …)`: a generic plan does not depend on the values, and NULLs make every
/// statement here a no-op but the heartbeat, which registers a node's row again when it is gone:
/// it beats for node 1 (the broker the test started), which changes nothing the plans read.
fn execute(name: &str, sql: &str) -> String {
    let args = match name {
        "heartbeat" => "1, NULL, 3600, NULL, 'plans', 1, 30, 0, '0.2.0'".to_string(),
        _ => vec!["NULL"; parameters(sql)].join(", "),
    };
    if args.is_empty() {
        format!("EXECUTE {name}")
    } else {
        format!("EXECUTE {name}({args})")
    }
}

/// What in a plan tree does not find its rows of drover.jobs through an index with a condition:
/// a sequential or bitmap scan of it, an index scan of it without a condition (the whole index),
/// or a sort, hash or merge join anywhere.
fn wrong_turns(plan: &Value, out: &mut Vec<String>) {
    let kind = plan["Node Type"].as_str().unwrap_or("");
    let relation = plan["Relation Name"].as_str().unwrap_or("");
    let on_jobs = relation == "jobs" && plan["Schema"].as_str().unwrap_or("drover") == "drover";
    match kind {
        "Sort" | "Hash" | "Hash Join" | "Merge Join" => out.push(kind.to_string()),
        "Seq Scan" | "Bitmap Heap Scan" if on_jobs => out.push(format!("{kind} on jobs")),
        "Index Scan" | "Index Only Scan" if on_jobs && plan.get("Index Cond").is_none() => out
            .push(format!(
                "{kind} on jobs using {} without a condition",
                plan["Index Name"].as_str().unwrap_or("?")
            )),
        _ => {}
    }
    if let Some(children) = plan["Plans"].as_array() {
        for child in children {
            wrong_turns(child, out);
        }
    }
}

/// The plan of each statement after the table grew, as `(name, wrong turns)`, on a session that
/// first ran `setup`.
async fn plans_after_growth(url: &str, setup: &str) -> Vec<(&'static str, Vec<String>)> {
    let client = drover_broker::connect::connect_once(url).await.unwrap();
    client.batch_execute(setup).await.unwrap();
    client
        .batch_execute(
            "SET plan_cache_mode = force_generic_plan;
             TRUNCATE drover.jobs;
             INSERT INTO drover.jobs (queue, payload) SELECT 'default', 'p' FROM generate_series(1, 40);",
        )
        .await
        .unwrap();
    for (name, sql) in statements() {
        client
            .batch_execute(&format!("PREPARE {name} AS {sql}"))
            .await
            .unwrap_or_else(|e| panic!("preparing {name}: {e}"));
        client
            .batch_execute(&execute(name, sql))
            .await
            .unwrap_or_else(|e| panic!("running {name}: {e}"));
    }
    client
        .batch_execute(
            "INSERT INTO drover.jobs (queue, payload) SELECT 'default', repeat('x', 600) FROM generate_series(1, 50000);
             UPDATE drover.jobs SET lease_token = nextval('drover.lease_tokens'), lease_owner = 1,
                    lease_expires_at = now() + interval '30 seconds'
             WHERE id IN (SELECT id FROM drover.jobs ORDER BY id DESC LIMIT 5000);",
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    for (name, sql) in statements() {
        let plan = explain(&client, "FORMAT JSON", &execute(name, sql)).await;
        let mut turns = Vec::new();
        wrong_turns(&plan[0]["Plan"], &mut turns);
        out.push((name, turns));
    }
    out
}

#[tokio::test]
async fn a_queue_table_that_grew_after_its_statements_were_planned_is_still_read_through_its_indexes(
) {
    let db = db().await;
    // Applies the migrations; its own connection is not used here.
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .batch_execute("ALTER TABLE drover.jobs SET (autovacuum_enabled = false)")
        .await
        .unwrap();

    // The hazard is real: on a plain session the ack keeps the plan it made for a small table.
    let plain = plans_after_growth(db.pg.url(), "SELECT 1").await;
    let ack = &plain.iter().find(|(name, _)| *name == "ack").unwrap().1;
    assert!(
        ack.iter().any(|t| t.contains("Seq Scan on jobs")),
        "a plain session's ack was expected to keep a sequential scan of drover.jobs: {plain:?}"
    );

    // The job connection's settings: every statement goes through an index.
    let pinned = plans_after_growth(db.pg.url(), drover_broker::job_connection::PIN_PLANS).await;
    let wrong: Vec<_> = pinned.iter().filter(|(_, t)| !t.is_empty()).collect();
    assert!(
        wrong.is_empty(),
        "plans that do not use an index: {wrong:?}"
    );

    // drover.enqueue, which runs in the application's sessions, carries the same settings as
    // function options (migration 6): the two lists are one rule written twice, since a
    // migration cannot read a query file.
    let mut wanted: Vec<String> = drover_broker::job_connection::PIN_PLANS
        .lines()
        .filter_map(|l| l.strip_prefix("SET "))
        .map(|l| l.trim_end_matches(';').replace(' ', ""))
        .collect();
    wanted.sort();
    assert!(!wanted.is_empty());
    // And so do the functions of migration 11 an application's session runs.
    for function in [
        "drover.enqueue(text, text, float8, text, boolean, text, float8, smallint, integer)",
        "drover.enqueue_limited(text, text, float8, text[], integer[], integer[], text, float8, smallint, integer, text, float8, text, boolean)",
        "drover.enqueue_fair(text, text, float8, text, float8, text, float8, smallint, integer)",
        "drover.limit_clear(text)",
        "drover.limit_slots_freed()",
        "drover.limit_pass()",
        "drover.limit_purge()",
        "drover.fair_purge()",
    ] {
        let mut carried: Vec<String> = client
            .query_one(
                &format!("SELECT proconfig FROM pg_proc WHERE oid = '{function}'::regprocedure"),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        // The entry points a producer calls run with their owner's rights, with a pinned search
        // path (migration 0013, docs/postgres-roles.md): a setting of its own, not a plan's.
        carried.retain(|s| s != "search_path=pg_catalog, pg_temp");
        carried.sort();
        assert_eq!(carried, wanted, "{function}'s settings against pin_plans.sql");
    }

    drop(broker);
}

/// `EXPLAIN (options) sql` on `client`, as JSON.
async fn explain(client: &tokio_postgres::Client, options: &str, sql: &str) -> Value {
    let text = client
        .simple_query(&format!("EXPLAIN ({options}) {sql}"))
        .await
        .unwrap_or_else(|e| panic!("explaining {sql}: {e}"))
        .into_iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Whether PostgreSQL compiled a statement with JIT when `EXPLAIN ANALYZE` ran it on `client`.
async fn compiled(client: &tokio_postgres::Client, sql: &str) -> bool {
    explain(client, "ANALYZE, FORMAT JSON", sql).await[0]
        .get("JIT")
        .is_some()
}

#[tokio::test]
async fn a_statement_left_with_a_plan_the_settings_name_is_not_compiled_on_every_run() {
    let db = db().await;
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    // The take of a limit pass: drover.limit_wakes has no index, so its scan is sequential
    // whatever the settings say, and costs what PostgreSQL adds to a plan it was told to avoid.
    let take = "SELECT ctid FROM drover.limit_wakes LIMIT 10000 FOR UPDATE SKIP LOCKED";

    // The hazard is real on this server: with the plan settings alone it is compiled.
    let hazard = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    hazard
        .batch_execute(
            &drover_broker::job_connection::PIN_PLANS
                .lines()
                .filter(|l| !l.starts_with("SET jit"))
                .collect::<Vec<_>>()
                .join("\n"),
        )
        .await
        .unwrap();
    assert!(
        compiled(&hazard, take).await,
        "with enable_seqscan off and JIT on, the take was expected to be compiled (is JIT available to this server?)"
    );

    // The job connection's settings: not compiled.
    let pinned = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    pinned
        .batch_execute(drover_broker::job_connection::PIN_PLANS)
        .await
        .unwrap();
    assert!(
        !compiled(&pinned, take).await,
        "the job connection's settings let PostgreSQL compile the take"
    );
    drop(broker);
}
