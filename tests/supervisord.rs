//! `php artisan drover:import-supervisor`: supervisord's `queue:work` programs — two files as
//! Laravel Forge writes them and a hand-written one with several programs, a group, expansions,
//! `queue:listen` and programs that are not queue workers (`tests/fixtures/supervisor/`) — become
//! a config/drover.php that `php artisan drover --export` loads and the master runs, on Laravel
//! 8.83 and 12.67 (`laravel8::NAME`, `laravel12::NAME`).

mod support;

use std::time::{Duration, Instant};

use support::*;

/// (queues, processes, timeout, memory, nice) of each exported pool, by name, in the order written.
fn exported_pools(export: &serde_json::Value) -> Vec<(String, Vec<String>, u64, u64, u64, i64)> {
    export["pools"]
        .as_array()
        .unwrap_or_else(|| panic!("no pools in the export: {export:#}"))
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["queues"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|q| q.as_str().unwrap().to_string())
                    .collect(),
                p["processes"].as_u64().unwrap(),
                p["timeout"].as_u64().unwrap(),
                p["memory"].as_u64().unwrap(),
                p["nice"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn owned(queues: &[&str]) -> Vec<String> {
    queues.iter().map(|q| q.to_string()).collect()
}

async fn supervisord_programs_become_pools_that_php_artisan_drover_exports_and_runs(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    // A release of the fixture app with a config/ of its own and no config/drover.php: the
    // import writes one there (the fixture's own config/drover.php is shared by every test).
    let site = Site::new(laravel);
    let release = site.ship("A", 1);
    let target = release.join("config/drover.php");
    std::fs::remove_file(&target).unwrap();
    app.dir = release.clone();
    // Every program runs as forge (user=), which the import writes as drover.user =
    // env('DROVER_USER', 'forge'); this machine has no forge, so the master is told otherwise.
    app.env.push(("DROVER_USER".into(), String::new()));
    let fixtures = root().join("tests/fixtures/supervisor");
    let files: Vec<String> = ["worker-481516.conf", "worker-481517.conf", "example.conf"]
        .iter()
        .map(|f| fixtures.join(f).display().to_string())
        .collect();
    let import = |extra: &[&str]| {
        let mut args = vec!["drover:import-supervisor"];
        args.extend(files.iter().map(|f| f.as_str()));
        args.extend(extra);
        let out = app.command(&args).env("COLUMNS", "400").output().unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };

    // A file that is not there is named, and nothing is written (and no PHP error shows).
    let out = app
        .command(&["drover:import-supervisor", "/nonexistent/worker.conf"])
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("/nonexistent/worker.conf: no such file; pass supervisord's program files")
            && said.contains("nothing written")
            && !said.contains("PHP Fatal")
            && !said.contains("Exception"),
        "{said}"
    );
    assert!(!target.exists());

    let (code, said) = import(&[]);
    assert_eq!(code, Some(0), "{said}");
    for needle in [
        format!("drover:import-supervisor: wrote {}", target.display()),
        "pools: worker-481516 (2 × high,default), worker-481517 (1 × mail), reports (1 × reports), imports (2 × imports,default), in every environment".into(),
        "not carried over: --daemon ([program:worker-481516])".into(),
        "not carried over: environment=APP_ENV,REPORTS_BUCKET ([program:reports])".into(),
        "skipped: [program:scheduler]".into(),
        "skipped: [program:horizon]".into(),
        "skipped: [program:ssr]".into(),
        "note: connection 'redis' (worker-481516)".into(),
        "note: connection 'database' (worker-481517)".into(),
        "note: stopwaitsecs: written as drover.shutdown_grace = 600".into(),
    ] {
        assert!(said.contains(&needle), "{needle:?} not in:\n{said}");
    }
    // Run again: refused, the file left as it is.
    let written = std::fs::read_to_string(&target).unwrap();
    let (code, said) = import(&[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("already exists; pass --force to overwrite it"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), written);

    // What the master gets from the written file.
    let export: serde_json::Value =
        serde_json::from_str(&app.artisan(&["drover", "--export"])).unwrap();
    assert_eq!(
        exported_pools(&export),
        vec![
            (
                "worker-481516".into(),
                owned(&["high", "default"]),
                2,
                90,
                128,
                0
            ),
            ("worker-481517".into(), owned(&["mail"]), 1, 60, 256, 0),
            ("reports".into(), owned(&["reports"]), 1, 0, 128, 5),
            (
                "imports".into(),
                owned(&["imports", "default"]),
                2,
                60,
                128,
                0
            ),
        ],
        "{export:#}"
    );
    assert_eq!(export["shutdown_grace"], 600.0, "the longest stopwaitsecs");
    assert_eq!(
        export["user"],
        serde_json::Value::Null,
        "DROVER_USER overrides forge"
    );
    // What the workers read from it (drover:work takes its pool's options from config/drover.php).
    let pools: serde_json::Value = serde_json::from_str(&app.artisan(&[
        "app:eval",
        "return Drover\\Config\\Pools::resolve(config('drover'), app()->environment());",
    ]))
    .unwrap();
    let option = |pool: &str, key: &str| pools[pool][key].clone();
    assert_eq!(
        [
            option("worker-481516", "tries"),
            option("worker-481516", "backoff"),
            option("worker-481516", "connection"),
            option("worker-481517", "max_jobs"),
            option("worker-481517", "max_time"),
            option("worker-481517", "force"),
            option("reports", "tries"),
            option("imports", "max_jobs"),
        ],
        [
            serde_json::json!(3),
            serde_json::json!([5]),
            serde_json::json!("drover"),
            serde_json::json!(1),
            serde_json::json!(3600),
            serde_json::json!(true),
            serde_json::json!(1),
            serde_json::json!(500),
        ],
        "{pools:#}"
    );

    // And the master runs them: every pool's workers serve, and a job on each imported queue runs.
    let queues = ["high", "default", "mail", "reports", "imports"];
    app.artisan(&[
        "app:eval",
        "foreach (['high', 'default', 'mail', 'reports', 'imports'] as $q) { App\\Jobs\\OkJob::dispatch(\"on_$q\")->onQueue($q); }",
    ]);
    let master = app.spawn(&["drover"], "drover.log");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = app.command(&["drover:status", "--json"]).output().unwrap();
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let serving: Vec<(String, usize)> = status["pools"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|p| {
                let workers = p["workers"].as_array().cloned().unwrap_or_default();
                (
                    p["name"].as_str().unwrap_or_default().to_string(),
                    workers
                        .iter()
                        .filter(|w| w["state"] == "idle" || w["state"] == "busy")
                        .count(),
                )
            })
            .collect();
        let mut done = journal(&client, "processed").await;
        done.sort();
        if done.len() == queues.len()
            && serving
                == [
                    ("worker-481516".to_string(), 2),
                    ("worker-481517".to_string(), 1),
                    ("reports".to_string(), 1),
                    ("imports".to_string(), 2),
                ]
        {
            let mut want: Vec<String> = queues.iter().map(|q| format!("on_{q}")).collect();
            want.sort();
            assert_eq!(done, want);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the imported pools did not serve and run a job per queue: processed {done:?}, serving {serving:?}\n{}",
            app.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(journal(&client, "failed").await.is_empty());
    stop_master(&app, master).await;
    db.stop().await;
}

on_every_laravel!(supervisord_programs_become_pools_that_php_artisan_drover_exports_and_runs);
