//! The reads the master shares with the PHP package (`queries/shared/*.sql`, which the dashboard
//! runs through `Drover\Schema\BrokerQuery`): the broker embeds every one of them, and on the rows
//! of `php-client/tests/fixtures/shared_reads.sql` its answers are the ones checked in beside
//! them (`shared_reads.json`), to which php-client/tests/SharedReadsTest.php holds the package's
//! reads (and the dashboard's pending count, to the master's backlog). A read that changes on one
//! side only fails one of the two tests; `DROVER_WRITE_CONTRACTS=1` rewrites the answers after a
//! change meant for both.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use drover_broker::{Broker, BrokerConfig, SystemClock};
use serde_json::json;

mod support;

/// The rows both tests load.
const SEED: &str = "../php-client/tests/fixtures/shared_reads.sql";
/// The broker's answers on them, which the PHP test reads.
const ANSWERS: &str = "../php-client/tests/fixtures/shared_reads.json";
/// The queues the rows fill.
const QUEUES: [&str; 3] = ["alpha", "beta", "gamma"];
/// The dashboard's caps (`Drover\Dashboard\Limits`): COUNT_CAP for counts, PAGE for lists.
const COUNT_CAP: i64 = 100_000;
const PAGE: i64 = 50;

fn path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// A wait in whole minutes: the rows place times relative to the database's now, so seconds
/// depend on when the test ran; minutes do not.
fn minutes(d: Duration) -> i64 {
    (d.as_secs_f64() / 60.0).round() as i64
}

#[test]
fn the_broker_embeds_every_shared_read() {
    let mut sources = String::new();
    for file in std::fs::read_dir(path("src")).unwrap() {
        let file = file.unwrap().path();
        if file.extension().is_some_and(|e| e == "rs") {
            sources += &std::fs::read_to_string(file).unwrap();
        }
    }
    let mut shared: Vec<String> = std::fs::read_dir(path("queries/shared"))
        .unwrap()
        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    shared.sort();
    assert_eq!(
        shared,
        [
            "group_stats.sql",
            "held_groups.sql",
            "limit_keys.sql",
            "oldest_wait.sql",
            "paused_queues.sql"
        ],
        "a shared read added or removed: name it here and in the fixture's answers"
    );
    for name in &shared {
        let embed = format!("include_str!(\"../queries/shared/{name}\")");
        assert!(
            sources.contains(&embed),
            "queries/shared/{name} is shared with the PHP package, but no part of the broker runs it"
        );
    }
}

/// The broker's answers to the shared reads on the fixture's rows, as the JSON the PHP test
/// reads.
async fn answers(broker: &Broker) -> String {
    let queues = support::queues(&QUEUES);
    let stats = broker.group_stats(&queues, COUNT_CAP).await.unwrap();
    let held = broker.held_groups(&queues, PAGE).await.unwrap();
    let paused = broker.paused_queues().await.unwrap();
    let waits = broker.oldest_waits(&queues).await.unwrap();
    let backlog = broker.backlog(&queues, COUNT_CAP).await.unwrap();
    let limits = broker.limit_keys(PAGE).await.unwrap();

    let group_stats: Vec<_> = stats
        .iter()
        .map(|s| {
            json!({
                "queue": s.queue,
                "groups": s.groups,
                "held": s.held,
                "waiting": s.waiting,
                "oldest_head_minutes": s.oldest_head.map(minutes),
            })
        })
        .collect();
    let held_groups: Vec<_> = held
        .iter()
        .map(|h| {
            json!({
                "queue": h.queue,
                "name": h.group,
                "held_by": h.job,
                "held_uuid": h.uuid,
                "held_error": h.error,
                "held_at_secs": h.since,
                "waiting": h.waiting,
            })
        })
        .collect();
    let paused_queues: serde_json::Map<String, serde_json::Value> = paused
        .iter()
        .map(|p| (p.queue.clone(), json!(p.left.map(minutes))))
        .collect();
    // As the dashboard shows them: every queue asked about, 0 when none of its jobs is due.
    let oldest_wait_minutes: serde_json::Map<String, serde_json::Value> = queues
        .iter()
        .map(|q| {
            let wait = waits.iter().find(|(queue, _)| queue == q);
            (q.clone(), json!(wait.map_or(0, |(_, d)| minutes(*d))))
        })
        .collect();
    let backlog: serde_json::Map<String, serde_json::Value> = backlog
        .into_iter()
        .map(|(queue, n)| (queue, json!(n)))
        .collect();
    let limit_keys: Vec<_> = limits
        .iter()
        .map(|k| {
            json!({
                "key": k.key,
                "waiting": k.waiting,
                "held": k.held,
                "rate_used": k.rate_used,
                "window_ends_in_minutes": k.window_ends_in.map(minutes),
                "oldest_wait_minutes": k.oldest_wait.map(minutes),
            })
        })
        .collect();
    let answers = json!({
        "queues": QUEUES,
        "group_stats": group_stats,
        "held_groups": held_groups,
        "paused_queues": paused_queues,
        "oldest_wait_minutes": oldest_wait_minutes,
        "backlog": backlog,
        "limit_keys": limit_keys,
    });
    serde_json::to_string_pretty(&answers).unwrap() + "\n"
}

#[tokio::test]
async fn on_the_fixtures_rows_the_brokers_shared_reads_give_the_checked_in_answers() {
    let db = support::db().await;
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap();
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .batch_execute(&std::fs::read_to_string(path(SEED)).unwrap())
        .await
        .unwrap();
    let text = answers(&broker).await;

    let file = path(ANSWERS);
    if std::env::var_os("DROVER_WRITE_CONTRACTS").is_some() {
        std::fs::write(&file, &text).unwrap();
    } else {
        let on_disk = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            on_disk == text,
            "the broker's shared reads no longer give the answers in {ANSWERS}, which the PHP package is held to; \
             if the change is meant for both, run `DROVER_WRITE_CONTRACTS=1 cargo test -p drover-broker --test shared_reads` \
             and commit it (the PHP test then checks the package against it).\nthe broker's answers:\n{text}"
        );
    }
    broker.deregister().await.unwrap();
}
