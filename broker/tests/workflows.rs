//! Durable workflows against a real PostgreSQL (migration 0016, docs/workflows.md): the graph
//! moves inside the database when a step's job leaves drover.jobs by any path — an ack, a
//! completion inside the application's transaction, a failure through the master, the reap of a
//! job out of attempts, a cancel — and never makes a settle wait.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use drover_broker::{Broker, BrokerConfig, Clock, Lease, ManualClock, Settle, SystemClock};
use support::{db, dispatch_workflow, open_completion, queues, Db};
use tokio_postgres::Client;

const LEASE: Duration = Duration::from_secs(20);

async fn broker(db: &Db, clock: Arc<dyn Clock>) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = LEASE;
    Broker::start(config, clock).await.unwrap()
}

async fn client(db: &Db) -> Client {
    drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap()
}

/// Dispatches workflow `name` with `nodes` (the JSON of drover.workflow_create) and one step per
/// `(node, payload)`, as the package's dispatch does, in one transaction; returns its id.
async fn dispatch(c: &Client, name: &str, nodes: &str, steps: &[(&str, &str)]) -> i64 {
    dispatch_workflow(c, name, nodes, steps, &[]).await.0
}

/// The leases of the jobs claimable now, by payload.
async fn claim(b: &Broker) -> Vec<(String, Lease)> {
    let mut got: Vec<(String, Lease)> = b
        .claim(&queues(&["default"]), 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|j| {
            (
                j.payload.clone(),
                Lease {
                    id: j.id,
                    token: j.token,
                },
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    got
}

fn lease(claimed: &[(String, Lease)], payload: &str) -> Lease {
    claimed
        .iter()
        .find(|(p, _)| p == payload)
        .unwrap_or_else(|| panic!("{payload} was not claimed: {claimed:?}"))
        .1
}

fn payloads(claimed: &[(String, Lease)]) -> Vec<&str> {
    claimed.iter().map(|(p, _)| p.as_str()).collect()
}

/// Each node's state, in declaration order, as "name=state".
async fn nodes(c: &Client, wf: i64) -> Vec<String> {
    c.query(
        "SELECT name || '=' || state || coalesce('(' || cause || ')', '') FROM drover.workflow_nodes
         WHERE wf = $1 ORDER BY position",
        &[&wf],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

async fn state(c: &Client, wf: i64) -> String {
    c.query_one("SELECT state FROM drover.workflows WHERE id = $1", &[&wf])
        .await
        .unwrap()
        .get(0)
}

const DIAMOND: &str = r#"[{"name":"a"},{"name":"b","deps":["a"]},{"name":"c","deps":["a"]},
                          {"name":"d","deps":["b","c"]}]"#;

#[tokio::test]
async fn two_parents_completing_in_overlapping_transactions_release_their_child_exactly_once() {
    let db = db().await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let c = client(&db).await;
    for (round, first) in ["b", "c"].into_iter().enumerate() {
        let wf = dispatch(
            &c,
            &format!("diamond-{round}"),
            DIAMOND,
            &[("a", "a"), ("b", "b"), ("c", "c"), ("d", "d")],
        )
        .await;
        let got = claim(&b).await;
        assert_eq!(payloads(&got), ["a"], "only the root runs first");
        assert_eq!(
            b.settle(&[Settle::Ack(lease(&got, "a"))])
                .await
                .unwrap()
                .acked,
            1
        );
        let got = claim(&b).await;
        assert_eq!(payloads(&got), ["b", "c"]);
        // Both parents complete inside their own open transactions (the exactly-once completion):
        // the first holds the workflow's lock, the second notes its end for the catch-up.
        let one = open_completion(&db, lease(&got, first)).await;
        let other = open_completion(&db, lease(&got, if first == "b" { "c" } else { "b" })).await;
        one.batch_execute("COMMIT").await.unwrap();
        other.batch_execute("COMMIT").await.unwrap();
        assert!(
            claim(&b).await.is_empty(),
            "d waits until the second end is applied"
        );
        b.reap_expired().await.unwrap(); // pipelines the catch-up
        let got = claim(&b).await;
        assert_eq!(payloads(&got), ["d"], "released once, round {round}");
        b.settle(&[Settle::Ack(lease(&got, "d"))]).await.unwrap();
        assert_eq!(state(&c, wf).await, "completed");
        assert_eq!(
            nodes(&c, wf).await,
            ["a=completed", "b=completed", "c=completed", "d=completed"]
        );
    }
}

#[tokio::test]
async fn a_settle_never_waits_for_a_workflow_whose_lock_an_open_transaction_holds() {
    let db = db().await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let c = client(&db).await;
    let wf = dispatch(
        &c,
        "many",
        r#"[{"name":"many"},{"name":"after","deps":["many"]}]"#,
        &[
            ("many", "m1"),
            ("many", "m2"),
            ("many", "m3"),
            ("after", "z"),
        ],
    )
    .await;
    let got = claim(&b).await;
    assert_eq!(payloads(&got), ["m1", "m2", "m3"]);
    let open = open_completion(&db, lease(&got, "m1")).await;
    let settled = tokio::time::timeout(
        Duration::from_secs(5),
        b.settle(&[
            Settle::Ack(lease(&got, "m2")),
            Settle::Ack(lease(&got, "m3")),
        ]),
    )
    .await
    .expect("a settle never waits for the open transaction")
    .unwrap();
    assert_eq!(settled.acked, 2);
    b.reap_expired().await.unwrap();
    assert!(
        claim(&b).await.is_empty(),
        "after waits for m1's completion, which has not committed"
    );
    open.batch_execute("COMMIT").await.unwrap();
    b.reap_expired().await.unwrap();
    assert_eq!(payloads(&claim(&b).await), ["z"]);
    let done: i64 = c
        .query_one(
            "SELECT count(*) FROM drover.workflow_steps WHERE wf = $1 AND state = 'completed'",
            &[&wf],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(done, 3);
}

#[tokio::test]
async fn a_failure_cancels_what_depends_on_it_continue_goes_on_and_a_retry_lets_the_rest_finish() {
    let db = db().await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let c = client(&db).await;
    let wf = dispatch(
        &c,
        "policies",
        r#"[{"name":"x"},{"name":"y","deps":["x"]},{"name":"z","deps":["y"]},
            {"name":"p","on_failure":"continue"},{"name":"q","deps":["p"]}]"#,
        &[("x", "x"), ("y", "y"), ("z", "z"), ("p", "p"), ("q", "q")],
    )
    .await;
    let got = claim(&b).await;
    assert_eq!(payloads(&got), ["p", "x"]);
    let failed = b
        .settle(&[
            Settle::Fail {
                lease: lease(&got, "x"),
                error: "boom".into(),
            },
            // The application recorded this one's failure itself (Laravel's failer).
            Settle::Failed(lease(&got, "p")),
        ])
        .await
        .unwrap();
    assert_eq!(failed.failed, 1);
    assert_eq!(
        nodes(&c, wf).await,
        [
            "x=failed",
            "y=cancelled(x)",
            "z=cancelled(x)",
            "p=failed",
            "q=running"
        ]
    );
    let got = claim(&b).await;
    assert_eq!(payloads(&got), ["q"], "continue: q runs after p failed");
    b.settle(&[Settle::Ack(lease(&got, "q"))]).await.unwrap();
    assert_eq!(state(&c, wf).await, "failed");

    // The operator retries x: y and z wait for it again, and run.
    let x: i64 = c
        .query_one(
            "SELECT id FROM drover.workflow_steps WHERE wf = $1 AND node = 'x'",
            &[&wf],
        )
        .await
        .unwrap()
        .get(0);
    let retried: bool = c
        .query_one("SELECT drover.workflow_retry_step($1)", &[&x])
        .await
        .unwrap()
        .get(0);
    assert!(retried);
    assert_eq!(state(&c, wf).await, "running");
    for step in ["x", "y", "z"] {
        let got = claim(&b).await;
        assert_eq!(payloads(&got), [step]);
        b.settle(&[Settle::Ack(lease(&got, step))]).await.unwrap();
    }
    assert_eq!(
        nodes(&c, wf).await,
        [
            "x=completed",
            "y=completed",
            "z=completed",
            "p=failed",
            "q=completed"
        ]
    );
    assert_eq!(state(&c, wf).await, "failed", "p's failure stands");
    let gone: i64 = c
        .query_one(
            "SELECT count(*) FROM drover.failed_jobs WHERE id = $1",
            &[&x],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(gone, 0, "the retried step's failed row is gone");
}

#[tokio::test]
async fn a_step_out_of_attempts_when_its_lease_expires_fails_its_node() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let b = broker(&db, clock.clone()).await;
    let c = client(&db).await;
    let wf = dispatch(
        &c,
        "expiring",
        r#"[{"name":"only"},{"name":"next","deps":["only"]}]"#,
        &[("only", "o"), ("next", "n")],
    )
    .await;
    c.execute(
        "UPDATE drover.jobs SET max_attempts = 1, available_at = $2 WHERE wf = $1",
        &[&wf, &clock.now()],
    )
    .await
    .unwrap();
    assert_eq!(payloads(&claim(&b).await), ["o"]);
    clock.advance(LEASE + Duration::from_secs(1));
    assert_eq!(b.reap_expired().await.unwrap().failed, 1);
    assert_eq!(nodes(&c, wf).await, ["only=failed", "next=cancelled(only)"]);
    assert_eq!(state(&c, wf).await, "failed");
}

#[tokio::test]
async fn waits_for_a_time_a_signal_and_a_condition_hold_no_claimable_job() {
    let db = db().await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let c = client(&db).await;
    let wf = dispatch(
        &c,
        "waits",
        r#"[{"name":"a"},
            {"name":"later","deps":["a"],"wait_secs":3600},
            {"name":"approved","deps":["a"],"wait_signal":"go"},
            {"name":"early","deps":["a"],"wait_signal":"sent-early"},
            {"name":"big","deps":["a"],"condition":{"node":"a","path":["rows"],"op":">","value":1000}},
            {"name":"small","deps":["a"],"condition":{"node":"a","path":["rows"],"op":"<=","value":1000}},
            {"name":"after-big","deps":["big"]}]"#,
        &[
            ("a", "a"),
            ("later", "later"),
            ("approved", "approved"),
            ("early", "early"),
            ("big", "big"),
            ("small", "small"),
            ("after-big", "after-big"),
        ],
    )
    .await;
    let took: i32 = c
        .query_one(
            "SELECT drover.workflow_signal('waits', 'sent-early', '{\"by\":\"ana\"}')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(took, 1, "a signal sent before its step is reached is kept");
    let got = claim(&b).await;
    let recorded: bool = c
        .query_one(
            "SELECT drover.workflow_record_result($1, $2, '{\"rows\": 40}')",
            &[&lease(&got, "a").id, &lease(&got, "a").token],
        )
        .await
        .unwrap()
        .get(0);
    assert!(recorded);
    b.settle(&[Settle::Ack(lease(&got, "a"))]).await.unwrap();
    assert_eq!(
        nodes(&c, wf).await,
        [
            "a=completed",
            "later=running",
            "approved=waiting",
            "early=running",
            "big=skipped(condition)",
            "small=running",
            "after-big=running"
        ]
    );
    let got = claim(&b).await;
    assert_eq!(
        payloads(&got),
        ["after-big", "early", "small"],
        "the timed step is not due, the signalled one waits"
    );
    let waiting: i64 = c
        .query_one(
            "SELECT count(*) FROM drover.jobs WHERE wf = $1 AND available_at > now() + interval '3500 seconds'",
            &[&wf],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(waiting, 1, "the timed step waits in drover.jobs, unleased");
    c.execute("SELECT drover.workflow_signal('waits', 'go', NULL)", &[])
        .await
        .unwrap();
    assert_eq!(payloads(&claim(&b).await), ["approved"]);
}

#[tokio::test]
async fn a_cancelled_workflow_deletes_its_waiting_steps_and_a_running_step_releases_nothing() {
    let db = db().await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let c = client(&db).await;
    let wf = dispatch(
        &c,
        "cancelled",
        r#"[{"name":"run"},{"name":"wait"},{"name":"after","deps":["run"]}]"#,
        &[("run", "run"), ("wait", "wait"), ("after", "after")],
    )
    .await;
    let got = b.claim(&queues(&["default"]), 1).await.unwrap();
    assert_eq!(got[0].payload, "run");
    let cancelled: bool = c
        .query_one("SELECT drover.workflow_cancel($1)", &[&wf])
        .await
        .unwrap()
        .get(0);
    assert!(cancelled);
    assert!(claim(&b).await.is_empty(), "the waiting step was deleted");
    b.settle(&[Settle::Ack(Lease {
        id: got[0].id,
        token: got[0].token,
    })])
    .await
    .unwrap();
    assert!(
        claim(&b).await.is_empty(),
        "the running step released nothing"
    );
    assert_eq!(state(&c, wf).await, "cancelled");
    let steps: Vec<String> = c
        .query(
            "SELECT node || '=' || state FROM drover.workflow_steps WHERE wf = $1 ORDER BY id",
            &[&wf],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        steps,
        ["run=completed", "wait=cancelled", "after=cancelled"]
    );
    assert_eq!(
        nodes(&c, wf).await,
        [
            "run=completed",
            "wait=cancelled(cancelled)",
            "after=cancelled(cancelled)"
        ],
        "the running node's end is recorded"
    );
}

#[tokio::test]
async fn a_unique_name_is_refused_while_running_and_a_cycle_at_dispatch() {
    let db = db().await;
    let _migrated = broker(&db, Arc::new(SystemClock)).await;
    let c = client(&db).await;
    dispatch(&c, "unique", r#"[{"name":"a"}]"#, &[("a", "a")]).await;
    let second = c
        .execute(
            "SELECT drover.workflow_create('unique', true, '[{\"name\":\"a\"}]')",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(second.code().unwrap().code(), "DRW01", "{second}");
    let cycle = c
        .execute(
            "SELECT drover.workflow_create('cyclic', false, '[{\"name\":\"a\",\"deps\":[\"b\"]},{\"name\":\"b\",\"deps\":[\"a\"]}]')",
            &[],
        )
        .await
        .unwrap_err();
    let said = cycle.as_db_error().unwrap().message();
    assert!(
        said.contains("has a cycle among its steps (a, b)"),
        "{said}"
    );
}

#[tokio::test]
async fn retention_deletes_workflows_that_ended_long_ago_with_their_steps() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let b = broker(&db, clock.clone()).await;
    let c = client(&db).await;
    let wf = dispatch(&c, "old", r#"[{"name":"a"}]"#, &[("a", "a")]).await;
    c.execute("DELETE FROM drover.jobs WHERE wf = $1", &[&wf])
        .await
        .unwrap();
    assert_eq!(state(&c, wf).await, "completed");
    let running = dispatch(&c, "running", r#"[{"name":"a"}]"#, &[("a", "a")]).await;
    assert_eq!(b.purge_workflows(Duration::from_secs(5)).await.unwrap(), 0);
    clock.advance(drover_broker::workflows::WORKFLOWS_KEPT + Duration::from_secs(60));
    assert_eq!(b.purge_workflows(Duration::from_secs(5)).await.unwrap(), 1);
    let left: Vec<i64> = support::ids(
        &c,
        "SELECT wf FROM drover.workflow_steps UNION ALL SELECT id FROM drover.workflows",
        &[],
    )
    .await;
    assert_eq!(left, [running, running]);
}

#[tokio::test]
async fn a_sub_workflow_starts_when_its_node_is_released_and_its_end_ends_the_node() {
    let db = db().await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let c = client(&db).await;
    let (parent, children) = dispatch_workflow(
        &c,
        "parent",
        r#"[{"name":"a"},{"name":"sub","deps":["a"]},{"name":"b","deps":["sub"]}]"#,
        &[("a", "a"), ("b", "b")],
        &[(
            "child",
            r#"[{"name":"x"},{"name":"y","deps":["x"]}]"#,
            &[("x", "x"), ("y", "y")],
            "sub",
        )],
    )
    .await;
    let child = children[0];
    assert_eq!(state(&c, child).await, "pending");
    for step in ["a", "x", "y", "b"] {
        let got = claim(&b).await;
        assert_eq!(payloads(&got), [step], "one at a time, in order");
        b.settle(&[Settle::Ack(lease(&got, step))]).await.unwrap();
    }
    assert_eq!(
        (state(&c, child).await, state(&c, parent).await),
        ("completed".to_string(), "completed".to_string())
    );
    assert_eq!(
        nodes(&c, parent).await,
        ["a=completed", "sub=completed", "b=completed"]
    );
}

#[tokio::test]
async fn queue_retry_of_a_failed_step_in_a_sub_workflow_reopens_it_and_its_parent() {
    let db = db().await;
    let b = broker(&db, Arc::new(SystemClock)).await;
    let c = client(&db).await;
    let x = r#"{"uuid":"1b4e28ba-2fa1-11d2-883f-0016d3cca427","job":"x"}"#;
    let (parent, children) = dispatch_workflow(
        &c,
        "parent",
        r#"[{"name":"sub"},{"name":"after","deps":["sub"]}]"#,
        &[("after", "after")],
        &[("child", r#"[{"name":"x"}]"#, &[("x", x)], "sub")],
    )
    .await;
    let child = children[0];
    let got = claim(&b).await;
    b.settle(&[Settle::Fail {
        lease: lease(&got, x),
        error: "boom".into(),
    }])
    .await
    .unwrap();
    assert_eq!(
        (state(&c, child).await, state(&c, parent).await),
        ("failed".to_string(), "failed".to_string())
    );
    assert_eq!(
        nodes(&c, parent).await,
        ["sub=failed", "after=cancelled(sub)"]
    );

    // Laravel's queue:retry pushes the payload back with its attempts reset.
    let retried = x.replace("\"job\":\"x\"", "\"job\":\"x\",\"attempts\":0");
    let step: Option<i64> = c
        .query_one("SELECT drover.workflow_retry_payload($1)", &[&retried])
        .await
        .unwrap()
        .get(0);
    assert!(step.is_some());
    let again: Option<i64> = c
        .query_one("SELECT drover.workflow_retry_payload($1)", &[&retried])
        .await
        .unwrap()
        .get(0);
    assert_eq!(again, None, "a step retried once is not failed any more");
    assert_eq!(state(&c, parent).await, "running");
    let got = claim(&b).await;
    assert_eq!(payloads(&got), [retried.as_str()]);
    b.settle(&[Settle::Ack(lease(&got, &retried))])
        .await
        .unwrap();
    let got = claim(&b).await;
    assert_eq!(payloads(&got), ["after"]);
    b.settle(&[Settle::Ack(lease(&got, "after"))])
        .await
        .unwrap();
    assert_eq!(
        (state(&c, child).await, state(&c, parent).await),
        ("completed".to_string(), "completed".to_string())
    );
}
