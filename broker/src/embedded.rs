//! The embedded default: a private PostgreSQL cluster under the state directory, started when no
//! database is configured. `initdb` on first use, then `postgres` as a child of the master (as an
//! unprivileged OS user when the master is root, since PostgreSQL refuses to run as root), stopped
//! with a fast shutdown on exit — and by the kernel (parent-death signal) if the master dies.
//!
//! Who may connect: the server listens on a Unix socket in its data directory (mode 0700, so only
//! its OS user and root reach it; `trust` there). When that socket's path would be too long, it
//! listens on 127.0.0.1 instead, where any local user could connect: there the superuser logs in
//! with a password (SCRAM-SHA-256), generated at random and kept in
//! `<state_dir>/postgres.password` (mode 0600), and the URL and PDO DSN it gives out carry it
//! (never logged: [`crate::connect::redact`]). `pg_hba.conf` is written by drover at every start.
//!
//! The server's log is bounded: its stderr is a pipe that a thread of the master copies into
//! `<state_dir>/postgres.log`, starting a new file whenever the next line would take it past
//! [`EmbeddedConfig::log_file_size`] (`postgres.log` becomes `postgres.log.1`, `.1` becomes
//! `.2`, …), and keeping [`EmbeddedConfig::log_files`] files in all: by default 5 × 10 MiB.
//! A `postgres.log` left larger than that by an older drover is cut to its last part at start.

use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt};
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
    /// the master passes its own (default `storage/drover` under its working directory).
    pub state_dir: PathBuf,
    /// Directory holding `initdb` and `postgres`. Default: the newest `/usr/lib/postgresql/*/bin`,
    /// else whatever `PATH` finds.
    pub bin_dir: Option<PathBuf>,
    /// The OS user that runs the server when the master runs as root. Default `postgres`.
    pub os_user: String,
    /// Extra server settings, passed as `-c name=value` after drover's own (so they win).
    /// Default none.
    pub settings: Vec<(String, String)>,
    /// Listen on 127.0.0.1 at this port instead of a Unix socket, with `trust` authentication
    /// as `initdb` set it up: any local user can connect as the superuser. For tests only (TLS,
    /// a server that comes and goes); the master never sets it. Default `None`: a socket in the
    /// data directory, or, when that path would be too long, a free loopback port with password
    /// authentication.
    pub tcp_port: Option<u16>,
    /// The largest a file of the server's log grows: the next one starts at the last whole line
    /// that fits (a longer line is split). Default 10 MiB.
    pub log_file_size: u64,
    /// How many files of the server's log are kept: `postgres.log` and `postgres.log.1` up to
    /// `postgres.log.<log_files - 1>`. Default 5: with `log_file_size`, 50 MiB at most.
    pub log_files: usize,
}

impl EmbeddedConfig {
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        EmbeddedConfig {
            state_dir: state_dir.into(),
            bin_dir: None,
            os_user: "postgres".to_string(),
            settings: Vec::new(),
            tcp_port: None,
            log_file_size: 10 * 1024 * 1024,
            log_files: 5,
        }
    }
}

/// The file in the state directory that holds the superuser's password for loopback TCP.
pub const PASSWORD_FILE: &str = "postgres.password";

/// Where the server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Listen {
    /// A Unix socket in the data directory (`trust`: the directory is 0700).
    Socket,
    /// 127.0.0.1 at a port the caller chose ([`EmbeddedConfig::tcp_port`]), `trust` (tests).
    TcpTrust(u16),
    /// 127.0.0.1 at a free port, SCRAM with this password (the socket path was too long).
    TcpPassword(u16, String),
}

/// A running private cluster. Call [`EmbeddedPostgres::stop`] for a clean shutdown; dropping it
/// asks the server to shut down without waiting.
pub struct EmbeddedPostgres {
    /// The postmaster, our child; `None` once stopped.
    child: Option<tokio::process::Child>,
    /// `<state_dir>/postgres`.
    data_dir: PathBuf,
    /// The PostgreSQL binaries it runs: a tool or a standby of the same server version uses them.
    bin_dir: PathBuf,
    /// key=value connection string for tokio-postgres.
    url: String,
    /// The same place as a PDO DSN, for PHP workers and producers.
    pdo_dsn: String,
    /// Copies the server's stderr into the bounded log; ends when the server is gone.
    log_thread: Option<std::thread::JoinHandle<()>>,
}

/// The cluster's superuser and database.
const DB_NAME: &str = "drover";

impl EmbeddedPostgres {
    /// Initialises the cluster if needed, starts it and waits until it accepts connections.
    pub async fn start(config: &EmbeddedConfig) -> Result<EmbeddedPostgres, BrokerError> {
        let bin = resolve_bin_dir(config.bin_dir.as_deref())?;
        let state_dir = make_state_dir(&config.state_dir)?;
        let data_dir = state_dir.join("postgres");
        let run_as = server_user(&config.os_user, &state_dir)?;
        let fresh = !data_dir.join("PG_VERSION").exists();
        if fresh {
            init_cluster(&bin, &data_dir, run_as.as_ref()).await?;
        }
        let mut listen = choose_listen(config.tcp_port, &data_dir)?;
        prepare_cluster(
            &bin,
            &state_dir,
            &data_dir,
            run_as.as_ref(),
            fresh,
            &mut listen,
        )
        .await?;

        let log_path = state_dir.join("postgres.log");
        let log = BoundedLog::open(&log_path, config.log_file_size, config.log_files)?;
        let (log_reader, log_writer) = pipe().map_err(|e| BrokerError::Embedded {
            about: "making the pipe for the PostgreSQL log".into(),
            source: Some(e),
        })?;
        // Reading before the server writes: it never meets a pipe without a reader.
        let log_thread = log
            .copy_from(log_reader)
            .map_err(|e| BrokerError::Embedded {
                about: "starting the thread that writes the PostgreSQL log".into(),
                source: Some(e),
            })?;
        let (cmd, place) = server_command(
            &bin,
            &data_dir,
            &listen,
            config,
            run_as.as_ref(),
            log_writer,
        )?;
        // The pipe's write ends go with the command: only the server holds them then, so the
        // copying thread sees the end of the pipe when the server is gone (or never started).
        let child = tokio::process::Command::from(cmd).spawn();
        let child = child.map_err(|e| BrokerError::Embedded {
            about: format!("starting {}", bin.join("postgres").display()),
            source: Some(e),
        })?;
        let mut pg = EmbeddedPostgres {
            child: Some(child),
            data_dir,
            bin_dir: bin.clone(),
            url: place.url(DB_NAME),
            pdo_dsn: place.pdo_dsn(),
            log_thread: Some(log_thread),
        };
        let admin_url = place.url("postgres");
        pg.wait_ready(&admin_url, &log_path).await?;
        create_database_if_missing(&admin_url).await?;
        tracing::info!(
            data_dir = %pg.data_dir.display(),
            dsn = %crate::connect::redact(&pg.pdo_dsn),
            "embedded PostgreSQL is up"
        );
        Ok(pg)
    }

    async fn wait_ready(&mut self, admin_url: &str, log_path: &Path) -> Result<(), BrokerError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    // Let the thread copy what the server said last.
                    let copied = Instant::now() + Duration::from_secs(1);
                    while self.log_thread.as_ref().is_some_and(|t| !t.is_finished())
                        && Instant::now() < copied
                    {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    return Err(BrokerError::embedded(format!(
                        "postgres exited during start-up ({status}); its log {} ends with:\n{}",
                        log_path.display(),
                        tail(log_path, 10)
                    )));
                }
            }
            match crate::connect::connect_once(admin_url).await {
                Ok(_) => return Ok(()),
                // The server answers but refuses us: waiting will not change that.
                Err(e) if e.is_permanent() => {
                    return Err(BrokerError::embedded(format!(
                        "postgres refuses drover's own connection: {e}; see {}",
                        log_path.display()
                    )))
                }
                Err(_) => {}
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

    /// The directory of the PostgreSQL binaries this cluster runs.
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
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
        // Its last words: the log thread ends once every server process closed the pipe.
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.log_thread.as_ref().is_some_and(|t| !t.is_finished())
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
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

/// A pipe whose ends are closed on exec (the server's end is made its stdout and stderr).
fn pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::{FromRawFd as _, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into the array, which nothing else owns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nothing else.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((reader.into(), writer.into()))
}

/// The server's log: `postgres.log` and at most `files - 1` older ones (`postgres.log.1` the
/// newest of them), each at most `max` bytes (a line longer than that is split).
struct BoundedLog {
    path: PathBuf,
    max: u64,
    files: usize,
    file: std::fs::File,
    size: u64,
}

impl BoundedLog {
    /// Opens `path` to append to; one larger than `max` (an older drover let it grow) is
    /// rotated first, keeping only its last `max` bytes.
    fn open(path: &Path, max: u64, files: usize) -> Result<BoundedLog, BrokerError> {
        let io = |about: &'static str| {
            let path = path.to_path_buf();
            move |source| BrokerError::Io {
                about,
                path,
                source,
            }
        };
        let max = max.max(1);
        let files = files.max(1);
        let size = match std::fs::metadata(path) {
            Ok(meta) => meta.len(),
            Err(_) => 0,
        };
        if size > max {
            if files > 1 {
                Self::shift(path, files);
                keep_tail(path, &numbered(path, 1), max)
                    .map_err(io("keeping the end of the PostgreSQL log"))?;
            } else {
                std::fs::File::create(path).map_err(io("emptying the PostgreSQL log"))?;
            }
        }
        let file = Self::append(path).map_err(io("opening the PostgreSQL log"))?;
        let size = if size > max { 0 } else { size };
        Ok(BoundedLog {
            path: path.to_path_buf(),
            max,
            files,
            file,
            size,
        })
    }

    fn append(path: &Path) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    }

    /// Moves `.1` to `.2` and so on, dropping the oldest, so that `.1` is free.
    fn shift(path: &Path, files: usize) {
        let _ = std::fs::remove_file(numbered(path, files.saturating_sub(1).max(1)));
        for i in (1..files.saturating_sub(1)).rev() {
            let _ = std::fs::rename(numbered(path, i), numbered(path, i + 1));
        }
    }

    /// Starts a new `postgres.log`, the current one becoming `.1` (or going, with one file).
    fn rotate(&mut self) -> std::io::Result<()> {
        Self::shift(&self.path, self.files);
        if self.files > 1 {
            std::fs::rename(&self.path, numbered(&self.path, 1))?;
        } else {
            self.file.set_len(0)?;
        }
        self.file = Self::append(&self.path)?;
        self.size = 0;
        Ok(())
    }

    /// Writes `data`, starting a new file at a line boundary where it would grow past `max`.
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            let room = self.max.saturating_sub(self.size) as usize;
            if data.len() <= room {
                self.file.write_all(data)?;
                self.size += data.len() as u64;
                return Ok(());
            }
            // What fits, up to the end of its last whole line.
            let fits = data[..room]
                .iter()
                .rposition(|b| *b == b'\n')
                .map(|i| i + 1);
            match fits {
                Some(n) => {
                    self.file.write_all(&data[..n])?;
                    data = &data[n..];
                    self.rotate()?;
                }
                None if self.size > 0 => self.rotate()?,
                // A line longer than a whole file: as much as fits, then a new file.
                None => {
                    self.file.write_all(&data[..room.max(1)])?;
                    data = &data[room.max(1)..];
                    self.rotate()?;
                }
            }
        }
        Ok(())
    }

    /// Copies everything read from `reader` into the log, on a thread of its own (the master's
    /// runtime never waits on it) until the server closes its end.
    fn copy_from(
        mut self,
        mut reader: std::fs::File,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("postgres-log".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let mut buf = [0u8; 8192];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => {
                            if let Err(e) = self.write(&buf[..n]) {
                                // Keep reading, so the server never blocks on a full pipe.
                                tracing::debug!(path = %self.path.display(), "writing the PostgreSQL log: {e}");
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => return,
                    }
                }
            })
    }
}

/// `postgres.log.N`.
fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Writes the last `max` bytes of `from` (from a line start) to `to`, and empties `from`.
fn keep_tail(from: &Path, to: &Path, max: u64) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(from)?;
    let len = file.metadata()?.len();
    let from_byte = len.saturating_sub(max);
    // One byte before, to see whether the part kept starts a line.
    file.seek(std::io::SeekFrom::Start(from_byte.saturating_sub(1)))?;
    let mut last = Vec::new();
    file.read_to_end(&mut last)?;
    let start = match from_byte {
        0 => 0,
        _ if last.first() == Some(&b'\n') => 1,
        _ => last
            .iter()
            .position(|b| *b == b'\n')
            .map_or(last.len(), |i| i + 1),
    };
    std::fs::write(to, &last[start..])?;
    file.set_len(0)
}

/// The superuser's password for loopback TCP kept in `<state_dir>/postgres.password`, if there
/// is one drover wrote. A cluster just initialised (`fresh`) has none: a file left from a removed
/// cluster means nothing to it.
fn saved_password(state_dir: &Path, fresh: bool) -> Option<String> {
    if fresh {
        return None;
    }
    let text = std::fs::read_to_string(state_dir.join(PASSWORD_FILE)).ok()?;
    let password = text.trim();
    is_plain_password(password).then(|| password.to_string())
}

/// Saves the superuser's password (0600, replacing the file at once), after it was set in the
/// cluster: a crash in between leaves no file, and the next start sets a new one.
fn save_password(state_dir: &Path, password: &str) -> Result<(), BrokerError> {
    let path = state_dir.join(PASSWORD_FILE);
    let tmp = path.with_extension("password.tmp");
    let write = || -> std::io::Result<()> {
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(password.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|source| BrokerError::Io {
        about: "saving the embedded PostgreSQL's password",
        path: path.clone(),
        source,
    })?;
    tracing::info!(file = %path.display(), "the embedded PostgreSQL listens on 127.0.0.1 (its socket path would be too long): a new superuser password was set and saved");
    Ok(())
}

/// What drover writes and reads back: no character that a URL, a key=value string or a PDO DSN
/// would need quoted.
fn is_plain_password(p: &str) -> bool {
    p.len() >= 16 && p.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Runs `statements` (one per line) with `postgres --single`, while the server is not running.
/// A password goes in as a SCRAM verifier, so the password itself is written nowhere but the
/// password file; the statements are left out of error messages all the same.
async fn single_user(
    bin: &Path,
    data_dir: &Path,
    run_as: Option<&User>,
    statements: &[String],
) -> Result<(), BrokerError> {
    let mut cmd = tokio::process::Command::new(bin.join("postgres"));
    cmd.arg("--single")
        .arg("-D")
        .arg(data_dir)
        .args(["-c", "logging_collector=off", "postgres"])
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(user) = run_as {
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    let failed = |why: String| {
        BrokerError::embedded(format!(
            "preparing the cluster in single-user mode (postgres --single -D {}) failed: {why}",
            data_dir.display()
        ))
    };
    let mut child = cmd.spawn().map_err(|e| failed(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt as _;
        let input: String = statements.iter().map(|s| format!("{s}\n")).collect();
        stdin
            .write_all(input.as_bytes())
            .await
            .map_err(|e| failed(e.to_string()))?;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Single-user mode exits 0 after a failed statement: look for the error itself.
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ERROR:") || l.contains("FATAL:") || l.contains("PANIC:"))
        .collect();
    if !out.status.success() || !errors.is_empty() {
        return Err(failed(format!("{}: {}", out.status, errors.join("; "))));
    }
    Ok(())
}

/// `n` random bytes from the system, as hex.
fn random_hex(n: usize) -> Result<String, BrokerError> {
    use ring::rand::SecureRandom as _;
    let mut bytes = vec![0u8; n];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| BrokerError::embedded("the system's random source failed"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677, as
/// `pg_authid.rolpassword` holds it): `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
/// `password` is ASCII, which SASLprep leaves as it is.
fn scram_sha_256(password: &str) -> Result<String, BrokerError> {
    use ring::rand::SecureRandom as _;
    use ring::{digest, hmac, pbkdf2};
    const ITERATIONS: u32 = 4096;
    let mut salt = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| BrokerError::embedded("the system's random source failed"))?;
    let mut salted = [0u8; 32];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        std::num::NonZeroU32::new(ITERATIONS).expect("nonzero"),
        &salt,
        password.as_bytes(),
        &mut salted,
    );
    let key = hmac::Key::new(hmac::HMAC_SHA256, &salted);
    let client_key = hmac::sign(&key, b"Client Key");
    let stored_key = digest::digest(&digest::SHA256, client_key.as_ref());
    let server_key = hmac::sign(&key, b"Server Key");
    Ok(format!(
        "SCRAM-SHA-256${ITERATIONS}:{}${}:{}",
        base64(&salt),
        base64(stored_key.as_ref()),
        base64(server_key.as_ref())
    ))
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Writes `pg_hba.conf` for how the server listens: `trust` on the Unix socket (in the 0700
/// data directory), SCRAM on loopback TCP unless a test asked for trust
/// ([`EmbeddedConfig::tcp_port`]). Rewritten at every start, so a cluster made by an older
/// drover (`initdb -A trust`) gets the same rules. A `hba_file` setting replaces it.
fn write_hba(data_dir: &Path, listen: &Listen, run_as: Option<&User>) -> Result<(), BrokerError> {
    let tcp = match listen {
        Listen::TcpTrust(_) => "trust",
        Listen::Socket | Listen::TcpPassword(..) => "scram-sha-256",
    };
    let text = format!(
        "# Written by drover at every start of its embedded cluster (broker/src/embedded.rs);\n\
         # edits are overwritten. Set hba_file to use another file.\n\
         # The socket is in this directory (0700): only the server's OS user and root reach it.\n\
         local all all trust\n\
         host all all 127.0.0.1/32 {tcp}\n\
         host all all ::1/128 {tcp}\n"
    );
    let path = data_dir.join("pg_hba.conf");
    let tmp = data_dir.join("pg_hba.conf.drover");
    let write = || -> std::io::Result<()> {
        std::fs::write(&tmp, &text)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        if let Some(user) = run_as {
            nix::unistd::chown(&tmp, Some(user.uid), Some(user.gid))?;
        }
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|source| BrokerError::Io {
        about: "writing the embedded PostgreSQL's pg_hba.conf",
        path,
        source,
    })
}

/// Where the server listens, as clients reach it.
struct Place {
    host: String,
    port: u16,
    /// The superuser's password, on loopback TCP with a password.
    password: Option<String>,
}

impl Place {
    /// A key=value connection string to `dbname`.
    fn url(&self, dbname: &str) -> String {
        let password = match &self.password {
            Some(p) => format!(" password={p}"),
            None => String::new(),
        };
        format!(
            "host={} port={} user={DB_NAME} dbname={dbname}{password}",
            self.host, self.port
        )
    }

    /// The PDO DSN to the drover database, for PHP.
    fn pdo_dsn(&self) -> String {
        let password = match &self.password {
            Some(p) => format!(";password={p}"),
            None => String::new(),
        };
        format!(
            "pgsql:host={};port={};dbname={DB_NAME};user={DB_NAME}{password}",
            self.host, self.port
        )
    }
}

/// The state directory, made if missing, as an absolute path.
fn make_state_dir(state_dir: &Path) -> Result<PathBuf, BrokerError> {
    std::fs::create_dir_all(state_dir).map_err(|source| BrokerError::Io {
        about: "creating the state directory",
        path: state_dir.to_path_buf(),
        source,
    })?;
    state_dir.canonicalize().map_err(|source| BrokerError::Io {
        about: "resolving the state directory",
        path: state_dir.to_path_buf(),
        source,
    })
}

/// The OS user the server runs as when drover runs as root (PostgreSQL refuses root), checked
/// to reach the state directory; `None` when drover is not root.
fn server_user(os_user: &str, state_dir: &Path) -> Result<Option<User>, BrokerError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let user = User::from_name(os_user)
        .ok()
        .flatten()
        .ok_or_else(|| BrokerError::embedded(format!(
            "drover runs as root, and PostgreSQL refuses to; the OS user {os_user:?} that should run it does not exist (create it, e.g. `useradd --system postgres`, or run scripts/setup)"
        )))?;
    check_reachable(state_dir, &user)?;
    Ok(Some(user))
}

/// A Unix socket in the data directory when the path fits (107 bytes), else loopback TCP (with
/// a password, unless a port was given: then trust, for tests).
fn choose_listen(tcp_port: Option<u16>, data_dir: &Path) -> Result<Listen, BrokerError> {
    let socket_path_len = data_dir.as_os_str().len() + "/.s.PGSQL.5432".len();
    if let Some(port) = tcp_port {
        return Ok(Listen::TcpTrust(port));
    }
    if socket_path_len <= 100 {
        return Ok(Listen::Socket);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| BrokerError::Embedded {
            about: "finding a free port".into(),
            source: Some(e),
        })?;
    Ok(Listen::TcpPassword(port, String::new()))
}

/// What must hold before the server accepts anyone, done in single-user mode: on TCP, the
/// superuser's password (saved, or made and saved; set into `listen`), and (first start) the
/// drover database, which a client already knocking on the port would otherwise find missing
/// (a permanent error). Then `pg_hba.conf`.
async fn prepare_cluster(
    bin: &Path,
    state_dir: &Path,
    data_dir: &Path,
    run_as: Option<&User>,
    fresh: bool,
    listen: &mut Listen,
) -> Result<(), BrokerError> {
    let mut before_start = Vec::new();
    let mut new_password = None;
    if let Listen::TcpPassword(_, password) = listen {
        match saved_password(state_dir, fresh) {
            Some(saved) => *password = saved,
            None => {
                *password = random_hex(24)?;
                before_start.push(format!(
                    "ALTER ROLE {DB_NAME} PASSWORD '{}'",
                    scram_sha_256(password)?
                ));
                new_password = Some(password.clone());
            }
        }
    }
    if fresh && *listen != Listen::Socket {
        before_start.push(format!("CREATE DATABASE {DB_NAME}"));
    }
    if !before_start.is_empty() {
        single_user(bin, data_dir, run_as, &before_start).await?;
    }
    if let Some(password) = new_password {
        save_password(state_dir, &password)?;
    }
    write_hba(data_dir, listen, run_as)
}

/// The server's command line, its output to the log pipe, run as `run_as`, in its own process
/// group, stopping fast if the master dies; and where clients reach it.
fn server_command(
    bin: &Path,
    data_dir: &Path,
    listen: &Listen,
    config: &EmbeddedConfig,
    run_as: Option<&User>,
    log_writer: std::fs::File,
) -> Result<(std::process::Command, Place), BrokerError> {
    let log_err = log_writer.try_clone().map_err(|e| BrokerError::Embedded {
        about: "duplicating the log handle".into(),
        source: Some(e),
    })?;
    let mut cmd = std::process::Command::new(bin.join("postgres"));
    cmd.arg("-D").arg(data_dir);
    let place = match listen {
        Listen::Socket => {
            cmd.args(["-p", "5432", "-c", "listen_addresses="])
                .arg("-c")
                .arg(format!("unix_socket_directories={}", data_dir.display()));
            Place {
                host: data_dir.display().to_string(),
                port: 5432,
                password: None,
            }
        }
        Listen::TcpTrust(port) | Listen::TcpPassword(port, _) => {
            cmd.arg("-p").arg(port.to_string()).args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
            ]);
            let password = match listen {
                Listen::TcpPassword(_, p) => Some(p.clone()),
                _ => None,
            };
            Place {
                host: "127.0.0.1".to_string(),
                port: *port,
                password,
            }
        }
    };
    for (name, value) in &config.settings {
        cmd.arg("-c").arg(format!("{name}={value}"));
    }
    cmd.stdin(Stdio::null())
        .stdout(log_writer)
        .stderr(log_err)
        .current_dir("/")
        .process_group(0);
    if let Some(user) = run_as {
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
    Ok((cmd, place))
}

/// The drover database, created if the cluster lacks it (a socket cluster's first start).
async fn create_database_if_missing(admin_url: &str) -> Result<(), BrokerError> {
    let admin = crate::connect::connect_once(admin_url).await?;
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_rfc_4648() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn scram_verifiers_have_postgresqls_form_and_a_fresh_salt() {
        let a = scram_sha_256("secret").unwrap();
        let b = scram_sha_256("secret").unwrap();
        assert_ne!(a, b, "a new salt each time");
        let rest = a.strip_prefix("SCRAM-SHA-256$4096:").unwrap();
        let (salt, keys) = rest.split_once('$').unwrap();
        let (stored, server) = keys.split_once(':').unwrap();
        assert_eq!((salt.len(), stored.len(), server.len()), (24, 44, 44));
    }

    #[test]
    fn generated_passwords_need_no_quoting() {
        let p = random_hex(24).unwrap();
        assert_eq!(p.len(), 48);
        assert!(is_plain_password(&p));
        assert_ne!(p, random_hex(24).unwrap());
        assert!(!is_plain_password("short"));
        assert!(!is_plain_password("with;semicolon;and;more"));
    }

    fn sizes(dir: &Path) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().into_string().unwrap(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_log_rotates_at_line_boundaries_and_keeps_so_many_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("postgres.log");
        let mut log = BoundedLog::open(&path, 100, 3).unwrap();
        let line = format!("{}\n", "x".repeat(29)); // 30 bytes
        for _ in 0..20 {
            log.write(line.as_bytes()).unwrap();
        }
        // 90 bytes a file (three whole lines), three files.
        assert_eq!(
            sizes(dir.path()),
            [
                ("postgres.log".to_string(), 60),
                ("postgres.log.1".to_string(), 90),
                ("postgres.log.2".to_string(), 90)
            ]
        );
        // Several lines in one write, a line longer than a file.
        log.write(format!("{line}{line}{line}").as_bytes()).unwrap();
        log.write(&[b'y'; 250]).unwrap();
        log.write(b"\n").unwrap();
        let all = sizes(dir.path());
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all.iter().all(|(_, n)| *n <= 100), "{all:?}");
        for (name, _) in &all {
            let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
            assert!(
                text.lines()
                    .all(|l| l.len() == 29 || l.bytes().all(|b| b == b'y')),
                "{name}: {text:?}"
            );
        }
    }

    #[test]
    fn a_log_grown_large_before_is_cut_to_its_last_part() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("postgres.log");
        let line = "x".repeat(99) + "\n";
        std::fs::write(&path, line.repeat(30_000)).unwrap(); // 3 MB
        std::fs::write(numbered(&path, 1), "old").unwrap();
        let mut log = BoundedLog::open(&path, 1000, 3).unwrap();
        log.write(b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let kept = std::fs::read_to_string(numbered(&path, 1)).unwrap();
        assert_eq!(kept, line.repeat(10), "the last whole lines");
        assert_eq!(std::fs::read_to_string(numbered(&path, 2)).unwrap(), "old");
        // One file only: it is simply emptied.
        std::fs::write(&path, line.repeat(30)).unwrap();
        drop(log);
        BoundedLog::open(&path, 1000, 1).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }
}
