//! The embedded default: a private PostgreSQL cluster under the state directory, started when no
//! database is configured. `initdb` on first use, then `postgres` as a child of the master (as an
//! unprivileged OS user when the master is root, since PostgreSQL refuses to run as root), stopped
//! with a fast shutdown on exit — and by the kernel (parent-death signal) if the master dies.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::{Pid, User};

use crate::BrokerError;

/// Where and how to run the embedded cluster.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// The master's state directory; the cluster lives in `<state_dir>/postgres`. No default here:
    /// the master passes its own (default `.drover` in the working directory).
    pub state_dir: PathBuf,
    /// Directory holding `initdb` and `postgres`. Default: the newest `/usr/lib/postgresql/*/bin`,
    /// else whatever `PATH` finds.
    pub bin_dir: Option<PathBuf>,
    /// The OS user that runs the server when the master runs as root. Default `postgres`.
    pub os_user: String,
    /// Extra server settings, passed as `-c name=value`. Default none.
    pub settings: Vec<(String, String)>,
    /// Listen on 127.0.0.1 at this port instead of a Unix socket. Default `None` (a socket in
    /// the data directory, or a free loopback port when that path would be too long).
    pub tcp_port: Option<u16>,
}

impl EmbeddedConfig {
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        EmbeddedConfig {
            state_dir: state_dir.into(),
            bin_dir: None,
            os_user: "postgres".to_string(),
            settings: Vec::new(),
            tcp_port: None,
        }
    }
}

/// A running private cluster. Call [`EmbeddedPostgres::stop`] for a clean shutdown; dropping it
/// asks the server to shut down without waiting.
pub struct EmbeddedPostgres {
    /// The postmaster, our child; `None` once stopped.
    child: Option<tokio::process::Child>,
    /// `<state_dir>/postgres`.
    data_dir: PathBuf,
    /// key=value connection string for tokio-postgres.
    url: String,
    /// The same place as a PDO DSN, for PHP workers and producers.
    pdo_dsn: String,
}

/// The cluster's superuser and database.
const DB_NAME: &str = "drover";

impl EmbeddedPostgres {
    /// Initialises the cluster if needed, starts it and waits until it accepts connections.
    pub async fn start(config: &EmbeddedConfig) -> Result<EmbeddedPostgres, BrokerError> {
        let bin = resolve_bin_dir(config.bin_dir.as_deref())?;
        std::fs::create_dir_all(&config.state_dir).map_err(|source| BrokerError::Io {
            about: "creating the state directory",
            path: config.state_dir.clone(),
            source,
        })?;
        let state_dir = config
            .state_dir
            .canonicalize()
            .map_err(|source| BrokerError::Io {
                about: "resolving the state directory",
                path: config.state_dir.clone(),
                source,
            })?;
        let data_dir = state_dir.join("postgres");
        let run_as = if nix::unistd::geteuid().is_root() {
            let user = User::from_name(&config.os_user)
                .ok()
                .flatten()
                .ok_or_else(|| BrokerError::embedded(format!(
                    "drover runs as root, and PostgreSQL refuses to; the OS user {:?} that should run it does not exist (create it, e.g. `useradd --system postgres`, or run scripts/setup)",
                    config.os_user
                )))?;
            check_reachable(&state_dir, &user)?;
            Some(user)
        } else {
            None
        };

        if !data_dir.join("PG_VERSION").exists() {
            init_cluster(&bin, &data_dir, run_as.as_ref()).await?;
        }

        // Unix socket in the data directory when the path fits (107 bytes), else loopback TCP.
        let socket_path_len = data_dir.as_os_str().len() + "/.s.PGSQL.5432".len();
        let (host, port, listen) = if let Some(port) = config.tcp_port {
            ("127.0.0.1".to_string(), port, true)
        } else if socket_path_len <= 100 {
            (data_dir.display().to_string(), 5432u16, false)
        } else {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(|e| BrokerError::Embedded {
                    about: "finding a free port".into(),
                    source: Some(e),
                })?;
            ("127.0.0.1".to_string(), port, true)
        };

        let log_path = state_dir.join("postgres.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|source| BrokerError::Io {
                about: "opening the PostgreSQL log",
                path: log_path.clone(),
                source,
            })?;
        let log_err = log.try_clone().map_err(|e| BrokerError::Embedded {
            about: "duplicating the log handle".into(),
            source: Some(e),
        })?;

        let mut cmd = std::process::Command::new(bin.join("postgres"));
        cmd.arg("-D").arg(&data_dir).arg("-p").arg(port.to_string());
        if listen {
            cmd.args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
            ]);
        } else {
            cmd.args(["-c", "listen_addresses="])
                .arg("-c")
                .arg(format!("unix_socket_directories={}", data_dir.display()));
        }
        for (name, value) in &config.settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .current_dir("/")
            .process_group(0);
        if let Some(user) = &run_as {
            cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
        let master = std::process::id();
        // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Fast shutdown if the master dies, so no orphaned cluster keeps the data directory.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() as u32 != master {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child =
            tokio::process::Command::from(cmd)
                .spawn()
                .map_err(|e| BrokerError::Embedded {
                    about: format!("starting {}", bin.join("postgres").display()),
                    source: Some(e),
                })?;
        let url = format!("host={host} port={port} user={DB_NAME} dbname=postgres");
        let mut pg = EmbeddedPostgres {
            child: Some(child),
            data_dir,
            url: format!("host={host} port={port} user={DB_NAME} dbname={DB_NAME}"),
            pdo_dsn: format!("pgsql:host={host};port={port};dbname={DB_NAME};user={DB_NAME}"),
        };
        pg.wait_ready(&url, &log_path).await?;
        let admin = crate::connect::connect_once(&url).await?;
        let exists = admin
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&DB_NAME])
            .await
            .map_err(BrokerError::query("looking for the drover database"))?
            .is_some();
        if !exists {
            admin
                .batch_execute(&format!("CREATE DATABASE {DB_NAME}"))
                .await
                .map_err(BrokerError::query("creating the drover database"))?;
        }
        tracing::info!(data_dir = %pg.data_dir.display(), dsn = %pg.pdo_dsn, "embedded PostgreSQL is up");
        Ok(pg)
    }

    async fn wait_ready(&mut self, admin_url: &str, log_path: &Path) -> Result<(), BrokerError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(BrokerError::embedded(format!(
                        "postgres exited during start-up ({status}); its log {} ends with:\n{}",
                        log_path.display(),
                        tail(log_path, 10)
                    )));
                }
            }
            if crate::connect::connect_once(admin_url).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(BrokerError::embedded(format!(
                    "postgres did not accept connections within 60s; see {}",
                    log_path.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Connection string for tokio-postgres / `--database-url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The same database as a PDO DSN.
    pub fn pdo_dsn(&self) -> &str {
        &self.pdo_dsn
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The postmaster's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    /// Waits for the server to exit on its own (it should not): returns a description of why.
    pub async fn exited(&mut self) -> String {
        match self.child.as_mut() {
            Some(child) => match child.wait().await {
                Ok(status) => format!("postgres exited unexpectedly ({status})"),
                Err(e) => format!("waiting for postgres failed: {e}"),
            },
            None => std::future::pending().await,
        }
    }

    /// Fast shutdown (SIGINT), waiting up to 30 s, then SIGKILL.
    pub async fn stop(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGINT);
        }
        match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
            Ok(_) => tracing::info!("embedded PostgreSQL stopped"),
            Err(_) => {
                tracing::warn!("embedded PostgreSQL did not stop within 30s; killing it");
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        if let Some(pid) = self.child.as_ref().and_then(|c| c.id()) {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGINT);
        }
    }
}

fn resolve_bin_dir(configured: Option<&Path>) -> Result<PathBuf, BrokerError> {
    if let Some(dir) = configured {
        return if dir.join("postgres").exists() {
            Ok(dir.to_path_buf())
        } else {
            Err(BrokerError::embedded(format!(
                "no postgres binary in {}",
                dir.display()
            )))
        };
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|dir| dir.join("postgres").exists() && dir.join("initdb").exists())
        .ok_or_else(|| BrokerError::embedded(
            "no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin and PATH); install postgresql-15 (scripts/setup does) or configure --database-url",
        ))
}

/// Every directory above the state directory must be searchable by the server's user.
fn check_reachable(state_dir: &Path, user: &User) -> Result<(), BrokerError> {
    for dir in state_dir.ancestors() {
        let Ok(meta) = std::fs::metadata(dir) else {
            continue;
        };
        let mode = meta.permissions().mode();
        use std::os::unix::fs::MetadataExt;
        let searchable = mode & 0o001 != 0
            || (meta.uid() == user.uid.as_raw() && mode & 0o100 != 0)
            || (meta.gid() == user.gid.as_raw() && mode & 0o010 != 0);
        if !searchable {
            return Err(BrokerError::embedded(format!(
                "the embedded PostgreSQL runs as OS user {:?}, which cannot enter {} (mode {:o}); put the state directory somewhere it can reach, e.g. --state-dir /var/lib/drover or /tmp/drover",
                user.name,
                dir.display(),
                mode & 0o777
            )));
        }
    }
    Ok(())
}

async fn init_cluster(
    bin: &Path,
    data_dir: &Path,
    run_as: Option<&User>,
) -> Result<(), BrokerError> {
    std::fs::create_dir_all(data_dir).map_err(|source| BrokerError::Io {
        about: "creating the PostgreSQL data directory",
        path: data_dir.to_path_buf(),
        source,
    })?;
    std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700)).map_err(
        |source| BrokerError::Io {
            about: "restricting the PostgreSQL data directory",
            path: data_dir.to_path_buf(),
            source,
        },
    )?;
    let mut cmd = tokio::process::Command::new(bin.join("initdb"));
    cmd.arg("-D")
        .arg(data_dir)
        .args(["-U", DB_NAME, "-A", "trust", "-E", "UTF8", "--no-locale"])
        .current_dir("/")
        .stdin(Stdio::null());
    if let Some(user) = run_as {
        nix::unistd::chown(data_dir, Some(user.uid), Some(user.gid)).map_err(|e| {
            BrokerError::Embedded {
                about: format!("handing {} to OS user {}", data_dir.display(), user.name),
                source: Some(e.into()),
            }
        })?;
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    tracing::info!(data_dir = %data_dir.display(), "initialising the embedded PostgreSQL cluster");
    let out = cmd.output().await.map_err(|e| BrokerError::Embedded {
        about: format!("running {}", bin.join("initdb").display()),
        source: Some(e),
    })?;
    if !out.status.success() {
        return Err(BrokerError::embedded(format!(
            "initdb failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
