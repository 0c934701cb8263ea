//! Stopping a running job (issue 41, docs/dashboard.md "Stopping a running job"), on Laravel
//! 8.83 and 12.67: two jobs hang (a dead API); each way of stopping one kills exactly the worker
//! running it, wherever it runs, and settles it as asked, while the other keeps running the same
//! attempt. `drover:stop-job --kill --release` puts it back to run again (the killed attempt's
//! process gone before the next one starts); the console's Stop button, graceful, fails it
//! through the application (`failed()` called, Laravel's failer); `--kill` runs no code of it
//! again (kept in drover.failed_jobs). A job that is not running is refused by name, and so is
//! a stop naming an attempt that has ended (`--lease` of the first, once the second runs).

mod support;

use std::time::{Duration, Instant};

use support::browser::Browser;
use support::serve::serve;
use support::*;

/// The pids that journaled `event` for `label`, in order.
async fn pids(client: &tokio_postgres::Client, label: &str, event: &str) -> Vec<i32> {
    client
        .query(
            "SELECT pid FROM journal WHERE label = $1 AND event = $2 ORDER BY id",
            &[&label, &event],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

async fn lease_of(client: &tokio_postgres::Client, id: i64) -> Option<i64> {
    client
        .query_opt("SELECT lease_token FROM drover.jobs WHERE id = $1", &[&id])
        .await
        .unwrap()
        .and_then(|r| r.get(0))
}

fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

async fn each_way_of_stopping_a_hung_job_kills_only_its_worker_and_settles_it_as_asked(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    for (k, v) in [("DROVER_PROCESSES", "3"), ("SESSION_DRIVER", "file")] {
        app.env.push((k.into(), v.into()));
    }
    let master = start_master(&app, 3).await;
    app.artisan(&[
        "app:eval",
        r#"App\Jobs\HungApiJob::dispatch('hung', 600000); App\Jobs\HungApiJob::dispatch('other', 600000);"#,
    ]);
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'handle'",
        2,
        Duration::from_secs(30),
    )
    .await;
    let id_of = |label: &'static str| {
        let client = &client;
        async move {
            let row = client
                .query_one(
                    "SELECT id FROM drover.jobs WHERE strpos(payload, $1) > 0",
                    &[&label],
                )
                .await
                .unwrap();
            row.get::<_, i64>(0)
        }
    };
    let (hung, other) = (id_of("hung").await, id_of("other").await);
    let other_token = lease_of(&client, other).await.expect("other runs");
    let hung_token = lease_of(&client, hung).await.expect("hung runs");
    let first = pids(&client, "hung", "handle").await[0];

    // A job that is not running is refused by name.
    let out = app
        .command(&["drover:stop-job", "999999"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("job 999999 is not in drover.jobs")
            || String::from_utf8_lossy(&out.stdout).contains("job 999999 is not in drover.jobs"),
        "{out:?}"
    );

    // Kill, then release: back on its queue, run again by a fresh worker once the first is gone.
    let said = app.artisan(&["drover:stop-job", &hung.to_string(), "--kill", "--release"]);
    assert!(said.contains("it is back on its queue"), "{said}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids(&client, "hung", "handle").await.len() < 2 {
        assert!(Instant::now() < deadline, "{}", app.log("drover.log"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = pids(&client, "hung", "handle").await[1];
    assert_ne!(first, second);
    // A stop that names the attempt that ended is refused, naming the one running now; nothing
    // is asked of it.
    let out = app
        .command(&[
            "drover:stop-job",
            &hung.to_string(),
            &format!("--lease={hung_token}"),
        ])
        .output()
        .unwrap();
    let said = support::said(&out);
    assert!(
        !out.status.success()
            && said.contains(&format!("has ended; job {hung} now runs attempt 2")),
        "{said}"
    );
    assert!(!alive(first), "the stopped attempt's process is gone");
    assert_eq!(
        count(
            &client,
            "SELECT max(attempt)::bigint FROM journal WHERE label = 'hung' AND event = 'handle'"
        )
        .await,
        2,
        "the killed attempt counts"
    );

    // The console's Stop button: graceful, then fail — through the application's failure path.
    let (_server, port) = serve(&app, "local", false);
    let browser = Browser::start();
    browser.goto(&format!("http://127.0.0.1:{port}/drover/job/{hung}"));
    browser.wait_for("button.stop-job");
    browser.screenshot(
        &support::root()
            .join(format!("target/dashboard-screenshots/{laravel:?}/stop.png").to_lowercase()),
    );
    browser.click("button.stop-job");
    assert!(browser.wait_for("#flash").contains("asked to stop it"));
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE label = 'hung' AND event = 'failed_hook'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let exception: String = client
        .query_one("SELECT exception FROM public.failed_jobs", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        exception.contains("was stopped by nobody signed in (local) while it ran"),
        "{exception}"
    );
    // The failed() hook ran in the worker before it exited and before the master settled the
    // job: wait for both.
    let deadline = Instant::now() + Duration::from_secs(30);
    while lease_of(&client, hung).await.is_some() || alive(second) {
        assert!(
            Instant::now() < deadline,
            "the stopped job's lease is still held or its worker {second} still runs: {}",
            app.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(browser);

    // The other job ran on, the same attempt, untouched.
    assert_eq!(lease_of(&client, other).await, Some(other_token));
    assert_eq!(pids(&client, "other", "handle").await.len(), 1);

    // Kill, then fail: no code of it runs again; drover keeps it.
    let said = app.artisan(&["drover:stop-job", &other.to_string(), "--kill"]);
    assert!(said.contains("no code of it ran again"), "{said}");
    let kept: String = client
        .query_one(
            "SELECT error FROM drover.failed_jobs WHERE id = $1",
            &[&other],
        )
        .await
        .unwrap()
        .get(0);
    assert!(kept.contains("stopped by artisan ("), "{kept}");
    assert!(pids(&client, "other", "failed_hook").await.is_empty());
    assert_eq!(
        count(&client, "SELECT count(*) FROM journal WHERE event = 'end'").await,
        0,
        "neither job ever reached its end"
    );
    let audit = count(
        &client,
        "SELECT count(*) FROM drover.console_actions WHERE verb = 'stop'",
    )
    .await;
    assert_eq!(audit, 3, "each stop is in the audit trail");
    stop_master(&app, master).await;
    db.stop().await;
}

on_every_laravel!(each_way_of_stopping_a_hung_job_kills_only_its_worker_and_settles_it_as_asked,);
