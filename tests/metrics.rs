//! Metrics end to end: what the master records in `drover.metrics` per minute, queue and job
//! class (CPU and peak memory read from the workers' /proc), its node status row, and the
//! `/metrics` and `/healthz` listener read by Prometheus's own text parser — the real binary,
//! real PHP workers, a real PostgreSQL.

mod support;

use std::io::Write;
use std::time::Duration;

use support::{
    count, enqueue, free_port, http, http_exchange, http_get as get, wait_count, Cluster, Drover,
};

async fn wait_for_listener(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on port {port}");
}

/// The exposition parsed by Prometheus's Python client's OpenMetrics parser (Debian's
/// python3-prometheus-client), as JSON: [{name, labels, value}] per sample. A text the parser
/// refuses fails the test with its message.
fn parse_openmetrics(text: &str) -> Vec<serde_json::Value> {
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append({"family": family.name, "type": family.type, "name": s.name, "labels": s.labels, "value": s.value})
print(json.dumps(out))
"#;
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 (scripts/setup installs python3-prometheus-client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the OpenMetrics parser refused /metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sample(samples: &[serde_json::Value], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s["name"] == name
                && labels
                    .iter()
                    .all(|(k, v)| s["labels"][*k].as_str() == Some(*v))
        })
        .and_then(|s| s["value"].as_f64())
}

#[tokio::test]
async fn a_job_that_burns_200ms_of_cpu_shows_about_that_and_one_that_allocates_64mb_shows_its_peak()
{
    let db = Cluster::start().await;
    let client = db.client().await;
    enqueue(
        db.dsn(),
        3,
        &["--act=burn", "--display-name=App\\Jobs\\Burn"],
    );
    enqueue(
        db.dsn(),
        3,
        &[
            "--act=grow",
            "--display-name=App\\Jobs\\Grow",
            "--first-seq=10",
        ],
    );
    enqueue(
        db.dsn(),
        3,
        &["--display-name=App\\Jobs\\Quick", "--first-seq=20"],
    );
    enqueue(
        db.dsn(),
        2,
        &[
            "--act=throw",
            "--display-name=App\\Jobs\\Fails",
            "--first-seq=30",
            "--max-attempts=1",
        ],
    );
    // One worker, one job at a time: each reading brackets exactly one job.
    let drover = db.drover(&["--workers", "1", "--prefetch", "1"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event IN ('finish') OR (event = 'start' AND seq >= 30)",
        11,
        Duration::from_secs(60),
    )
    .await;
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(30),
    )
    .await;
    // While it runs, its node row carries its status.
    let status: serde_json::Value = client
        .query_one("SELECT status::text FROM drover.nodes", &[])
        .await
        .map(|r| serde_json::from_str(r.get::<_, &str>(0)).unwrap())
        .unwrap_or_default();
    let log = drover.stop().await; // the recorder writes what is left at exit

    let rows = client
        .query(
            "SELECT class, sum(completed)::int8, sum(failed)::int8, sum(released)::int8,
                    max((cpu->>'p50')::float8), max((cpu->>'max')::float8),
                    max((memory->>'max')::float8), max((memory->>'p50')::float8),
                    sum((runtime->>'n')::int8)::int8, sum((wait->>'n')::int8)::int8,
                    max((runtime->>'max')::float8), min(hostname), min(queue),
                    sum((memory->>'n')::int8)::int8, max((wait->>'max')::float8)
             FROM drover.metrics GROUP BY class ORDER BY class",
            &[],
        )
        .await
        .unwrap();
    let by_job = |class: &str| {
        rows.iter()
            .find(|r| r.get::<_, &str>(0) == class)
            .unwrap_or_else(|| panic!("no metrics for {class}:\n{log}"))
    };
    let burn = by_job("App\\Jobs\\Burn");
    assert_eq!((burn.get::<_, i64>(1), burn.get::<_, i64>(2)), (3, 0));
    let (cpu_p50, cpu_max): (f64, f64) = (burn.get(4), burn.get(5));
    eprintln!("Burn: CPU p50 {cpu_p50} ms, max {cpu_max} ms");
    assert!(
        (180.0..300.0).contains(&cpu_p50),
        "a job that busy-waits 200 ms used {cpu_p50} ms of CPU (p50)"
    );
    assert!(
        burn.get::<_, f64>(10) >= 200.0,
        "its run time covers the busy wait"
    );
    assert_eq!(burn.get::<_, i64>(8), 3, "three run times");
    assert_eq!(burn.get::<_, i64>(9), 3, "three waits");
    // Enqueued before the master started, they waited at least until it took them (one worker,
    // one at a time), and not longer than the whole run.
    let longest_wait: f64 = burn.get(14);
    assert!(
        longest_wait > 0.0 && longest_wait < 60_000.0,
        "the longest wait of a Burn job was {longest_wait} ms"
    );
    assert_eq!(burn.get::<_, &str>(12), "default");

    let grow = by_job("App\\Jobs\\Grow");
    let grow_peak: f64 = grow.get(6);
    let quick = by_job("App\\Jobs\\Quick");
    let quick_peak: f64 = quick.get(6);
    eprintln!("Grow: peak {grow_peak} KiB; Quick (after it, same worker): peak {quick_peak} KiB");
    assert!(
        grow_peak > 64.0 * 1024.0,
        "a job that allocates 64 MiB peaked at {grow_peak} KiB"
    );
    assert_eq!(
        quick.get::<_, i64>(13),
        3,
        "every Quick job has a memory reading"
    );
    assert!(
        quick_peak > 1024.0 && quick_peak < 64.0 * 1024.0,
        "the peak is reset per job: a job that allocates nothing, run by the same worker after the 64 MiB one, peaked at {quick_peak} KiB"
    );
    assert!(quick.get::<_, f64>(5) < 50.0, "a quick job used little CPU");

    let fails = by_job("App\\Jobs\\Fails");
    assert_eq!((fails.get::<_, i64>(1), fails.get::<_, i64>(2)), (0, 2));

    assert_eq!(
        status["pools"][0]["workers"].as_array().map(Vec::len),
        Some(1),
        "the node row's status lists the worker: {status}"
    );
    assert!(
        status["pools"][0]["workers"][0]["pss_kib"]
            .as_u64()
            .is_some(),
        "{status}"
    );
    db.stop().await;
}

#[tokio::test]
async fn metrics_parse_with_prometheus_s_own_parser_and_healthz_tells_serving_from_degraded() {
    let db = Cluster::start().await;
    let client = db.client().await;
    enqueue(db.dsn(), 20, &["--display-name=App\\Jobs\\Ok"]);
    enqueue(
        db.dsn(),
        1,
        &[
            "--act=throw",
            "--display-name=App\\Jobs\\Fails",
            "--first-seq=100",
            "--max-attempts=1",
        ],
    );
    // Jobs on a queue nobody serves, waiting since before the master started.
    enqueue(db.dsn(), 5, &["--queue=unserved", "--first-seq=200"]);
    let unserved_since = std::time::Instant::now();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let drover = db.drover(&[
        "--workers",
        "2",
        "--queue",
        "default,idle",
        "--metrics-listen",
        &listen,
    ]);
    wait_for_listener(port).await;
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        20,
        Duration::from_secs(60),
    )
    .await;
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs WHERE queue = 'default'",
        0,
        Duration::from_secs(30),
    )
    .await;
    enqueue(
        db.dsn(),
        3,
        &["--queue=idle", "--delay=3600", "--first-seq=300"],
    );

    let (code, text) = get(port, "/metrics");
    assert_eq!(code, 200, "{text}");
    let samples = parse_openmetrics(&text);
    let ok = [("queue", "default"), ("class", "App\\Jobs\\Ok")];
    assert_eq!(
        sample(&samples, "drover_jobs_completed_total", &ok),
        Some(20.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &samples,
            "drover_jobs_failed_total",
            &[("queue", "default"), ("class", "App\\Jobs\\Fails")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&samples, "drover_job_runtime_seconds_count", &ok),
        Some(20.0)
    );
    assert_eq!(
        sample(&samples, "drover_job_wait_seconds_count", &ok),
        Some(20.0)
    );
    // The same jobs by OpenTelemetry's messaging conventions (one queue, every class).
    let messaging = [
        ("messaging_system", "drover"),
        ("messaging_destination_name", "default"),
        ("messaging_operation_name", "process"),
    ];
    assert_eq!(
        sample(
            &samples,
            "messaging_client_consumed_messages_total",
            &messaging
        ),
        Some(21.0),
        "{text}"
    );
    let done = [&messaging[..], &[("error_type", "")]].concat();
    let failed = [&messaging[..], &[("error_type", "failed")]].concat();
    assert_eq!(
        sample(&samples, "messaging_process_duration_seconds_count", &done),
        Some(20.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &samples,
            "messaging_process_duration_seconds_count",
            &failed
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &samples,
            "drover_job_runtime_seconds_bucket",
            &[
                ("queue", "default"),
                ("class", "App\\Jobs\\Ok"),
                ("le", "+Inf")
            ]
        ),
        Some(20.0)
    );
    assert_eq!(
        sample(&samples, "drover_queue_depth", &[("queue", "default")]),
        Some(0.0)
    );
    assert_eq!(
        sample(&samples, "drover_queue_depth", &[("queue", "idle")]),
        Some(0.0),
        "delayed jobs are not available yet"
    );
    let workers: f64 = ["idle", "busy"]
        .iter()
        .filter_map(|s| {
            sample(
                &samples,
                "drover_workers",
                &[("pool", "default"), ("state", s)],
            )
        })
        .sum();
    assert_eq!(workers, 2.0, "{text}");
    assert_eq!(
        sample(&samples, "drover_circuit_open", &[("pool", "default")]),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &samples,
            "drover_worker_restarts_total",
            &[("pool", "default")]
        ),
        Some(0.0)
    );
    let pss = sample(&samples, "drover_master_pss_bytes", &[]).expect("the master's PSS");
    assert!(pss > 100_000.0 && pss < 64e6, "master PSS {pss} bytes");

    let (code, body) = get(port, "/healthz");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"serving\""), "{body}");
    assert_eq!(get(port, "/nothing").0, 404);
    let (code, body) = http(port, "POST /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(code, 405, "{body}");
    let (code, body) = http(port, &format!("GET /{} HTTP/1.1\r\n", "x".repeat(20_000)));
    assert_eq!(code, 400, "an endless request head is refused: {body}");
    drover.stop().await;

    // The unserved queue's oldest job has waited since it was enqueued; a master that serves it
    // with a worker that cannot start is degraded.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let broken = Drover::start_worker(
        Some(db.url()),
        Some(db.dsn()),
        &[
            "--workers",
            "1",
            "--queue",
            "unserved",
            "--metrics-listen",
            &listen,
        ],
        &["sh", "-c", "exit 3"],
    );
    wait_for_listener(port).await;
    let mut last = (0, String::new());
    for _ in 0..100 {
        last = get(port, "/healthz");
        if last.0 == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last.0, 503, "a pool whose worker cannot start: {}", last.1);
    assert!(last.1.contains("degraded"), "{}", last.1);
    // Before the request: the gauge is read while the request is served, and on a busy machine
    // the answer took over 50 ms to come back.
    let at_least = unserved_since.elapsed().as_secs_f64();
    let (code, text) = get(port, "/metrics");
    assert_eq!(code, 200);
    let samples = parse_openmetrics(&text);
    let oldest = sample(
        &samples,
        "drover_queue_oldest_age_seconds",
        &[("queue", "unserved")],
    )
    .expect("the unserved queue's oldest wait");
    assert!(
        oldest >= at_least - 0.05 && oldest < at_least + 5.0,
        "the oldest of 5 jobs enqueued {at_least} s ago has waited {oldest} s"
    );
    assert_eq!(
        sample(&samples, "drover_queue_depth", &[("queue", "unserved")]),
        Some(5.0)
    );
    broken.stop().await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE queue = 'unserved'"
        )
        .await,
        5
    );
    db.stop().await;
}

#[tokio::test]
async fn with_history_on_each_completed_job_is_kept_with_its_payload_worker_and_usage() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let ids = enqueue(db.dsn(), 5, &["--display-name=App\\Jobs\\Kept", "--ms=20"]);
    enqueue(
        db.dsn(),
        1,
        &["--act=throw", "--first-seq=50", "--max-attempts=1"],
    );
    let drover = db.drover(&["--workers", "2", "--history-minutes", "60"]);
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(60),
    )
    .await;
    drover.stop().await;
    let rows = client
        .query(
            "SELECT h.id, h.attempt, h.class, h.payload, h.worker_pid, h.runtime_ms, h.cpu_ms,
                    h.memory_kib, h.wait_ms, h.finished_at >= h.started_at,
                    (SELECT pid FROM runs WHERE job_id = h.id AND event = 'finish')
             FROM drover.recent_jobs AS h ORDER BY h.id",
            &[],
        )
        .await
        .unwrap();
    let kept: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(kept, ids, "the five completed jobs, and not the failed one");
    for r in &rows {
        assert_eq!(r.get::<_, i32>(1), 1);
        assert_eq!(r.get::<_, &str>(2), "App\\Jobs\\Kept");
        let payload: serde_json::Value = serde_json::from_str(r.get::<_, &str>(3)).unwrap();
        assert_eq!(payload["displayName"], "App\\Jobs\\Kept");
        assert_eq!(
            r.get::<_, i32>(4),
            r.get::<_, i32>(10),
            "the worker that ran it"
        );
        // The master times a job from its `started` frame to its `done` frame as it reads them;
        // on a loaded machine the first can be read a few ms late, so half the job's 20 ms is the
        // floor (a run time not measured, or measured as the claim's, would be near 0).
        let runtime = r.get::<_, f64>(5);
        assert!(
            (10.0..5_000.0).contains(&runtime),
            "its run time is about its 20 ms: {runtime}"
        );
        assert!(r.get::<_, Option<f64>>(6).is_some_and(|cpu| cpu >= 0.0));
        assert!(r.get::<_, Option<i64>>(7).is_some_and(|kib| kib > 1024));
        assert!(r.get::<_, Option<f64>>(8).is_some_and(|w| w >= 0.0));
        assert!(r.get::<_, bool>(9));
    }
    db.stop().await;
}

/// The master's open file descriptors.
fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The local addresses of the sockets listening on `port` (the kernel's hex, from /proc/net/tcp
/// and tcp6: `0100007F:23E3` is 127.0.0.1:9187).
fn listening_on(port: u16) -> Vec<String> {
    let mut found = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(3) == Some(&"0A") && fields[1].ends_with(&format!(":{port:04X}")) {
                found.push(fields[1].to_string());
            }
        }
    }
    found
}

/// `GET /healthz` (with `extra` headers): its status and body, and the time from before the
/// connect to the answer's last byte.
fn timed_healthz(port: u16, extra: &str) -> (u16, String, Duration) {
    let started = std::time::Instant::now();
    let (code, _, body) = http_exchange(
        port,
        &format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n"),
    );
    (code, body, started.elapsed())
}

/// Issue 56's small doors: idle connections cannot starve `/healthz` (a liveness probe must not
/// restart a healthy master) nor take the master's descriptors, and `/metrics` behind a token,
/// on loopback when given a port alone.
#[tokio::test]
async fn healthz_answers_within_100ms_while_64_idle_connections_are_open_and_metrics_asks_for_its_token(
) {
    let db = Cluster::start().await;
    let port = free_port();
    let token = "0123456789abcdef-metrics-token";
    let drover = Drover::start_with_env(
        Some(db.url()),
        Some(db.dsn()),
        &["--workers", "1", "--metrics-listen", &format!(":{port}")],
        &[("DROVER_METRICS_TOKEN", token)],
    );
    wait_for_listener(port).await;
    assert_eq!(
        listening_on(port),
        [format!("0100007F:{port:04X}")],
        "a port alone is bound on 127.0.0.1, and only there"
    );
    let mut last = (0, String::new());
    for _ in 0..400 {
        last = get(port, "/healthz");
        if last.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        last,
        (200, "{\"health\":\"serving\"}\n".to_string()),
        "serving; without the token, the verdict alone"
    );

    // 64 connections that say nothing, each accepted (a descriptor in the master) before the
    // probe comes.
    let fds_before = open_fds(drover.pid());
    let idle: Vec<std::net::TcpStream> = (0..64)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    for _ in 0..100 {
        if open_fds(drover.pid()) >= fds_before + 64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (code, body, took) = timed_healthz(port, "");
    assert_eq!(code, 200, "/healthz with 64 idle connections open: {body}");
    assert!(
        took < Duration::from_millis(100),
        "/healthz took {took:?} (connect to last byte) with 64 idle connections open"
    );

    // /metrics asks for its token, idle connections or not; with it, /healthz shows its problems.
    let (code, head, body) = http_exchange(port, "GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(code, 401, "{body}");
    assert!(head.contains("\r\nWWW-Authenticate: Bearer"), "{head}");
    let wrong = http(
        port,
        "GET /metrics HTTP/1.1\r\nAuthorization: Bearer 0123456789abcdef-metrics-tokeN\r\n\r\n",
    );
    assert_eq!(wrong.0, 401, "{}", wrong.1);
    let bearer = format!("Authorization: Bearer {token}\r\n");
    let (code, text) = http(port, &format!("GET /metrics HTTP/1.1\r\n{bearer}\r\n"));
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("drover_workers{"), "{text}");
    assert!(!text.contains(token), "{text}");
    let (code, body, _) = timed_healthz(port, &bearer);
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("\"problems\":[]") && body.contains("\"phase\""),
        "{body}"
    );

    // A flood past the cap of open connections: the oldest idle ones are closed for the newest,
    // the master's descriptors stay bounded, and a probe is still answered.
    let flood: Vec<std::net::TcpStream> = (0..200)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fds = open_fds(drover.pid());
    assert!(
        fds <= fds_before + 128 + 10,
        "{fds} descriptors with {} connections open (before: {fds_before})",
        idle.len() + flood.len()
    );
    let (code, body, _) = timed_healthz(port, "");
    assert_eq!(code, 200, "/healthz past the cap: {body}");
    drop((idle, flood));

    let (status, _) = drover.status();
    assert!(
        !status.to_string().contains(token),
        "drover status shows the token"
    );
    let log = drover.stop().await;
    assert!(!log.contains(token), "the log shows the token:\n{log}");
    assert!(
        log.contains(&format!(
            "serving /metrics and /healthz on http://127.0.0.1:{port} (/metrics asks for the bearer token"
        )),
        "{log}"
    );
    assert!(!log.contains("not on loopback"), "{log}");
    db.stop().await;
}
