//! A master that stops by itself, as `queue:work` does: `--stop-when-empty`, `--max-jobs`,
//! `--max-time`, and the exit status when it cannot write its last settles.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::*;

#[tokio::test]
async fn stop_when_empty_runs_every_ready_job_and_retry_then_exits_0_leaving_a_job_due_later() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let ids = enqueue(db.dsn(), 300, &["--batch=100", "--ms=2"]);
    // Fails its first attempt: the retry (no delay) must run before the master may stop.
    let retried = enqueue(
        db.dsn(),
        1,
        &[
            "--first-seq=1000",
            "--act=throw",
            "--act-attempt=1",
            "--max-attempts=2",
        ],
    );
    let later = enqueue(db.dsn(), 1, &["--first-seq=2000", "--delay=600"]);
    let mut drover = db.drover(&["--workers", "2", "--prefetch", "4", "--stop-when-empty"]);
    let status = drover.wait_exit(Duration::from_secs(60)).await;
    let log = drover.log_text();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(
        log.contains("every queue is empty (--stop-when-empty)"),
        "{log}"
    );
    // Under a backlog, acks ride with the claims that follow them (one commit for both), and a
    // drain still sees the queues empty after the last of them.
    assert!(
        stopped_count(&log, "acks_ridden") > 0,
        "no ack rode with a claim: {log}"
    );
    // Start-up's pages went back to the kernel once both workers served, and every job after
    // that still ran (the counts below).
    assert_eq!(
        log.matches("start-up pages handed back to the kernel")
            .count(),
        1,
        "{log}"
    );
    assert_eq!(
        count(
            &client,
            &format!(
                "SELECT count(*) FROM runs WHERE job_id = {} AND event = 'start'",
                retried[0]
            )
        )
        .await,
        2,
        "{log}"
    );
    // The delayed job did not keep the master alive, and is still there, unstarted.
    assert_eq!(
        count(
            &client,
            &format!(
                "SELECT count(*) FROM drover.jobs WHERE id = {} AND attempts = 0",
                later[0]
            )
        )
        .await,
        1
    );
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 1);
    client
        .execute("DELETE FROM drover.jobs WHERE id = $1", &[&later[0]])
        .await
        .unwrap();
    // Every job finished once; the failing one on its retry, before the master stopped.
    let all: Vec<i64> = ids.iter().chain(&retried).copied().collect();
    assert_exactly_once(&client, &all).await;
    db.stop().await;
}

#[tokio::test]
async fn stop_when_empty_on_empty_queues_exits_at_once() {
    let db = Cluster::start().await;
    let mut drover = db.drover(&[
        "--workers",
        "1",
        "--stop-when-empty",
        "--poll-interval",
        "60s",
    ]);
    let started = Instant::now();
    let status = drover.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(status.code(), Some(0), "{}", drover.log_text());
    // Once the worker said hello and one claim found nothing: not a poll interval later.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    db.stop().await;
}

#[tokio::test]
async fn max_jobs_stops_after_that_many_and_hands_the_rest_back_uncharged() {
    let db = Cluster::start().await;
    let client = db.client().await;
    enqueue(db.dsn(), 40, &["--ms=5"]);
    let mut drover = db.drover(&["--workers", "1", "--prefetch", "1", "--max-jobs", "10"]);
    let status = drover.wait_exit(Duration::from_secs(60)).await;
    let log = drover.log_text();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("10 job(s) run (--max-jobs)"), "{log}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM runs WHERE event = 'finish'").await,
        10
    );
    // The rest are back in the queue, no attempt charged.
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE attempts = 0 AND lease_token IS NULL"
        )
        .await,
        30
    );
    db.stop().await;
}

#[tokio::test]
async fn max_time_stops_a_master_after_that_long_and_lets_the_running_job_finish_past_the_grace() {
    let db = Cluster::start().await;
    let client = db.client().await;
    // Runs past both the stop and the shutdown grace: a master stopping by itself does not kill
    // it (queue:work --max-time lets its job finish). The 4 s leave the worker room to boot and
    // start the job on a loaded machine before the time is up.
    let ids = enqueue(db.dsn(), 1, &["--ms=6000"]);
    let mut drover = db.drover(&[
        "--workers",
        "1",
        "--max-time",
        "4s",
        "--shutdown-grace",
        "1s",
    ]);
    let started = Instant::now();
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'start'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let status = drover.wait_exit(Duration::from_secs(30)).await;
    let log = drover.log_text();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("(--max-time)"), "{log}");
    assert!(started.elapsed() >= Duration::from_millis(6000));
    // Graceful: the job that was running when the time was up finished.
    assert_exactly_once(&client, &ids).await;
    db.stop().await;
}

#[tokio::test]
async fn a_database_gone_for_good_during_shutdown_exits_1_naming_the_unwritten_settles() {
    let mut db = Cluster::start().await;
    let client = db.client().await;
    // Long enough to be running still when the database is gone.
    enqueue(db.dsn(), 1, &["--ms=6000"]);
    let mut drover = db.drover(&["--workers", "1", "--shutdown-grace", "20s"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'start'",
        1,
        Duration::from_secs(30),
    )
    .await;
    drop(client);
    // The database goes away while the job runs, and stays away.
    db.pg.take().unwrap().stop().await;
    drover.signal(Signal::SIGTERM);
    let status = drover.wait_exit(Duration::from_secs(30)).await;
    let log = drover.log_text();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("stopped with 1 settle(s) unwritten")
            && log.contains("run again once their leases expire"),
        "{log}"
    );
}

#[tokio::test]
async fn stop_when_empty_waits_for_each_ordered_groups_next_job() {
    let db = Cluster::start().await;
    let client = db.client().await;
    // Three groups of ten: each job becomes ready only when its group's previous one is acked.
    let ids = enqueue(db.dsn(), 30, &["--groups=3", "--ms=5"]);
    let mut drover = db.drover(&["--workers", "2", "--prefetch", "2", "--stop-when-empty"]);
    let status = drover.wait_exit(Duration::from_secs(60)).await;
    assert_eq!(status.code(), Some(0), "{}", drover.log_text());
    assert_exactly_once(&client, &ids).await;
    db.stop().await;
}

#[tokio::test]
async fn a_draining_master_whose_workers_cannot_start_exits_1_naming_the_pool() {
    let db = Cluster::start().await;
    let mut drover = Drover::start_worker(
        Some(db.url()),
        Some(db.dsn()),
        &["--stop-when-empty"],
        &["sh", "-c", "exit 3"],
    );
    let status = drover.wait_exit(Duration::from_secs(120)).await;
    let log = drover.log_text();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("no worker of pool default can start"), "{log}");
    db.stop().await;
}

#[tokio::test]
async fn a_draining_master_that_cannot_reach_its_database_exits_1_after_one_lease() {
    let port = free_port();
    let url = format!("host=127.0.0.1 port={port} user=drover dbname=drover connect_timeout=1");
    let mut drover = Drover::start(Some(&url), None, &["--stop-when-empty", "--lease", "3s"]);
    let started = Instant::now();
    let status = drover.wait_exit(Duration::from_secs(30)).await;
    let log = drover.log_text();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&format!(
            "Error: the database at 127.0.0.1:{port}/drover did not answer within 3s"
        )),
        "{log}"
    );
    assert!(started.elapsed() >= Duration::from_secs(3));
}
