//! Laravel 12's `failover` queue driver with drover as its first connection (the fixture's
//! `failover` connection: `['drover', 'redis']`): a push lands in drover.jobs and runs under
//! `php artisan drover`; with drover's database unreachable it falls over to redis, whose own
//! `queue:work redis` runs it; with both down the dispatch fails loudly.
//!
//! Laravel 12 only: the failover driver (`Illuminate\Queue\FailoverQueue`, `QueueFailedOver`)
//! does not exist in Laravel 8.83, where a push to such a connection fails with "No connector for
//! [failover]" — which `laravel8_has_no_failover_driver` checks, so this file notices the day the
//! Laravel 8 fixture gains one.

mod support;

use std::time::Duration;

use support::*;

/// Dispatches `OkJob(label)` on the failover connection and prints each `QueueFailedOver` as
/// `failed over: CONNECTION: EXCEPTION`.
fn dispatch_through_failover(label: &str) -> String {
    format!(
        "Illuminate\\Support\\Facades\\Event::listen(Illuminate\\Queue\\Events\\QueueFailedOver::class, fn ($e) => print('failed over: ' . $e->connectionName . ': ' . get_class($e->exception) . \"\\n\"));
         App\\Jobs\\OkJob::dispatch('{label}')->onConnection('failover');
         return 'dispatched';"
    )
}

fn output(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn laravel12_failover_with_drover_first_runs_on_drover_and_falls_over_to_redis_when_its_database_is_down(
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let redis = RedisServer::start();
    let mut app = LaravelApp::new(&db, Laravel::V12);
    app.env.push(("REDIS_PORT".into(), redis.port.to_string()));
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    let redis_jobs = || redis.cli(&["llen", "queues:default"]).trim().to_string();

    // drover reachable: the job is drover's, nothing fails over.
    let said = app.artisan(&["app:eval", &dispatch_through_failover("via_drover")]);
    assert!(!said.contains("failed over"), "{said}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.jobs").await,
        1,
        "the push landed in drover.jobs"
    );
    assert_eq!(redis_jobs(), "0");
    let master = start_master(&app, 1).await;
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'via_drover' AND event = 'processed' AND connection = 'drover'",
        1,
        Duration::from_secs(30),
    )
    .await;
    stop_master(&app, master).await;
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 0);

    // `queue:work failover` with drover first is `queue:work drover`: a foreground drover master,
    // which says the connection behind needs its own worker; it drains and exits.
    app.artisan(&[
        "app:eval",
        &dispatch_through_failover("via_failover_worker"),
    ]);
    let out = app
        .command(&["queue:work", "failover", "--stop-when-empty"])
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    let said = output(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("failover is a failover connection whose first connection is drover")
            && said.contains("fell over to redis need their own queue:work"),
        "{said}"
    );
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 0);
    client
        .execute(
            "DELETE FROM public.journal WHERE label = 'via_failover_worker'",
            &[],
        )
        .await
        .unwrap();

    // drover's database unreachable (its server refuses connections): the push goes to redis,
    // and Laravel says so with QueueFailedOver, naming drover.
    let down = free_port().to_string();
    let out = app
        .command(&["app:eval", &dispatch_through_failover("via_redis")])
        .env("DB_HOST", "127.0.0.1")
        .env("DB_PORT", &down)
        .output()
        .unwrap();
    let said = output(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("failed over: drover: Illuminate\\Database\\QueryException"),
        "{said}"
    );
    assert_eq!(redis_jobs(), "1", "the job waits on redis");
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 0);
    // The fallback connection is worked by its own queue:work (the failover driver pops only its
    // first connection), with drover's database back.
    app.artisan(&["queue:work", "redis", "--once", "--stop-when-empty"]);
    assert_eq!(
        journal(&client, "processed").await,
        vec!["via_drover", "via_redis"]
    );
    let on_redis: String = client
        .query_one(
            "SELECT string_agg(event || '@' || coalesce(connection, '?'), ' ' ORDER BY id) FROM public.journal WHERE label = 'via_redis'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(on_redis, "processing@redis handle@redis processed@redis");

    // Both down: the dispatch fails, naming the last connection's error; nothing is queued.
    let out = app
        .command(&["app:eval", &dispatch_through_failover("nowhere")])
        .env("DB_HOST", "127.0.0.1")
        .env("DB_PORT", &down)
        .env("REDIS_PORT", &down)
        .output()
        .unwrap();
    let said = output(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("failed over: drover") && said.contains("failed over: redis"),
        "{said}"
    );
    assert!(said.contains("Connection refused"), "{said}");
    assert_eq!(redis_jobs(), "0");
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 0);
    db.stop().await;
}

/// Why the test above is Laravel 12's only: Laravel 8.83 has no failover driver.
#[tokio::test]
async fn laravel8_has_no_failover_driver() {
    let db = Cluster::start().await;
    let app = LaravelApp::new(&db, Laravel::V8);
    let out = app
        .command(&["app:eval", &dispatch_through_failover("l8")])
        .output()
        .unwrap();
    let said = output(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("No connector for [failover]"), "{said}");
    db.stop().await;
}
