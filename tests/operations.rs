//! Supervisor operations end to end: restarts and the circuit, limits, reloads, pause and
//! continue, systemd — the real binary, real PHP workers, a real PostgreSQL.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::{
    assert_exactly_once, count, enqueue, wait_count, wait_finished_at_least, Cluster, Drover,
};

fn worker_starts(log: &str) -> usize {
    log.matches("worker started").count()
}

/// A `--config` file with one pool running `command`, written next to the cluster.
fn config_file(
    db: &Cluster,
    name: &str,
    pool: serde_json::Value,
    top: serde_json::Value,
) -> String {
    let mut config = serde_json::json!({
        "version": 1,
        "database_url": db.url(),
        "pools": [pool],
    });
    for (k, v) in top.as_object().unwrap() {
        config[k] = v.clone();
    }
    let path = db.dir.path().join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    path.display().to_string()
}

fn handler_command() -> Vec<String> {
    let root = support::root();
    vec![
        "php".into(),
        root.join("php-client/bin/drover-worker")
            .display()
            .to_string(),
        root.join("tests/fixtures/handler.php")
            .display()
            .to_string(),
    ]
}

#[tokio::test]
async fn a_crash_looping_worker_opens_the_circuit_and_does_not_spin_the_cpu() {
    let db = Cluster::start().await;
    let config = config_file(
        &db,
        "crash.json",
        serde_json::json!({
            "name": "crashing", "queues": ["default"], "processes": 2,
            "command": ["sh", "-c", "exit 3"],
        }),
        // A pause long enough that the 2 s check below, and the log and status reads before it,
        // fit inside it on a loaded host (3 s left about a second of slack; 8 s leave several).
        serde_json::json!({"restart_failures": 4, "restart_pause": 8}),
    );
    let drover = Drover::start_worker(None, None, &["--config", &config], &[]);
    drover
        .wait_log(
            "restarts are suspended (circuit open)",
            Duration::from_secs(20),
        )
        .await;
    let status = drover
        .wait_status("an open circuit", Duration::from_secs(5), |s| {
            s["pools"][0]["circuit"]["state"] == "open"
        })
        .await;
    assert!(status["pools"][0]["failures_in_a_row"].as_u64().unwrap() >= 4);
    assert_eq!(status["pools"][0]["serving"], 0);

    // While open: no starts, and the master sleeps.
    let starts = worker_starts(&drover.log_text());
    let cpu = drover.cpu_seconds();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let log = drover.log_text();
    assert_eq!(
        worker_starts(&log),
        starts,
        "workers started while the circuit was open:\n{log}"
    );
    let used = drover.cpu_seconds() - cpu;
    assert!(
        used < 0.2,
        "the master used {used} s of CPU in 2 s with the circuit open"
    );

    // After the pause one probe goes through; it dies too, so the circuit opens again.
    let log = drover
        .wait_log("as the circuit's probe", Duration::from_secs(20))
        .await;
    let probes_at_once = log.matches("as the circuit's probe").count();
    assert_eq!(probes_at_once, 1, "more than one probe:\n{log}");
    drover
        .wait_status(
            "the circuit open again after the probe",
            Duration::from_secs(5),
            |s| {
                s["pools"][0]["circuit"]["state"] == "open"
                    && s["pools"][0]["failures_in_a_row"].as_u64().unwrap_or(0) >= 5
            },
        )
        .await;
    drover.stop().await;
}

#[tokio::test]
async fn a_worker_that_never_says_hello_is_killed_at_its_boot_timeout_as_a_failed_start() {
    let db = Cluster::start().await;
    let config = config_file(
        &db,
        "silent.json",
        serde_json::json!({
            "name": "silent", "queues": ["default"], "processes": 1,
            "command": ["sleep", "600"], "boot_timeout": 1,
        }),
        serde_json::json!({"restart_failures": 2, "restart_pause": 60}),
    );
    let drover = Drover::start_worker(None, None, &["--config", &config], &[]);
    let log = drover
        .wait_log(
            "restarts are suspended (circuit open)",
            Duration::from_secs(15),
        )
        .await;
    assert_eq!(log.matches("did not say hello in time").count(), 2, "{log}");
    let (status, code) = drover.status();
    assert_eq!(status["pools"][0]["circuit"]["state"], "open");
    assert_eq!(status["pools"][0]["workers"].as_array().unwrap().len(), 0);
    // An open circuit is degraded, whatever else runs: exit 3, with the reason.
    assert_eq!(code, 3, "{status:#}");
    assert_eq!(status["health"], "degraded");
    assert!(
        status["problems"][0]
            .as_str()
            .unwrap()
            .contains("pool silent: circuit open after 2 failed starts"),
        "{status:#}"
    );
    drover.stop().await;
}

#[tokio::test]
async fn a_worker_that_leaks_memory_is_recycled_after_its_current_job_and_the_job_is_not_failed() {
    leaking_worker_is_recycled("exec").await;
}

#[tokio::test]
async fn a_forked_worker_that_leaks_memory_is_replaced_by_a_new_fork_after_its_current_job() {
    leaking_worker_is_recycled("fork").await;
}

/// A worker over its pool's memory limit finishes its job and is replaced (`spawn`: started by
/// exec, or forked from the zygote).
async fn leaking_worker_is_recycled(spawn: &str) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let command = handler_command();
    let config = config_file(
        &db,
        "leak.json",
        serde_json::json!({
            "name": "leaky", "queues": ["default"], "processes": 1,
            "command": command, "memory": 80, "spawn": spawn,
            "env": {"DROVER_PDO_DSN": db.dsn()},
        }),
        serde_json::json!({}),
    );
    let drover = Drover::start_worker(
        None,
        None,
        &["--config", &config, "--memory-check-interval", "200ms"],
        &[],
    );
    let status = drover
        .wait_status("a ready worker", Duration::from_secs(20), |s| {
            s["pools"][0]["serving"] == 1
        })
        .await;
    let first_pid = status["pools"][0]["workers"][0]["pid"].as_u64().unwrap();
    // The leaking job runs 1.5 s after it grew: the check sees it mid-job and must wait for the end.
    let ids = enqueue(db.dsn(), 1, &["--act=leak", "--ms=1500"]);
    let more = enqueue(db.dsn(), 3, &[]);
    drover
        .wait_log("over the pool's memory limit", Duration::from_secs(20))
        .await;
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        4,
        Duration::from_secs(30),
    )
    .await;
    let all: Vec<i64> = ids.iter().chain(&more).copied().collect();
    assert_exactly_once(&client, &all).await;
    // The leaking job finished on the first worker; the rest ran on its replacement.
    let leaked_on: i32 = client
        .query_one(
            "SELECT pid FROM runs WHERE job_id = $1 AND event = 'finish'",
            &[&ids[0]],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(leaked_on as u64, first_pid);
    let status = drover
        .wait_status("a replacement worker", Duration::from_secs(10), |s| {
            s["pools"][0]["serving"] == 1
                && s["pools"][0]["workers"][0]["pid"].as_u64() != Some(first_pid)
        })
        .await;
    // A planned exit: the circuit never counted it.
    assert_eq!(status["pools"][0]["failures_in_a_row"], 0);
    assert_eq!(status["totals"]["failed"], 0);
    assert_eq!(
        status["pools"][0]["workers"][0]["forked"],
        spawn == "fork",
        "{status:#}"
    );
    drover.stop().await;
}

#[tokio::test]
async fn hup_under_load_replaces_every_worker_losing_nothing_with_capacity_never_below_n_minus_1() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let drover = db.drover(&["--workers", "4", "--prefetch", "2"]);
    let status = drover
        .wait_status("4 ready workers", Duration::from_secs(30), |s| {
            s["pools"][0]["serving"] == 4
        })
        .await;
    let old: Vec<u64> = status["pools"][0]["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["pid"].as_u64().unwrap())
        .collect();
    let ids = enqueue(db.dsn(), 600, &["--ms=20"]);
    wait_finished_at_least(&client, 40).await;

    drover.signal(Signal::SIGHUP);
    let started = Instant::now();
    let mut lowest = usize::MAX;
    loop {
        let (s, _) = drover.status();
        let pool = &s["pools"][0];
        lowest = lowest.min(pool["serving"].as_u64().unwrap() as usize);
        let workers = pool["workers"].as_array().unwrap();
        let done = pool["generation"] == 1
            && workers.len() == 4
            && workers
                .iter()
                .all(|w| w["generation"] == 1 && w["state"] != "starting");
        if done {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the reload did not finish: {s:#}\n{}",
            drover.log_text()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        lowest >= 3,
        "capacity fell to {lowest} workers during the reload"
    );
    let (s, _) = drover.status();
    for w in s["pools"][0]["workers"].as_array().unwrap() {
        assert!(
            !old.contains(&w["pid"].as_u64().unwrap()),
            "worker {w} was not replaced"
        );
    }
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(60),
    )
    .await;
    assert_exactly_once(&client, &ids).await;
    let log = drover.stop().await;
    assert_eq!(log.matches("reload: worker").count(), 4, "{log}");
}

#[tokio::test]
async fn usr2_stops_feeding_within_one_job_and_holds_no_prefetched_jobs_then_cont_resumes() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let drover = db.drover(&["--workers", "2", "--prefetch", "4"]);
    let ids = enqueue(db.dsn(), 200, &["--ms=50"]);
    wait_finished_at_least(&client, 10).await;

    drover.signal(Signal::SIGUSR2);
    // Within one job (50 ms) plus delivery, nothing holds a job any more; the bound is for the
    // status polls (a process each) on a loaded host.
    let status = drover
        .wait_status("paused, holding nothing", Duration::from_secs(5), |s| {
            s["paused"] == true
                && s["pools"][0]["workers"]
                    .as_array()
                    .is_some_and(|ws| ws.iter().all(|w| w["held"] == 0))
        })
        .await;
    assert_eq!(drover.status().1, 1, "status exits 1 while paused");
    assert!(status["totals"]["returned_unstarted"].as_u64().unwrap() > 0);
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs WHERE lease_token IS NOT NULL",
        0,
        Duration::from_secs(5),
    )
    .await;
    let started = count(&client, "SELECT count(*) FROM runs WHERE event = 'start'").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        count(&client, "SELECT count(*) FROM runs WHERE event = 'start'").await,
        started,
        "jobs started while paused"
    );

    drover.signal(Signal::SIGCONT);
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(60),
    )
    .await;
    assert_exactly_once(&client, &ids).await;
    assert_eq!(drover.status().1, 0);
    drover.stop().await;
}

#[tokio::test]
async fn drover_restart_rolls_the_workers_and_a_second_master_is_refused() {
    let db = Cluster::start().await;
    let drover = db.drover(&["--workers", "2"]);
    drover
        .wait_status("2 ready workers", Duration::from_secs(30), |s| {
            s["pools"][0]["serving"] == 2
        })
        .await;
    let state = drover.state_dir.display().to_string();
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .args([
            "run",
            "--database-url",
            db.url(),
            "--state-dir",
            &state,
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(!second.status.success());
    let message = String::from_utf8_lossy(&second.stderr);
    assert!(
        message.contains("another drover master is already running"),
        "{message}"
    );

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["restart", "--state-dir", &state])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drover
        .wait_status(
            "every worker of generation 1",
            Duration::from_secs(30),
            |s| {
                let ws = s["pools"][0]["workers"].as_array().unwrap();
                ws.len() == 2
                    && ws
                        .iter()
                        .all(|w| w["generation"] == 1 && w["state"] == "idle")
            },
        )
        .await;
    drover.stop().await;
}

#[tokio::test]
async fn systemd_hears_ready_then_stopping() {
    let db = Cluster::start().await;
    let dir = support::shared_tempdir();
    let path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    std::env::set_var("NOTIFY_SOCKET", &path);
    let drover = db.drover(&["--workers", "1"]);
    std::env::remove_var("NOTIFY_SOCKET");
    let mut buf = [0u8; 512];
    let n = socket.recv(&mut buf).unwrap();
    let ready = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(ready.starts_with("READY=1\nSTATUS="), "{ready}");
    drover.signal(Signal::SIGTERM);
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STOPPING=1");
    let mut drover = drover;
    assert!(drover.wait_exit(Duration::from_secs(30)).await.success());
}

/// The `auto:busy` pool's target changes in a master's log: (seconds of the day the line was
/// stamped, from, to), from lines such as `2026-12-03T11:37:47.123456Z  INFO ...: autoscaling:
/// auto:busy 1 → 2 workers ...`.
fn busy_changes(log: &str) -> Vec<(f64, u64, u64)> {
    let mut changes: Vec<(f64, u64, u64)> = Vec::new();
    for line in log.lines() {
        let Some((_, rest)) = line.split_once("autoscaling: auto:busy ") else {
            continue;
        };
        let stamp = |range: std::ops::Range<usize>| -> f64 {
            line.get(range)
                .and_then(|f| f.parse().ok())
                .unwrap_or_else(|| panic!("no time stamp: {line}"))
        };
        let mut at = stamp(11..13) * 3600.0 + stamp(14..16) * 60.0 + stamp(17..26);
        // A run across midnight.
        if changes.last().is_some_and(|(before, _, _)| at < *before) {
            at += 86_400.0;
        }
        let mut counts = rest.split_whitespace();
        let from = counts.next().and_then(|n| n.parse().ok());
        let to = counts.nth(1).and_then(|n| n.parse().ok());
        let (Some(from), Some(to)) = (from, to) else {
            panic!("not a change: {line}");
        };
        changes.push((at, from, to));
    }
    changes
}

#[tokio::test]
async fn autoscaling_follows_a_backlog_up_and_back_down_within_max_shift_per_cooldown_without_flapping(
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let config = config_file(
        &db,
        "auto.json",
        serde_json::json!({
            "name": "auto", "queues": ["busy", "quiet"], "processes": 5,
            "command": handler_command(), "env": {"DROVER_PDO_DSN": db.dsn()},
            "balance": "auto", "min_processes": 1, "max_processes": 5,
            "balance_max_shift": 1, "balance_cooldown": 0.5, "scale_down_delay": 1,
        }),
        serde_json::json!({}),
    );
    let drover = Drover::start_worker(None, None, &["--config", &config], &[]);
    drover
        .wait_status("one worker per queue", Duration::from_secs(30), |s| {
            s["pools"]
                .as_array()
                .is_some_and(|ps| ps.len() == 2 && ps.iter().all(|p| p["serving"] == 1))
        })
        .await;
    let ids = enqueue(db.dsn(), 300, &["--queue=busy", "--ms=40"]);

    // Watch the targets until the backlog is gone and the busy queue is back at its minimum.
    let started = Instant::now();
    let mut quiet_seen = Vec::new();
    let mut back_down_at = None;
    loop {
        let (s, _) = drover.status();
        let pools = s["pools"].as_array().unwrap();
        let find = |name: &str| {
            pools.iter().find(|p| p["name"] == name).unwrap()["processes"]
                .as_u64()
                .unwrap()
        };
        let now_busy = find("auto:busy");
        quiet_seen.push(find("auto:quiet"));
        assert!(
            now_busy + find("auto:quiet") <= 5,
            "over max_processes: {s:#}"
        );
        let busy = now_busy;
        let left = count(&client, "SELECT count(*) FROM drover.jobs").await;
        if left == 0 && busy == 1 && back_down_at.is_none() {
            back_down_at = Some(Instant::now());
        }
        if back_down_at.is_some_and(|t| t.elapsed() > Duration::from_secs(3)) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no convergence:\n{}",
            drover.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // The changes as the master made them, from its log (each line stamped when it decided), not
    // as a poll happened to see them: a poll that a loaded machine delays merges two changes.
    let changes = busy_changes(&drover.log_text());
    let peak = changes.iter().map(|(_, _, to)| *to).max().unwrap_or(1);
    assert_eq!(
        peak, 4,
        "the busy queue should grow to max_processes minus the quiet queue's one: {changes:?}"
    );
    for pair in changes.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            // A decision waits out the cooldown from the one before; without it they would come
            // at every 100 ms tick. (The stamps are the wall clock's, the cooldown the monotonic
            // one's: a little slack.)
            gap >= 0.45,
            "two changes {gap:.3} s apart (cooldown 0.5 s): {changes:?}"
        );
    }
    for (_, from, to) in &changes {
        assert_eq!(
            from.abs_diff(*to),
            1,
            "a change larger than max_shift: {changes:?}"
        );
    }
    let ups = changes.iter().filter(|(_, f, t)| t > f).count();
    let downs = changes.iter().filter(|(_, f, t)| t < f).count();
    assert_eq!(
        (ups, downs),
        (3, 3),
        "up to 4 and back to 1 once, no flapping: {changes:?}"
    );
    assert!(
        quiet_seen.iter().all(|n| *n == 1),
        "the empty queue kept its one worker throughout"
    );
    assert_exactly_once(&client, &ids).await;
    let (s, _) = drover.status();
    assert_eq!(s["pools"][0]["autoscaling"]["pool"], "auto");
    drover.stop().await;
}

#[tokio::test]
async fn a_reload_applies_the_new_configuration_adding_growing_and_retiring_pools() {
    let db = Cluster::start().await;
    let pool = |name: &str, processes: usize| {
        serde_json::json!({
            "name": name, "queues": [name], "processes": processes,
            "command": handler_command(), "env": {"DROVER_PDO_DSN": db.dsn()},
        })
    };
    // The reload command prints the new configuration (as `php artisan drover --export` does).
    let next = db.dir.path().join("next.json");
    let config = config_file(
        &db,
        "reload.json",
        pool("mail", 1),
        serde_json::json!({"pools": [pool("mail", 1), pool("reports", 1)],
            "reload_command": ["cat", next.display().to_string()]}),
    );
    let drover = Drover::start_worker(None, None, &["--config", &config], &[]);
    drover
        .wait_status("two pools serving", Duration::from_secs(30), |s| {
            s["pools"]
                .as_array()
                .is_some_and(|ps| ps.iter().all(|p| p["serving"] == 1))
        })
        .await;
    let mut new_config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    new_config["pools"] = serde_json::json!([pool("mail", 3), pool("video", 1)]);
    std::fs::write(&next, serde_json::to_vec(&new_config).unwrap()).unwrap();

    drover.signal(Signal::SIGHUP);
    let status = drover
        .wait_status(
            "mail at 3, video added, reports retired",
            Duration::from_secs(30),
            |s| {
                let pools = s["pools"].as_array().unwrap();
                let get = |n: &str| pools.iter().find(|p| p["name"] == n).cloned();
                get("mail").is_some_and(|p| p["serving"] == 3 && p["generation"] == 1)
                    && get("video").is_some_and(|p| p["serving"] == 1)
                    && get("reports").is_some_and(|p| {
                        p["retired"] == true && p["workers"].as_array().unwrap().is_empty()
                    })
            },
        )
        .await;
    assert_eq!(status["reloading"], false);
    // The file now holds what runs.
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    assert_eq!(written["pools"][1]["name"], "video");

    // An invalid configuration is refused by name, and the workers are still replaced.
    std::fs::write(&next, br#"{"version":1,"pools":[{"name":"mail","queues":["mail"],"processes":0,"command":["x"]}]}"#).unwrap();
    drover.signal(Signal::SIGHUP);
    drover
        .wait_log(
            "processes must be a whole number from 1 to 4096, got 0",
            Duration::from_secs(10),
        )
        .await;
    drover
        .wait_status("mail on generation 2", Duration::from_secs(30), |s| {
            s["pools"][0]["generation"] == 2
                && s["pools"][0]["workers"]
                    .as_array()
                    .is_some_and(|ws| ws.len() == 3 && ws.iter().all(|w| w["generation"] == 2))
        })
        .await;
    drover.stop().await;
}

#[tokio::test]
async fn three_masters_started_at_once_on_one_state_dir_leave_exactly_one_running() {
    let db = Cluster::start().await;
    let state = db.dir.path().join("shared-state");
    std::fs::create_dir_all(&state).unwrap();
    let state = state.display().to_string();
    let args = ["--workers", "1", "--state-dir", state.as_str()];
    // Started in the same instant: a check of the socket followed by a bind would let several
    // through; the flock on master.lock lets one.
    let mut masters: Vec<Drover> = (0..3).map(|_| db.drover(&args)).collect();
    // Two of them give up (at once on an idle host; a loaded one may take seconds to run them).
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = |masters: &mut Vec<Drover>| {
        masters
            .iter_mut()
            .filter_map(|m| m.child.try_wait().unwrap())
            .count()
    };
    while exited(&mut masters) < 2 {
        assert!(
            Instant::now() < deadline,
            "more than one master still runs after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The one left keeps running.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut running = 0;
    for m in &mut masters {
        match m.child.try_wait().unwrap() {
            None => running += 1,
            Some(status) => {
                assert!(!status.success());
                let log = m.log_text();
                assert!(
                    log.contains("another drover master is already running"),
                    "{log}"
                );
            }
        }
    }
    assert_eq!(running, 1, "exactly one master runs");
    for m in masters {
        if m.log_text().contains("registered node") {
            m.stop().await;
        }
    }
}

#[tokio::test]
async fn sighup_and_sigusr2_while_the_master_waits_for_the_database_are_ignored_not_fatal() {
    // Nothing listens on this port: the master waits for the database at start-up.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://drover@127.0.0.1:{port}/drover");
    let drover = Drover::start(Some(&url), None, &["--workers", "1"]);
    drover
        .wait_log("retrying until it answers", Duration::from_secs(20))
        .await;
    // A deploy's reload or an operator's pause arriving this early used to kill the process.
    drover.signal(Signal::SIGHUP);
    drover.signal(Signal::SIGUSR2);
    drover
        .wait_log(
            "SIGUSR2 while connecting to the database: ignored",
            Duration::from_secs(10),
        )
        .await;
    let log = drover
        .wait_log(
            "SIGHUP while connecting to the database: ignored",
            Duration::from_secs(10),
        )
        .await;
    assert!(!log.contains("panicked"), "{log}");
    // SIGTERM still ends the wait, cleanly.
    drover.stop().await;
}

#[tokio::test]
async fn failed_jobs_older_than_the_retention_are_deleted_by_the_master() {
    let db = Cluster::start().await;
    let client = db.client().await;
    client
        .batch_execute(
            "INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
             SELECT g, 'default', '{}', 1, 'old', now() - interval '8 days' FROM generate_series(1, 2500) g;
             INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
             SELECT g, 'default', '{}', 1, 'recent', now() - interval '6 days' FROM generate_series(3001, 3010) g;",
        )
        .await
        .unwrap();
    // The default retention is 7 days; the master's first pass runs at start.
    let drover = db.drover(&["--workers", "1"]);
    wait_count(
        &client,
        "SELECT count(*) FROM drover.failed_jobs WHERE error = 'old'",
        0,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.failed_jobs WHERE error = 'recent'"
        )
        .await,
        10,
        "failed jobs within the retention stay"
    );
    let log = drover.stop().await;
    assert!(
        log.contains("deleted failed jobs older than 7 days"),
        "{log}"
    );
}

#[tokio::test]
async fn pausing_one_pool_holds_its_jobs_while_the_other_pools_run_and_continue_resumes_it() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let pool = |name: &str| {
        serde_json::json!({
            "name": name, "queues": [name], "processes": 1,
            "command": handler_command(), "env": {"DROVER_PDO_DSN": db.dsn()},
        })
    };
    let config = config_file(
        &db,
        "two-pools.json",
        pool("mail"),
        serde_json::json!({"pools": [pool("mail"), pool("reports")]}),
    );
    let drover = Drover::start_worker(None, None, &["--config", &config], &[]);
    drover
        .wait_status("two pools serving", Duration::from_secs(30), |s| {
            s["pools"]
                .as_array()
                .is_some_and(|ps| ps.iter().all(|p| p["serving"] == 1))
        })
        .await;
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(args)
            .arg("--state-dir")
            .arg(&drover.state_dir)
            .output()
            .unwrap()
    };
    let unknown = cli(&["pause", "--pool", "video"]);
    assert!(!unknown.status.success());
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        said.contains("no pool named \"video\" (pools: mail, reports)"),
        "{said}"
    );

    assert!(cli(&["pause", "--pool", "mail"]).status.success());
    let (status, code) = drover.status();
    assert_eq!(code, 1, "one pool paused: the master says paused");
    assert_eq!(status["pools"][0]["paused"], true);
    assert_eq!(status["pools"][1]["paused"], false);

    let mail = enqueue(db.dsn(), 5, &["--queue=mail", "--first-seq=100"]);
    let reports = enqueue(db.dsn(), 5, &["--queue=reports", "--first-seq=200"]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish' AND seq >= 200",
        5,
        Duration::from_secs(30),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM runs WHERE seq BETWEEN 100 AND 199"
        )
        .await,
        0,
        "the paused pool started nothing"
    );

    assert!(cli(&["continue", "--pool", "mail"]).status.success());
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish' AND seq BETWEEN 100 AND 199",
        5,
        Duration::from_secs(30),
    )
    .await;
    let (_, code) = drover.status();
    assert_eq!(code, 0, "serving again");
    drover.stop().await;
    let all: Vec<i64> = mail.into_iter().chain(reports).collect();
    assert_exactly_once(&client, &all).await;
}

#[tokio::test]
async fn a_second_sighup_during_a_reload_runs_one_more_reload_after_it() {
    let db = Cluster::start().await;
    let pool = serde_json::json!({
        "name": "mail", "queues": ["mail"], "processes": 1,
        "command": handler_command(), "env": {"DROVER_PDO_DSN": db.dsn()},
    });
    // The reload command takes seconds, as `php artisan drover --export` of a big app may.
    let next = db.dir.path().join("next.json");
    let config = config_file(
        &db,
        "slow-reload.json",
        pool,
        serde_json::json!({"reload_command": ["sh", "-c", format!("sleep 3; cat {}", next.display())]}),
    );
    std::fs::copy(&config, &next).unwrap();
    let drover = Drover::start_worker(None, None, &["--config", &config], &[]);
    drover
        .wait_status("serving", Duration::from_secs(30), |s| {
            s["pools"][0]["serving"] == 1
        })
        .await;
    drover.signal(Signal::SIGHUP);
    drover
        .wait_log("reloading: re-reading", Duration::from_secs(10))
        .await;
    // A deploy switched releases and asked again while the first re-read still runs (3 s).
    drover.signal(Signal::SIGHUP);
    drover.signal(Signal::SIGHUP);
    drover
        .wait_log(
            "another follows when it is applied",
            Duration::from_secs(10),
        )
        .await;
    drover
        .wait_status("two reloads applied", Duration::from_secs(30), |s| {
            s["pools"][0]["generation"] == 2 && s["reloading"] == false
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, _) = drover.status();
    assert_eq!(
        status["pools"][0]["generation"], 2,
        "three SIGHUPs during one re-read make exactly one more reload"
    );
    let log = drover.stop().await;
    assert_eq!(log.matches("reloading: re-reading").count(), 2, "{log}");
}

#[tokio::test]
async fn a_job_past_its_timeout_kills_its_worker_settles_the_job_and_a_replacement_starts_uncounted(
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let drover = db.drover(&["--workers", "1", "--timeout", "1s"]);
    let first = drover
        .wait_status("a ready worker", Duration::from_secs(30), |s| {
            s["pools"][0]["serving"] == 1
        })
        .await["pools"][0]["workers"][0]["pid"]
        .as_u64()
        .unwrap();
    let slow = enqueue(db.dsn(), 1, &["--ms=5000", "--max-attempts=1"]);
    let status = drover
        .wait_status(
            "the timeout settled and a new worker",
            Duration::from_secs(15),
            |s| {
                s["totals"]["timed_out"] == 1
                    && s["pools"][0]["serving"] == 1
                    && s["pools"][0]["workers"][0]["pid"].as_u64() != Some(first)
            },
        )
        .await;
    // A planned exit: not an early death.
    assert_eq!(status["pools"][0]["failures_in_a_row"], 0);
    assert_eq!(status["pools"][0]["circuit"]["state"], "closed");
    // Out of attempts: failed with the reason, never finished, never run twice.
    wait_count(
        &client,
        "SELECT count(*) FROM drover.failed_jobs",
        1,
        Duration::from_secs(5),
    )
    .await;
    let error: String = client
        .query_one(
            "SELECT error FROM drover.failed_jobs WHERE id = $1",
            &[&slow[0]],
        )
        .await
        .unwrap()
        .get(0);
    assert!(error.contains("ran past its timeout"), "{error}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM runs WHERE event = 'start'").await,
        1
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM runs WHERE event = 'finish'").await,
        0
    );
    // The replacement works.
    let next = enqueue(db.dsn(), 3, &[]);
    wait_count(
        &client,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        3,
        Duration::from_secs(15),
    )
    .await;
    let finished: Vec<i64> = client
        .query(
            "SELECT job_id FROM runs WHERE event = 'finish' ORDER BY job_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(finished, next);
    drover.stop().await;
}

#[tokio::test]
async fn a_report_left_open_in_repeatable_read_is_named_by_status_metrics_and_a_warning_until_it_ends(
) {
    let db = Cluster::start().await;
    let port = support::free_port();
    let config = config_file(
        &db,
        "horizon.json",
        serde_json::json!({
            "name": "default", "queues": ["default"], "processes": 1,
            "command": handler_command(),
        }),
        // The shortest lease: a check every half lease (1.5 s), a warning after 1 s held.
        serde_json::json!({
            "lease": 3, "snapshot_alert_secs": 1,
            "metrics_listen": format!("127.0.0.1:{port}"),
        }),
    );
    let drover = Drover::start_worker(None, None, &["--config", &config], &[]);
    drover
        .wait_status("a serving worker", Duration::from_secs(20), |s| {
            s["pools"][0]["serving"] == 1
        })
        .await;
    let (report, pid) = support::hold_a_report(&db).await;

    let log = drover
        .wait_log(
            "the database's vacuum horizon has been held back",
            Duration::from_secs(20),
        )
        .await;
    let warning = log
        .lines()
        .find(|l| l.contains("vacuum horizon has been held back"))
        .unwrap();
    for part in [
        &format!("session pid {pid} (nightly report"),
        "idle in transaction",
        &format!("pg_terminate_backend({pid})"),
        "idle_in_transaction_session_timeout",
    ] {
        assert!(warning.contains(part), "{part:?} not in: {warning}");
    }
    let status = drover
        .wait_status(
            "the report as the oldest snapshot",
            Duration::from_secs(5),
            |s| s["horizon"]["oldest"]["pid"] == pid,
        )
        .await;
    assert_eq!(status["horizon"]["oldest"]["name"], "nightly report");
    assert!(status["horizon"]["oldest"]["open_secs"].as_f64().unwrap() >= 1.0);
    let (code, text) = support::http_get(port, "/metrics");
    assert_eq!(code, 200);
    let open: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("drover_oldest_snapshot_seconds "))
        .unwrap_or_else(|| panic!("no drover_oldest_snapshot_seconds in:\n{text}"))
        .parse()
        .unwrap();
    assert!(open >= 1.0, "{text}");

    // The report ends: said once, and the status no longer names it.
    report.batch_execute("COMMIT").await.unwrap();
    let log = drover
        .wait_log(
            "no longer holds the vacuum horizon back",
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(
        log.matches("vacuum horizon has been held back").count(),
        1,
        "warned once per holding:\n{log}"
    );
    drover
        .wait_status("the report gone", Duration::from_secs(5), |s| {
            s["horizon"]["oldest"]["pid"] != pid
        })
        .await;
    drover.stop().await;
}
