//! The Laravel integration: `php artisan drover` runs the fixture app's jobs with Laravel's own
//! semantics, compared side by side with `queue:work` on the database driver.

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

/// Runs the matrix through 4 `queue:work database` processes, restarted when they exit (a
/// timeout kills its worker), as supervisord would.
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
    let mut workers: Vec<Child> = (0..4)
        .map(|i| app.spawn(&args, &format!("queue-work-{i}.log")))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut empty_since: Option<Instant> = None;
    loop {
        for (i, w) in workers.iter_mut().enumerate() {
            if w.try_wait().unwrap().is_some() {
                *w = app.spawn(&args, &format!("queue-work-{i}.log"));
            }
        }
        if count(client, "SELECT count(*) FROM public.jobs").await == 0 {
            if empty_since.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(2) {
                break;
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
    for w in &mut workers {
        signal(w, Signal::SIGTERM);
        let _ = w.wait();
    }
    serde_json::from_str(&app.artisan(&["matrix:report"])).unwrap()
}

async fn run_with_drover(app: &LaravelApp, client: &tokio_postgres::Client) -> serde_json::Value {
    app.artisan(&["matrix:dispatch", "drover"]);
    let mut master = app.spawn(&["drover"], "drover.log");
    wait_drained(
        client,
        "SELECT count(*) FROM drover.jobs",
        Duration::from_secs(2),
        Duration::from_secs(90),
    )
    .await;
    app.artisan(&["drover:terminate"]);
    let status = master.wait().unwrap();
    assert!(
        status.success(),
        "php artisan drover exited with {status}:\n{}",
        app.log("drover.log")
    );
    serde_json::from_str(&app.artisan(&["matrix:report"])).unwrap()
}

#[tokio::test]
async fn the_behaviour_matrix_matches_queue_work_on_the_database_driver() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db);
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
    let drover = run_with_drover(&app, &client).await;

    let show = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap();
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
    db.stop().await;
}
