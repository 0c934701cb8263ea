//! Traces end to end: the real master exports the jobs' spans over OTLP/HTTP to a receiver started
//! by the test, which decodes them with the OpenTelemetry project's generated protocol types
//! (`tests/support/otlp_receiver.rs`) — real PHP workers, a real PostgreSQL, payloads carrying a
//! W3C `traceparent` as the Laravel package writes it (`tests/fixtures/enqueue.php
//! --traceparent`). The Laravel side, a job dispatched in a traced request, is `tests/laravel.rs`'s.

mod support;

use std::time::Duration;

use support::otlp_receiver::{OtlpReceiver, ReceivedSpan};
use support::{create_runs_table, enqueue, root, wait_count, Cluster, Drover};

/// `drover run --config` with one pool of `processes` fixture workers, and `traces` if given.
fn contract(db: &Cluster, traces: Option<serde_json::Value>) -> std::path::PathBuf {
    let mut c = serde_json::json!({
        "version": 1,
        "database_url": db.url(),
        "lease": 5,
        "pools": [{
            "name": "default", "queues": ["default"], "processes": 2,
            "command": [
                "php",
                root().join("php-client/bin/drover-worker").display().to_string(),
                root().join("tests/fixtures/handler.php").display().to_string(),
            ],
            "env": {"DROVER_PDO_DSN": db.dsn()},
        }],
    });
    if let Some(traces) = traces {
        c["traces"] = traces;
    }
    let path = db
        .dir
        .path()
        .join(format!("traces-{}.json", c.get("traces").is_some()));
    std::fs::write(&path, serde_json::to_vec(&c).unwrap()).unwrap();
    path
}

fn named<'a>(spans: &'a [ReceivedSpan], trace: &str, name: &str) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|s| s.trace_id == trace && s.name == name)
        .collect()
}

#[tokio::test]
async fn a_traced_job_is_one_trace_send_process_settle_each_retry_a_process_span_and_a_killed_one_an_error(
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    create_runs_table(&client).await;
    let receiver = OtlpReceiver::start().await;

    // Without a traces setting the collector is never contacted.
    let config = contract(&db, None);
    let drover = Drover::start_worker(None, None, &["--config", config.to_str().unwrap()], &[]);
    enqueue(
        db.dsn(),
        3,
        &["--traceparent=00-11111111111111111111111111111111-2222222222222222-01"],
    );
    wait_count(
        &client,
        "SELECT count(*) FROM public.runs WHERE event = 'finish'",
        3,
        Duration::from_secs(30),
    )
    .await;
    drover.stop().await;
    assert_eq!(receiver.connections(), 0, "export is off: no connection");

    let config = contract(
        &db,
        Some(serde_json::json!({
            "endpoint": receiver.endpoint(), "service_name": "drover-test", "batch": 8,
        })),
    );
    let drover = Drover::start_worker(None, None, &["--config", config.to_str().unwrap()], &[]);
    let retried = "0af7651916cd43dd8448eb211c80319c";
    let killed = "4bf92f3577b34da6a3ce929d0e0e4736";
    let request_span = "b7ad6b7169203331";
    let retried_id = enqueue(
        db.dsn(),
        1,
        &[
            &format!("--traceparent=00-{retried}-{request_span}-01"),
            "--act=throw",
            "--max-attempts=2",
            "--first-seq=10",
        ],
    )[0];
    let killed_id = enqueue(
        db.dsn(),
        1,
        &[
            &format!("--traceparent=00-{killed}-{request_span}-01"),
            "--act=crash",
            "--max-attempts=1",
            "--first-seq=20",
        ],
    )[0];
    enqueue(db.dsn(), 1, &["--first-seq=30"]);
    let spans = receiver
        .wait_for(Duration::from_secs(30), |spans| {
            named(spans, retried, "settle default").len() == 2
                && named(spans, killed, "settle default").len() == 1
                && spans.iter().filter(|s| s.name == "settle default").count() == 4
        })
        .await;
    let log = drover.stop().await;
    assert!(receiver.errors().is_empty(), "{:?}", receiver.errors());

    // The retried job: one trace, under the dispatching request's span.
    let send = named(&spans, retried, "send default");
    assert_eq!(send.len(), 1, "one send span: {spans:#?}");
    let send = send[0];
    assert_eq!(
        (send.kind.as_str(), send.parent_span_id.as_str()),
        ("producer", request_span)
    );
    let process = named(&spans, retried, "process default");
    assert_eq!(process.len(), 2, "a process span per attempt: {spans:#?}");
    for (attempt, p) in process.iter().enumerate() {
        assert_eq!(p.kind, "consumer");
        assert_eq!(
            p.parent_span_id, send.span_id,
            "each attempt under the send span"
        );
        assert!(p.end_unix_nano >= p.start_unix_nano && p.start_unix_nano >= send.start_unix_nano);
        let a = &p.attributes;
        assert_eq!(a["messaging.system"], "drover");
        assert_eq!(a["messaging.destination.name"], "default");
        assert_eq!(a["messaging.operation.type"], "process");
        assert_eq!(a["messaging.message.id"], retried_id.to_string());
        assert_eq!(a["messaging.drover.attempt"], (attempt + 1).to_string());
    }
    assert_eq!(process[0].status, "unset", "released, not an error");
    assert_eq!(
        process[0].attributes["messaging.drover.outcome"],
        "released"
    );
    assert_eq!(process[1].attributes["messaging.drover.outcome"], "done");
    let settles = named(&spans, retried, "settle default");
    for s in &settles {
        assert_eq!(s.kind, "client");
        assert!(
            process.iter().any(|p| p.span_id == s.parent_span_id),
            "under its attempt"
        );
    }
    let operations: Vec<&str> = settles
        .iter()
        .map(|s| s.attributes["messaging.operation.name"].as_str())
        .collect();
    assert_eq!(operations, ["release", "ack"]);

    // The job whose worker crashed: its span ended in error, its failure settled.
    let process = named(&spans, killed, "process default");
    assert_eq!(process.len(), 1, "{spans:#?}");
    assert_eq!(process[0].status, "error");
    assert!(
        process[0].status_message.contains("worker exited"),
        "{:?}",
        process[0]
    );
    assert_eq!(
        process[0].attributes["messaging.message.id"],
        killed_id.to_string()
    );
    assert_eq!(
        named(&spans, killed, "settle default")[0].attributes["messaging.operation.name"],
        "fail"
    );

    // A job dispatched outside a trace: a trace of its own, no send span.
    let own: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.trace_id != retried && s.trace_id != killed)
        .collect();
    let names: Vec<&str> = own.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["process default", "settle default"], "{own:#?}");
    assert_eq!(own[0].parent_span_id, "", "a root");
    assert!(receiver
        .resources()
        .iter()
        .all(|r| r.get("service.name").map(String::as_str) == Some("drover-test")));
    assert!(!log.contains("traces: cannot export"), "{log}");
    db.stop().await;
}
