//! What `drover status` and `/metrics` read of workflows and of running jobs' progress, against a
//! real PostgreSQL (`queries/workflow_counts.sql`, `queries/job_progress.sql`): workflows are
//! dispatched, run and failed through the database's own functions and the broker's claims and
//! settles, as in production, and progress is reported as a job reports it
//! (`drover.job_progress`, fenced by its lease).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use drover_broker::{Broker, BrokerConfig, Lease, LeasedJob, ManualClock, Settle, WorkflowCounts};
use support::{db, enqueue, queues, Db};
use tokio_postgres::Client;

async fn client(db: &Db) -> Client {
    drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap()
}

/// A broker on `clock`, a minute ahead of the database's: what the functions make available now
/// is claimable at once.
async fn broker(db: &Db) -> (Broker, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(
        SystemTime::now() + Duration::from_secs(60),
    ));
    let broker = Broker::start(BrokerConfig::new(db.pg.url()), clock.clone())
        .await
        .unwrap();
    (broker, clock)
}

/// Dispatches workflow `name` with `nodes` (drover.workflow_create's JSON) and one step per node
/// (its payload the node's name), in one transaction, as the package does; returns its id.
async fn dispatch(c: &Client, name: &str, nodes: &str) -> i64 {
    let names: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(nodes)
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    let steps: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), n.as_str())).collect();
    support::dispatch_workflow(c, name, nodes, &steps, &[])
        .await
        .0
}

/// Claims what is claimable and settles each job as `how` says of its payload.
async fn run(b: &Broker, how: impl Fn(&str) -> Option<&'static str>) {
    let got = b.claim(&queues(&["default"]), 1000).await.unwrap();
    let settles: Vec<Settle> = got
        .iter()
        .filter_map(|j| {
            let lease = Lease {
                id: j.id,
                token: j.token,
            };
            match how(&j.payload)? {
                "ack" => Some(Settle::Ack(lease)),
                _ => Some(Settle::Fail {
                    lease,
                    error: "boom".into(),
                }),
            }
        })
        .collect();
    b.settle(&settles).await.unwrap();
}

#[tokio::test]
async fn workflows_are_counted_by_state_with_their_nodes_waiting_for_a_signal_or_a_time() {
    let db = db().await;
    let (b, clock) = broker(&db).await;
    let c = client(&db).await;
    assert_eq!(
        b.workflow_counts().await.unwrap(),
        WorkflowCounts::default()
    );

    dispatch(
        &c,
        "approve",
        r#"[{"name":"a"},{"name":"publish","deps":["a"],"wait_signal":"approved"}]"#,
    )
    .await;
    dispatch(
        &c,
        "remind",
        r#"[{"name":"b"},{"name":"later","deps":["b"],"wait_secs":3600}]"#,
    )
    .await;
    dispatch(
        &c,
        "breaks",
        r#"[{"name":"c"},{"name":"never","deps":["c"]}]"#,
    )
    .await;
    dispatch(&c, "quick", r#"[{"name":"d"}]"#).await;
    // A parent whose sub-workflow waits (pending) for the parent's node `sub`.
    support::dispatch_workflow(
        &c,
        "parent",
        r#"[{"name":"e"},{"name":"sub","deps":["e"]}]"#,
        &[("e", "e")],
        &[("child", r#"[{"name":"x"}]"#, &[("x", "x")], "sub")],
    )
    .await;

    // The first steps run: a, b and d complete, c fails (its workflow with it); e is left running.
    run(&b, |payload| match payload {
        "c" => Some("fail"),
        "e" => None,
        _ => Some("ack"),
    })
    .await;
    assert_eq!(
        b.workflow_counts().await.unwrap(),
        WorkflowCounts {
            pending: 1,
            running: 3,
            nodes_waiting_for_signal: 1,
            nodes_waiting_for_time: 1,
            failed_last_hour: 1,
        },
        "running: approve, remind and parent; pending: the child; quick completed"
    );

    // The signal is sent: the node runs, waits no more.
    let took: i32 = c
        .query_one(
            "SELECT drover.workflow_signal('approve', 'approved', NULL)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(took, 1);
    let counts = b.workflow_counts().await.unwrap();
    assert_eq!(counts.nodes_waiting_for_signal, 0, "{counts:?}");

    // Two hours on: the timed node is due (its step claimable, waiting no more) and the failure is
    // older than an hour.
    clock.advance(Duration::from_secs(2 * 3600));
    let counts = b.workflow_counts().await.unwrap();
    assert_eq!(
        (counts.nodes_waiting_for_time, counts.failed_last_hour),
        (0, 0),
        "{counts:?}"
    );
    assert_eq!((counts.pending, counts.running), (1, 3));
}

/// Job `job` reports `percent` and `note` as a job's `$this->progress()` does; whether it was
/// written.
async fn report(c: &Client, job: &LeasedJob, percent: i32, note: Option<&str>) -> bool {
    c.query_one(
        "SELECT drover.job_progress($1, $2, $3, $4)",
        &[&job.id, &job.token, &percent, &note],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn the_progress_of_running_jobs_is_read_by_id_and_a_job_that_reported_none_is_absent() {
    let db = db().await;
    let (b, clock) = broker(&db).await;
    let c = client(&db).await;
    assert_eq!(
        b.job_progress(&[]).await.unwrap(),
        [],
        "no job, no statement"
    );
    enqueue(&db, "default", 3, None).await;
    let mut got = b.claim(&queues(&["default"]), 3).await.unwrap();
    got.sort_by_key(|j| j.id);
    assert!(report(&c, &got[0], 41, Some("parsed 4,000 rows")).await);
    assert!(report(&c, &got[1], 100, None).await);
    // Fenced by the lease: a stale token writes nothing.
    let stale = LeasedJob {
        token: got[2].token + 1000,
        ..got[2].clone()
    };
    assert!(!report(&c, &stale, 10, None).await);

    let ids: Vec<i64> = got.iter().map(|j| j.id).collect();
    let read = b.job_progress(&ids).await.unwrap();
    assert_eq!(read.len(), 2, "{read:?}");
    assert_eq!(
        (read[0].job, read[0].percent, read[0].note.as_deref()),
        (got[0].id, 41, Some("parsed 4,000 rows"))
    );
    assert_eq!(
        (read[1].job, read[1].percent, read[1].note.as_deref()),
        (got[1].id, 100, None)
    );
    // Reported by the database's clock just now; read by the test's, a minute ahead.
    let ago = read[0].reported_ago;
    assert!(
        ago > Duration::from_secs(50) && ago <= Duration::from_secs(61),
        "{ago:?}"
    );
    clock.advance(Duration::from_secs(60));
    let later = b.job_progress(&ids[..1]).await.unwrap();
    assert_eq!(later.len(), 1);
    assert!(
        later[0].reported_ago >= ago + Duration::from_secs(59),
        "{later:?}"
    );
}
