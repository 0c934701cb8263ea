//! A report that holds a snapshot open while a Laravel application dispatches (issue 40,
//! docs/decisions/0010-a-held-snapshot.md), on Laravel 8.83 and 12.67: every job runs once while
//! the vacuum horizon is held back, `php artisan drover:status` names what holds it, and stops
//! naming it once the report ends. How flat claims stay meanwhile is measured, not asserted:
//! `bench/src/bin/held_snapshot.rs` (bench/results/held_snapshot.md).

mod support;

use std::time::{Duration, Instant};

use support::*;

/// `drover:status` until its text satisfies `done`, within `timeout`; that text.
fn status_until(
    app: &LaravelApp,
    what: &str,
    timeout: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let out = app
            .command(&["drover:status", "--no-ansi"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if done(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: drover:status said\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

async fn a_report_held_open_while_the_application_dispatches_is_named_and_every_job_runs_once(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    // The shortest lease: the horizon is read every half lease.
    for (k, v) in [("DROVER_PROCESSES", "2"), ("DROVER_LEASE", "3")] {
        app.env.push((k.into(), v.into()));
    }
    let master = start_master(&app, 2).await;
    let (report, pid) = hold_a_report(&db).await;

    app.artisan(&[
        "app:eval",
        r#"foreach (range(1, 200) as $i) { App\Jobs\NapJob::dispatch("held $i"); }"#,
    ]);
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'end'",
        200,
        Duration::from_secs(60),
    )
    .await;
    let held = format!("held by session pid {pid} (nightly report");
    let text = status_until(&app, "the report named", Duration::from_secs(20), |t| {
        t.contains(&held)
    });
    assert!(text.contains("idle in transaction"), "{text}");

    report.batch_execute("COMMIT").await.unwrap();
    status_until(
        &app,
        "the report no longer named",
        Duration::from_secs(20),
        |t| t.contains("vacuum horizon:") && !t.contains(&held),
    );
    stop_master(&app, master).await;
    let twice = count(
        &client,
        "SELECT count(*) FROM (SELECT label FROM journal WHERE event = 'end'
           GROUP BY label HAVING count(*) > 1) AS t",
    )
    .await;
    assert_eq!(twice, 0, "a job ran to its end twice");
    db.stop().await;
}

on_every_laravel!(
    a_report_held_open_while_the_application_dispatches_is_named_and_every_job_runs_once,
);
