//! PostgreSQL as production teams run it, started by the tests themselves: a primary with a
//! streaming standby (`pg_basebackup -R`), and PgBouncer (Debian's package) in session or
//! transaction mode in front of a cluster. Each is stopped and removed when dropped.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio_postgres::Client;

const BIN: &str = "/usr/lib/postgresql/15/bin";

/// A command run as the `postgres` user when the tests run as root (initdb, postgres and
/// PgBouncer refuse root).
fn as_postgres(program: &str) -> Command {
    if nix::unistd::geteuid().is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", program]);
        c
    } else {
        Command::new(program)
    }
}

/// A directory the `postgres` user owns, inside `parent`, mode 0700 (as a data directory must be).
fn owned_dir(parent: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    if nix::unistd::geteuid().is_root() {
        super::run_ok(
            Command::new("chown").arg("postgres:postgres").arg(&dir),
            "chown",
        );
    }
    dir
}

/// `pg_ctl` on a test cluster, as its owner; waits for it (60 s at most).
pub fn pg_ctl(data_dir: &Path, args: &[&str]) {
    let mut cmd = as_postgres(&format!("{BIN}/pg_ctl"));
    cmd.arg("-D")
        .arg(data_dir)
        .args(args)
        .args(["-w", "-t", "60"]);
    super::run_ok(&mut cmd, &format!("pg_ctl {args:?}"));
}

/// A primary and its hot standby, streaming, with synchronous commit: a commit the primary
/// acknowledged is on the standby too, so a promotion loses nothing that was committed (with
/// asynchronous replication a failover may lose the last commits, which no client can help).
/// Both listen on a Unix socket in their own data directory, port 5432, `trust`.
pub struct Replicated {
    pub primary: PathBuf,
    pub standby: PathBuf,
    /// Holds both data directories.
    _dir: tempfile::TempDir,
}

impl Replicated {
    /// Starts the primary, migrates it (`drover migrate`) and creates the handler's `runs`
    /// table, then clones and starts the standby and waits until it streams synchronously.
    pub async fn start() -> Replicated {
        let dir = super::shared_tempdir();
        let primary = owned_dir(dir.path(), "primary");
        let standby = owned_dir(dir.path(), "standby");
        let mut initdb = as_postgres(&format!("{BIN}/initdb"));
        initdb
            .args(["-A", "trust", "-U", "drover", "-D"])
            .arg(&primary)
            .stdout(Stdio::null());
        super::run_ok(&mut initdb, "initdb");
        std::fs::write(
            primary.join("pg_hba.conf"),
            "local all all trust\nlocal replication all trust\n",
        )
        .unwrap();
        std::fs::write(
            primary.join("postgresql.auto.conf"),
            "listen_addresses = ''\nfsync = off\nwal_level = replica\nmax_wal_senders = 4\n",
        )
        .unwrap();
        let pair = Replicated {
            primary,
            standby,
            _dir: dir,
        };
        pair.start_server(&pair.primary);
        let admin = connect(&pair.url_of(&pair.primary, "postgres")).await;
        admin.batch_execute("CREATE DATABASE drover").await.unwrap();
        drop(admin);
        super::drover_migrate(&pair.url_of(&pair.primary, "drover"));
        super::create_runs_table(&connect(&pair.primary_url()).await).await;

        let mut backup = as_postgres(&format!("{BIN}/pg_basebackup"));
        backup
            .arg("-h")
            .arg(&pair.primary)
            .args([
                "-p", "5432", "-U", "drover", "-R", "-X", "stream", "-c", "fast", "-D",
            ])
            .arg(&pair.standby);
        super::run_ok(&mut backup, "pg_basebackup");
        // The primary's socket lock file came along (its socket is in its data directory).
        let _ = std::fs::remove_file(pair.standby.join(".s.PGSQL.5432.lock"));
        // The clone's settings point at its own directory; its primary_conninfo names it.
        let auto = pair.standby.join("postgresql.auto.conf");
        let text = std::fs::read_to_string(&auto).unwrap();
        let text = text.replace(
            "primary_conninfo = '",
            "primary_conninfo = 'application_name=standby ",
        );
        std::fs::write(&auto, text).unwrap();
        pair.start_server(&pair.standby);
        let primary = connect(&pair.primary_url()).await;
        for sql in [
            "ALTER SYSTEM SET synchronous_standby_names = 'standby'",
            "SELECT pg_reload_conf()",
        ] {
            primary.batch_execute(sql).await.unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let sync: i64 = primary
                .query_one(
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if sync == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the standby never streamed synchronously"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        pair
    }

    fn start_server(&self, data_dir: &Path) {
        pg_ctl(
            data_dir,
            &[
                "start",
                "-l",
                &data_dir.join("server.log").display().to_string(),
                "-o",
                &format!("-k {}", data_dir.display()),
            ],
        );
    }

    fn url_of(&self, data_dir: &Path, db: &str) -> String {
        format!(
            "host={} port=5432 user=drover dbname={db}",
            data_dir.display()
        )
    }

    pub fn primary_url(&self) -> String {
        self.url_of(&self.primary, "drover")
    }

    pub fn standby_url(&self) -> String {
        self.url_of(&self.standby, "drover")
    }

    /// Both hosts, the primary first, as a team writes a failover URL; `extra` is appended
    /// (e.g. `target_session_attrs=read-write`).
    pub fn both_url(&self, extra: &str) -> String {
        format!(
            "host={},{} port=5432 user=drover dbname=drover {extra}",
            self.primary.display(),
            self.standby.display()
        )
    }

    /// Both hosts for PHP's PDO (libpq takes the same keys).
    pub fn both_dsn(&self) -> String {
        format!(
            "pgsql:host={},{};port=5432;dbname=drover;user=drover;target_session_attrs=read-write",
            self.primary.display(),
            self.standby.display()
        )
    }

    /// The primary dies (`-m immediate`: no shutdown checkpoint, clients cut off) and the standby
    /// is promoted; returns when the new primary accepts writes.
    pub fn fail_over(&self) -> Instant {
        pg_ctl(&self.primary, &["stop", "-m", "immediate"]);
        pg_ctl(&self.standby, &["promote"]);
        Instant::now()
    }
}

impl Drop for Replicated {
    fn drop(&mut self) {
        for dir in [&self.primary, &self.standby] {
            if dir.join("postmaster.pid").exists() {
                let _ = as_postgres(&format!("{BIN}/pg_ctl"))
                    .arg("-D")
                    .arg(dir)
                    .args(["stop", "-m", "immediate", "-w"])
                    .output();
            }
        }
    }
}

/// A connection for the test's own queries.
pub async fn connect(url: &str) -> Client {
    drover_broker::connect::connect_once(url).await.unwrap()
}

/// PgBouncer's pool modes that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    Session,
    Transaction,
}

/// PgBouncer on 127.0.0.1 at a free port, pooling database `drover` of a cluster reached at
/// `server_host` (a socket directory), `trust`, with an admin console (`pgbouncer` database).
pub struct PgBouncer {
    pub port: u16,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl PgBouncer {
    pub fn start(server_host: &str, mode: PoolMode) -> PgBouncer {
        let dir = super::shared_tempdir();
        let home = owned_dir(dir.path(), "pgbouncer");
        let port = super::free_port();
        let mode = match mode {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        };
        std::fs::write(home.join("users.txt"), "\"drover\" \"\"\n").unwrap();
        let ini = home.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n\
                 drover = host={server_host} port=5432 dbname=drover user=drover\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = trust\n\
                 auth_file = {users}\n\
                 admin_users = drover\n\
                 pool_mode = {mode}\n\
                 default_pool_size = 4\n\
                 max_client_conn = 200\n\
                 logfile = {log}\n",
                users = home.join("users.txt").display(),
                log = home.join("pgbouncer.log").display(),
            ),
        )
        .unwrap();
        let child = as_postgres("/usr/sbin/pgbouncer")
            .arg(&ini)
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pgbouncer (scripts/setup installs it)");
        let bouncer = PgBouncer {
            port,
            child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "pgbouncer did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        bouncer
    }

    /// The pooled database, as a URL for drover.
    pub fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=drover dbname=drover",
            self.port
        )
    }

    /// The pooled database, as a PDO DSN.
    pub fn dsn(&self) -> String {
        format!(
            "pgsql:host=127.0.0.1;port={};dbname=drover;user=drover",
            self.port
        )
    }

    /// A command on the admin console (`RECONNECT`, `SHOW POOLS`), by psql.
    pub fn admin(&self, command: &str) -> String {
        let out = super::run_ok(
            Command::new("psql")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "drover",
                ])
                .args(["-d", "pgbouncer", "-XAtc", command]),
            &format!("pgbouncer admin {command}"),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // Its own process group: runuser and pgbouncer both.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}
