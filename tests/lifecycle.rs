//! End-to-end scenarios: the real `drover` binary, real PHP workers, a real PostgreSQL per test.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::*;

#[tokio::test]
async fn two_thousand_jobs_across_four_workers_complete_exactly_once() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let ids = enqueue(db.dsn(), 2000, &["--batch=100"]);
    let drover = db.drover(&["--workers", "4", "--prefetch", "4"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        2000,
        Duration::from_secs(120),
    )
    .await;
    drover.stop().await;
    assert_exactly_once(&client, &ids).await;
    // All four workers took part.
    assert_eq!(
        count(&client, "SELECT count(DISTINCT pid) FROM runs").await,
        4
    );
    db.stop().await;
}

#[tokio::test]
async fn a_worker_killed_mid_job_has_its_jobs_released_at_once() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let ids = enqueue(db.dsn(), 4, &["--ms=2000"]);
    let drover = db.drover(&["--workers", "1", "--prefetch", "4"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'start'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let row = client
        .query_one("SELECT job_id, pid FROM runs WHERE event = 'start'", &[])
        .await
        .unwrap();
    let (running, pid): (i64, i32) = (row.get(0), row.get(1));
    let before: Vec<(i64, i64)> = client
        .query("SELECT id, lease_token FROM drover.jobs ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        before.len(),
        4,
        "the worker holds all four jobs (one running, three prefetched)"
    );

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    let killed_at = Instant::now();
    let released = loop {
        let rows = client
            .query(
                "SELECT id, lease_token, attempts FROM drover.jobs ORDER BY id",
                &[],
            )
            .await
            .unwrap();
        let all_released = rows.iter().all(|r| r.get::<_, Option<i64>>(1).is_none());
        if all_released {
            break rows;
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(10),
            "jobs still leased to the dead worker"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    // A few milliseconds on an idle host: the master hears of the death at once. The bound is a
    // loaded host's, still far below the 30 s lease (and the 15 s reap) that a master polling for
    // dead workers would wait out.
    let elapsed = killed_at.elapsed();
    assert!(
        elapsed <= Duration::from_secs(5),
        "released after {elapsed:?}"
    );
    for r in &released {
        let (id, attempts): (i64, i32) = (r.get(0), r.get(2));
        let want = if id == running { 1 } else { 0 };
        assert_eq!(
            attempts, want,
            "job {id}: the running job is charged, prefetched ones are not"
        );
    }

    // The replacement worker runs all four: the killed job on its second attempt.
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        4,
        Duration::from_secs(30),
    )
    .await;
    let log = drover.stop().await;
    assert!(log.contains("was killed by SIGKILL"), "{log}");
    assert_exactly_once(&client, &ids).await;
    let attempts: i32 = client
        .query_one(
            "SELECT attempt FROM runs WHERE event = 'finish' AND job_id = $1",
            &[&running],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(attempts, 2);
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM runs WHERE event = 'finish' AND attempt = 1"
        )
        .await,
        3
    );
    db.stop().await;
}

#[tokio::test]
async fn sigterm_under_load_drains_and_leaves_unstarted_jobs_uncharged() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let ids = enqueue(db.dsn(), 60, &["--ms=300", "--batch=60"]);
    let mut drover = db.drover(&["--workers", "2", "--prefetch", "4"]);
    wait_count(
        &client,
        "SELECT least(count(*), 4) FROM runs WHERE event = 'finish'",
        4,
        Duration::from_secs(30),
    )
    .await;
    drover.signal(Signal::SIGTERM);
    let status = drover.wait_exit(Duration::from_secs(20)).await;
    assert!(
        status.success(),
        "exit status {status}\n{}",
        drover.log_text()
    );

    // Everything that started also finished; nothing is leased; unstarted jobs kept attempt 0.
    let started = count(
        &client,
        "SELECT count(DISTINCT job_id) FROM runs WHERE event = 'start'",
    )
    .await;
    let finished = count(
        &client,
        "SELECT count(DISTINCT job_id) FROM runs WHERE event = 'finish'",
    )
    .await;
    assert_eq!(started, finished, "a job was cut off");
    let left = count(&client, "SELECT count(*) FROM drover.jobs").await;
    assert_eq!(left + finished, 60, "jobs lost");
    assert!(left > 0, "the drain should leave jobs behind");
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE lease_token IS NOT NULL OR attempts <> 0"
        )
        .await,
        0
    );

    // A new master runs the rest, each exactly once.
    let drover = db.drover(&["--workers", "2", "--prefetch", "4"]);
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(60),
    )
    .await;
    drover.stop().await;
    assert_exactly_once(&client, &ids).await;
    db.stop().await;
}

#[tokio::test]
async fn sigkill_of_the_master_lets_the_next_take_its_jobs_after_the_lease_and_its_node_row() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let ids = enqueue(db.dsn(), 12, &["--ms=1000", "--batch=12"]);
    let mut first = db.drover(&["--workers", "2", "--prefetch", "2", "--lease", "3s"]);
    wait_count(
        &client,
        "SELECT least(count(*), 2) FROM runs WHERE event = 'start'",
        2,
        Duration::from_secs(30),
    )
    .await;
    let worker_pids: Vec<i32> = pids_that_ran(&client).await;
    first.signal(Signal::SIGKILL);
    first.wait_exit(Duration::from_secs(5)).await;
    let killed_at = Instant::now();
    // Its workers die with it (parent-death signal): no job keeps running unleased.
    for pid in worker_pids {
        wait_process_gone(pid, Duration::from_secs(1)).await;
    }
    assert!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE lease_token IS NOT NULL"
        )
        .await
            > 0
    );

    // On the same state directory, as a service manager restarts it: the dead master's row goes
    // (a queue pause would otherwise wait for it), and this one's is the only one.
    let state_dir = first.state_dir.display().to_string();
    let second = db.drover(&[
        "--workers",
        "2",
        "--prefetch",
        "2",
        "--lease",
        "3s",
        "--state-dir",
        &state_dir,
    ]);
    second
        .wait_log("previous master", Duration::from_secs(30))
        .await;
    assert_eq!(count(&client, "SELECT count(*) FROM drover.nodes").await, 1);
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(60),
    )
    .await;
    let log = second.stop().await;
    assert!(log.contains("took back jobs whose lease expired"), "{log}");
    assert!(
        log.contains("removed the node row of this state directory's previous master"),
        "{log}"
    );
    assert_exactly_once(&client, &ids).await;
    // The jobs the dead master held were not restarted before their lease ran out (3 s).
    let early: i64 = client
        .query_one(
            "SELECT count(*) FROM runs WHERE event = 'start' AND attempt > 1 AND at < (SELECT min(at) FROM runs) + interval '3 seconds'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(early, 0);
    assert!(killed_at.elapsed() >= Duration::from_secs(1));
    db.stop().await;
}

#[tokio::test]
async fn a_fifteen_second_job_with_a_six_second_lease_is_never_handed_to_a_second_worker() {
    let db = Cluster::start().await;
    let client = db.client().await;
    // The job outlasts its lease 2.5 times, so it lives on renewals alone. A 6 s lease, not less:
    // the worker is killed (rightly) when renewals stall for about half the lease, and a loaded CI
    // machine has stalled a statement for over a second.
    let ids = enqueue(db.dsn(), 1, &["--ms=15000"]);
    let drover = db.drover(&["--workers", "2", "--prefetch", "1", "--lease", "6s"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        1,
        Duration::from_secs(40),
    )
    .await;
    let log = drover.stop().await;
    assert_exactly_once(&client, &ids).await;
    assert_eq!(
        count(&client, "SELECT count(*) FROM runs WHERE event = 'start'").await,
        1,
        "{log}"
    );
    assert!(!log.contains("lease lost"), "{log}");
    db.stop().await;
}

#[tokio::test]
async fn a_job_enqueued_in_a_rolled_back_transaction_never_runs() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let drover = db.drover(&["--workers", "1", "--poll-interval", "200ms"]);
    let gone = enqueue(db.dsn(), 3, &["--rollback", "--first-seq=100"]);
    let kept = enqueue(db.dsn(), 2, &["--first-seq=1"]);
    assert_eq!(gone.len(), 3);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        2,
        Duration::from_secs(30),
    )
    .await;
    // Several fallback polls later, still only the committed jobs ran.
    tokio::time::sleep(Duration::from_millis(800)).await;
    drover.stop().await;
    assert_exactly_once(&client, &kept).await;
    assert_eq!(
        count(&client, "SELECT count(*) FROM runs WHERE seq >= 100").await,
        0
    );
    db.stop().await;
}

#[tokio::test]
async fn an_unknown_database_or_role_at_start_up_exits_at_once_with_the_servers_message() {
    let db = Cluster::start().await;
    for (what, url, says) in [
        (
            "database",
            db.url().replace("dbname=drover", "dbname=no_such_db"),
            "database \"no_such_db\" does not exist",
        ),
        (
            "role",
            db.url().replace("user=drover", "user=no_such_role"),
            "role \"no_such_role\" does not exist",
        ),
    ] {
        assert_ne!(url, db.url(), "the test URL names the {what}");
        // Retrying cannot help: under systemd (Type=notify) a start that waits forever hangs.
        let mut drover = Drover::start(Some(&url), Some(db.dsn()), &["--workers", "1"]);
        let status = drover.wait_exit(Duration::from_secs(15)).await;
        let log = drover.log_text();
        assert!(!status.success(), "{log}");
        assert!(log.contains(says), "{what}: {log}");
        assert!(!log.contains("retrying"), "{what}: {log}");
    }
    db.stop().await;
}

#[test]
fn a_zero_memory_check_interval_is_refused_by_name_before_anything_starts() {
    // A zero period would panic the timer after the workers were started.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .args([
            "run",
            "--memory-check-interval",
            "0",
            "--workers",
            "1",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("--memory-check-interval"), "{said}");
    assert!(said.contains("an interval must be more than 0"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
}

#[tokio::test]
async fn an_unreachable_database_is_named_and_retried_until_it_comes_up() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://drover:hunter2@127.0.0.1:{port}/drover");
    let dsn = format!("pgsql:host=127.0.0.1;port={port};dbname=drover;user=drover");
    let drover = Drover::start(Some(&url), Some(&dsn), &["--workers", "1"]);
    let log = drover
        .wait_log(
            &format!("cannot connect to PostgreSQL at 127.0.0.1:{port}/drover"),
            Duration::from_secs(20),
        )
        .await;
    drover
        .wait_log("retrying until it answers", Duration::from_secs(20))
        .await;
    assert!(!log.contains("hunter2"), "password in the log:\n{log}");

    // The server appears; drover connects, migrates and works.
    let db = Cluster::start_with(|c| c.tcp_port = Some(port)).await;
    let client = db.client().await;
    drover
        .wait_log("registered node", Duration::from_secs(30))
        .await;
    let ids = enqueue(db.dsn(), 3, &[]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        3,
        Duration::from_secs(30),
    )
    .await;
    let log = drover.stop().await;
    assert!(!log.contains("hunter2"), "password in the log:\n{log}");
    assert_exactly_once(&client, &ids).await;
    db.stop().await;
}

#[tokio::test]
async fn garbage_and_oversized_frames_replace_the_worker_and_lose_nothing() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut ids = enqueue(db.dsn(), 20, &["--ms=20", "--batch=20"]);
    ids.extend(enqueue(db.dsn(), 1, &["--act=garbage", "--first-seq=1000"]));
    ids.extend(enqueue(
        db.dsn(),
        1,
        &["--act=oversized", "--first-seq=2000"],
    ));
    let drover = db.drover(&["--workers", "2", "--prefetch", "2"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        22,
        Duration::from_secs(60),
    )
    .await;
    let log = drover.stop().await;
    assert!(log.contains("malformed frame"), "{log}");
    assert!(
        log.contains("frame longer than the 1048576-byte limit"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    assert_exactly_once(&client, &ids).await;
    // The two bad jobs were retried (attempt counted) by a replacement worker.
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM runs WHERE event = 'finish' AND seq >= 1000 AND attempt = 2"
        )
        .await,
        2
    );
    db.stop().await;
}

#[tokio::test]
async fn unknown_jobs_and_stale_tokens_from_a_worker_replace_it() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut ids = enqueue(db.dsn(), 1, &["--act=unknown_job", "--first-seq=1"]);
    ids.extend(enqueue(
        db.dsn(),
        1,
        &["--act=stale_token", "--first-seq=2"],
    ));
    let drover = db.drover(&["--workers", "1"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        2,
        Duration::from_secs(60),
    )
    .await;
    let log = drover.stop().await;
    assert!(log.contains("reported done for job 987654321"), "{log}");
    assert!(log.contains("which it does not hold"), "{log}");
    assert_exactly_once(&client, &ids).await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM runs WHERE event = 'finish' AND attempt = 2"
        )
        .await,
        2
    );
    db.stop().await;
}

#[tokio::test]
async fn a_job_out_of_attempts_fails_into_failed_jobs_with_its_error() {
    let db = Cluster::start().await;
    let client = db.client().await;
    // seq 7 throws on its first attempt only; seq 8 always throws and has one attempt.
    enqueue(
        db.dsn(),
        1,
        &["--act=throw", "--max-attempts=3", "--first-seq=7"],
    );
    let always = enqueue(
        db.dsn(),
        1,
        &["--act=throw", "--max-attempts=1", "--first-seq=8"],
    );
    let drover = db.drover(&["--workers", "1"]);
    wait_count(
        &client,
        "SELECT count(*) FROM drover.failed_jobs",
        1,
        Duration::from_secs(30),
    )
    .await;
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(30),
    )
    .await;
    drover.stop().await;
    // seq 7 threw on attempt 1 and then succeeded; seq 8 had one attempt and failed.
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM runs WHERE seq = 7 AND event = 'finish' AND attempt = 2"
        )
        .await,
        1
    );
    let row = client
        .query_one("SELECT id, attempts, error FROM drover.failed_jobs", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), always[0]);
    assert_eq!(row.get::<_, i32>(1), 1);
    assert!(row
        .get::<_, String>(2)
        .contains("RuntimeException: job 8 failed on purpose"));
    db.stop().await;
}

#[tokio::test]
async fn a_delayed_job_runs_when_due_without_waiting_for_the_poll() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let drover = db.drover(&["--workers", "1", "--poll-interval", "60s"]);
    drover
        .wait_log("registered node", Duration::from_secs(30))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let enqueued = Instant::now();
    let ids = enqueue(db.dsn(), 1, &["--delay=1.5"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        1,
        Duration::from_secs(10),
    )
    .await;
    let took = enqueued.elapsed();
    assert!(
        took >= Duration::from_millis(1400),
        "ran early, after {took:?}"
    );
    assert!(
        took < Duration::from_secs(4),
        "the due-time timer did not fire: {took:?}"
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM runs WHERE event = 'start'").await,
        1
    );
    drover.stop().await;
    assert_exactly_once(&client, &ids).await;
    db.stop().await;
}

#[tokio::test]
async fn the_embedded_default_starts_and_stops_its_own_postgres() {
    let dir = shared_tempdir();
    let state = dir.path().join("state");
    let state_arg = state.to_str().unwrap().to_string();
    let drover = Drover::start(None, None, &["--workers", "2", "--state-dir", &state_arg]);
    // master.json is written once the node is registered, a moment after that line is logged
    // (a loaded host can read in between): the test waits for the file itself.
    let master_json = state.join("master.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !master_json.exists() {
        assert!(
            Instant::now() < deadline,
            "no master.json in 60 s:\n{}",
            drover.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let master: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&master_json).unwrap()).unwrap();
    let dsn = master["pdo_dsn"].as_str().unwrap().to_string();
    let url = master["database_url"].as_str().unwrap().to_string();
    let client = drover_broker::connect::connect_once(&url).await.unwrap();
    client
        .batch_execute("CREATE TABLE public.runs (job_id bigint, seq int, attempt int, pid int, event text, at timestamptz NOT NULL DEFAULT clock_timestamp())")
        .await
        .unwrap();
    let ids = enqueue(&dsn, 50, &["--batch=50"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        50,
        Duration::from_secs(30),
    )
    .await;
    assert_exactly_once(&client, &ids).await;
    let postmaster_pid: i32 = std::fs::read_to_string(state.join("postgres/postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    drop(client);
    let log = drover.stop().await;
    assert!(log.contains("embedded PostgreSQL stopped"), "{log}");
    wait_process_gone(postmaster_pid, Duration::from_secs(5)).await;
    assert!(!state.join("master.json").exists());
}

#[tokio::test]
async fn a_second_sigterm_stops_at_once_and_releases_every_lease() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let ids = enqueue(db.dsn(), 8, &["--ms=20000", "--batch=8"]);
    let mut drover = db.drover(&["--workers", "2", "--prefetch", "3"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'start'",
        2,
        Duration::from_secs(30),
    )
    .await;
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs WHERE lease_token IS NOT NULL",
        6,
        Duration::from_secs(10),
    )
    .await;
    let stopped_at = Instant::now();
    drover.signal(Signal::SIGTERM);
    drover
        .wait_log("graceful shutdown", Duration::from_secs(5))
        .await;
    drover.signal(Signal::SIGTERM);
    let status = drover.wait_exit(Duration::from_secs(10)).await;
    assert!(status.success(), "{status}\n{}", drover.log_text());
    assert!(
        stopped_at.elapsed() < Duration::from_secs(5),
        "took {:?}",
        stopped_at.elapsed()
    );
    assert!(drover.log_text().contains("immediate shutdown"));
    // Every lease released: the two running jobs charged, the prefetched ones not.
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE lease_token IS NOT NULL"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE attempts = 1"
        )
        .await,
        2
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE attempts = 0"
        )
        .await,
        6
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.jobs").await,
        ids.len() as i64
    );
    db.stop().await;
}

#[tokio::test]
async fn a_master_cut_off_from_the_database_kills_its_worker_before_the_lease_ends() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = Cluster::start_with(|c| c.tcp_port = Some(port)).await;
    let client = db.client().await;
    // A 6 s lease: the kill must come before it ends, counted from a renewal up to lease/3 before
    // the cut, by processes a loaded machine may stall for a second.
    let ids = enqueue(db.dsn(), 1, &["--ms=15000"]);
    let drover = db.drover(&["--workers", "1", "--lease", "6s"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'start'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let pid: i32 = client
        .query_one("SELECT pid FROM runs", &[])
        .await
        .unwrap()
        .get(0);
    drop(client);

    // The database goes away while the job runs.
    let Cluster { pg, dir } = db;
    pg.unwrap().stop().await;
    let cut_at = Instant::now();
    wait_process_gone(pid, Duration::from_secs(10)).await;
    // Killed before the 6 s lease (counted from the last renewal, at most lease/3 before the cut)
    // ran out: by the master's lease check or by the worker's own guard, whichever came first.
    assert!(
        cut_at.elapsed() < Duration::from_millis(6000),
        "worker killed only after {:?}",
        cut_at.elapsed()
    );
    let log = drover.log_text();
    assert!(
        log.contains("could not be renewed") || log.contains("drover lease guard: worker pid"),
        "{log}"
    );

    // The database returns; the killed job is released (charged) and runs to completion, once.
    let mut config = drover_broker::EmbeddedConfig::new(dir.path().join("db"));
    config.tcp_port = Some(port);
    let db = Cluster {
        pg: Some(
            drover_broker::EmbeddedPostgres::start(&config)
                .await
                .unwrap(),
        ),
        dir,
    };
    let client = db.client().await;
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        1,
        Duration::from_secs(60),
    )
    .await;
    let log = drover.stop().await;
    assert_exactly_once(&client, &ids).await;
    assert_eq!(
        count(&client, "SELECT count(*) FROM runs WHERE event = 'start'").await,
        2,
        "{log}"
    );
    db.stop().await;
}
