//! Shape 8 (c)'s streaming standby: a hot standby of the bench's PostgreSQL (the stack's cluster,
//! which stays the primary), cloned by `pg_basebackup` and streaming **asynchronously**
//! (PostgreSQL's default, and most managed services' for a standby in another zone), promoted by
//! `pg_ctl promote` as a managed service promotes its standby when the primary dies. It runs as
//! the OS user `postgres` when the harness runs as root (PostgreSQL refuses root), with the
//! primary's settings, its socket in its own data directory on port 5432, as the primary's is.
//! One per run: cloned afresh, and stopped and removed at its end.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::stack::Stack;

pub struct Standby {
    /// Its data directory (and socket directory).
    pub data: PathBuf,
    /// Holds the data directory and the server's log, owned by the server's OS user.
    home: PathBuf,
    bin: PathBuf,
}

/// The OS user that runs the servers when the harness is root.
fn server_user() -> Option<nix::unistd::User> {
    if nix::unistd::geteuid().is_root() {
        nix::unistd::User::from_name("postgres").ok().flatten()
    } else {
        None
    }
}

/// `program` of `bin`, as the server's OS user.
fn as_server(bin: &Path, program: &str) -> Command {
    match server_user() {
        Some(_) => {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin.join(program));
            c
        }
        None => Command::new(bin.join(program)),
    }
}

fn run_ok(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Standby {
    /// Lets the stack's primary stream to a standby (a `replication` line in its `pg_hba.conf`,
    /// which drover rewrites at each start of its cluster), clones it and starts the clone; returns
    /// once the primary reports it streaming.
    pub async fn start(stack: &Stack) -> anyhow::Result<Standby> {
        // The primary's own binaries: a base backup needs the server's version.
        let bin = stack.pg.bin_dir().to_path_buf();
        let primary = stack.pg.data_dir().to_path_buf();
        let hba = primary.join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba)?;
        if !text.contains("local replication all trust") {
            std::fs::write(&hba, format!("{text}local replication all trust\n"))?;
        }
        stack
            .client
            .batch_execute("SELECT pg_reload_conf()")
            .await?;

        let home = stack.dir.path().join("standby");
        if home.exists() {
            std::fs::remove_dir_all(&home)?;
        }
        let data = home.join("data");
        for d in [&home, &data] {
            std::fs::create_dir(d)?;
            if let Some(u) = server_user() {
                nix::unistd::chown(d, Some(u.uid), Some(u.gid))?;
            }
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700))?;
        let standby = Standby { data, home, bin };

        // The reload is asynchronous: the first try may meet the old rules.
        let mut tries = 0;
        loop {
            let mut backup = as_server(&standby.bin, "pg_basebackup");
            backup
                .arg("-h")
                .arg(&primary)
                .args([
                    "-p", "5432", "-U", "drover", "-R", "-X", "stream", "-c", "fast",
                ])
                .arg("-D")
                .arg(&standby.data);
            match run_ok(&mut backup, "pg_basebackup") {
                Ok(_) => break,
                Err(e) if tries < 5 => {
                    tries += 1;
                    eprintln!("bench:   pg_basebackup failed, again in 0.5 s: {e:#}");
                    // It leaves what it wrote; it needs the directory empty.
                    for entry in std::fs::read_dir(&standby.data)? {
                        let p = entry?.path();
                        if p.is_dir() {
                            std::fs::remove_dir_all(&p)?;
                        } else {
                            std::fs::remove_file(&p)?;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
        // The primary's socket lock came along (its socket is in its data directory).
        let _ = std::fs::remove_file(standby.data.join(".s.PGSQL.5432.lock"));

        // The primary's settings (a hot standby needs max_connections at least the primary's),
        // its listening as the embedded cluster's: the socket in the data directory, no TCP.
        let mut options = format!(
            "-p 5432 -c listen_addresses= -c unix_socket_directories={}",
            standby.data.display()
        );
        for (name, value) in stack.pg_settings() {
            options += &format!(" -c {name}={value}");
        }
        run_ok(
            as_server(&standby.bin, "pg_ctl")
                .arg("-D")
                .arg(&standby.data)
                .arg("-l")
                .arg(standby.home.join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"])
                .stdout(Stdio::null()),
            "pg_ctl start (the standby)",
        )?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let streaming = stack
                .scalar_i64("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
                .await?;
            if streaming >= 1 {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the standby did not stream within 60 s; its log:\n{}",
                    std::fs::read_to_string(standby.home.join("server.log")).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(standby)
    }

    /// The standby alone.
    pub fn url(&self) -> String {
        format!(
            "host={} port=5432 user=drover dbname=drover",
            self.data.display()
        )
    }

    /// The primary's WAL not yet replayed by the standby, bytes (`pg_stat_replication`).
    pub async fn lag_bytes(stack: &Stack) -> anyhow::Result<i64> {
        stack
            .scalar_i64(
                "SELECT coalesce(max(pg_current_wal_lsn() - replay_lsn), -1)::int8 FROM pg_stat_replication",
            )
            .await
    }

    /// `pg_ctl promote` (which waits until the promotion is done); returns once a connection
    /// to it can write.
    pub async fn promote(&self) -> anyhow::Result<()> {
        run_ok(
            as_server(&self.bin, "pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-w", "-t", "60", "promote"])
                .stdout(Stdio::null()),
            "pg_ctl promote",
        )?;
        let c = drover_broker::connect::connect_once(&self.url()).await?;
        let in_recovery: bool = c.query_one("SELECT pg_is_in_recovery()", &[]).await?.get(0);
        anyhow::ensure!(
            !in_recovery,
            "the standby is still in recovery after pg_ctl promote"
        );
        Ok(())
    }

    /// Where the new timeline forked from the old primary's (the promoted standby's history
    /// file: the end of what it had replayed), as an LSN string.
    pub fn fork_point(&self) -> anyhow::Result<String> {
        let wal = self.data.join("pg_wal");
        let mut history: Vec<PathBuf> = std::fs::read_dir(&wal)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "history"))
            .collect();
        history.sort();
        let last = history
            .pop()
            .context("no timeline history file after the promotion")?;
        let text = std::fs::read_to_string(&last)?;
        let line = text
            .lines()
            .rfind(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .context("an empty timeline history file")?;
        line.split_whitespace()
            .nth(1)
            .map(str::to_string)
            .with_context(|| format!("no LSN in {line:?}"))
    }

    /// The old primary's WAL past `fork` (read with `pg_waldump` from its data directory while
    /// it is down): what it wrote that the promoted standby never had — records, bytes, and
    /// transaction commits among them. Read from the start of the fork's WAL segment, so the
    /// records before the fork show the reader found the WAL (an old primary whose WAL ends at
    /// the fork has none after it).
    pub fn lost_wal(&self, primary: &Path, fork: &str) -> anyhow::Result<LostWal> {
        const SEGMENT: u64 = 16 << 20;
        let fork_at = lsn(fork)?;
        let mut from = fork_at - fork_at % SEGMENT;
        if from == fork_at && from >= SEGMENT {
            from -= SEGMENT;
        }
        let out = Command::new(self.bin.join("pg_waldump"))
            .arg("-p")
            .arg(primary.join("pg_wal"))
            .args(["-t", "1", "-s"])
            .arg(format!("{:X}/{:X}", from >> 32, from & 0xffff_ffff))
            .stdin(Stdio::null())
            .output()
            .context("running pg_waldump")?;
        // It ends with an error at the end of the WAL, as every reader does: not a failure.
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lost = LostWal::default();
        let mut end = fork_at;
        for line in text.lines() {
            let Some(at) = line
                .split("lsn: ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|l| lsn(l).ok())
            else {
                continue;
            };
            if at < fork_at {
                lost.read_before_fork += 1;
                continue;
            }
            lost.records += 1;
            if line.contains("desc: COMMIT") {
                lost.commits += 1;
            }
            // "len (rec/tot): 54/ 54": the record's whole length.
            let total = line
                .split("len (rec/tot):")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|r| r.split('/').nth(1))
                .and_then(|t| t.trim().parse::<u64>().ok())
                .unwrap_or(0);
            end = end.max(at + total);
        }
        lost.bytes = end - fork_at;
        if lost.read_before_fork + lost.records == 0 {
            lost.note = String::from_utf8_lossy(&out.stderr).trim().to_string();
        }
        Ok(lost)
    }

    /// Stops it (immediate: it is thrown away) and removes it.
    pub fn remove(self) {
        drop(self);
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        if self.data.join("postmaster.pid").exists() {
            let _ = as_server(&self.bin, "pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-w", "-m", "immediate", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// An LSN "X/Y" as a byte position.
fn lsn(s: &str) -> anyhow::Result<u64> {
    let (hi, lo) = s
        .split_once('/')
        .with_context(|| format!("not an LSN: {s:?}"))?;
    Ok((u64::from_str_radix(hi, 16)? << 32) | u64::from_str_radix(lo, 16)?)
}

/// The old primary's WAL the promotion left behind.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LostWal {
    /// Records read before the fork (the reader found the WAL).
    #[serde(default)]
    pub read_before_fork: usize,
    pub records: usize,
    /// From the fork to the last record's end.
    pub bytes: u64,
    pub commits: usize,
    /// pg_waldump's complaint when it read no record at all.
    #[serde(default)]
    pub note: String,
}
