//! What every engine runs on: one PostgreSQL (fsync on, as configured for production), one
//! redis-server, and the fixture Laravel app pointed at both: `tests/laravel-app` on Debian's
//! Laravel 8.83 (`--laravel 8`), or its Laravel 12.67 build (`tests/laravel12-app/build`, from the
//! offline reference tree, into `target/bench-laravel12-app`, with Horizon: [`crate::horizon`],
//! and shape 8's job and config/drover.php).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context};
use drover_broker::{EmbeddedConfig, EmbeddedPostgres};
use tokio_postgres::Client;

use crate::records::{Records, Runs};

pub struct Stack {
    /// The database all engines share.
    pub pg: EmbeddedPostgres,
    /// How it was started, to start it again after an outage (shape 8).
    pg_config: EmbeddedConfig,
    /// redis-server for the redis engine.
    redis: Child,
    /// Scratch: the cluster, app storage, drover's state.
    pub dir: tempfile::TempDir,
    /// The environment artisan runs with.
    env: Vec<(String, String)>,
    /// The jobs' records (`BENCH_RUNS_DIR`).
    records: std::sync::Mutex<Records>,
    pub client: Client,
    pub root: PathBuf,
    /// The application's directory (its artisan).
    pub app: PathBuf,
    /// pg_stat_statements is loaded and created in the database (asked for by shape 6, to time
    /// the master's claims per tenth of the run).
    pub stat_statements: bool,
    /// The app's Laravel: 8 or 12.
    pub laravel: u8,
}

impl Stack {
    /// `laravel`: 8 (Debian's package) or 12 (the reference tree, built under target/).
    /// `stat_statements`: load pg_stat_statements (every shape of the invocation then runs with
    /// it, the yardstick of shape 6 included).
    /// `settings`: PostgreSQL settings beyond the defaults (`--pg-setting`).
    pub async fn start(
        root: &Path,
        laravel: u8,
        stat_statements: bool,
        settings: &[(String, String)],
    ) -> anyhow::Result<Stack> {
        // The bench's own Laravel 12 build: Horizon is installed into it, never into the tests' app.
        let app = drover_bench::laravel_fixture(root, laravel, "bench-laravel12-app")?;
        if laravel == 12 {
            crate::horizon::prepare(root, &app)?;
            prepare_fleet(root, &app)?;
        }
        let dir = tempfile::Builder::new()
            .prefix("drover-bench-")
            .tempdir_in("/tmp")?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let mut config = EmbeddedConfig::new(dir.path().join("db"));
        // fsync stays on (the default); enough connections for 64 workers per engine.
        config
            .settings
            .push(("max_connections".into(), "300".into()));
        // The WAL sync's own time, for what a commit costs beside a dispatch (pg_stat_wal).
        config
            .settings
            .push(("track_wal_io_timing".into(), "on".into()));
        config.settings.extend(settings.iter().cloned());
        if stat_statements {
            config.settings.push((
                "shared_preload_libraries".into(),
                "pg_stat_statements".into(),
            ));
        }
        let pg = EmbeddedPostgres::start(&config)
            .await
            .context("starting PostgreSQL")?;

        let redis_port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut redis = Command::new("redis-server");
        with_parent_death_signal(&mut redis, nix::libc::SIGKILL);
        let redis = redis
            .args([
                "--port",
                &redis_port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                // Where the AOF goes when an engine turns it on (`redis_persistence`).
                "--dir",
                &dir.path().display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server (scripts/setup installs it)")?;

        let storage = dir.path().join("storage");
        for sub in ["framework/cache/data", "logs", "bootstrap"] {
            std::fs::create_dir_all(storage.join(sub))?;
        }
        let s = storage.display().to_string();
        let drover = root.join("target/release/drover");
        if !drover.exists() {
            bail!(
                "{} is missing; build it with `cargo build --release`",
                drover.display()
            );
        }
        let env = vec![
            ("DB_HOST".into(), pg.data_dir().display().to_string()),
            ("DB_PORT".into(), "5432".into()),
            ("DB_DATABASE".into(), "drover".into()),
            ("DB_USERNAME".into(), "drover".into()),
            ("REDIS_HOST".into(), "127.0.0.1".into()),
            ("REDIS_PORT".into(), redis_port.to_string()),
            ("APP_STORAGE".into(), s.clone()),
            (
                "APP_SERVICES_CACHE".into(),
                format!("{s}/bootstrap/services.php"),
            ),
            (
                "APP_PACKAGES_CACHE".into(),
                format!("{s}/bootstrap/packages.php"),
            ),
            ("DROVER_BINARY".into(), drover.display().to_string()),
            (
                "DROVER_STATE_DIR".into(),
                dir.path().join("state").display().to_string(),
            ),
            ("DROVER_QUEUES".into(), "default".into()),
            (
                "BENCH_RUNS_DIR".into(),
                dir.path().join("runs").display().to_string(),
            ),
            ("LOG_CHANNEL".into(), "stderr".into()),
            ("LOG_LEVEL".into(), "error".into()),
        ];
        let client = drover_broker::connect::connect_once(pg.url()).await?;
        let records = std::sync::Mutex::new(Records::new(&dir.path().join("runs"))?);
        let stack = Stack {
            pg,
            pg_config: config,
            redis,
            dir,
            env,
            records,
            client,
            root: root.to_path_buf(),
            app,
            stat_statements: false,
            laravel,
        };
        let out = Command::new(&drover)
            .args(["migrate", "--database-url", stack.pg.url()])
            .output()?;
        if !out.status.success() {
            bail!("drover migrate: {}", String::from_utf8_lossy(&out.stderr));
        }
        stack.artisan(&["migrate", "--force"])?;
        let mut stack = stack;
        if stat_statements {
            match stack
                .client
                .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                .await
            {
                Ok(()) => stack.stat_statements = true,
                Err(e) => eprintln!("bench: pg_stat_statements unavailable ({e}); shape 6 times claims from the records only"),
            }
        }
        Ok(stack)
    }

    /// A database outage's start: PostgreSQL's fast shutdown (SIGINT to the postmaster, what
    /// `pg_ctl stop -m fast` sends), returned once the server has removed its `postmaster.pid`.
    pub async fn stop_pg(&mut self) -> anyhow::Result<()> {
        self.stop_pg_with(nix::sys::signal::Signal::SIGINT).await
    }

    /// A primary that dies: PostgreSQL's immediate shutdown (SIGQUIT to the postmaster, what
    /// `pg_ctl stop -m immediate` sends: no shutdown checkpoint, no last WAL sent to a standby,
    /// every client cut off), returned once the server has removed its `postmaster.pid`.
    pub async fn kill_pg(&mut self) -> anyhow::Result<()> {
        self.stop_pg_with(nix::sys::signal::Signal::SIGQUIT).await
    }

    async fn stop_pg_with(&mut self, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
        let pid = self.pg.pid().context("PostgreSQL is not running")?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal)?;
        let pidfile = self.pg.data_dir().join("postmaster.pid");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while pidfile.exists() {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "PostgreSQL did not stop within 60 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// The outage's end: the same cluster started again, as it was; returns once it accepts
    /// connections, with [`Stack::client`] connected anew.
    pub async fn start_pg(&mut self) -> anyhow::Result<()> {
        let pg = EmbeddedPostgres::start(&self.pg_config)
            .await
            .context("starting PostgreSQL again")?;
        // The old server exited (a zombie until dropped here): its SIGINT hits nothing.
        drop(std::mem::replace(&mut self.pg, pg));
        self.client = drover_broker::connect::connect_once(self.pg.url()).await?;
        Ok(())
    }

    /// The settings the cluster was started with beyond its defaults (a standby of it gets the
    /// same: shape 8 (c)).
    pub fn pg_settings(&self) -> &[(String, String)] {
        &self.pg_config.settings
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("php");
        // If the harness dies, what it started goes too (a drover master gets a graceful TERM).
        with_parent_death_signal(&mut cmd, nix::libc::SIGTERM);
        cmd.arg(self.app.join("artisan"))
            .args(args)
            .current_dir(&self.app)
            .env_remove("DATABASE_URL");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    pub fn with_env(&self, extra: &[(&str, String)], args: &[&str]) -> Command {
        let mut cmd = self.command(args);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts artisan `args` with `extra` environment, its output in the scratch file `log`.
    pub fn spawn_logged(
        &self,
        extra: &[(&str, String)],
        args: &[&str],
        log: &str,
    ) -> anyhow::Result<Child> {
        let log = self.log(log);
        Ok(self
            .with_env(extra, args)
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?)
    }

    /// Turns Redis's append-only file on (`appendfsync everysec`, in the scratch directory Redis
    /// was started in) or
    /// off, at run time (`CONFIG SET`).
    pub fn redis_persistence(&self, aof: bool) -> anyhow::Result<()> {
        let port = self
            .env
            .iter()
            .find(|(k, _)| k == "REDIS_PORT")
            .map(|(_, v)| v.clone())
            .context("no REDIS_PORT in the app's environment")?;
        let settings: &[&[&str]] = if aof {
            &[&["appendfsync", "everysec"], &["appendonly", "yes"]]
        } else {
            &[&["appendonly", "no"]]
        };
        for pair in settings {
            let out = Command::new("redis-cli")
                .args(["-p", &port, "CONFIG", "SET"])
                .args(*pair)
                .output()
                .context("redis-cli (scripts/setup installs redis-tools with redis-server)")?;
            let said = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() || !said.trim().eq_ignore_ascii_case("OK") {
                bail!(
                    "redis-cli CONFIG SET {pair:?}: {said}{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        Ok(())
    }

    pub fn artisan(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.command(args).output()?;
        if !out.status.success() {
            bail!(
                "artisan {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    pub fn log(&self, name: &str) -> std::fs::File {
        std::fs::File::create(self.log_path(name)).expect("log file")
    }

    /// Where [`Stack::log`] writes `name`.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn drover(&self) -> PathBuf {
        self.root.join("target/release/drover")
    }

    /// Empties every queue (ordered groups and deduplication ids included) and the measurement
    /// tables.
    pub async fn reset(&self) -> anyhow::Result<()> {
        self.client
            .batch_execute("TRUNCATE public.bench_dispatch, public.jobs, public.failed_jobs, drover.jobs, drover.failed_jobs, drover.groups, drover.group_jobs, drover.group_pending, drover.group_failures, drover.dedup, drover.limit_waiting, drover.limit_holders, drover.limit_pending, drover.limit_keys, drover.limit_wakes, drover.fair_keys")
            .await?;
        self.artisan(&[
            "app:eval",
            "Illuminate\\Support\\Facades\\Redis::connection()->flushall();",
        ])?;
        self.artisan(&["cache:clear"])?;
        self.records().clear()?;
        Ok(())
    }

    fn records(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many jobs have completed (records written) so far.
    pub fn completed(&self) -> anyhow::Result<i64> {
        Ok(self.records().refresh()? as i64)
    }

    /// Every record so far.
    pub fn runs(&self) -> anyhow::Result<Runs> {
        self.records().runs()
    }

    pub async fn scalar_i64(&self, sql: &str) -> anyhow::Result<i64> {
        Ok(self.client.query_one(sql, &[]).await?.get(0))
    }

    pub async fn stop(mut self) {
        let _ = self.redis.kill();
        let _ = self.redis.wait();
        self.pg.stop().await;
    }
}

/// Puts shape 8's PHP in the bench app: its job beside the bench's providers (which autoload
/// it) and its config/drover.php — the fixture's, unchanged unless `BENCH_FLEET` is set. The
/// build links config/drover.php to the tests' fixture: the link is removed, never written
/// through.
fn prepare_fleet(root: &Path, app: &Path) -> anyhow::Result<()> {
    std::fs::copy(
        root.join("bench/fleet/FleetJob.php"),
        app.join("bootstrap/FleetJob.php"),
    )
    .context("copying bench/fleet/FleetJob.php into the bench app")?;
    let fixture = root.join("tests/laravel-app/config/drover.php");
    let text = std::fs::read_to_string(root.join("bench/fleet/drover.php"))?
        .replace("__FIXTURE_CONFIG__", &fixture.display().to_string());
    let target = app.join("config/drover.php");
    if std::fs::symlink_metadata(&target).is_ok() {
        std::fs::remove_file(&target)?;
    }
    std::fs::write(&target, text)?;
    Ok(())
}

/// The child gets `signal` when the harness exits, so an interrupted run leaves nothing behind.
fn with_parent_death_signal(cmd: &mut Command, signal: i32) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if nix::libc::prctl(nix::libc::PR_SET_PDEATHSIG, signal) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
