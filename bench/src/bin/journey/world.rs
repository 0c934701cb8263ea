//! What the journey runs on: one PostgreSQL and one redis-server shared by three hosts, and the
//! hosts themselves. A host is a directory — its site as a Forge zero-downtime site lays it out
//! (`site/releases/NAME`, `site/current`, the shared `site/storage` and `site/.env`) and `bin/drover`,
//! the binary its master runs (as `/usr/bin/drover` of the Debian package) — and a host name:
//! every command run "on" it runs in a UTS namespace of its own (`unshare --uts`, as
//! tests/schedule.rs runs its masters), so `gethostname()` says `h1`, `h2` or `h3` to Laravel's
//! scheduler, Horizon and drover alike. What runs on a host: its master (`php current/artisan
//! drover`, the unit's ExecStart), Horizon under a supervisord-like program (restarted when it
//! exits, until the program is removed) and, on one host, cron's `schedule:run` line (a loop that
//! starts it at second 0 of each minute, as cron does).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use drover_broker::{EmbeddedConfig, EmbeddedPostgres};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// Wall clock, Unix seconds.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The child gets `signal` when the harness dies, so an interrupted run leaves nothing behind.
/// (Every child is started from the runtime's one thread, which lives as long as the harness.)
fn parent_death_signal(cmd: &mut Command, signal: i32) {
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

/// What a command printed, stdout then stderr.
pub fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` to its end: its output, or an error naming `what` with everything it printed.
pub async fn run(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("starting {what}"))?;
    if !out.status.success() {
        bail!("{what} failed ({}):\n{}", out.status, said(&out).trim_end());
    }
    Ok(said(&out))
}

/// The OS user every host's processes run as — the site's user, as Forge's `forge` or the guide's
/// `www-data`: the deploy script, Horizon, cron's line, the master and its workers. (A master
/// refuses to run as root in production.)
pub const APP_USER: &str = "www-data";

/// `chown -R APP_USER: path`.
pub fn give_to_app_user(path: &Path) -> anyhow::Result<()> {
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{APP_USER}:{APP_USER}")])
        .arg(path)
        .status()?;
    if !status.success() {
        bail!("chown -R {APP_USER} {}", path.display());
    }
    Ok(())
}

/// The database every host shares: an embedded PostgreSQL 15 on 127.0.0.1 (trust), which the
/// application's user reaches as every host would reach its database server.
pub struct Database {
    pg: EmbeddedPostgres,
    config: EmbeddedConfig,
    /// The application's DB_HOST and DB_PORT.
    pub host: String,
    pub port: u16,
}

impl Database {
    pub async fn start(dir: &Path) -> anyhow::Result<Database> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut config = EmbeddedConfig::new(dir.join("db"));
        config.tcp_port = Some(port);
        config
            .settings
            .push(("max_connections".into(), "300".into()));
        let pg = EmbeddedPostgres::start(&config)
            .await
            .context("starting PostgreSQL")?;
        Ok(Database {
            pg,
            config,
            host: "127.0.0.1".into(),
            port,
        })
    }

    /// `pg_ctl OP -m fast` as the server's user (`runuser -u postgres` when the harness is root).
    async fn pg_ctl(&self, args: &[&str]) -> anyhow::Result<()> {
        let pg_ctl = self.pg.bin_dir().join("pg_ctl");
        let mut cmd = if nix::unistd::geteuid().is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&pg_ctl);
            c
        } else {
            Command::new(&pg_ctl)
        };
        cmd.arg("-D")
            .arg(self.pg.data_dir())
            .args(args)
            .args(["-w", "-t", "60"])
            .stdout(Stdio::null());
        run(&mut cmd, &format!("pg_ctl {}", args.join(" "))).await?;
        Ok(())
    }

    /// The outage's start: `pg_ctl stop -m fast`.
    pub async fn stop_for_outage(&self) -> anyhow::Result<()> {
        self.pg_ctl(&["stop", "-m", "fast"]).await
    }

    /// The outage's end: the same cluster started again, as it was.
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        let pg = EmbeddedPostgres::start(&self.config)
            .await
            .context("starting PostgreSQL again")?;
        drop(std::mem::replace(&mut self.pg, pg));
        Ok(())
    }

    pub async fn stop(self) {
        self.pg.stop().await;
    }
}

/// The redis-server Horizon and the application's cache use (no persistence, as the bench's).
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    pub async fn start(dir: &Path) -> anyhow::Result<Redis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut cmd = Command::new("redis-server");
        parent_death_signal(&mut cmd, nix::libc::SIGKILL);
        let child = cmd
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server (scripts/setup installs it)")?;
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Command::new("redis-cli")
                .args(["-p", &port.to_string(), "ping"])
                .output()
                .await
                .context("redis-cli")?;
            if String::from_utf8_lossy(&out.stdout).trim() == "PONG" {
                return Ok(redis);
            }
            if Instant::now() > deadline {
                bail!("redis-server did not answer on port {port} within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A process's working directory, resolved by the kernel (a release directory, never `current`).
pub fn cwd(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Every descendant of `pid`, now.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                out.push(c);
                next.push(c);
            }
        }
    }
    out
}

/// A supervisord program: the command started again a second after it exits, until the program
/// is removed (`remove`), as `autorestart=true` does. What it starts is built anew each time (it
/// names `current`, which a deploy moves).
pub struct Program {
    enabled: Arc<AtomicBool>,
    pid: Arc<Mutex<Option<i32>>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Program {
    pub fn start(make: impl Fn() -> anyhow::Result<Command> + 'static) -> Program {
        let enabled = Arc::new(AtomicBool::new(true));
        let pid = Arc::new(Mutex::new(None));
        let (e, p) = (enabled.clone(), pid.clone());
        let task = tokio::task::spawn_local(async move {
            while e.load(Ordering::SeqCst) {
                let child = make().and_then(|mut c| Ok(c.spawn()?));
                match child {
                    Ok(mut child) => {
                        let id = child.id().map(|i| i as i32).unwrap_or(-1);
                        *p.lock().unwrap() = Some(id);
                        let _ = child.wait().await;
                        *p.lock().unwrap() = None;
                    }
                    Err(e) => eprintln!("journey: a program did not start: {e:#}"),
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Program {
            enabled,
            pid,
            task: Some(task),
        }
    }

    /// The running process, if any.
    pub fn pid(&self) -> Option<i32> {
        *self.pid.lock().unwrap()
    }

    /// Removed from supervisord: not started again once it exits.
    pub fn remove(&self) {
        self.enabled.store(false, Ordering::SeqCst);
    }

    /// Waits until the program's process has exited and it is not started again.
    pub async fn wait_gone(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.remove();
        if let Some(task) = self.task.take() {
            match tokio::time::timeout(timeout, task).await {
                Ok(_) => {}
                Err(_) => bail!(
                    "a program's process (pid {:?}) did not exit within {timeout:?}",
                    self.pid()
                ),
            }
        }
        Ok(())
    }

    /// The last resort of a run that fails: SIGKILL to what runs now.
    pub fn kill(&self) {
        self.remove();
        if let Some(pid) = self.pid() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Each run cron started: when, and its exit (None while it runs).
type CronRuns = Arc<Mutex<Vec<(f64, Option<i32>)>>>;

/// Cron's `* * * * * php artisan schedule:run` line on a host: at second 0 of each minute,
/// `schedule:run` is started and not waited for. Removing the line stops the loop (a run already
/// started goes on, as under cron).
pub struct CronLine {
    enabled: Arc<AtomicBool>,
    /// Each run's start time and exit (None while running).
    pub runs: CronRuns,
}

impl CronLine {
    pub fn install(make: impl Fn() -> anyhow::Result<Command> + 'static) -> CronLine {
        let enabled = Arc::new(AtomicBool::new(true));
        let runs = Arc::new(Mutex::new(Vec::new()));
        let (e, r) = (enabled.clone(), runs.clone());
        tokio::task::spawn_local(async move {
            loop {
                let t = now();
                let next = (t / 60.0).floor() * 60.0 + 60.0;
                tokio::time::sleep(Duration::from_secs_f64(next - t)).await;
                if !e.load(Ordering::SeqCst) {
                    return;
                }
                let started = now();
                match make().and_then(|mut c| Ok(c.spawn()?)) {
                    Ok(mut child) => {
                        let index = {
                            let mut runs = r.lock().unwrap();
                            runs.push((started, None));
                            runs.len() - 1
                        };
                        let r = r.clone();
                        tokio::task::spawn_local(async move {
                            let code = child.wait().await.ok().and_then(|s| s.code()).unwrap_or(-1);
                            r.lock().unwrap()[index].1 = Some(code);
                        });
                    }
                    Err(e) => eprintln!("journey: cron's schedule:run did not start: {e:#}"),
                }
            }
        });
        CronLine { enabled, runs }
    }

    /// The line removed from the crontab.
    pub fn remove(&self) {
        self.enabled.store(false, Ordering::SeqCst);
    }

    /// Whether every run started so far has ended.
    pub fn idle(&self) -> bool {
        self.runs.lock().unwrap().iter().all(|r| r.1.is_some())
    }
}

/// One host.
pub struct Host {
    pub name: String,
    pub dir: PathBuf,
    /// How a command is run on it.
    pub on: OnHost,
    /// The master (`php current/artisan drover`), when running, and when it was started.
    pub master: Option<(Child, f64)>,
    /// Horizon's supervisord program, when installed.
    pub horizon: Option<Program>,
    /// Cron's `schedule:run` line, when in the crontab.
    pub cron: Option<CronLine>,
    /// Each master started: (its log's name, the binary's version line, when).
    pub masters_started: Vec<(String, String, f64)>,
}

impl Host {
    pub fn new(scratch: &Path, name: &str, binary: &Path) -> anyhow::Result<Host> {
        let dir = scratch.join(name);
        for d in [
            "site/releases",
            "site/storage/app/public",
            "site/storage/framework/cache/data",
            "site/storage/framework/views",
            "site/storage/framework/sessions",
            "site/storage/logs",
            "site/storage/journey-runs",
            "bin",
            "logs",
        ] {
            std::fs::create_dir_all(dir.join(d))?;
        }
        let machine_env = vec![
            (
                "PATH".into(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            ),
            ("HOME".into(), dir.display().to_string()),
            ("LANG".into(), "C.UTF-8".into()),
            // The fixture's schedule (tests/laravel-app/app/Console/TestSchedule.php) is read
            // from the process's environment: with the configuration cached, as a deploy
            // leaves it, Laravel reads no .env.
            ("DROVER_TEST_SCHEDULE".into(), "journey".into()),
        ];
        give_to_app_user(&dir)?;
        let host = Host {
            name: name.to_string(),
            on: OnHost {
                name: name.to_string(),
                env: machine_env,
                current: dir.join("site/current"),
            },
            dir,
            master: None,
            horizon: None,
            cron: None,
            masters_started: Vec::new(),
        };
        host.install_binary(binary)?;
        Ok(host)
    }

    pub fn site(&self) -> PathBuf {
        self.dir.join("site")
    }

    pub fn current(&self) -> PathBuf {
        self.site().join("current")
    }

    pub fn bin(&self) -> PathBuf {
        self.dir.join("bin/drover")
    }

    /// The state directory the master keeps (config/drover.php's default, storage/drover, in the
    /// site's shared storage).
    pub fn state_dir(&self) -> PathBuf {
        self.site().join("storage/drover")
    }

    /// `apt install ./drover_<version>.deb`: the host's binary is `binary` from now on (the link
    /// replaced atomically, as a package manager replaces /usr/bin/drover).
    pub fn install_binary(&self, binary: &Path) -> anyhow::Result<()> {
        let link = self.bin();
        let tmp = link.with_extension("new");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(binary, &tmp)?;
        std::fs::rename(&tmp, &link)?;
        Ok(())
    }

    /// The site's `.env` (Forge's "Environment" tab), as its lines.
    pub fn env_file(&self) -> PathBuf {
        self.site().join(".env")
    }

    /// Sets `key=value` in the site's `.env` (replacing the line, or adding it).
    pub fn set_env(&self, key: &str, value: &str) -> anyhow::Result<()> {
        let path = self.env_file();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with(&format!("{key}=")))
            .map(str::to_string)
            .collect();
        lines.push(format!("{key}={value}"));
        std::fs::write(&path, lines.join("\n") + "\n")?;
        Ok(())
    }

    /// `program ARGS` on this host, in `cwd` ([`OnHost::command`]).
    pub fn command(&self, cwd: &Path, program: &str, args: &[&str]) -> Command {
        self.on.command(cwd, program, args)
    }

    /// `php current/artisan ARGS` on this host ([`OnHost::artisan`]).
    pub fn artisan(&self, args: &[&str]) -> Command {
        self.on.artisan(args)
    }

    /// Runs `php current/artisan ARGS` to its end: (exit code, what it printed).
    pub async fn artisan_output(&self, args: &[&str]) -> anyhow::Result<(i32, String)> {
        let out = self
            .artisan(args)
            .output()
            .await
            .with_context(|| format!("{}: php artisan {}", self.name, args.join(" ")))?;
        Ok((out.status.code().unwrap_or(-1), said(&out)))
    }

    /// Runs `php current/artisan ARGS`, which must succeed.
    pub async fn artisan_ok(&self, args: &[&str]) -> anyhow::Result<String> {
        run(
            &mut self.artisan(args),
            &format!("{}: php artisan {}", self.name, args.join(" ")),
        )
        .await
    }

    /// A log file of the host's (appended to: a master started again writes after its last run).
    fn log(&self, name: &str) -> anyhow::Result<std::fs::File> {
        Ok(std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("logs").join(name))?)
    }

    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(name)
    }

    /// `systemctl start drover@myapp`: `php current/artisan drover` (what the unit's `drover
    /// launch` runs, here as the harness's user), its output in logs/master.log.
    pub fn start_master(&mut self) -> anyhow::Result<()> {
        if self.master.is_some() {
            bail!("{}: a master already runs", self.name);
        }
        let version = std::process::Command::new(self.bin())
            .arg("version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let log = self.log("master.log")?;
        use std::io::Write;
        let mut marker = log.try_clone()?;
        writeln!(
            marker,
            "==== journey: master started at {:.3} with {} ({version})",
            now(),
            self.bin().display()
        )?;
        let child = self
            .artisan(&["drover"])
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("{}: starting php artisan drover", self.name))?;
        let at = now();
        self.masters_started
            .push(("master.log".into(), version, at));
        self.master = Some((child, at));
        Ok(())
    }

    pub fn master_pid(&self) -> Option<i32> {
        self.master
            .as_ref()
            .and_then(|(c, _)| c.id())
            .map(|p| p as i32)
    }

    /// SIGTERM to the master (`systemctl stop`: a graceful drain) and its exit.
    pub async fn stop_master(&mut self, timeout: Duration) -> anyhow::Result<i32> {
        let Some((mut child, _)) = self.master.take() else {
            bail!("{}: no master runs", self.name);
        };
        if let Some(pid) = child.id() {
            kill(Pid::from_raw(pid as i32), Signal::SIGTERM)?;
        }
        match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => Ok(status?.code().unwrap_or(-1)),
            Err(_) => {
                let _ = child.kill().await;
                bail!(
                    "{}: the master did not exit within {timeout:?} of SIGTERM",
                    self.name
                )
            }
        }
    }

    /// `drover status --json` of this host's master (its own binary, on its state directory):
    /// (exit code, the JSON).
    pub async fn status_json(&self) -> (i32, serde_json::Value) {
        let (bin, state) = (
            self.bin().display().to_string(),
            self.state_dir().display().to_string(),
        );
        let out = self
            .command(
                &self.dir,
                &bin,
                &["status", "--json", "--state-dir", &state],
            )
            .output()
            .await;
        match out {
            Ok(out) => (
                out.status.code().unwrap_or(-1),
                serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null),
            ),
            Err(_) => (-1, serde_json::Value::Null),
        }
    }

    /// Waits until the master has `processes` workers serving (idle or busy).
    pub async fn wait_serving(&self, processes: usize, timeout: Duration) -> anyhow::Result<f64> {
        let deadline = Instant::now() + timeout;
        loop {
            let (code, status) = self.status_json().await;
            let serving = status["pools"]
                .as_array()
                .map(|pools| {
                    pools
                        .iter()
                        .flat_map(|p| p["workers"].as_array().cloned().unwrap_or_default())
                        .filter(|w| w["state"] == "idle" || w["state"] == "busy")
                        .count()
                })
                .unwrap_or(0);
            if code == 0 && serving >= processes {
                return Ok(now());
            }
            if Instant::now() > deadline {
                bail!(
                    "{}: the master did not have {processes} workers serving within {timeout:?} (drover status exit {code}); its log ends:\n{}",
                    self.name,
                    self.log_tail("master.log", 15)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path(name)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The release directory each worker process runs in, by kind: the master's drover workers
    /// (not the zygote) and Horizon's `horizon:work` processes.
    pub fn worker_releases(&self) -> BTreeMap<&'static str, Vec<(i32, PathBuf)>> {
        let mut out: BTreeMap<&'static str, Vec<(i32, PathBuf)>> = BTreeMap::new();
        if let Some(master) = self.master_pid() {
            for pid in descendants(master) {
                let cmd = cmdline(pid);
                if cmd.contains("drover:work") && !cmd.contains("(drover zygote)") {
                    if let Some(dir) = cwd(pid) {
                        out.entry("drover").or_default().push((pid, dir));
                    }
                }
            }
        }
        if let Some(horizon) = self.horizon.as_ref().and_then(Program::pid) {
            for pid in crate::horizon::tree(horizon).all {
                if cmdline(pid).contains("horizon:work") {
                    if let Some(dir) = cwd(pid) {
                        out.entry("horizon").or_default().push((pid, dir));
                    }
                }
            }
        }
        out
    }

    /// Horizon installed as a supervisord program: `php current/artisan horizon`, its output in
    /// logs/horizon.log.
    pub fn start_horizon(&mut self) {
        let (log, on) = (self.log_path("horizon.log"), self.on.clone());
        self.horizon = Some(Program::start(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)?;
            let mut cmd = on.artisan(&["horizon"]);
            cmd.stdout(file.try_clone()?).stderr(file);
            Ok(cmd)
        }));
    }

    /// Cron's line, `* * * * * cd SITE/current && php artisan schedule:run >> logs/cron.log 2>&1`.
    pub fn install_cron(&mut self) {
        let (log, on) = (self.log_path("cron.log"), self.on.clone());
        self.cron = Some(CronLine::install(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)?;
            let mut cmd = on.artisan(&["schedule:run"]);
            cmd.stdout(file.try_clone()?).stderr(file);
            Ok(cmd)
        }));
    }
}

/// How a command runs on a host: in a UTS namespace of its own named for the host (`unshare
/// --uts`), with the machine's environment only — PATH, and the fixture's switch for the
/// journey's schedule — beside the site's `.env`, which Laravel reads.
#[derive(Clone)]
pub struct OnHost {
    pub name: String,
    env: Vec<(String, String)>,
    /// The site's `current`.
    pub current: PathBuf,
}

impl OnHost {
    /// `program ARGS` in `cwd` on the host: its host name set in a new UTS namespace (as root),
    /// then as [`APP_USER`] (setpriv, which sets the parent-death signal again after the change of
    /// user clears it).
    pub fn command(&self, cwd: &Path, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--uts",
            "sh",
            "-c",
            &format!("hostname \"$0\" && exec setpriv --reuid={APP_USER} --regid={APP_USER} --init-groups --pdeathsig=TERM -- \"$@\""),
        ])
            .arg(&self.name)
            .arg(program)
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null());
        parent_death_signal(&mut cmd, nix::libc::SIGTERM);
        cmd
    }

    /// `php current/artisan ARGS`, in `current` (as a shell `cd`s into the site: the kernel
    /// resolves it to the release it points to now).
    pub fn artisan(&self, args: &[&str]) -> Command {
        let artisan = self.current.join("artisan").display().to_string();
        let mut all = vec![artisan.as_str()];
        all.extend_from_slice(args);
        self.command(&self.current, "php", &all)
    }
}
