//! The application's schedule run by the master, without cron (issue 39, docs/schedule.md):
//! `php artisan drover` reads the fixture's schedule (App\Console\TestSchedule, Laravel 8's
//! Kernel::schedule and Laravel 12's withSchedule), runs each due time through
//! `drover:schedule-run` with Laravel's semantics, and records each run in
//! `drover.schedule_runs`. Every scenario runs on Laravel 8.83 and 12.67.

mod support;

use std::time::{Duration, Instant, SystemTime};

use support::*;

/// One run as the history holds it.
#[derive(Debug)]
struct Run {
    summary: String,
    due_at: SystemTime,
    scope: String,
    status: String,
    reason: Option<String>,
    late: Option<Duration>,
    output_tail: Option<String>,
}

async fn runs(client: &tokio_postgres::Client) -> Vec<Run> {
    client
        .query(
            "SELECT summary, due_at, scope, status, reason, started_at, output_tail
             FROM drover.schedule_runs ORDER BY due_at, summary",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let due_at: SystemTime = r.get(1);
            let started: Option<SystemTime> = r.get(5);
            Run {
                summary: r.get(0),
                due_at,
                scope: r.get(2),
                status: r.get(3),
                reason: r.get(4),
                late: started.map(|s| s.duration_since(due_at).unwrap_or_default()),
                output_tail: r.get(6),
            }
        })
        .collect()
}

/// The master runs the schedule: at a minute's due time, a closure of onOneServer() and a
/// command ran and succeeded (the command's output kept), a task whose filter says no and one
/// for another environment were skipped, a task that throws failed with its exception; an
/// expression cron cannot read is named in the log and left out; on Laravel 12 a task every two
/// seconds ran at each of its due times. The history holds one row per task and due time.
async fn the_master_runs_the_schedule_without_cron_and_records_each_run(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = LaravelApp::new_with(&db, laravel, &[("DROVER_TEST_SCHEDULE", "basics")]);
    let mut master = app.spawn(&["drover"], "drover.log");

    // The first minute whose due time every minute task passed (ended), up to ~a minute away.
    let minute_tasks = [
        "artisan app:scheduled hello",
        "closure",
        "elsewhere",
        "filtered",
        "throws",
    ];
    let deadline = Instant::now() + Duration::from_secs(100);
    let first_minute = loop {
        let all = runs(&client).await;
        let closure_due = all
            .iter()
            .find(|r| r.summary == "closure" && r.status != "running")
            .map(|r| r.due_at);
        if let Some(due) = closure_due {
            let ended: Vec<&str> = all
                .iter()
                .filter(|r| r.due_at == due && r.status != "running")
                .map(|r| r.summary.as_str())
                .filter(|s| minute_tasks.contains(s))
                .collect();
            if ended.len() == minute_tasks.len() {
                break due;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no minute's due time ended for every task in 100 s: {all:#?}\n{}",
            app.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let all = runs(&client).await;
    let at = |summary: &str| -> &Run {
        let found: Vec<&Run> = all
            .iter()
            .filter(|r| r.summary == summary && r.due_at == first_minute)
            .collect();
        assert_eq!(found.len(), 1, "{summary} at {first_minute:?}: {all:#?}");
        found[0]
    };
    let closure = at("closure");
    assert_eq!(closure.status, "succeeded", "{closure:?}");
    assert_eq!(closure.scope, "", "onOneServer: one run across masters");
    let command = at("artisan app:scheduled hello");
    assert_eq!(command.status, "succeeded", "{command:?}");
    assert_ne!(
        command.scope, "",
        "a task without onOneServer runs once per host"
    );
    assert!(
        command
            .output_tail
            .as_deref()
            .unwrap_or("")
            .contains("scheduled says hello"),
        "{command:?}"
    );
    let filtered = at("filtered");
    assert_eq!(filtered.status, "skipped", "{filtered:?}");
    assert!(filtered.reason.as_deref().unwrap_or("").contains("filters"));
    let elsewhere = at("elsewhere");
    assert_eq!(elsewhere.status, "skipped", "{elsewhere:?}");
    assert!(elsewhere
        .reason
        .as_deref()
        .unwrap_or("")
        .contains("environment"));
    let throws = at("throws");
    assert_eq!(throws.status, "failed", "{throws:?}");
    assert!(
        throws
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("the task broke"),
        "{throws:?}"
    );
    for run in [closure, command, filtered, elsewhere, throws] {
        // Started at its due second (the bench measures how close; this only rules out a run
        // a minute late, or before its time).
        let late = run.late.expect("started");
        assert!(late < Duration::from_secs(2), "{run:?}");
    }
    // The closure and the command ran (the log they append to), once for that minute.
    let log = std::fs::read_to_string(app.storage_dir().join("schedule-runs.log")).unwrap();
    let due_s = first_minute
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let lines_in_minute = |name: &str| {
        log.lines()
            .filter(|l| {
                let mut parts = l.split(' ');
                parts.next() == Some(name)
                    && parts
                        .next()
                        .and_then(|t| t.parse::<f64>().ok())
                        .is_some_and(|t| t >= due_s && t < due_s + 60.0)
            })
            .count()
    };
    assert_eq!(lines_in_minute("closure"), 1, "{log}");
    assert_eq!(lines_in_minute("command"), 1, "{log}");
    assert_eq!(lines_in_minute("filtered"), 0, "{log}");
    assert_eq!(lines_in_minute("elsewhere"), 0, "{log}");
    assert!(!log.contains("bad-cron"), "{log}");
    let master_log = app.log("drover.log");
    assert!(
        master_log.contains("bad-cron") || master_log.contains("61 * * * *"),
        "the task with an expression cron cannot read is named: {master_log}"
    );

    if laravel == Laravel::V12 {
        // Every two seconds, onOneServer: each due time from its first on record to its last,
        // once, succeeded (the last may still run).
        let two: Vec<&Run> = all.iter().filter(|r| r.summary == "two-seconds").collect();
        assert!(two.len() >= 5, "{two:#?}");
        for pair in two.windows(2) {
            assert_eq!(
                pair[1].due_at.duration_since(pair[0].due_at).unwrap(),
                Duration::from_secs(2),
                "{two:#?}"
            );
        }
        for run in &two[..two.len() - 1] {
            assert_eq!(run.status, "succeeded", "{run:?}");
            assert!(run.late.unwrap() < Duration::from_secs(2), "{run:?}");
        }
    }

    app.artisan(&["drover:terminate"]);
    let status = master.wait().unwrap();
    let master_log = app.log("drover.log");
    assert!(status.success(), "{status}:\n{master_log}");
    assert!(!master_log.contains("panicked"), "{master_log}");
    db.stop().await;
}

on_every_laravel!(the_master_runs_the_schedule_without_cron_and_records_each_run);
