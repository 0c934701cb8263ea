//! Fork mode, end to end: workers forked from a zygote (docs/decisions/0001). The plain-PHP
//! scenarios run `drover run --spawn fork` with the fixture handler; the Laravel ones run
//! `php artisan drover` on Laravel 8.83 and 12 (`laravel8::NAME`, `laravel12::NAME`), where fork
//! is the default. What each forked worker must not share with the zygote or its siblings, and
//! what the master must do when a zygote dies, hangs or cannot boot, is asserted from outside:
//! `/proc`, `pg_stat_activity`, the rows the jobs write, and `drover status`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use support::*;

/// A process's state letter and parent, from /proc; `None` once it is reaped.
fn stat_of(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

fn alive(pid: i32) -> bool {
    stat_of(pid).is_some_and(|(state, _)| state != 'Z')
}

/// Zombie children of `parent`: processes that ended and that nobody waited for.
fn zombies_of(parent: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| stat_of(*pid) == Some(('Z', parent)))
        .collect()
}

async fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The zygote's PID and the workers' PIDs (all forked) from a status document.
fn zygote_and_workers(status: &serde_json::Value) -> (i32, Vec<i32>) {
    let pool = &status["pools"][0];
    assert_eq!(pool["spawn"]["mode"], "fork", "{status:#}");
    let zygote = pool["spawn"]["zygote"]["pid"]
        .as_i64()
        .expect("a zygote pid") as i32;
    let workers = pool["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            assert_eq!(w["forked"], true, "{w}");
            w["pid"].as_i64().unwrap() as i32
        })
        .collect();
    (zygote, workers)
}

fn serving(status: &serde_json::Value, n: usize) -> bool {
    status["pools"][0]["serving"].as_u64() == Some(n as u64)
        && status["pools"][0]["spawn"]["zygote"]["state"] == "ready"
}

async fn finished(client: &tokio_postgres::Client) -> i64 {
    count(
        client,
        "SELECT count(DISTINCT job_id) FROM runs WHERE event = 'finish'",
    )
    .await
}

#[tokio::test]
async fn killing_the_zygote_leaves_its_workers_serving_and_the_next_worker_comes_from_a_new_zygote()
{
    let db = Cluster::start().await;
    let client = db.client().await;
    let drover = db.drover(&["--workers", "2", "--spawn", "fork"]);
    let master = drover.pid();
    let status = drover
        .wait_status("2 forked workers", Duration::from_secs(30), |s| {
            serving(s, 2)
        })
        .await;
    let (zygote, workers) = zygote_and_workers(&status);
    for w in &workers {
        assert_eq!(
            stat_of(*w).map(|s| s.1),
            Some(master),
            "worker {w} is the master's child"
        );
    }
    assert_eq!(stat_of(zygote).map(|s| s.1), Some(master));

    kill(Pid::from_raw(zygote), Signal::SIGKILL).unwrap();
    let ids = enqueue(db.dsn(), 20, &["--ms=20"]);
    wait_count(
        &client,
        "SELECT count(DISTINCT job_id) FROM runs WHERE event = 'finish'",
        ids.len() as i64,
        Duration::from_secs(30),
    )
    .await;
    let pids: BTreeSet<i32> = client
        .query("SELECT DISTINCT pid FROM runs", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        pids,
        workers.iter().copied().collect(),
        "the workers forked before the zygote died ran the jobs"
    );
    let status = drover
        .wait_status("a new zygote", Duration::from_secs(10), |s| {
            s["pools"][0]["spawn"]["zygote"]["state"] == "ready"
                && s["pools"][0]["spawn"]["zygote"]["pid"].as_i64() != Some(zygote as i64)
        })
        .await;
    let (new_zygote, _) = zygote_and_workers(&status);

    // A worker killed now is replaced by one forked from the new zygote.
    kill(Pid::from_raw(workers[0]), Signal::SIGKILL).unwrap();
    let status = drover
        .wait_status("a replacement", Duration::from_secs(10), |s| {
            serving(s, 2)
                && s["pools"][0]["workers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|w| w["pid"].as_i64() != Some(workers[0] as i64))
        })
        .await;
    let (_, now) = zygote_and_workers(&status);
    let replacement = *now.iter().find(|p| !workers.contains(p)).unwrap();
    assert_eq!(stat_of(replacement).map(|s| s.1), Some(master));
    let log = drover.stop().await;
    assert!(log.contains("the zygote was killed by SIGKILL"), "{log}");
    assert_eq!(log.matches("zygote started").count(), 2, "{log}");
    wait_until(
        "the zygote leaving with its master",
        Duration::from_secs(5),
        || !alive(new_zygote),
    )
    .await;
    db.stop().await;
}

#[tokio::test]
async fn killing_the_master_takes_its_forked_workers_and_its_zygote_with_it() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let drover = db.drover(&["--workers", "2", "--spawn", "fork"]);
    let status = drover
        .wait_status("2 forked workers", Duration::from_secs(30), |s| {
            serving(s, 2)
        })
        .await;
    let (zygote, workers) = zygote_and_workers(&status);
    // Both workers busy with long jobs when the master dies.
    enqueue(db.dsn(), 2, &["--ms=30000", "--beat-ms=50"]);
    wait_count(
        &client,
        "SELECT count(DISTINCT job_id) FROM runs WHERE event = 'start'",
        2,
        Duration::from_secs(20),
    )
    .await;
    kill(Pid::from_raw(drover.pid()), Signal::SIGKILL).unwrap();
    wait_until(
        "the workers and the zygote dying with their master",
        Duration::from_secs(5),
        || workers.iter().chain([&zygote]).all(|p| !alive(*p)),
    )
    .await;
    db.stop().await;
}

#[tokio::test]
async fn a_reload_forks_the_new_generation_from_a_new_zygote_and_the_old_one_leaves_with_its_last_worker(
) {
    let db = Cluster::start().await;
    let drover = db.drover(&["--workers", "3", "--spawn", "fork"]);
    let status = drover
        .wait_status("3 forked workers", Duration::from_secs(30), |s| {
            serving(s, 3)
        })
        .await;
    let (old_zygote, old_workers) = zygote_and_workers(&status);
    // Frozen, the old zygote cannot read the `stop` it is sent once its workers are gone: it is
    // killed after the grace.
    kill(Pid::from_raw(old_zygote), Signal::SIGSTOP).unwrap();
    drover.signal(Signal::SIGHUP);
    let status = drover
        .wait_status("generation 1 everywhere", Duration::from_secs(30), |s| {
            serving(s, 3)
                && s["pools"][0]["workers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|w| w["generation"] == 1 && w["state"] == "idle")
        })
        .await;
    let (new_zygote, new_workers) = zygote_and_workers(&status);
    assert_ne!(new_zygote, old_zygote);
    assert!(new_workers.iter().all(|w| !old_workers.contains(w)));
    wait_until(
        "the old zygote killed 10 s after its last worker left",
        Duration::from_secs(20),
        || !alive(old_zygote),
    )
    .await;
    assert!(alive(new_zygote));
    assert_eq!(status["pools"][0]["spawn"]["zygote"]["generation"], 1);
    drover.stop().await;
    db.stop().await;
}

#[tokio::test]
async fn orphans_that_jobs_leave_behind_are_reaped_by_the_master() {
    let db = Cluster::start().await;
    let client = db.client().await;
    let drover = db.drover(&["--workers", "2", "--spawn", "fork"]);
    drover
        .wait_status("2 forked workers", Duration::from_secs(30), |s| {
            serving(s, 2)
        })
        .await;
    // Each job leaves a `sleep 0.3` behind whose shell has exited: as a subreaper the master
    // inherits it, and it is nobody else's to wait for.
    let ids = enqueue(db.dsn(), 10, &["--act=orphan"]);
    wait_count(
        &client,
        "SELECT count(DISTINCT job_id) FROM runs WHERE event = 'finish'",
        ids.len() as i64,
        Duration::from_secs(30),
    )
    .await;
    let master = drover.pid();
    wait_until(
        "every orphan reaped (no zombie child of the master)",
        Duration::from_secs(5),
        || zombies_of(master).is_empty(),
    )
    .await;
    // The last ones, still running a moment ago, end and are reaped too: no `sleep` child of the
    // master is left, running or not.
    let orphans = || -> Vec<i32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
            .filter(|pid| stat_of(*pid).is_some_and(|(_, ppid)| ppid == master))
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            })
            .collect()
    };
    wait_until(
        "every orphan ended and reaped",
        Duration::from_secs(10),
        || orphans().is_empty(),
    )
    .await;
    assert!(zombies_of(master).is_empty(), "{:?}", zombies_of(master));
    drover.stop().await;
    db.stop().await;
}

#[tokio::test]
async fn a_zygote_that_stops_answering_is_killed_at_the_boot_timeout_and_the_pool_falls_back_to_exec(
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let handler = root().join("tests/fixtures/handler.php");
    let worker = root().join("php-client/bin/drover-worker");
    // A zygote that says it is ready, then never forks: the workers asked of it never come.
    let script = format!(
        r#"if [ "$DROVER_ZYGOTE" = 1 ]; then printf '{{"t":"zygote","v":1,"pid":%d}}\n' $$ >&3; exec sleep 600; fi; exec php {} {}"#,
        worker.display(),
        handler.display()
    );
    let dir = shared_tempdir();
    let config = dir.path().join("drover.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "version": 1,
            "database_url": db.url(),
            "state_dir": dir.path().join("state"),
            "restart_failures": 2,
            "pools": [{
                "name": "default", "queues": ["default"], "processes": 2,
                // The exec fallback's PHP workers must boot within it too, on a loaded machine.
                "command": ["sh", "-c", script], "spawn": "fork", "boot_timeout": 4,
                "env": {"DROVER_PDO_DSN": db.dsn()},
            }],
        })
        .to_string(),
    )
    .unwrap();
    let drover = Drover::start_worker(None, None, &["--config", config.to_str().unwrap()], &[]);
    let status = drover
        .wait_status("workers started by exec", Duration::from_secs(30), |s| {
            s["pools"][0]["spawn"]["mode"] == "exec" && s["pools"][0]["serving"] == 2
        })
        .await;
    let fell_back = status["pools"][0]["spawn"]["fell_back"].as_str().unwrap();
    assert!(fell_back.contains("died 2 times in a row"), "{fell_back}");
    let ids = enqueue(db.dsn(), 10, &[]);
    wait_count(
        &client,
        "SELECT count(DISTINCT job_id) FROM runs WHERE event = 'finish'",
        ids.len() as i64,
        Duration::from_secs(30),
    )
    .await;
    let log = drover.stop().await;
    assert!(
        log.contains("the zygote did not fork a worker within the boot timeout; killing it"),
        "{log}"
    );
    assert!(
        log.contains("the pool starts its workers by exec instead of forking them"),
        "{log}"
    );
    // The workers the zygote never forked did not count against the pool's circuit.
    assert!(!log.contains("circuit open"), "{log}");
    assert_eq!(finished(&client).await, ids.len() as i64);
    db.stop().await;
}

#[tokio::test]
async fn a_root_started_master_becomes_the_configured_user_and_forks_workers_that_run_as_it() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (scripts/test and CI run the suite as root)"
    );
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    let db = Cluster::start_for_any_user().await;
    let drover = db.drover(&["--workers", "2", "--spawn", "fork", "--user", "nobody"]);
    // Serving means each forked worker reached the master's fork socket (0600, nobody's) and said
    // hello.
    let status = drover
        .wait_status("2 forked workers", Duration::from_secs(30), |s| {
            serving(s, 2)
        })
        .await;
    let (zygote, workers) = zygote_and_workers(&status);
    let uid_of = support::process_uid;
    // The master itself, the zygote and the workers: nobody, none of them root.
    assert_eq!(
        uid_of(drover.pid()),
        Some(nobody.uid.as_raw()),
        "the master"
    );
    for pid in workers.iter().chain([&zygote]) {
        assert_eq!(uid_of(*pid), Some(nobody.uid.as_raw()), "process {pid}");
        assert_eq!(stat_of(*pid).map(|s| s.1), Some(drover.pid()));
    }
    drover.stop().await;
    db.stop().await;
}

#[tokio::test]
async fn forked_workers_that_cannot_reach_the_master_make_the_pool_start_workers_by_exec() {
    // The master becomes nobody, and so do its workers: what is asserted is how they are started,
    // and that one serves (said hello).
    let db = Cluster::start_for_any_user().await;
    let dir = shared_tempdir();
    let config = dir.path().join("drover.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "version": 1, "database_url": db.url(), "state_dir": dir.path().join("state"),
            "restart_failures": 2, "user": "nobody",
            "pools": [{
                "name": "default", "queues": ["default"], "processes": 1, "spawn": "fork",
                "command": [
                    "php",
                    root().join("php-client/bin/drover-worker"),
                    root().join("tests/fixtures/handler.php"),
                ],
                "env": {"DROVER_PDO_DSN": db.dsn()},
            }],
        })
        .to_string(),
    )
    .unwrap();
    let drover = Drover::start_worker(None, None, &["--config", config.to_str().unwrap()], &[]);
    let status = drover
        .wait_status("a forked worker", Duration::from_secs(30), |s| {
            serving(s, 1)
        })
        .await;
    let (_, workers) = zygote_and_workers(&status);
    // From now on the workers' user cannot connect to the fork socket: every worker forked next
    // dies before it reaches the master.
    std::fs::set_permissions(
        drover.state_dir.join("fork.sock"),
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .unwrap();
    kill(Pid::from_raw(workers[0]), Signal::SIGKILL).unwrap();
    let status = drover
        .wait_status("workers started by exec", Duration::from_secs(30), |s| {
            s["pools"][0]["spawn"]["mode"] == "exec" && s["pools"][0]["serving"] == 1
        })
        .await;
    let cause = status["pools"][0]["spawn"]["fell_back"].as_str().unwrap();
    assert!(
        cause.contains("could not fork 2 workers in a row")
            && cause.contains("before it reached the master"),
        "{cause}"
    );
    assert_eq!(
        status["pools"][0]["circuit"]["state"], "closed",
        "the workers that never reached the master did not count against the circuit"
    );
    drover.stop().await;
    db.stop().await;
}

/// Every Laravel scenario below runs with these extra environment variables.
fn fork_app(db: &Cluster, laravel: Laravel, extra: &[(&str, &str)]) -> LaravelApp {
    let mut app = LaravelApp::new(db, laravel);
    for (k, v) in extra {
        app.env.push((k.to_string(), v.to_string()));
    }
    app
}

fn laravel_status(app: &LaravelApp) -> serde_json::Value {
    let out = app.command(&["drover:status", "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Dispatches `n` probes of 10 ms each to the drover connection and waits until all have run.
async fn run_probes(app: &LaravelApp, client: &tokio_postgres::Client, n: u32, within: Duration) {
    app.artisan(&[
        "app:eval",
        &format!(
            "for ($i = 0; $i < {n}; $i++) {{ App\\Jobs\\ForkProbe::dispatch($i, 10)->onConnection('drover'); }}"
        ),
    ]);
    wait_count(
        client,
        "SELECT count(*) FROM fork_probes",
        i64::from(n),
        within,
    )
    .await;
}

/// Each worker in `of` (pid → the connection ids its jobs saw) kept one connection, no two
/// workers share one, and none is the zygote's.
fn assert_own_connection(of: &BTreeMap<i32, BTreeSet<i64>>, zygote: i64, what: &str) {
    let mut seen = BTreeSet::new();
    for (pid, ids) in of {
        assert_eq!(ids.len(), 1, "worker {pid} kept one {what}: {ids:?}");
        let id = *ids.iter().next().unwrap();
        assert!(seen.insert(id), "two workers share {what} {id}: {of:?}");
        assert_ne!(id, zygote, "worker {pid} uses the zygote's {what}");
    }
}

/// What the zygote `pid` appended at boot to `file` in the app's storage (lines `PID VALUE`, written
/// by the fixture's ForkFixtureServiceProvider), the only process to have booted.
fn boot_record(app: &LaravelApp, file: &str, zygote: i32) -> i64 {
    let text = std::fs::read_to_string(app.storage_dir().join(file)).unwrap_or_default();
    assert_eq!(
        text.lines().count(),
        1,
        "only the zygote booted (the workers were forked): {file}: {text}"
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{zygote} ")))
        .unwrap_or_else(|| panic!("the zygote {zygote} did not write {file} at boot: {text}"))
        .parse()
        .unwrap()
}

/// The targets of a process's open descriptors.
fn open_files(pid: i32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

async fn forked_workers_never_share_a_database_session_a_redis_connection_a_log_stream_or_a_random_sequence(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let redis = RedisServer::start();
    let redis_port = redis.port.to_string();
    let app = fork_app(
        &db,
        laravel,
        &[
            ("FIXTURE_BOOT_QUERY", "1"),
            ("FIXTURE_BOOT_REDIS", "1"),
            ("REDIS_HOST", "127.0.0.1"),
            ("REDIS_PORT", &redis_port),
            ("FIXTURE_BOOT_CACHE", "1"),
            ("FIXTURE_BOOT_LOG", "1"),
            ("LOG_CHANNEL", "single"),
            ("LOG_LEVEL", "info"),
            ("DROVER_PROCESSES", "4"),
        ],
    );
    let master = start_master(&app, 4).await;
    let status = laravel_status(&app);
    let master_pid = status["pid"].as_i64().unwrap() as i32;
    let (zygote, workers) = zygote_and_workers(&status);
    let text = app.artisan(&["drover:status"]);
    assert!(
        text.contains(&format!("workers forked from zygote pid {zygote} (ready)")),
        "{text}"
    );

    // The zygote queried the database, read its database cache store, used Redis and logged while
    // it booted, then let all go; no worker booted (each was forked).
    let zygote_backend = boot_record(&app, "boot-backends", zygote);
    let zygote_redis = boot_record(&app, "boot-redis", zygote);
    let log_file = app.storage_dir().join("logs/fixture.log");
    assert!(
        std::fs::read_to_string(&log_file)
            .unwrap()
            .contains("booted"),
        "the zygote logged at boot"
    );
    let log_name = log_file.display().to_string();
    for pid in workers.iter().chain([&zygote]) {
        assert!(
            !open_files(*pid).contains(&log_name),
            "process {pid} holds the zygote's log file open"
        );
    }

    app.artisan(&[
        "app:eval",
        "for ($i = 0; $i < 40; $i++) { App\\Jobs\\ForkProbe::dispatch($i)->onConnection('drover'); }
         App\\Jobs\\TransactionProbe::dispatch('holder')->onConnection('drover');
         App\\Jobs\\TransactionProbe::dispatch('checker')->onConnection('drover');",
    ]);
    wait_count(
        &client,
        "SELECT count(*) FROM fork_probes",
        42,
        Duration::from_secs(60),
    )
    .await;
    let rows = client
        .query(
            "SELECT seq, pid, ppid, backend, mt_rand, random_int, lcg, uniqid, str_random, seen, redis_client, cache_backend, backend_after FROM fork_probes ORDER BY id",
            &[],
        )
        .await
        .unwrap();
    let mut backend_of: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    let mut redis_of: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    let mut draws: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for r in &rows {
        let (seq, pid, ppid, backend): (i32, i32, i32, i32) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        assert_eq!(ppid, master_pid, "job {seq} ran in a child of the master");
        assert!(
            workers.contains(&pid),
            "job {seq} ran in pid {pid}, not a forked worker {workers:?}"
        );
        backend_of
            .entry(pid)
            .or_default()
            .insert(i64::from(backend));
        if seq >= 0 {
            // The database cache store the zygote used at boot talks through the worker's own
            // session in the worker, and using it leaves that session as it was.
            assert_eq!(
                (r.get::<_, Option<i32>>(11), r.get::<_, Option<i32>>(12)),
                (Some(backend), Some(backend)),
                "job {seq}: the database cache store's backend, and the job's backend after using it, against the job's {backend}"
            );
            redis_of.entry(pid).or_default().insert(r.get(10));
            draws
                .entry("mt_rand")
                .or_default()
                .insert(r.get::<_, i64>(4).to_string());
            draws
                .entry("random_int")
                .or_default()
                .insert(r.get::<_, i64>(5).to_string());
            draws.entry("lcg_value").or_default().insert(r.get(6));
            draws.entry("uniqid").or_default().insert(r.get(7));
            draws.entry("Str::random").or_default().insert(r.get(8));
        }
    }
    assert!(
        backend_of.len() >= 2,
        "the jobs spread over the workers: {backend_of:?}"
    );
    assert_own_connection(&backend_of, zygote_backend, "database session");
    assert_own_connection(&redis_of, zygote_redis, "Redis connection");
    assert!(
        !redis.client_ids().contains(&zygote_redis),
        "the zygote kept its Redis connection"
    );
    for (source, values) in &draws {
        assert_eq!(
            values.len(),
            40,
            "{source} repeated a value across workers: {values:?}"
        );
    }
    // And the session the zygote opened at boot is closed (by the zygote, before it forked).
    assert_eq!(
        count(
            &client,
            &format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {zygote_backend}"),
        )
        .await,
        0,
        "the zygote kept its database session"
    );
    let holder = rows.iter().find(|r| r.get::<_, i32>(0) == -1).unwrap();
    let checker = rows.iter().find(|r| r.get::<_, i32>(0) == -2).unwrap();
    assert_ne!(
        holder.get::<_, i32>(1),
        checker.get::<_, i32>(1),
        "the two probes ran side by side"
    );
    assert_eq!(
        checker.get::<_, Option<i32>>(9),
        Some(0),
        "a worker saw another worker's uncommitted row"
    );
    // Every worker wrote its own lines to the log file, whole.
    let log = std::fs::read_to_string(&log_file).unwrap();
    for i in 0..40 {
        assert!(
            log.contains(&format!("probe {i} ")),
            "probe {i} was not logged:\n{log}"
        );
    }
    assert!(
        log.lines().all(|l| l.starts_with('[')),
        "a log line was garbled:\n{log}"
    );

    let log = stop_master(&app, master).await;
    assert!(log.contains("zygote ready"), "{log}");
    db.stop().await;
}

async fn a_release_whose_zygote_cannot_boot_falls_back_to_exec_naming_the_cause_and_runs_its_jobs(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = fork_app(
        &db,
        laravel,
        &[
            ("FIXTURE_ZYGOTE_BOOT_FAILS", "1"),
            ("DROVER_PROCESSES", "2"),
        ],
    );
    let master = start_master(&app, 2).await;
    let status = laravel_status(&app);
    let spawn = &status["pools"][0]["spawn"];
    assert_eq!(spawn["mode"], "exec", "{status:#}");
    let cause = spawn["fell_back"].as_str().unwrap();
    assert!(
        cause.contains("its zygote could not boot: exited with code"),
        "{cause}"
    );
    assert_eq!(
        status["exit_code"], 0,
        "a fall-back is not degraded: the pool serves"
    );
    let text = app.artisan(&["drover:status"]);
    assert!(
        text.contains("workers started by exec: its zygote could not boot"),
        "{text}"
    );
    run_probes(&app, &client, 6, Duration::from_secs(30)).await;
    let log = stop_master(&app, master).await;
    assert!(
        log.contains("the pool starts its workers by exec instead of forking them: its zygote could not boot"),
        "{log}"
    );
    assert!(
        log.contains("this release cannot boot as a zygote"),
        "the zygote's own error is in the log:\n{log}"
    );
    db.stop().await;
}

async fn persistent_connections_make_the_pool_start_its_workers_by_exec_naming_them(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = fork_app(
        &db,
        laravel,
        &[("FIXTURE_PERSISTENT_PDO", "1"), ("DROVER_PROCESSES", "2")],
    );
    let master = start_master(&app, 2).await;
    let status = laravel_status(&app);
    let cause = status["pools"][0]["spawn"]["fell_back"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        cause.contains("persistent connections cannot be shared with forked workers: database connection pgsql"),
        "{status:#}"
    );
    run_probes(&app, &client, 4, Duration::from_secs(30)).await;
    stop_master(&app, master).await;
    db.stop().await;
}

async fn workers_recycled_by_max_jobs_are_forked_again(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = fork_app(
        &db,
        laravel,
        &[("DROVER_PROCESSES", "2"), ("DROVER_MAX_JOBS", "2")],
    );
    let master = start_master(&app, 2).await;
    run_probes(&app, &client, 20, Duration::from_secs(60)).await;
    let pids = count(&client, "SELECT count(DISTINCT pid) FROM fork_probes").await;
    assert!(
        pids >= 10,
        "two jobs per worker: {pids} workers ran 20 jobs"
    );
    let (zygote, _) = zygote_and_workers(&laravel_status(&app));
    let log = stop_master(&app, master).await;
    assert_eq!(log.matches("zygote started").count(), 1, "{log}");
    assert!(log.matches("worker forked").count() >= 10, "{log}");
    assert!(
        !log.contains("worker started"),
        "no worker was started by exec:\n{log}"
    );
    wait_until(
        "the zygote leaving with its master",
        Duration::from_secs(5),
        || !alive(zygote),
    )
    .await;
    db.stop().await;
}

/// An application whose boot keeps a connection open (an SDK's keep-alive client): the zygote's
/// fork-safety check names it in the master's log, and the pool forks all the same.
async fn a_connection_the_boot_keeps_open_is_named_in_the_masters_log_and_the_pool_still_forks(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let service = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = service.local_addr().unwrap().to_string();
    let app = fork_app(
        &db,
        laravel,
        &[
            ("FIXTURE_BOOT_SOCKET", &address),
            ("DROVER_PROCESSES", "1"),
            ("DROVER_FORK_SAFETY_TIMING", "1"),
        ],
    );
    let master = start_master(&app, 1).await;
    let status = laravel_status(&app);
    assert_eq!(status["pools"][0]["spawn"]["mode"], "fork", "{status:#}");
    let log = stop_master(&app, master).await;
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("drover zygote: fork safety: fd "))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    let timing = log
        .lines()
        .find(|l| l.contains("drover zygote: fork safety: checked in "))
        .unwrap_or_else(|| panic!("the check's time (DROVER_FORK_SAFETY_TIMING):\n{log}"));
    assert!(timing.ends_with(", 1 warning(s)"), "{timing}");
    eprintln!("{}\n{timing}", warnings[0]);
    assert!(
        warnings[0].contains(&format!("is a TCP connection to {address} from 127.0.0.1:"))
            && warnings[0].contains("every worker would share it")
            && warnings[0].contains("spawn to exec"),
        "{log}"
    );
    drop(service);
    db.stop().await;
}

on_every_laravel!(
    a_connection_the_boot_keeps_open_is_named_in_the_masters_log_and_the_pool_still_forks,
    forked_workers_never_share_a_database_session_a_redis_connection_a_log_stream_or_a_random_sequence,
    persistent_connections_make_the_pool_start_its_workers_by_exec_naming_them,
    a_release_whose_zygote_cannot_boot_falls_back_to_exec_naming_the_cause_and_runs_its_jobs,
    workers_recycled_by_max_jobs_are_forked_again,
);
