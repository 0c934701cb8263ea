//! What the end-to-end tests share: a private PostgreSQL per test, the real `drover` binary with
//! real PHP workers running `tests/fixtures/handler.php`, and the PHP producer.
#![allow(dead_code)]

pub mod browser;
pub mod otlp_receiver;
pub mod partition;
pub mod postgres;
pub mod runs;
pub mod serve;
pub mod tls;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use drover_broker::{EmbeddedConfig, EmbeddedPostgres};
use tokio_postgres::Client;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A temporary directory the embedded cluster's unprivileged user can enter.
pub fn shared_tempdir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("drover-test-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A private PostgreSQL for one test, migrated, with the `runs` table the handler writes to.
pub struct Cluster {
    pub pg: Option<EmbeddedPostgres>,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start() -> Cluster {
        Self::start_with(|_| {}).await
    }

    /// A cluster without drover's schema (nothing migrated, no `runs` table).
    pub async fn start_empty() -> Cluster {
        let dir = shared_tempdir();
        let mut config = EmbeddedConfig::new(dir.path().join("db"));
        config.settings.push(("fsync".into(), "off".into()));
        let pg = EmbeddedPostgres::start(&config)
            .await
            .expect("test PostgreSQL starts");
        Cluster { pg: Some(pg), dir }
    }

    /// A cluster on loopback TCP (trust), which a master or worker of any OS user reaches (the
    /// default's socket directory admits only its own user and root).
    pub async fn start_for_any_user() -> Cluster {
        let port = free_port();
        Self::start_with(|c| c.tcp_port = Some(port)).await
    }

    pub async fn start_with(tune: impl FnOnce(&mut EmbeddedConfig)) -> Cluster {
        let dir = shared_tempdir();
        let mut config = EmbeddedConfig::new(dir.path().join("db"));
        config.settings.push(("fsync".into(), "off".into()));
        tune(&mut config);
        let pg = EmbeddedPostgres::start(&config)
            .await
            .expect("test PostgreSQL starts");
        let cluster = Cluster { pg: Some(pg), dir };
        drover_migrate(cluster.url());
        create_runs_table(&cluster.client().await).await;
        cluster
    }

    pub fn url(&self) -> &str {
        self.pg.as_ref().unwrap().url()
    }

    /// Starts the cluster again, in the same directory and on the same port, after `pg_ctl`
    /// stopped it behind its handle's back (a database outage's end).
    #[allow(dead_code)] // not every test binary that includes this module restarts a database
    pub async fn start_again(self) -> Cluster {
        let Cluster { pg, dir } = self;
        drop(pg); // its postmaster is already gone
        let mut config = drover_broker::EmbeddedConfig::new(dir.path().join("db"));
        config.settings.push(("fsync".into(), "off".into()));
        let pg = drover_broker::EmbeddedPostgres::start(&config)
            .await
            .unwrap();
        Cluster { pg: Some(pg), dir }
    }

    /// `drover run` on this cluster, its workers writing to it.
    pub fn drover(&self, args: &[&str]) -> Drover {
        Drover::start(Some(self.url()), Some(self.dsn()), args)
    }

    pub fn dsn(&self) -> &str {
        self.pg.as_ref().unwrap().pdo_dsn()
    }

    pub async fn client(&self) -> Client {
        drover_broker::connect::connect_once(self.url())
            .await
            .unwrap()
    }

    pub async fn stop(mut self) {
        if let Some(pg) = self.pg.take() {
            pg.stop().await;
        }
    }
}

/// A session of `db` named "nightly report" holding a REPEATABLE READ snapshot that read
/// drover.jobs (a report left open, holding the vacuum horizon back), and its backend's pid.
/// COMMIT on the client ends it.
pub async fn hold_a_report(db: &Cluster) -> (Client, i32) {
    let report = db.client().await;
    let pid: i32 = report
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    report
        .batch_execute(
            "SET application_name = 'nightly report';
             BEGIN ISOLATION LEVEL REPEATABLE READ;
             SELECT count(*) FROM drover.jobs;",
        )
        .await
        .unwrap();
    (report, pid)
}

/// What a command printed: its stdout, then its stderr.
pub fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` to completion; panics with `what` and its output if it fails.
pub fn run_ok(cmd: &mut Command, what: &str) -> std::process::Output {
    succeeded(cmd.output().unwrap(), what)
}

/// `out` of a process that must have succeeded; panics with `what` and its output if not.
pub fn succeeded(out: std::process::Output, what: &str) -> std::process::Output {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `drover migrate --database-url URL`: whether it succeeded, and what it printed (its log at
/// warn and above, then its answer).
pub fn try_drover_migrate(url: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["migrate", "--database-url", url])
        .env("DROVER_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `drover migrate --database-url URL`, which must succeed.
pub fn drover_migrate(url: &str) {
    let (ok, printed) = try_drover_migrate(url);
    assert!(ok, "drover migrate: {printed}");
}

/// The table the fixture handler records each job's start, beats and end in.
pub async fn create_runs_table(client: &Client) {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS public.runs (job_id bigint, seq int, attempt int, pid int, event text,
             at timestamptz NOT NULL DEFAULT clock_timestamp())",
        )
        .await
        .unwrap();
}

/// Enqueues through the PHP producer; returns the job ids.
pub fn enqueue(dsn: &str, count: usize, options: &[&str]) -> Vec<i64> {
    let out = Command::new("php")
        .arg(root().join("tests/fixtures/enqueue.php"))
        .arg(dsn)
        .arg(count.to_string())
        .args(options)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "enqueue.php: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.parse().unwrap())
        .collect()
}

/// A running `drover run` with the fixture handler.
pub struct Drover {
    pub child: Child,
    pub log: PathBuf,
    /// Its state directory (control socket).
    pub state_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drover {
    /// `drover run --database-url URL ARGS -- php drover-worker handler.php`, with the handler's DSN.
    pub fn start(url: Option<&str>, dsn: Option<&str>, args: &[&str]) -> Drover {
        Self::start_with_env(url, dsn, args, &[])
    }

    /// [`Drover::start`] with extra environment for the master (and so its workers).
    pub fn start_with_env(
        url: Option<&str>,
        dsn: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Drover {
        let worker = [
            "php".to_string(),
            root()
                .join("php-client/bin/drover-worker")
                .display()
                .to_string(),
            root()
                .join("tests/fixtures/handler.php")
                .display()
                .to_string(),
        ];
        let worker: Vec<&str> = worker.iter().map(|s| s.as_str()).collect();
        Self::start_worker_with_env(url, dsn, args, &worker, env)
    }

    /// `drover run --database-url URL ARGS -- WORKER...`; an empty `worker` runs no worker command
    /// (for `--config`).
    pub fn start_worker(
        url: Option<&str>,
        dsn: Option<&str>,
        args: &[&str],
        worker: &[&str],
    ) -> Drover {
        Self::start_worker_with_env(url, dsn, args, worker, &[])
    }

    fn start_worker_with_env(
        url: Option<&str>,
        dsn: Option<&str>,
        args: &[&str],
        worker: &[&str],
        env: &[(&str, &str)],
    ) -> Drover {
        let dir = shared_tempdir();
        let log = dir.path().join("drover.log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
        cmd.arg("run");
        if let Some(url) = url {
            cmd.args(["--database-url", url]);
        }
        if let Some(dsn) = dsn {
            cmd.env("DROVER_PDO_DSN", dsn);
        }
        let state_dir = match args.iter().position(|a| *a == "--state-dir") {
            Some(i) => PathBuf::from(args[i + 1]),
            None => {
                cmd.arg("--state-dir").arg(dir.path().join("state"));
                dir.path().join("state")
            }
        };
        cmd.args(args);
        if !worker.is_empty() {
            cmd.arg("--").args(worker);
        }
        cmd.envs(env.iter().copied());
        cmd.env_remove("DATABASE_URL")
            .env("DROVER_LOG", "info,drover=debug,tokio_postgres=warn")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("stdout.log")).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = cmd.spawn().unwrap();
        Drover {
            child,
            log,
            state_dir,
            _dir: dir,
        }
    }

    /// A scratch directory that lives as long as this master (world-writable, for workers that
    /// run as another user).
    pub fn scratch(&self) -> PathBuf {
        self._dir.path().to_path_buf()
    }

    /// `drover status --json`, and its exit code.
    pub fn status(&self) -> (serde_json::Value, i32) {
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["status", "--json", "--state-dir"])
            .arg(&self.state_dir)
            .output()
            .unwrap();
        let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "drover status --json printed no JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (json, out.status.code().unwrap_or(-1))
    }

    /// Polls `drover status --json` until `check` holds.
    pub async fn wait_status(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + timeout;
        loop {
            let (status, _) = self.status();
            if check(&status) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "status never showed {what}: {status:#}\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// User + system CPU seconds the master has used so far.
    pub fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        // SAFETY: sysconf only reads a constant.
        ticks / unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) } as f64
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn log_text(&self) -> String {
        let mut s = String::new();
        std::fs::File::open(&self.log)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        s
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).unwrap();
    }

    /// Waits for the log to contain `needle`.
    pub async fn wait_log(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.log_text();
            if log.contains(needle) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "log never said {needle:?}:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "drover did not exit within {timeout:?}:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then wait for a clean exit.
    pub async fn stop(mut self) -> String {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        let status = self.wait_exit(Duration::from_secs(60)).await;
        let log = self.log_text();
        assert!(status.success(), "drover exited with {status}:\n{log}");
        log
    }
}

impl Drop for Drover {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `sql` (one bigint) until it equals `want`.
pub async fn wait_count(client: &Client, sql: &str, want: i64, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let got: i64 = client.query_one(sql, &[]).await.unwrap().get(0);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{sql} stayed at {got}, wanted {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The labels the fixture app journaled for `event` (`public.journal`), in the order written.
pub async fn journal(client: &Client, event: &str) -> Vec<String> {
    client
        .query(
            "SELECT label FROM public.journal WHERE event = $1 ORDER BY id",
            &[&event],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Waits until at least `n` jobs have finished (the handler records each finish in `runs`).
pub async fn wait_finished_at_least(client: &Client, n: i64) {
    wait_count(
        client,
        &format!("SELECT least(count(*), {n}) FROM runs WHERE event = 'finish'"),
        n,
        Duration::from_secs(30),
    )
    .await;
}

/// A count from the master's last line (`master stopped claimed=… acks_ridden=…`).
pub fn stopped_count(log: &str, field: &str) -> u64 {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("master stopped"))
        .unwrap_or_else(|| panic!("the master logged no `master stopped` line:\n{log}"));
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(field)?.strip_prefix('='))
        .and_then(|v| v.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
        .unwrap_or_else(|| panic!("the master's last line has no {field}=: {line}"))
}

pub async fn count(client: &Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// A client to `db`, waiting (30 s at most) through its restart.
pub async fn reconnect(db: &Cluster) -> Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match drover_broker::connect::connect_once(db.url()).await {
            Ok(client) => return client,
            Err(e) => assert!(Instant::now() < deadline, "database back: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every enqueued job finished exactly once and nothing is left in the queue or failed.
pub async fn assert_exactly_once(client: &Client, ids: &[i64]) {
    let rows = client
        .query(
            "SELECT job_id, count(*) FROM runs WHERE event = 'finish' GROUP BY job_id",
            &[],
        )
        .await
        .unwrap();
    let mut finished: Vec<(i64, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    finished.sort();
    let dupes: Vec<_> = finished.iter().filter(|(_, n)| *n > 1).collect();
    assert!(dupes.is_empty(), "jobs finished more than once: {dupes:?}");
    let mut want = ids.to_vec();
    want.sort();
    let got: Vec<i64> = finished.iter().map(|(id, _)| *id).collect();
    let lost: Vec<_> = want
        .iter()
        .filter(|id| got.binary_search(id).is_err())
        .collect();
    assert!(
        lost.is_empty(),
        "{} jobs never finished: {:?}",
        lost.len(),
        &lost[..lost.len().min(20)]
    );
    assert_eq!(
        got.len(),
        want.len(),
        "finished jobs that were never enqueued"
    );
    // A finished job's ack lands a moment after its last record: it waits up to 5 ms for a
    // claim to carry it (docs/leases.md, "Acks ride with claims"), then its commit.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = count(client, "SELECT count(*) FROM drover.jobs").await;
    while left != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = count(client, "SELECT count(*) FROM drover.jobs").await;
    }
    assert_eq!(
        left, 0,
        "jobs left in the queue 5 s after the last finished"
    );
    assert_eq!(
        count(client, "SELECT count(*) FROM drover.failed_jobs").await,
        0,
        "failed jobs"
    );
}

/// The worker processes that recorded anything in `runs`.
pub async fn pids_that_ran(client: &Client) -> Vec<i32> {
    client
        .query("SELECT DISTINCT pid FROM runs", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Waits until `pid` is gone (or a zombie nobody reaped yet: it runs no code).
pub async fn wait_process_gone(pid: i32, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state is the field after the parenthesised command name.
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if matches!(state, None | Some('Z') | Some('X')) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} still running (state {state:?})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The Laravel versions every Laravel test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Laravel {
    /// Laravel 8.83 from Debian's `php-laravel-framework` (`tests/laravel-app`, no Composer).
    V8,
    /// Laravel 12.67 from the offline reference tree, with drover/laravel installed by Composer
    /// (`tests/laravel12-app/build`).
    V12,
}

impl Laravel {
    /// The fixture application's directory (built first for Laravel 12).
    pub fn app_dir(self) -> PathBuf {
        match self {
            Laravel::V8 => root().join("tests/laravel-app"),
            Laravel::V12 => laravel12_app(),
        }
    }
}

/// The offline Laravel 12 reference tree (`../shared/reference/laravel12`, or
/// `DROVER_LARAVEL12_REFERENCE`).
pub fn laravel12_reference() -> PathBuf {
    let path = std::env::var_os("DROVER_LARAVEL12_REFERENCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/reference/laravel12"));
    assert!(
        path.join("install.sh").is_file(),
        "the Laravel 12 reference tree is not at {} (set DROVER_LARAVEL12_REFERENCE)",
        path.display()
    );
    path
}

/// Builds (or reuses) the Laravel 12 fixture app under `target/`, once per test process and under
/// a lock across the processes nextest runs side by side.
fn laravel12_app() -> PathBuf {
    static APP: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    APP.get_or_init(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join("target"));
        let dir = target.join("laravel12-app");
        std::fs::create_dir_all(&target).unwrap();
        run_ok(
            Command::new("flock")
                .arg(target.join("laravel12-app.lock"))
                .arg("bash")
                .arg(root().join("tests/laravel12-app/build"))
                .arg(&dir),
            "building the Laravel 12 fixture failed",
        );
        dir
    })
    .clone()
}

/// A fixture app (`tests/laravel-app` on Laravel 8, its Laravel 12 build) pointed at a test
/// cluster, with its own storage.
pub struct LaravelApp {
    pub laravel: Laravel,
    /// The application's directory (its artisan runs there).
    pub dir: PathBuf,
    pub env: Vec<(String, String)>,
    pub storage: tempfile::TempDir,
}

impl LaravelApp {
    /// Migrated, ready to dispatch. `DB_HOST` is the cluster's socket directory.
    pub fn new(db: &Cluster, laravel: Laravel) -> LaravelApp {
        Self::new_with(db, laravel, &[])
    }

    /// As [`LaravelApp::new`], with `overrides` of the environment (e.g. another `DB_HOST`)
    /// applied before the first artisan command.
    pub fn new_with(db: &Cluster, laravel: Laravel, overrides: &[(&str, &str)]) -> LaravelApp {
        let socket_dir = db.pg.as_ref().unwrap().data_dir().display().to_string();
        Self::on_host(&socket_dir, laravel, overrides)
    }

    /// As [`LaravelApp::new_with`], on the PostgreSQL at `db_host` (libpq's `host`: a socket
    /// directory, or several, comma-separated, as a failover pair is written), port 5432.
    pub fn on_host(db_host: &str, laravel: Laravel, overrides: &[(&str, &str)]) -> LaravelApp {
        let storage = shared_tempdir();
        for dir in [
            "framework/cache/data",
            "framework/views",
            "framework/sessions",
            "logs",
            "bootstrap",
        ] {
            std::fs::create_dir_all(storage.path().join(dir)).unwrap();
        }
        // The `sqlite` connection's database (DB_CONNECTION=sqlite), which Laravel wants to exist.
        std::fs::File::create(storage.path().join("database.sqlite")).unwrap();
        let s = storage.path().display().to_string();
        let env = vec![
            ("DB_HOST".into(), db_host.to_string()),
            ("DB_PORT".into(), "5432".into()),
            ("DB_DATABASE".into(), "drover".into()),
            ("DB_USERNAME".into(), "drover".into()),
            ("APP_STORAGE".into(), s.clone()),
            (
                "APP_SERVICES_CACHE".into(),
                format!("{s}/bootstrap/services.php"),
            ),
            (
                "APP_PACKAGES_CACHE".into(),
                format!("{s}/bootstrap/packages.php"),
            ),
            ("DROVER_BINARY".into(), env!("CARGO_BIN_EXE_drover").into()),
            ("DROVER_STATE_DIR".into(), format!("{s}/drover")),
            ("LOG_CHANNEL".into(), "stderr".into()),
            ("LOG_LEVEL".into(), "critical".into()),
        ];
        let mut env = env;
        for (key, value) in overrides {
            env.retain(|(k, _)| k != key);
            env.push((key.to_string(), value.to_string()));
        }
        let app = LaravelApp {
            laravel,
            dir: laravel.app_dir(),
            env,
            storage,
        };
        // The Laravel the test claims to run, and no other.
        let version = app.artisan(&["--version", "--no-ansi"]);
        let want = match laravel {
            Laravel::V8 => "Laravel Framework 8.83",
            Laravel::V12 => "Laravel Framework 12.",
        };
        assert!(version.contains(want), "{laravel:?}: {version}");
        app.artisan(&["migrate", "--force"]);
        app
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("php");
        cmd.arg(self.dir.join("artisan"))
            .args(args)
            .current_dir(&self.dir);
        cmd.env_remove("DATABASE_URL");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs an artisan command to completion; panics with its output if it fails.
    pub fn artisan(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(
            out.status.success(),
            "artisan {args:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts a long-running artisan command with its output in the app's storage.
    pub fn spawn(&self, args: &[&str], log_name: &str) -> Spawned {
        let log = std::fs::File::create(self.storage.path().join(log_name)).unwrap();
        Spawned(
            self.command(args)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    }

    pub fn log(&self, log_name: &str) -> String {
        std::fs::read_to_string(self.storage.path().join(log_name)).unwrap_or_default()
    }

    pub fn state_dir(&self) -> PathBuf {
        self.storage.path().join("drover")
    }

    /// The app's storage directory (`storage_path()` in it).
    pub fn storage_dir(&self) -> PathBuf {
        self.storage.path().to_path_buf()
    }
}

/// A process a test started: killed if the test ends (or panics) while it still runs, so a failed
/// test leaves no master behind.
pub struct Spawned(pub Child);

impl std::ops::Deref for Spawned {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A deploy tool's layout for the fixture app: `SITE/releases/NAME`, each a release of the same
/// application, and `SITE/current`, the symlink the service names.
pub struct Site {
    pub dir: tempfile::TempDir,
    laravel: Laravel,
}

impl Site {
    pub fn new(laravel: Laravel) -> Site {
        Site {
            dir: shared_tempdir(),
            laravel,
        }
    }

    /// `SITE/current`, the path the service and the shell use.
    pub fn current(&self) -> PathBuf {
        self.dir.path().join("current")
    }

    pub fn release_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join("releases").join(name)
    }

    /// Ships release `name`: the fixture app, with its pool's `processes` set to `processes` in
    /// this release's config/drover.php. Code and vendor/ are shared by symlink; artisan,
    /// bootstrap/ and config/ are the release's own, as in a real release directory.
    pub fn ship(&self, name: &str, processes: usize) -> PathBuf {
        use std::os::unix::fs::symlink;
        let dir = self.release_dir(name);
        let source = self.laravel.app_dir();
        std::fs::create_dir_all(dir.join("bootstrap/cache")).unwrap();
        std::fs::create_dir_all(dir.join("config")).unwrap();
        std::fs::copy(source.join("artisan"), dir.join("artisan")).unwrap();
        std::fs::copy(
            source.join("bootstrap/app.php"),
            dir.join("bootstrap/app.php"),
        )
        .unwrap();
        match self.laravel {
            Laravel::V8 => {
                // The fixture's autoloader, from wherever the release is.
                let autoload = source.join("bootstrap/autoload.php");
                std::fs::write(
                    dir.join("bootstrap/autoload.php"),
                    format!("<?php\nrequire '{}';\n", autoload.display()),
                )
                .unwrap();
            }
            Laravel::V12 => {
                for f in ["bootstrap/providers.php", ".env", "composer.json"] {
                    std::fs::copy(source.join(f), dir.join(f)).unwrap();
                }
                symlink(source.join("vendor"), dir.join("vendor")).unwrap();
            }
        }
        for d in ["app", "database"] {
            symlink(source.join(d), dir.join(d)).unwrap();
        }
        for entry in std::fs::read_dir(source.join("config")).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() != "drover.php" {
                symlink(entry.path(), dir.join("config").join(entry.file_name())).unwrap();
            }
        }
        std::fs::write(
            dir.join("config/drover.php"),
            format!(
                "<?php\n$config = require '{}';\n$config['defaults']['default']['processes'] = {processes};\nreturn $config;\n",
                source.join("config/drover.php").display()
            ),
        )
        .unwrap();
        dir
    }

    /// Ships release `name` whose workers cannot boot (`drover:work` throws while the application
    /// boots, before it says hello: a provider that fails only in workers), while the rest of
    /// artisan — `php artisan drover --export`, the reload command — works.
    pub fn ship_unbootable(&self, name: &str, processes: usize) -> PathBuf {
        let dir = self.ship(name, processes);
        std::fs::rename(
            dir.join("bootstrap/app.php"),
            dir.join("bootstrap/app-real.php"),
        )
        .unwrap();
        std::fs::write(
            dir.join("bootstrap/app.php"),
            "<?php\nif (in_array('drover:work', $_SERVER['argv'] ?? [], true)) {\n    throw new RuntimeException('this release cannot boot its workers');\n}\nreturn require __DIR__.'/app-real.php';\n",
        )
        .unwrap();
        dir
    }

    /// `ln -sfn releases/NAME current`, atomically (a new link renamed over the old one), as
    /// Envoyer and Deployer do.
    pub fn switch_to(&self, name: &str) {
        let tmp = self.dir.path().join("current.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(PathBuf::from("releases").join(name), &tmp).unwrap();
        std::fs::rename(&tmp, self.current()).unwrap();
    }
}

/// The real user id of process `pid` (`Uid:` in its `/proc` status), `None` when it is gone.
pub fn process_uid(pid: i32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Whether `pid` is a zygote (fork mode): it shows as `... (drover zygote)` in `ps`; the workers
/// forked from it take their command line back.
pub fn is_zygote(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("(drover zygote)"))
}

/// Where process `pid` runs (`/proc/PID/cwd`, resolved by the kernel).
pub fn process_cwd(pid: i64) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default()
}

/// A port nobody listens on right now (another process may still take it before it is bound).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Sends `request` (head and body, as they are) over plain HTTP to `127.0.0.1:port` and reads the
/// answer to its end: (status, body); status 0 when no HTTP answer came (nothing listens, the
/// connection closed without one).
pub fn http(port: u16, request: &str) -> (u16, String) {
    let (status, _head, body) = http_exchange(port, request);
    (status, body)
}

/// As [`http`], with the answer's head (status line and headers) too: (status, head, body).
pub fn http_exchange(port: u16, request: &str) -> (u16, String, String) {
    use std::io::Write;
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new(), String::new());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    if stream.write_all(request.as_bytes()).is_err() {
        return (0, String::new(), String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// `GET path` over plain HTTP/1.1 (see [`http`]).
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    http(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    )
}

/// `php artisan drover` in `app`, once `processes` workers are ready (idle or busy).
pub async fn start_master(app: &LaravelApp, processes: usize) -> Spawned {
    let mut master = app.spawn(&["drover"], "drover.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut ready = 0;
    while ready != processes && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let out = app.command(&["drover:status", "--json"]).output().unwrap();
        if out.status.code() == Some(0) {
            let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let workers = status["pools"][0]["workers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            ready = workers
                .iter()
                .filter(|w| w["state"] == "idle" || w["state"] == "busy")
                .count();
        }
    }
    if ready != processes {
        let _ = master.kill();
        let _ = master.wait();
        panic!(
            "the master did not get {processes} workers ready:\n{}",
            app.log("drover.log")
        );
    }
    master
}

/// The master's workers were started the way a scenario asked (`spawn`): forked from a zygote,
/// or by exec. `log` is the master's.
pub fn assert_spawned(log: &str, spawn: &str) {
    if spawn == "fork" {
        assert!(
            log.contains("zygote ready")
                && log.contains("worker forked")
                && !log.contains("worker started"),
            "the workers were to be forked from a zygote:\n{log}"
        );
    } else {
        assert!(
            log.contains("worker started") && !log.contains("zygote"),
            "the workers were to be started by exec:\n{log}"
        );
    }
}

/// `php artisan drover:terminate`; the master's log, once it exited 0.
pub async fn stop_master(app: &LaravelApp, mut master: Spawned) -> String {
    app.artisan(&["drover:terminate"]);
    let status = master.wait().unwrap();
    let log = app.log("drover.log");
    assert!(
        status.success(),
        "php artisan drover exited with {status}:\n{log}"
    );
    log
}

/// A private `redis-server` on a free port of 127.0.0.1 (no persistence), stopped when dropped.
pub struct RedisServer {
    pub port: u16,
    child: Child,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/setup installs it)");
        let server = RedisServer { port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.cli(&["ping"]).trim() != "PONG" {
            assert!(Instant::now() < deadline, "redis-server did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// `redis-cli -p PORT ARGS`, its output.
    pub fn cli(&self, args: &[&str]) -> String {
        Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// The ids of the connected clients (`CLIENT LIST`), this query's own included.
    pub fn client_ids(&self) -> Vec<i64> {
        self.cli(&["client", "list"])
            .lines()
            .filter_map(|l| l.strip_prefix("id=")?.split(' ').next()?.parse().ok())
            .collect()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Each scenario (an `async fn NAME(laravel: Laravel)` of the test file), once per Laravel:
/// `laravel8::NAME` and `laravel12::NAME`.
#[macro_export]
macro_rules! on_every_laravel {
    ($($name:ident),* $(,)?) => {
        mod laravel8 {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Laravel::V8).await
            })*
        }
        mod laravel12 {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Laravel::V12).await
            })*
        }
    };
}
