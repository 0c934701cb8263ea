//! The Laravel integration: `php artisan drover` runs the fixture app's jobs with Laravel's own
//! semantics, compared side by side with `queue:work` on the database driver. Every scenario runs
//! on Laravel 8.83 (Debian's package) and on Laravel 12.67 (the offline reference tree, the
//! package installed by Composer): `laravel8::NAME` and `laravel12::NAME`.

mod support;

use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::*;

fn signal(child: &Child, sig: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig);
}

/// Waits until `sql` counts 0 and stays there for `settle`.
async fn wait_drained(
    client: &tokio_postgres::Client,
    sql: &str,
    settle: Duration,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    let mut empty_since: Option<Instant> = None;
    loop {
        let n = count(client, sql).await;
        if n == 0 {
            let since = *empty_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= settle {
                return;
            }
        } else {
            empty_since = None;
        }
        assert!(
            Instant::now() < deadline,
            "{sql} still {n} after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The matrix's step after its first drain, the same under both runners: the failed job of the
/// `retry` batch pushed back with `php artisan queue:retry-batch ID`.
async fn retry_the_failed_batch(app: &LaravelApp, client: &tokio_postgres::Client) {
    let id: String = client
        .query_one(
            "SELECT id FROM public.job_batches WHERE name = 'retry'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    app.artisan(&["queue:retry-batch", &id]);
}

/// Waits until the `queue:work` processes drained `public.jobs` (empty for 2 s), restarting any
/// that exit (a timeout kills its worker), as supervisord would.
async fn drain_with_queue_work(
    app: &LaravelApp,
    client: &tokio_postgres::Client,
    workers: &mut [Spawned],
    args: &[&str],
) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut empty_since: Option<Instant> = None;
    loop {
        for (i, w) in workers.iter_mut().enumerate() {
            if w.try_wait().unwrap().is_some() {
                *w = app.spawn(args, &format!("queue-work-{i}.log"));
            }
        }
        if count(client, "SELECT count(*) FROM public.jobs").await == 0 {
            if empty_since.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(2) {
                return;
            }
        } else {
            empty_since = None;
        }
        assert!(
            Instant::now() < deadline,
            "queue:work did not drain the matrix"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the matrix through 4 `queue:work database` processes.
async fn run_with_queue_work(
    app: &LaravelApp,
    client: &tokio_postgres::Client,
) -> serde_json::Value {
    app.artisan(&["matrix:dispatch", "database"]);
    let args = [
        "queue:work",
        "database",
        "--queue=high,default",
        "--sleep=0",
        "--tries=1",
        "--timeout=60",
        "--backoff=0",
    ];
    let mut workers: Vec<Spawned> = (0..4)
        .map(|i| app.spawn(&args, &format!("queue-work-{i}.log")))
        .collect();
    drain_with_queue_work(app, client, &mut workers, &args).await;
    retry_the_failed_batch(app, client).await;
    drain_with_queue_work(app, client, &mut workers, &args).await;
    // SIGTERM, again every second to a worker still running: one was seen to miss its first
    // (Laravel 12, --sleep=0, it polled on for minutes), and the test waited for it forever.
    let deadline = Instant::now() + Duration::from_secs(10);
    for w in &mut workers {
        signal(w, Signal::SIGTERM);
    }
    for w in &mut workers {
        let mut next_signal = Instant::now() + Duration::from_secs(1);
        while w.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "a queue:work did not stop");
            if Instant::now() >= next_signal {
                signal(w, Signal::SIGTERM);
                next_signal += Duration::from_secs(1);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    serde_json::from_str(&app.artisan(&["matrix:report"])).unwrap()
}

async fn run_with_drover(
    app: &LaravelApp,
    client: &tokio_postgres::Client,
    spawn: &str,
) -> serde_json::Value {
    app.artisan(&["matrix:dispatch", "drover"]);
    let master = app.spawn(&["drover"], "drover.log");
    let drained = || {
        wait_drained(
            client,
            "SELECT count(*) FROM drover.jobs",
            Duration::from_secs(2),
            Duration::from_secs(90),
        )
    };
    drained().await;
    retry_the_failed_batch(app, client).await;
    drained().await;
    let log = stop_master(app, master).await;
    // The run really used the spawn mode it was given.
    assert_spawned(&log, spawn);
    serde_json::from_str(&app.artisan(&["matrix:report"])).unwrap()
}

async fn the_behaviour_matrix_matches_queue_work_on_the_database_driver(laravel: Laravel) {
    behaviour_matrix(laravel, "fork").await;
}

async fn the_behaviour_matrix_matches_queue_work_with_workers_started_by_exec(laravel: Laravel) {
    behaviour_matrix(laravel, "exec").await;
}

/// The matrix through queue:work and through drover with workers started as `spawn` says (fork,
/// the default, or exec).
async fn behaviour_matrix(laravel: Laravel, spawn: &str) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_SPAWN".into(), spawn.into()));
    // queue:work leaves a timed-out job reserved until retry_after; keep that short.
    app.env.push(("QUEUE_RETRY_AFTER".into(), "3".into()));

    let queue_work = run_with_queue_work(&app, &client).await;
    client
        .batch_execute(
            "TRUNCATE public.journal, public.failed_jobs, public.job_batches, public.widgets",
        )
        .await
        .unwrap();
    app.artisan(&["cache:clear"]);
    let drover = run_with_drover(&app, &client, spawn).await;

    let show = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap();
    // Decided otherwise by design (docs/limits.md): a job over a RateLimited limiter's rate is
    // held unclaimed on drover until its window ends, where queue:work releases it. Compared
    // apart, each to what it is to be.
    let (mut queue_work, mut drover) = (queue_work, drover);
    let mut apart = |label: &str| {
        let take = |report: &mut serde_json::Value| {
            report["events"]
                .as_object_mut()
                .and_then(|events| events.remove(label))
                .unwrap_or_else(|| panic!("no events for {label}"))
        };
        (take(&mut queue_work), take(&mut drover))
    };
    let waiter = apart("rate_limited_waiter");
    let window_ends = apart("rate_limited_waiter_window_ends");
    assert_eq!(
        waiter.0,
        serde_json::json!([
            "processing@1",
            "processed@1",
            "processing@2",
            "handle@2",
            "processed@2"
        ]),
        "queue:work releases the waiter while the limit is spent, runs it after"
    );
    assert_eq!(
        waiter.1,
        serde_json::json!(["processing@1", "handle@1", "processed@1"]),
        "drover holds the waiter unclaimed until the window ends: no release, attempt 1"
    );
    assert!(
        window_ends
            .0
            .to_string()
            .contains("saw_the_waiter_released@1")
            && window_ends
                .1
                .to_string()
                .contains("saw_the_waiter_waiting@1"),
        "{window_ends:?}"
    );
    for key in ["events", "failed", "batch"] {
        assert_eq!(
            queue_work[key],
            drover[key],
            "{key} differ\n--- queue:work ---\n{}\n--- drover ---\n{}",
            show(&queue_work[key]),
            show(&drover[key])
        );
    }
    // The matrix really exercised failures, retries and timeouts.
    assert_eq!(
        drover["failed"].as_object().unwrap().len(),
        6,
        "{}",
        show(&drover)
    );
    assert_eq!(
        drover["events"]["timeout_retry"].as_array().unwrap().len(),
        5
    );
    assert!(app.log("drover.log").contains("ran past its timeout"));
    // And each case did what it is there for (the same under both runners, checked above).
    let events = |label: &str| -> Vec<String> {
        drover["events"][label]
            .as_array()
            .unwrap_or_else(|| panic!("no events for {label}: {}", show(&drover)))
            .iter()
            .map(|e| e.as_str().unwrap().to_string())
            .collect()
    };
    let has = |label: &str, want: &[&str]| {
        let got = events(label);
        for w in want {
            assert!(got.iter().any(|e| e == w), "{label}: no {w} in {got:?}");
        }
    };
    let handles = |label: &str| {
        events(label)
            .iter()
            .filter(|e| e.starts_with("handle@"))
            .count()
    };
    has(
        "backoff_steps",
        &["waited_1s@2", "waited_2s@3", "processed@3"],
    );
    // Unique: ShouldBeUnique drops the copy dispatched while it runs; UntilProcessing and an
    // expired $uniqueFor queue it. The second dispatch at once is dropped by all three.
    assert_eq!(handles("multi_unique"), 1);
    assert_eq!(handles("multi_unique_until_processing"), 2);
    assert_eq!(handles("multi_unique_for"), 2);
    has("in_transaction", &["queued_before_commit@0", "processed@1"]);
    has("after_commit", &["held_until_commit@0", "processed@1"]);
    has(
        "after_commit_interface",
        &["held_until_commit@0", "processed@1"],
    );
    // A lock held from outside drover (here Cache::lock) is still Laravel's to enforce.
    assert_eq!(
        events("overlap_waiter"),
        [
            "processing@1",
            "processed@1",
            "processing@2",
            "handle@2",
            "processed@2"
        ],
        "overlap_waiter: released while the lock was held, run after"
    );
    has("overlap_lock_ends", &["saw_the_waiter_released@1"]);
    has("rate_limited_first", &["handle@1", "processed@1"]);
    assert_eq!(handles("skip_when_true"), 0);
    assert_eq!(handles("skip_when_false"), 1);
    assert_eq!(
        handles("cancelled_batch_1") + handles("cancelled_batch_2"),
        0
    );
    has("batch_3", &["processed@1"]);
    // The failed job of the `retry` batch, run again by queue:retry-batch.
    assert_eq!(
        events("retry_batch_fails_once"),
        [
            "processing@1",
            "handle@1",
            "failed_hook@1",
            "failed@1",
            "exception@1",
            "processing@1",
            "handle@1",
            "processed@1"
        ]
    );
    let batch = |name: &str| drover["batch"][name].clone();
    assert_eq!(batch("matrix")["total"], 3, "batch()->add()");
    assert_eq!(batch("matrix")["pending"], 0);
    assert_eq!(batch("cancelled")["cancelled"], true);
    assert_eq!(batch("retry")["pending"], 0, "the retried job recorded");
    assert_eq!(batch("retry")["failed_job_ids"], 0);
    // Where Laravel 8 lacks the feature the case names, it says so (under both runners).
    let (skip, batch_skip, after_commit) = match laravel {
        Laravel::V8 => (
            "skip_absent_on_this_laravel_uses_a_stand_in@0",
            "skip_if_batch_cancelled_absent_on_this_laravel_uses_a_stand_in@0",
            "should_queue_after_commit_absent_on_this_laravel_uses_after_commit_property@0",
        ),
        Laravel::V12 => (
            "uses_laravels_skip@0",
            "uses_laravels_skip_if_batch_cancelled@0",
            "uses_should_queue_after_commit@0",
        ),
    };
    has("skip_when_true", &[skip]);
    has("cancelled_batch_1", &[batch_skip]);
    has("after_commit_interface", &[after_commit]);
    // A delayed job without $backoff is retried after its delay on Laravel 12 (the payload's
    // `delay`, which Job::backoff() falls back to) and at once on Laravel 8 (no `delay` written).
    let retry = match laravel {
        Laravel::V8 => "retried_at_once@2",
        Laravel::V12 => "retried_after_its_delay@2",
    };
    assert!(
        drover["events"]["delayed_flaky"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(retry)),
        "{}",
        show(&drover["events"]["delayed_flaky"])
    );
    db.stop().await;
}

/// One stored payload as the comparison sees it: the JSON object, with what is random per
/// dispatch checked for its form and replaced by a placeholder (the uuid, the redis driver's
/// `id`, a batch's id, also inside the serialized command), an encrypted command replaced by its
/// decryption (checked to differ from it), and `(due in)`, the seconds its row or entry waits.
fn normalized_payload(entry: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value;
    let raw = entry["payload"].as_str().unwrap();
    let Value::Object(mut p) = serde_json::from_str(raw).unwrap() else {
        panic!("not an object: {raw}")
    };
    if let Some(uuid) = p.get("uuid").and_then(Value::as_str) {
        let dashes: Vec<usize> = uuid.match_indices('-').map(|(i, _)| i).collect();
        assert!(uuid.len() == 36 && dashes == [8, 13, 18, 23], "uuid {uuid}");
        p.insert("uuid".into(), "<uuid>".into());
    }
    if let Some(id) = p.get("id").and_then(Value::as_str) {
        assert!(
            id.len() == 32 && id.chars().all(|c| c.is_ascii_alphanumeric()),
            "id {id}"
        );
        p.insert("id".into(), "<random id>".into());
    }
    if let Some(Value::Object(data)) = p.get_mut("data") {
        if let Some(plain) = entry["decrypted"].as_str() {
            assert_ne!(data["command"].as_str(), Some(plain), "not encrypted");
            data.insert("command".into(), format!("decrypted:{plain}").into());
        }
        // A closure's serialization names its object (`self`) and signs itself (`hash`).
        for (marker, len) in [("s:4:\"self\";s:32:\"", 32), ("s:4:\"hash\";s:44:\"", 44)] {
            if let Some(command) = data.get("command").and_then(Value::as_str) {
                if let Some(at) = command.find(marker).map(|i| i + marker.len()) {
                    let mut c = command.to_string();
                    c.replace_range(at..at + len, &"#".repeat(len));
                    data.insert("command".into(), c.into());
                }
            }
        }
        if let Some(command) = data.get("command").and_then(Value::as_str) {
            let marker = "\"batchId\";s:36:\"";
            if let Some(at) = command.find(marker).map(|i| i + marker.len()) {
                let batch = command[at..at + 36].to_string();
                data.insert(
                    "command".into(),
                    command.replace(&batch, "<batch id>").into(),
                );
                if data.get("batchId").and_then(Value::as_str) == Some(&batch) {
                    data.insert("batchId".into(), "<batch id>".into());
                }
            }
        }
    }
    p.insert("(due in)".into(), entry["due_in"].clone());
    p
}

/// The fields of two payloads that differ, `field: left ≠ right` (`data.` fields one by one).
fn payload_differences(
    left: &serde_json::Map<String, serde_json::Value>,
    right: &serde_json::Map<String, serde_json::Value>,
) -> Vec<String> {
    use serde_json::Value;
    let flat = |m: &serde_json::Map<String, Value>| {
        let mut out = std::collections::BTreeMap::new();
        for (k, v) in m {
            match v {
                Value::Object(data) if k == "data" => {
                    for (dk, dv) in data {
                        out.insert(format!("data.{dk}"), dv.clone());
                    }
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        out
    };
    let (l, r) = (flat(left), flat(right));
    let show = |v: Option<&Value>| v.map_or("absent".to_string(), |v| v.to_string());
    let mut keys: Vec<&String> = l.keys().chain(r.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| l.get(*k) != r.get(*k))
        .map(|k| format!("{k}: {} ≠ {}", show(l.get(k)), show(r.get(k))))
        .collect()
}

/// The payloads drover writes are Laravel's own: the same probes (options as properties and
/// methods, delays, encrypted, unique, tagged, grouped, closure, chain, batch, bulk, string and
/// raw jobs) dispatched with the clock frozen through Laravel's database and redis drivers and
/// through drover, then compared field by field. Every difference is listed here and in
/// docs/laravel-compatibility.md ("Payload fields"); anything else fails.
async fn payloads_are_written_as_laravels_own_database_and_redis_drivers_write_them(
    laravel: Laravel,
) {
    use serde_json::Value;
    let db = Cluster::start().await;
    let redis = RedisServer::start();
    let port = redis.port.to_string();
    let app = LaravelApp::new_with(
        &db,
        laravel,
        &[("REDIS_HOST", "127.0.0.1"), ("REDIS_PORT", &port)],
    );
    let captured: Value = serde_json::from_str(&app.artisan(&["payloads:capture"])).unwrap();
    // Per driver, per probe, its payloads in label order.
    let of =
        |driver: &str| -> std::collections::BTreeMap<String, Vec<serde_json::Map<String, Value>>> {
            let probes = captured[driver].as_object().unwrap();
            probes
                .iter()
                .map(|(probe, entries)| {
                    let mut list: Vec<_> = entries
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(normalized_payload)
                        .collect();
                    list.sort_by_key(|p| p.get("label").map(|l| l.to_string()));
                    (probe.clone(), list)
                })
                .collect()
        };
    let (database, redis_payloads, drover) = (of("database"), of("redis"), of("drover"));
    let probes: Vec<&String> = drover.keys().collect();
    assert_eq!(probes.len(), 16, "{probes:?}");
    assert_eq!(database.keys().collect::<Vec<_>>(), probes);
    assert_eq!(redis_payloads.keys().collect::<Vec<_>>(), probes);
    let mut differences: Vec<String> = Vec::new();
    for probe in &probes {
        for (driver, theirs) in [("database", &database), ("redis", &redis_payloads)] {
            assert_eq!(
                theirs[*probe].len(),
                drover[*probe].len(),
                "{driver} {probe}"
            );
            for (their, ours) in theirs[*probe].iter().zip(&drover[*probe]) {
                let label = ours.get("label").and_then(Value::as_str).unwrap_or("-");
                for d in payload_differences(their, ours) {
                    differences.push(format!("{driver} vs drover, {probe}/{label}: {d}"));
                }
            }
        }
    }
    // What drover adds (tags on every job object, the group of a grouped job), what the redis
    // driver adds (its own id and attempt count, as RedisJob reads them), and bulk delays.
    let mut expected = Vec::new();
    for probe in &probes {
        for ours in &drover[*probe] {
            let label = ours.get("label").and_then(Value::as_str).unwrap_or("-");
            for driver in ["database", "redis"] {
                let at = format!("{driver} vs drover, {probe}/{label}");
                let delayed_bulk = label == "bulk_delayed" || label == "batch_delayed";
                if driver == "redis" && probe.as_str() != "raw" {
                    expected.push(format!("{at}: attempts: 0 ≠ absent"));
                }
                if laravel == Laravel::V8 && delayed_bulk {
                    // Laravel 8's bulk() ignores a job's delay (both drivers); drover keeps it,
                    // as Laravel 12 does.
                    expected.push(format!("{at}: (due in): 0 ≠ 2"));
                }
                if laravel == Laravel::V12 && driver == "redis" && delayed_bulk {
                    // Laravel 12's redis bulk() pushes a delayed job through later(), which
                    // writes its delay; its database bulk() does not, nor does drover's.
                    expected.push(format!("{at}: delay: 2 ≠ null"));
                }
                if driver == "redis" && probe.as_str() != "raw" {
                    expected.push(format!("{at}: id: \"<random id>\" ≠ absent"));
                }
                if probe.as_str() == "grouped" {
                    expected.push(format!("{at}: messageGroup: absent ≠ \"g1\""));
                }
                if !["string", "raw"].contains(&probe.as_str()) {
                    let tags = if probe.as_str() == "tagged" {
                        r#"["customer:42","invoices"]"#
                    } else {
                        "[]"
                    };
                    expected.push(format!("{at}: tags: absent ≠ {tags}"));
                }
            }
        }
    }
    let unexpected: Vec<&String> = differences
        .iter()
        .filter(|d| !expected.contains(d))
        .collect();
    let missing: Vec<&String> = expected
        .iter()
        .filter(|e| !differences.contains(e))
        .collect();
    assert!(
        unexpected.is_empty() && missing.is_empty(),
        "differences not expected: {unexpected:#?}\nexpected but not found: {missing:#?}\ndrover's payloads:\n{}",
        serde_json::to_string_pretty(&drover).unwrap()
    );

    // The probes exercise the fields they are meant to (drover's values, the drivers' the same).
    let one = |probe: &str| drover[probe][0].clone();
    let options = one("options");
    for (field, want) in [
        ("maxTries", serde_json::json!(3)),
        ("maxExceptions", serde_json::json!(2)),
        ("failOnTimeout", serde_json::json!(true)),
        ("timeout", serde_json::json!(7)),
        ("backoff", serde_json::json!("1,5,10")),
    ] {
        assert_eq!(options[field], want, "options.{field}");
    }
    let methods = one("methods");
    assert_eq!(methods["backoff"], "2,20", "backoff() with a DateTime step");
    let plain = one("plain");
    match laravel {
        Laravel::V8 => {
            // Laravel 8 reads $tries only, writes no createdAt, delay or batchId.
            assert_eq!(methods["maxTries"], Value::Null);
            for probe in &probes {
                for p in &drover[*probe] {
                    for field in ["createdAt", "delay"] {
                        assert!(!p.contains_key(field), "{probe}: {field}");
                    }
                    assert!(p["data"].get("batchId").is_none(), "{probe}: batchId");
                }
            }
            assert!(options["retryUntil"].as_i64().unwrap() > 1_600_000_000);
        }
        Laravel::V12 => {
            assert_eq!(methods["maxTries"], 4, "tries() read on Laravel 12");
            let created = plain["createdAt"].as_i64().unwrap();
            assert_eq!(options["retryUntil"].as_i64(), Some(created + 300));
            for (probe, delay) in [
                ("plain", Value::Null),
                ("delayed", serde_json::json!(2)),
                ("delayed_date", serde_json::json!(30)),
                ("delayed_zero", serde_json::json!(0)),
                ("bulk", Value::Null),
            ] {
                assert_eq!(one(probe)["delay"], delay, "{probe}: delay");
            }
            let batch = one("batch");
            assert_eq!(batch["data"]["batchId"], "<batch id>");
            assert_eq!(plain["data"]["batchId"], Value::Null);
        }
    }
    for (probe, due) in [("delayed", 2), ("delayed_date", 30), ("plain", 0)] {
        assert_eq!(one(probe)["(due in)"], due, "{probe}");
    }
    assert!(one("encrypted")["data"]["command"]
        .as_str()
        .unwrap()
        .starts_with("decrypted:O:21:\"App\\Jobs\\EncryptedJob\""));
    db.stop().await;
}

async fn drover_restart_reexports_config_drover_php_and_replaces_every_worker_under_load(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "2".into()));
    let master = start_master(&app, 2).await;
    app.artisan(&[
        "app:eval",
        "foreach (range(1, 12) as $i) { App\\Jobs\\SlowJob::dispatch(\"rolling_$i\"); }",
    ]);
    // A deploy: the master runs `php artisan drover --export` for the configuration, then
    // replaces the workers one by one while the jobs run.
    let out = app.artisan(&["drover:restart"]);
    assert!(out.contains("restarting"), "{out}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = app.command(&["drover:status", "--json"]).output().unwrap();
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let workers = s["pools"][0]["workers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if s["pools"][0]["generation"] == 1
            && workers.len() == 2
            && workers.iter().all(|w| w["generation"] == 1)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the workers were not replaced: {s:#}\n{}",
            app.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_drover_drained(&client, 500).await;
    assert_eq!(journal(&client, "processed").await.len(), 12);
    assert!(journal(&client, "failed").await.is_empty());
    let log = app.log("drover.log");
    assert!(
        !log.contains("reload: the new configuration is invalid"),
        "{log}"
    );
    assert!(
        !log.contains("failed ("),
        "the reload command failed: {log}"
    );
    stop_master(&app, master).await;
    db.stop().await;
}

/// Waits until drover's queue has been empty for `settle_ms`.
async fn wait_drover_drained(client: &tokio_postgres::Client, settle_ms: u64) {
    wait_drained(
        client,
        "SELECT count(*) FROM drover.jobs",
        Duration::from_millis(settle_ms),
        Duration::from_secs(30),
    )
    .await;
}

async fn a_dispatch_in_a_rolled_back_transaction_never_runs_and_after_commit_waits_for_the_commit(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.artisan(&["app:eval", r#"
        try { DB::transaction(function () { App\Jobs\OkJob::dispatch('rolled_back'); throw new RuntimeException('abort'); }); } catch (RuntimeException $e) {}
        DB::transaction(function () { App\Jobs\OkJob::dispatch('committed'); });
    "#]);
    app.env.push(("QUEUE_AFTER_COMMIT".into(), "1".into()));
    let inside = app.artisan(&[
        "app:eval",
        r#"
        DB::beginTransaction();
        App\Jobs\OkJob::dispatch('after_commit');
        $inside = DB::table('drover.jobs')->count();
        DB::commit();
        return $inside;
    "#,
    ]);
    assert_eq!(
        inside.trim(),
        "1",
        "after_commit: the job is inserted only at commit (1 = the earlier committed job)"
    );
    let master = start_master(&app, 4).await;
    wait_drover_drained(&client, 500).await;
    stop_master(&app, master).await;
    let mut done = journal(&client, "processed").await;
    done.sort();
    assert_eq!(done, vec!["after_commit", "committed"]);
    db.stop().await;
}

/// How many of 20 dispatches (`label_0` … `label_19`) returned with their commit already flushed
/// to the WAL, as the application's session sees it right after each.
const FLUSHED_AFTER_EACH_DISPATCH: &str = r#"
    $flushed = 0;
    for ($i = 0; $i < 20; $i++) {
        App\Jobs\OkJob::dispatch(getenv('LABEL') . "_$i");
        $flushed += DB::selectOne('SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn() AS f')->f ? 1 : 0;
    }
    return $flushed;
"#;

async fn lose_dispatches_on_database_crash_commits_a_dispatch_without_its_flush_and_only_outside_a_transaction(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    // By default a dispatch returns once its commit is on disk: the flush position has passed
    // it every time (allowing 2 for WAL that a background process wrote in between).
    app.env.push(("LABEL".into(), "durable".into()));
    let flushed: u32 = app
        .artisan(&["app:eval", FLUSHED_AFTER_EACH_DISPATCH])
        .trim()
        .parse()
        .unwrap();
    assert!(
        flushed >= 18,
        "{flushed} of 20 default dispatches were flushed when they returned"
    );
    app.env
        .push(("DROVER_LOSE_DISPATCHES_ON_CRASH".into(), "1".into()));
    app.env.push(("LABEL".into(), "async".into()));
    // Opted in, the WAL writer flushes them later (every 200 ms): most return unflushed.
    let flushed: u32 = app
        .artisan(&["app:eval", FLUSHED_AFTER_EACH_DISPATCH])
        .trim()
        .parse()
        .unwrap();
    assert!(
        flushed <= 10,
        "{flushed} of 20 opted-in dispatches were flushed when they returned"
    );
    // Inside the application's transaction its own commit decides, and the setting never
    // outlives the dispatch's statement; a bulk dispatch and a grouped one (drover.enqueue) take
    // the same path.
    let seen = app.artisan(&[
        "app:eval",
        r#"
        App\Jobs\GroupJob::dispatch('g', 'g:0');
        App\Jobs\GroupJob::dispatch('g', 'g:1');
        $inside = DB::transaction(function () {
            App\Jobs\OkJob::dispatch('in_transaction');
            return DB::selectOne('SHOW synchronous_commit')->synchronous_commit;
        });
        $flushed = DB::selectOne('SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn() AS f')->f ? 'flushed' : 'unflushed';
        Queue::connection('drover')->bulk([new App\Jobs\OkJob('bulk_0'), new App\Jobs\OkJob('bulk_1')]);
        App\Jobs\OkJob::dispatch('after_bulk');
        return "$inside $flushed " . DB::selectOne('SHOW synchronous_commit')->synchronous_commit;
    "#,
    ]);
    assert_eq!(seen.trim(), "on flushed on");
    let master = start_master(&app, 4).await;
    wait_drover_drained(&client, 500).await;
    stop_master(&app, master).await;
    let mut done = journal(&client, "processed").await;
    done.sort();
    let mut expected: Vec<String> = (0..20)
        .flat_map(|i| [format!("durable_{i}"), format!("async_{i}")])
        .chain(
            [
                "in_transaction",
                "bulk_0",
                "bulk_1",
                "after_bulk",
                "g:0",
                "g:1",
            ]
            .map(String::from),
        )
        .collect();
    expected.sort();
    assert_eq!(done, expected);
    assert_eq!(journal(&client, "group_end").await, vec!["g:0", "g:1"]);
    // A value that is not a boolean is refused, naming the key and the fix.
    let out = app
        .command(&[
            "app:eval",
            "config(['queue.connections.drover.lose_dispatches_on_database_crash' => 'false']); App\\Jobs\\OkJob::dispatch('never');",
        ])
        .output()
        .unwrap();
    let refused = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{refused}");
    assert!(
        // The console wraps the message anywhere, words included.
        refused
            .split_whitespace()
            .collect::<String>()
            .contains("lose_dispatches_on_database_crashmustbetrueorfalse,got'false'"),
        "{refused}"
    );
    db.stop().await;
}

/// Dispatches two jobs, then counts the dispatch statements this session keeps prepared.
const DISPATCH_TWICE_AND_COUNT_PREPARED: &str = r#"
    App\Jobs\OkJob::dispatch(getenv('LABEL') . '_1');
    App\Jobs\OkJob::dispatch(getenv('LABEL') . '_2');
    return DB::selectOne("SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE 'INSERT INTO drover.jobs%'")->n;
"#;

const DISPATCH_AFTER_DEALLOCATE_ALL: &str = r#"
    $kept = fn () => DB::selectOne("SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE 'INSERT INTO drover.jobs%'")->n;
    App\Jobs\OkJob::dispatch('native_3');
    App\Jobs\GroupJob::dispatch('g', 'g:0');
    DB::unprepared('DEALLOCATE ALL');
    App\Jobs\GroupJob::dispatch('g', 'g:1');
    App\Jobs\OkJob::dispatch('native_4');
    $out = [$kept()];
    DB::unprepared('DISCARD ALL');
    try {
        DB::transaction(function () { App\Jobs\OkJob::dispatch('rolled_back'); });
        $out[] = 'none';
    } catch (Illuminate\Database\QueryException $e) {
        $out[] = $e->errorInfo[0] ?? $e->getPrevious()?->errorInfo[0] ?? 'unknown';
    }
    App\Jobs\OkJob::dispatch('native_5');
    $out[] = $kept();
    return implode(' ', $out);
"#;

async fn a_dispatch_prepares_its_insert_once_per_connection_unless_the_connection_emulates_prepares(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    // Native prepares (Laravel's default): one named statement, kept for the second dispatch.
    app.env.push(("LABEL".into(), "native".into()));
    let kept = app.artisan(&["app:eval", DISPATCH_TWICE_AND_COUNT_PREPARED]);
    assert_eq!(kept.trim(), "1");
    // The application drops its connection's statements: the next dispatch prepares again (a
    // grouped one, drover.enqueue, too); one inside a transaction fails with that transaction
    // (PostgreSQL aborted it), the next works.
    let after = app.artisan(&["app:eval", DISPATCH_AFTER_DEALLOCATE_ALL]);
    assert_eq!(
        after.trim(),
        "1 26000 1",
        "kept after a retry, the error inside a transaction, kept again"
    );
    // Emulated (as behind a transaction pooler): nothing is kept on the server.
    app.env.push(("LABEL".into(), "emulated".into()));
    app.env
        .push(("FIXTURE_EMULATE_PREPARES".into(), "1".into()));
    let kept = app.artisan(&["app:eval", DISPATCH_TWICE_AND_COUNT_PREPARED]);
    assert_eq!(kept.trim(), "0");
    let master = start_master(&app, 4).await;
    wait_drover_drained(&client, 500).await;
    stop_master(&app, master).await;
    let mut done = journal(&client, "processed").await;
    done.sort();
    assert_eq!(
        done,
        vec![
            "emulated_1",
            "emulated_2",
            "g:0",
            "g:1",
            "native_1",
            "native_2",
            "native_3",
            "native_4",
            "native_5"
        ]
    );
    assert_eq!(journal(&client, "group_end").await, vec!["g:0", "g:1"]);
    db.stop().await;
}

async fn queues_are_served_in_the_pools_priority_order(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    app.artisan(&[
        "app:eval",
        r#"
        foreach ([1, 2, 3] as $i) { App\Jobs\OkJob::dispatch("default_$i"); }
        foreach ([1, 2, 3] as $i) { App\Jobs\OkJob::dispatch("high_$i")->onQueue('high'); }
    "#,
    ]);
    let master = start_master(&app, 1).await;
    wait_drover_drained(&client, 300).await;
    stop_master(&app, master).await;
    assert_eq!(
        journal(&client, "handle").await,
        vec![
            "high_1",
            "high_2",
            "high_3",
            "default_1",
            "default_2",
            "default_3"
        ]
    );
    db.stop().await;
}

/// ... and traces: the jobs dispatched in the application's current trace — the OpenTelemetry
/// API's current span (the API's stand-in, php-client/tests/fixtures/opentelemetry-api.php: the
/// package cannot be installed here), or on Laravel 11+ a `traceparent` kept in Laravel's
/// Context — are each one trace under the dispatching span, `send` → `process` (one per attempt,
/// the failed one an error) → `settle`, received by an OTLP receiver that decodes them with the
/// OpenTelemetry project's own protocol types; a job dispatched outside a trace has one of its
/// own.
async fn metrics_count_laravel_jobs_by_class_with_releases_and_failures_through_laravels_failer(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let receiver = otlp_receiver::OtlpReceiver::start().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    app.env
        .push(("DROVER_TRACES_ENDPOINT".into(), receiver.endpoint()));
    let (request, context_request) = ("b7ad6b7169203331", "00f067aa0ba902b7");
    let (in_span, in_context) = (
        "0af7651916cd43dd8448eb211c80319c",
        "4bf92f3577b34da6a3ce929d0e0e4736",
    );
    let stand_in = root().join("php-client/tests/fixtures/opentelemetry-api.php");
    app.artisan(&[
        "app:eval",
        &format!(
            r#"
        require '{stand_in}';
        $scope = OpenTelemetry\API\Trace\Span::wrap(
            OpenTelemetry\API\Trace\SpanContext::create('{in_span}', '{request}', 1))->activate();
        App\Jobs\OkJob::dispatch("ok_1");
        App\Jobs\FailingJob::dispatch("fails");
        $scope->detach();
        $context = class_exists(Illuminate\Support\Facades\Context::class);
        if ($context) {{
            Illuminate\Support\Facades\Context::addHidden('traceparent', '00-{in_context}-{context_request}-01');
        }}
        App\Jobs\OkJob::dispatch("ok_2");
        if ($context) {{ Illuminate\Support\Facades\Context::forgetHidden('traceparent'); }}
        App\Jobs\OkJob::dispatch("ok_3");
    "#,
            stand_in = stand_in.display()
        ),
    ]);
    let master = start_master(&app, 1).await;
    wait_drover_drained(&client, 300).await;
    stop_master(&app, master).await; // the recorder writes its last minutes at exit
    let spans = receiver
        .wait_for(Duration::from_secs(10), |spans| {
            spans.iter().filter(|s| s.name == "settle default").count() == 5
        })
        .await;
    let of = |trace: &str, name: &str, class: &str| -> Vec<otlp_receiver::ReceivedSpan> {
        spans
            .iter()
            .filter(|s| s.trace_id == trace && s.name == name)
            .filter(|s| {
                name == "settle default" || s.attributes["messaging.drover.job.class"] == class
            })
            .cloned()
            .collect()
    };
    for class in ["App\\Jobs\\OkJob", "App\\Jobs\\FailingJob"] {
        let send = of(in_span, "send default", class);
        assert_eq!(send.len(), 1, "{class}: {spans:#?}");
        assert_eq!(
            (send[0].kind.as_str(), send[0].parent_span_id.as_str()),
            ("producer", request)
        );
        for p in of(in_span, "process default", class) {
            assert_eq!(
                p.parent_span_id, send[0].span_id,
                "{class}'s attempts under its send span"
            );
            assert_eq!(p.attributes["messaging.system"], "drover");
            assert_eq!(p.attributes["messaging.destination.name"], "default");
        }
    }
    assert_eq!(of(in_span, "process default", "App\\Jobs\\OkJob").len(), 1);
    let failing = of(in_span, "process default", "App\\Jobs\\FailingJob");
    let outcomes: Vec<(&str, &str)> = failing
        .iter()
        .map(|p| {
            (
                p.attributes["messaging.drover.outcome"].as_str(),
                p.status.as_str(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [("released", "unset"), ("failed", "error")],
        "{failing:#?}"
    );
    assert_eq!(
        of(in_span, "settle default", "").len(),
        3,
        "one settle per attempt"
    );
    let context_sends = of(in_context, "send default", "App\\Jobs\\OkJob");
    match laravel {
        Laravel::V8 => assert!(context_sends.is_empty(), "Laravel 8 has no Context"),
        _ => assert_eq!(
            context_sends
                .iter()
                .map(|s| s.parent_span_id.as_str())
                .collect::<Vec<_>>(),
            [context_request],
            "the traceparent kept in Laravel's Context"
        ),
    }
    let roots = spans
        .iter()
        .filter(|s| s.name == "process default" && s.parent_span_id.is_empty())
        .count();
    let untraced = if laravel == Laravel::V8 { 2 } else { 1 };
    assert_eq!(
        roots, untraced,
        "a job dispatched outside a trace is a trace of its own"
    );
    let rows: Vec<(String, i64, i64, i64, i64)> = client
        .query(
            "SELECT class, sum(completed)::int8, sum(released)::int8, sum(failed)::int8,
                    sum((cpu->>'n')::int8)::int8
             FROM drover.metrics GROUP BY class ORDER BY class",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    // FailingJob ($tries = 2): released by Laravel after its first attempt, failed through
    // Laravel's failer after its second. Every attempt has a CPU reading.
    assert_eq!(
        rows,
        vec![
            ("App\\Jobs\\FailingJob".to_string(), 0, 1, 1, 2),
            ("App\\Jobs\\OkJob".to_string(), 3, 0, 0, 3),
        ]
    );
    db.stop().await;
}

/// A one-shot HTTP server standing in for a Slack incoming webhook: every request's body, in order.
fn webhook() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // Read the head, then Content-Length bytes of body.
            let body = loop {
                let Ok(n) = stream.read(&mut buf) else {
                    break None;
                };
                if n == 0 {
                    break None;
                }
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break Some(body.to_string());
                    }
                }
            };
            if let Some(body) = body {
                seen.lock().unwrap().push(body);
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, bodies)
}

async fn a_queue_waiting_past_its_threshold_fires_long_wait_detected_once_per_cooldown_and_notifies_slack(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let (port, posted) = webhook();
    let mut app = LaravelApp::new(&db, laravel);
    // The pool serves `high` only: the job on `default` waits. Threshold 1 s; a short lease so
    // the master checks every 2 s.
    app.env.push(("DROVER_QUEUES".into(), "high".into()));
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    app.env.push(("DROVER_WAIT_THRESHOLD".into(), "1".into()));
    app.env.push(("DROVER_LEASE".into(), "4".into()));
    app.env.push((
        "DROVER_TEST_SLACK_URL".into(),
        format!("http://127.0.0.1:{port}/hook"),
    ));
    app.artisan(&["app:eval", "App\\Jobs\\OkJob::dispatch('waits');"]);
    let master = start_master(&app, 1).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while journal(&client, "long_wait").await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "no LongWaitDetected within 30 s:\n{}",
            app.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Three more checks: the cooldown (300 s) holds the alert to one.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let log = stop_master(&app, master).await;
    assert_eq!(
        journal(&client, "long_wait").await,
        vec!["drover:default"],
        "one alert per cooldown:\n{log}"
    );
    assert!(
        log.contains("long wait: the oldest job of queue default has waited"),
        "{log}"
    );
    let posted = posted.lock().unwrap().clone();
    assert_eq!(posted.len(), 1, "one Slack message: {posted:?}");
    let message: serde_json::Value = serde_json::from_str(&posted[0]).unwrap();
    assert_eq!(message["channel"], "#queues");
    let text = message["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("\"default\" queue on the \"drover\" connection has a wait time of"),
        "{text}"
    );
    let noted: i64 = client
        .query_one(
            "SELECT count(*) FROM drover.long_waits WHERE queue = 'default'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(noted, 1);
    db.stop().await;
}

async fn maintenance_mode_holds_jobs_unless_the_pool_is_forced(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    app.artisan(&["down"]);
    app.artisan(&[
        "app:eval",
        "App\\Jobs\\OkJob::dispatch('during_maintenance');",
    ]);
    let master = start_master(&app, 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        journal(&client, "handle").await.is_empty(),
        "a job ran in maintenance mode"
    );
    app.artisan(&["up"]);
    wait_drover_drained(&client, 300).await;
    stop_master(&app, master).await;
    assert_eq!(journal(&client, "handle").await, vec!["during_maintenance"]);

    // With force, the pool works through maintenance mode.
    app.env.push(("DROVER_FORCE".into(), "1".into()));
    app.artisan(&["down"]);
    app.artisan(&["app:eval", "App\\Jobs\\OkJob::dispatch('forced');"]);
    let master = start_master(&app, 1).await;
    wait_drover_drained(&client, 300).await;
    stop_master(&app, master).await;
    app.artisan(&["up"]);
    assert_eq!(
        journal(&client, "handle").await,
        vec!["during_maintenance", "forced"]
    );
    db.stop().await;
}

async fn queue_restart_replaces_every_worker_and_pause_holds_jobs_until_continue(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "2".into()));
    let master = start_master(&app, 2).await;
    let pids = |s: &serde_json::Value| -> Vec<i64> {
        s["pools"][0]["workers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["pid"].as_i64())
            .collect()
    };
    let before: serde_json::Value =
        serde_json::from_str(&app.artisan(&["drover:status", "--json"])).unwrap();

    // queue:restart: the workers tell the master, which reloads — every worker replaced, one by
    // one, each after its current job.
    app.artisan(&["queue:restart"]);
    app.artisan(&[
        "app:eval",
        "foreach (range(1, 6) as $i) { App\\Jobs\\SlowJob::dispatch(\"restart_$i\"); }",
    ]);
    wait_drover_drained(&client, 500).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let out = app.command(&["drover:status", "--json"]).output().unwrap();
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let new = pids(&s);
        if new.len() == 2 && new.iter().all(|p| !pids(&before).contains(p)) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "workers were not replaced: before {before} now {s}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(journal(&client, "processed").await.len(), 6);
    assert_eq!(after["totals"]["failed"], 0);

    // Pause: no job starts; status exits 1. Continue: it runs.
    app.artisan(&["drover:pause"]);
    let status = app.command(&["drover:status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(1), "status while paused");
    // A user the control socket does not answer is told so, not that no master runs.
    let mut as_nobody = std::process::Command::new("runuser");
    as_nobody.args(["-u", "nobody", "--", "php"]);
    let template = app.command(&["drover:status"]);
    as_nobody
        .args(template.get_args())
        .current_dir(&app.dir)
        .env_remove("DATABASE_URL")
        .envs(app.env.iter().map(|(k, v)| (k, v)));
    let denied = as_nobody.output().unwrap();
    let said = String::from_utf8_lossy(&denied.stdout).into_owned()
        + &String::from_utf8_lossy(&denied.stderr);
    assert_eq!(denied.status.code(), Some(4), "{said}");
    assert!(
        said.contains("permission denied on the drover control socket"),
        "{said}"
    );
    assert!(!said.contains("no drover master is running"), "{said}");
    app.artisan(&["app:eval", "App\\Jobs\\OkJob::dispatch('after_pause');"]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !journal(&client, "handle")
            .await
            .contains(&"after_pause".to_string()),
        "a job ran while paused"
    );
    app.artisan(&["drover:continue"]);
    wait_drover_drained(&client, 300).await;
    assert!(journal(&client, "processed")
        .await
        .contains(&"after_pause".to_string()));

    // One pool alone, as Horizon's pause-supervisor.
    let refused = app
        .command(&["drover:pause", "--pool=nope"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stdout).into_owned()
        + &String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("no pool named \"nope\""), "{said}");
    app.artisan(&["drover:pause", "--pool=default"]);
    let status = app.command(&["drover:status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(1), "status with a pool paused");
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("PAUSED (drover:continue --pool=default)"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    app.artisan(&["drover:continue", "--pool=default"]);
    let status = app.command(&["drover:status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(0), "serving again");
    stop_master(&app, master).await;
    let gone = app.command(&["drover:status"]).output().unwrap();
    assert_eq!(gone.status.code(), Some(2), "status with no master");
    db.stop().await;
}

async fn failed_jobs_are_listed_retried_and_forgotten_with_laravels_own_commands(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    app.artisan(&["app:eval", "App\\Jobs\\ManualFailJob::dispatch('to_retry'); App\\Jobs\\ManualFailJob::dispatch('to_forget');"]);
    let master = start_master(&app, 1).await;
    wait_count(
        &client,
        "SELECT count(*) FROM public.failed_jobs",
        2,
        Duration::from_secs(30),
    )
    .await;
    // Logged by Laravel's failer: the master deletes the job and keeps no second copy.
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.failed_jobs").await,
        0
    );
    let listed = app.artisan(&["queue:failed"]);
    assert!(
        listed.contains("ManualFailJob") && listed.contains("drover"),
        "{listed}"
    );

    // queue:retry puts the job back on the drover connection; it runs (and fails) again.
    let uuid = |label: &str| {
        let label = label.to_string();
        let client = &client;
        async move {
            client
                .query_one(
                    "SELECT uuid FROM public.failed_jobs WHERE payload::json->>'label' = $1",
                    &[&label],
                )
                .await
                .unwrap()
                .get::<_, String>(0)
        }
    };
    let retry = uuid("to_retry").await;
    // Laravel's queue:retry pushes the job before it forgets the failed_jobs row. A worker fed at
    // once can fail the job again before that forget, and the failer's insert then collides with
    // the old row's uuid. Paused, the retried job waits until queue:retry is done.
    app.artisan(&["drover:pause"]);
    app.artisan(&["queue:retry", &retry]);
    app.artisan(&["drover:continue"]);
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'to_retry' AND event = 'handle'",
        2,
        Duration::from_secs(30),
    )
    .await;
    wait_count(
        &client,
        "SELECT count(*) FROM public.failed_jobs",
        2,
        Duration::from_secs(30),
    )
    .await;
    let forget = uuid("to_forget").await;
    app.artisan(&["queue:forget", &forget]);
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        1
    );
    app.artisan(&["queue:flush"]);
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        0
    );
    stop_master(&app, master).await;
    db.stop().await;
}

async fn an_idle_worker_starts_a_new_job_at_once_not_after_its_sleep(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    let master = start_master(&app, 1).await;
    // Idle for longer than the pool's `sleep` (3 s): a polling worker would be asleep now.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    app.artisan(&["app:eval", "App\\Jobs\\OkJob::dispatch('prompt');"]);
    // From the dispatch's return: the artisan process's own boot (0.1-0.6 s, more on a loaded
    // host) is not the worker's pickup.
    let dispatched = Instant::now();
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE event = 'handle'",
        1,
        Duration::from_secs(10),
    )
    .await;
    let waited = dispatched.elapsed();
    // A worker asleep for its 3 s would show.
    assert!(
        waited < Duration::from_millis(2000),
        "pickup took {waited:?}"
    );
    stop_master(&app, master).await;
    db.stop().await;
}

/// Polls `php artisan drover:status` until it exits with `code`; returns what it printed.
async fn wait_status_exit(app: &LaravelApp, code: i32, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let out = app.command(&["drover:status"]).output().unwrap();
        if out.status.code() == Some(code) {
            return String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
        }
        assert!(
            Instant::now() < deadline,
            "drover:status never exited {code} (last {:?}):\n{}",
            out.status.code(),
            app.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the pool runs `processes` serving workers of `generation`, every one of them in
/// `release` (its /proc/PID/cwd), and returns their PIDs.
async fn wait_workers_in(
    app: &LaravelApp,
    generation: u64,
    processes: usize,
    release: &std::path::Path,
) -> Vec<i64> {
    let release = release.canonicalize().unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let out = app.command(&["drover:status", "--json"]).output().unwrap();
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let workers = s["pools"][0]["workers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let pids: Vec<i64> = workers.iter().filter_map(|w| w["pid"].as_i64()).collect();
        let cwds: Vec<std::path::PathBuf> = pids.iter().map(|p| process_cwd(*p)).collect();
        if s["pools"][0]["generation"] == generation
            && workers.len() == processes
            && workers.iter().all(|w| {
                w["generation"] == generation && (w["state"] == "idle" || w["state"] == "busy")
            })
            && cwds.iter().all(|c| *c == release)
        {
            return pids;
        }
        assert!(
            Instant::now() < deadline,
            "wanted {processes} workers of generation {generation} in {}; status: {s:#}\nworkers' cwd: {cwds:?}\n{}",
            release.display(),
            app.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A deploy with symlinked releases, as Envoyer, Deployer and Forge do it: the master is started
/// through `current`, and each `ln -sfn` + reload must run the release `current` points to now —
/// its code (the workers' working directory) and its config/drover.php (2 or 3 processes).
async fn a_reload_after_ln_sfn_runs_the_new_release_a_rollback_the_old_one_and_a_deleted_release_is_never_needed(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    let site = Site::new(laravel);
    site.ship("A", 2);
    site.ship("B", 3);
    site.switch_to("A");
    // `php /site/current/artisan drover`, as the unit's ExecStart runs it.
    app.dir = site.current();
    let mut master = app.spawn(&["drover"], "drover.log");
    wait_workers_in(&app, 0, 2, &site.release_dir("A")).await;
    let dispatch = |from: usize, to: usize| {
        format!("foreach (range({from}, {to}) as $i) {{ App\\Jobs\\SlowJob::dispatch(\"deploy_$i\"); }}")
    };
    app.artisan(&["app:eval", &dispatch(1, 20)]);

    // Deploy B: new code, new config (3 processes).
    site.switch_to("B");
    signal(&master, Signal::SIGHUP);
    wait_workers_in(&app, 1, 3, &site.release_dir("B")).await;
    app.artisan(&["app:eval", &dispatch(21, 30)]);

    // Roll back to A.
    site.switch_to("A");
    signal(&master, Signal::SIGHUP);
    wait_workers_in(&app, 2, 2, &site.release_dir("A")).await;

    // Deploy B again and delete A first, as a deploy tool prunes old releases: the master,
    // started from A, never needs it.
    site.switch_to("B");
    std::fs::remove_dir_all(site.release_dir("A")).unwrap();
    app.artisan(&["app:eval", &dispatch(31, 40)]);
    signal(&master, Signal::SIGHUP);
    wait_workers_in(&app, 3, 3, &site.release_dir("B")).await;

    wait_drover_drained(&client, 500).await;
    let mut done = journal(&client, "processed").await;
    done.sort();
    let mut want: Vec<String> = (1..=40).map(|i| format!("deploy_{i}")).collect();
    want.sort();
    assert_eq!(
        done, want,
        "every job processed exactly once across the deploys"
    );
    assert!(journal(&client, "failed").await.is_empty());
    app.artisan(&["drover:terminate"]);
    let status = master.wait().unwrap();
    let log = app.log("drover.log");
    assert!(status.success(), "{status}:\n{log}");
    for bad in [
        "reload: the new configuration is invalid",
        "take effect at the next start",
        "circuit opened",
        "failed (",
    ] {
        assert!(!log.contains(bad), "the log says {bad:?}:\n{log}");
    }
    db.stop().await;
}

/// The deploy verbs of Forge's and Envoyer's scripts after a symlinked deploy: `queue:restart`
/// makes the master reload — a new zygote from the release `current` points to now — so every
/// job dispatched after it runs the new release's code (it used to fork new workers from the old
/// zygote: 0 of 10 did); `horizon:terminate`, without Horizon, does the same (a rollback here).
async fn queue_restart_and_horizon_terminate_after_a_symlinked_deploy_run_the_new_release(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    let site = Site::new(laravel);
    site.ship("A", 2);
    site.ship("B", 2);
    site.switch_to("A");
    app.dir = site.current();
    let master = app.spawn(&["drover"], "drover.log");
    wait_workers_in(&app, 0, 2, &site.release_dir("A")).await;
    let probes = |from: usize, to: usize| {
        format!("foreach (range({from}, {to}) as $i) {{ App\\Jobs\\ReleaseProbe::dispatch(\"probe_$i\"); }}")
    };
    app.artisan(&["app:eval", &probes(1, 3)]);
    wait_drover_drained(&client, 200).await;

    // Deploy B as the tools do: switch the symlink, then the script's last line.
    site.switch_to("B");
    app.artisan(&["queue:restart"]);
    wait_workers_in(&app, 1, 2, &site.release_dir("B")).await;
    app.artisan(&["app:eval", &probes(4, 13)]);
    wait_drover_drained(&client, 200).await;

    // Roll back to A with a Horizon-era script's verb.
    site.switch_to("A");
    let said = app.artisan(&["horizon:terminate"]);
    assert!(said.contains("Horizon is not installed"), "{said}");
    wait_workers_in(&app, 2, 2, &site.release_dir("A")).await;
    app.artisan(&["app:eval", &probes(14, 16)]);
    wait_drover_drained(&client, 200).await;

    let name = |i: usize| format!("probe_{i}");
    // Two workers: in any order within a release.
    let ran_in = |mut labels: Vec<String>| {
        labels.sort_by_key(|l| l[6..].parse::<usize>().unwrap());
        labels
    };
    assert_eq!(
        ran_in(journal(&client, "release:A").await),
        [1, 2, 3, 14, 15, 16].map(name).to_vec()
    );
    assert_eq!(
        ran_in(journal(&client, "release:B").await),
        (4..=13).map(name).collect::<Vec<_>>(),
        "every job after queue:restart ran the new release's code"
    );
    let log = stop_master(&app, master).await;
    assert_eq!(
        log.matches("reloading: re-reading the configuration")
            .count(),
        2,
        "one reload per restart, however many workers told of it:\n{log}"
    );
    db.stop().await;
}

/// A release whose workers cannot boot: the circuit opens, the old workers keep serving, and
/// `drover:status` says degraded (exit 3) instead of "running"; a rollback starts at once.
async fn a_release_that_cannot_boot_leaves_the_old_workers_serving_status_degraded_and_a_rollback_recovers(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    let site = Site::new(laravel);
    site.ship("A", 2);
    site.ship_unbootable("C", 2);
    site.switch_to("A");
    app.dir = site.current();
    let mut master = app.spawn(&["drover"], "drover.log");
    let old = wait_workers_in(&app, 0, 2, &site.release_dir("A")).await;
    let status = app.command(&["drover:status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(0), "serving");

    site.switch_to("C");
    signal(&master, Signal::SIGHUP);
    let degraded = wait_status_exit(&app, 3, Duration::from_secs(30)).await;
    assert!(degraded.contains("circuit open"), "{degraded}");
    assert!(app
        .log("drover.log")
        .contains("this release cannot boot its workers"));
    // The old release's workers still run jobs.
    app.artisan(&[
        "app:eval",
        "foreach (range(1, 5) as $i) { App\\Jobs\\OkJob::dispatch(\"during_$i\"); }",
    ]);
    wait_drover_drained(&client, 300).await;
    assert_eq!(journal(&client, "processed").await.len(), 5);
    let out = app.command(&["drover:status", "--json"]).output().unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let serving: Vec<i64> = s["pools"][0]["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["state"] == "idle" || w["state"] == "busy")
        .filter_map(|w| w["pid"].as_i64())
        .collect();
    assert!(
        !serving.is_empty() && serving.iter().all(|p| old.contains(p)),
        "the old workers serve: {s:#}"
    );

    // Roll back: the reload starts A's workers at once, without waiting out the open circuit.
    site.switch_to("A");
    signal(&master, Signal::SIGHUP);
    let rolled_back = Instant::now();
    wait_workers_in(&app, 2, 2, &site.release_dir("A")).await;
    assert!(
        rolled_back.elapsed() < Duration::from_secs(20),
        "the rollback waited {:?} (the circuit's pause is 30 s)",
        rolled_back.elapsed()
    );
    let status = app.command(&["drover:status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(0), "serving again");
    app.artisan(&["app:eval", "App\\Jobs\\OkJob::dispatch('after_rollback');"]);
    wait_drover_drained(&client, 300).await;
    assert_eq!(journal(&client, "processed").await.len(), 6);
    assert!(journal(&client, "failed").await.is_empty());
    app.artisan(&["drover:terminate"]);
    assert!(
        master.wait().unwrap().success(),
        "{}",
        app.log("drover.log")
    );
    db.stop().await;
}

/// As Horizon: an environment that no entry of `drover.environments` matches runs no workers. The
/// master still starts (a reload picks pools up), says why, and status says degraded.
async fn an_environment_without_an_entry_runs_no_workers_and_says_so(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env
        .push(("DROVER_FIXTURE_ENTRY".into(), "production".into()));
    app.artisan(&["app:eval", "App\\Jobs\\OkJob::dispatch('waits');"]);
    let mut master = app.spawn(&["drover"], "drover.log");
    let said = wait_status_exit(&app, 3, Duration::from_secs(20)).await;
    assert!(said.contains("no pools"), "{said}");
    let log = app.log("drover.log");
    assert!(
        log.contains("no entry of drover.environments matches environment 'local' (entries: production): this master runs no workers"),
        "{log}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(journal(&client, "handle").await.is_empty(), "a job ran");
    app.artisan(&["drover:terminate"]);
    assert!(
        master.wait().unwrap().success(),
        "{}",
        app.log("drover.log")
    );
    db.stop().await;
}

/// A managed PostgreSQL that accepts only verified TLS: the application's own connection says
/// `sslmode=verify-full` and `sslrootcert`, and `php artisan drover` hands exactly that to the
/// master, whose every connection then uses TLS.
async fn jobs_flow_when_the_applications_connection_requires_verified_tls(laravel: Laravel) {
    let pki = support::tls::make_pki();
    let (db, port) = support::tls::tls_cluster(&pki).await;
    let client = db.client().await;
    let port = port.to_string();
    let ca = pki.ca.display().to_string();
    let app = LaravelApp::new_with(
        &db,
        laravel,
        &[
            ("DB_HOST", "localhost"),
            ("DB_PORT", &port),
            ("DB_SSLMODE", "verify-full"),
            ("DB_SSLROOTCERT", &ca),
            ("DROVER_PROCESSES", "2"),
        ],
    );
    let exported = app.artisan(&["drover", "--dry-run"]);
    assert!(exported.contains("\"version\""), "{exported}");
    app.artisan(&[
        "app:eval",
        "foreach (range(1, 20) as $i) { App\\Jobs\\OkJob::dispatch(\"tls_$i\"); }",
    ]);
    let master = start_master(&app, 2).await;
    wait_drover_drained(&client, 300).await;
    let mut done = journal(&client, "processed").await;
    done.sort();
    let mut want: Vec<String> = (1..=20).map(|i| format!("tls_{i}")).collect();
    want.sort();
    assert_eq!(done, want);
    let (total, encrypted): (i64, i64) = {
        let row = client
            .query_one(
                "SELECT count(*), count(*) FILTER (WHERE s.ssl)
                 FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
                 WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(
        total >= 3,
        "the master's and the workers' connections: {total}"
    );
    assert_eq!(encrypted, total, "a connection without TLS");
    stop_master(&app, master).await;
    db.stop().await;
    drop(pki.dir);
}

async fn a_job_that_kills_its_worker_is_failed_by_laravels_tries_naming_the_death_and_others_run(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let receiver = otlp_receiver::OtlpReceiver::start().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "2".into()));
    app.env
        .push(("DROVER_TRACES_ENDPOINT".into(), receiver.endpoint()));
    // The poison job is dispatched in a trace (the OpenTelemetry API's stand-in: the package
    // cannot be installed here), so each attempt killed mid-run is a span ended in error.
    let trace = "5bf92f3577b34da6a3ce929d0e0e4736";
    app.artisan(&[
        "app:eval",
        &format!(
            "require '{}'; $scope = OpenTelemetry\\API\\Trace\\Span::wrap(OpenTelemetry\\API\\Trace\\SpanContext::create('{trace}', '00f067aa0ba902b7', 1))->activate(); App\\Jobs\\CrashingJob::dispatch('poison'); $scope->detach(); foreach (range(1, 20) as $i) {{ App\\Jobs\\OkJob::dispatch(\"ok$i\"); }}",
            root()
                .join("php-client/tests/fixtures/opentelemetry-api.php")
                .display()
        ),
    ]);
    let master = start_master(&app, 2).await;
    wait_count(
        &client,
        "SELECT count(*) FROM public.failed_jobs",
        1,
        Duration::from_secs(60),
    )
    .await;
    wait_count(
        &client,
        "SELECT count(DISTINCT label) FROM public.journal WHERE label LIKE 'ok%' AND event = 'handle'",
        20,
        Duration::from_secs(30),
    )
    .await;
    // Each attempt killed its worker; Laravel's tries (2) failed it at the third pickup, through
    // its failer, naming how the last attempt ended.
    let handled = count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'poison' AND event = 'handle'",
    )
    .await;
    assert_eq!(handled, 2, "ran once per try");
    let exception: String = client
        .query_one("SELECT exception FROM public.failed_jobs", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        exception.contains("MaxAttemptsExceededException")
            && exception.contains("CrashingJob has been attempted too many times")
            && exception.contains(
                "Its last attempt ended when the worker running it was killed by SIGKILL"
            ),
        "{exception}"
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.failed_jobs").await,
        0,
        "Laravel's failer logged it; the master keeps no second copy"
    );
    // The worker's failure report reaches the master after Laravel's failer wrote its row, and
    // the master settles it in its next batch: the job leaves drover.jobs then, not before.
    support::wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(10),
    )
    .await;
    let log = stop_master(&app, master).await;
    assert!(!log.contains("circuit open"), "{log}");
    let spans = receiver
        .wait_for(Duration::from_secs(10), |spans| {
            spans
                .iter()
                .filter(|s| s.trace_id == trace && s.name == "settle default")
                .count()
                >= 3
        })
        .await;
    let killed: Vec<&otlp_receiver::ReceivedSpan> = spans
        .iter()
        .filter(|s| s.trace_id == trace && s.name == "process default")
        .filter(|s| s.attributes["messaging.drover.outcome"] == "worker_gone")
        .collect();
    assert_eq!(
        killed.len(),
        2,
        "an error span per attempt killed mid-run: {spans:#?}"
    );
    for span in killed {
        assert_eq!(span.status, "error");
        assert!(span.status_message.contains("worker exited"), "{span:?}");
    }
    db.stop().await;
}

on_every_laravel!(
    the_behaviour_matrix_matches_queue_work_on_the_database_driver,
    the_behaviour_matrix_matches_queue_work_with_workers_started_by_exec,
    payloads_are_written_as_laravels_own_database_and_redis_drivers_write_them,
    drover_restart_reexports_config_drover_php_and_replaces_every_worker_under_load,
    a_dispatch_in_a_rolled_back_transaction_never_runs_and_after_commit_waits_for_the_commit,
    lose_dispatches_on_database_crash_commits_a_dispatch_without_its_flush_and_only_outside_a_transaction,
    a_dispatch_prepares_its_insert_once_per_connection_unless_the_connection_emulates_prepares,
    queues_are_served_in_the_pools_priority_order,
    metrics_count_laravel_jobs_by_class_with_releases_and_failures_through_laravels_failer,
    a_queue_waiting_past_its_threshold_fires_long_wait_detected_once_per_cooldown_and_notifies_slack,
    maintenance_mode_holds_jobs_unless_the_pool_is_forced,
    queue_restart_replaces_every_worker_and_pause_holds_jobs_until_continue,
    failed_jobs_are_listed_retried_and_forgotten_with_laravels_own_commands,
    an_idle_worker_starts_a_new_job_at_once_not_after_its_sleep,
    a_reload_after_ln_sfn_runs_the_new_release_a_rollback_the_old_one_and_a_deleted_release_is_never_needed,
    queue_restart_and_horizon_terminate_after_a_symlinked_deploy_run_the_new_release,
    a_release_that_cannot_boot_leaves_the_old_workers_serving_status_degraded_and_a_rollback_recovers,
    an_environment_without_an_entry_runs_no_workers_and_says_so,
    jobs_flow_when_the_applications_connection_requires_verified_tls,
    a_job_that_kills_its_worker_is_failed_by_laravels_tries_naming_the_death_and_others_run,
);
