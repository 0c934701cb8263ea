//! `drover`: the master and broker in one binary. This file only wires the parts together.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use drover::config::{PoolSpec, RunConfig, SpawnMode, CONFIG_VERSION, DEFAULT_STATE_DIR};
use drover::master::pools::setup::{build_pools, ConfigSource, WorkerContext, Zygotes};
use drover::master::{Exit, PoolRuntime, RecorderConfig, StopWhen};
use drover::privileges::{self, rules::AtRun, Account};
use drover::process::control::{self, Command as ControlCommand, Request as ControlRequest};
use drover::process::signals::{Sig, Signals};
use drover::process::state_file;
use drover::process::systemd::Notifier;
use drover::scheduling::{run::RunCommand, Scheduling};
use drover::state_dir::StateDir;
use drover::{Master, MasterConfig, Reloading};
use drover_broker::{
    listener, Broker, BrokerConfig, EmbeddedConfig, EmbeddedPostgres, SystemClock,
};
use drover_supervisor::{Rendezvous, WorkerEvent};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

#[derive(Parser)]
#[command(
    name = "drover",
    version,
    about = "Supervises PHP workers and leases them PostgreSQL jobs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the master: workers, broker and (without a database URL) the embedded PostgreSQL.
    Run(Box<RunArgs>),
    /// Start `php APP/artisan drover` as the application's user: what the packaged
    /// drover@.service runs as root. It becomes --user (its groups, gid and uid, for good)
    /// before PHP starts, so no code of the application ever runs as root (docs/security.md).
    Launch(LaunchArgs),
    /// What this binary is: its version, the configuration contract it reads and the schema version
    /// it needs (`php artisan drover:install` compares them with the package's).
    Version {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Apply the schema migrations and exit.
    Migrate {
        /// PostgreSQL URL or libpq key=value string (else DROVER_DATABASE_URL, else DATABASE_URL).
        #[arg(long, env = "DROVER_DATABASE_URL")]
        database_url: Option<String>,
        /// Also create drover's least-privilege roles (drover_master, drover_producer,
        /// drover_reader, drover_operator; needs CREATEROLE) and grant their rights
        /// (docs/postgres-roles.md).
        #[arg(long)]
        create_roles: bool,
        /// Print the SQL that creates the roles and grants their rights, for a DBA, and exit
        /// without connecting.
        #[arg(long, conflicts_with = "create_roles")]
        print_roles: bool,
    },
    /// Show the running master's pools and workers. Exit code: 0 serving, 1 paused, 2 no master,
    /// 3 degraded (a circuit open, a pool with no worker serving), 4 permission denied, 5
    /// database unreachable.
    Status {
        #[arg(long, env = "DROVER_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop handing out jobs (running jobs finish), to every pool or to one.
    Pause {
        #[arg(long, env = "DROVER_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// Only this pool (its name in the configuration), as Horizon's pause-supervisor.
        #[arg(long)]
        pool: Option<String>,
    },
    /// Hand out jobs again after a pause (of every pool, or of one).
    Continue {
        #[arg(long, env = "DROVER_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// Only this pool.
        #[arg(long)]
        pool: Option<String>,
    },
    /// Graceful shutdown of the running master (as SIGTERM).
    Terminate {
        #[arg(long, env = "DROVER_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// The lease guard the master starts beside itself (internal; reads deadlines on stdin).
    #[command(hide = true)]
    LeaseGuard,
    /// Re-read the configuration and replace every worker one by one with new code (as SIGHUP):
    /// for deploys. Returns at once; `drover status` shows the progress.
    Restart {
        #[arg(long, env = "DROVER_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
}

#[derive(Args)]
struct LaunchArgs {
    /// The application's user (the owner of its storage/): PHP, the master and its workers run
    /// as it. Never root.
    #[arg(long, env = "DROVER_USER")]
    user: String,
    /// The application's path as the deploy tool names it: its `current` symlink, never a
    /// release directory (the master starts its workers there and reloads the release it points to).
    #[arg(long, env = "DROVER_APP")]
    app: PathBuf,
    /// The PHP binary (looked up on PATH when it has no slash).
    #[arg(long, default_value = "php")]
    php: PathBuf,
    /// More flags for `php artisan drover`, after `--` (e.g. `-- --max-time 3600`).
    #[arg(last = true)]
    artisan: Vec<OsString>,
}

#[derive(Args)]
struct RunArgs {
    /// The versioned JSON configuration (what `php artisan drover` writes). Excludes the pool flags
    /// and the worker command.
    #[arg(long, conflicts_with_all = ["workers", "prefetch", "queues", "timeout", "outage_grace", "worker", "spawn"])]
    config: Option<PathBuf>,
    /// PostgreSQL URL (else DROVER_DATABASE_URL, else DATABASE_URL); without any, drover starts
    /// a private cluster in the state directory.
    #[arg(long, env = "DROVER_DATABASE_URL")]
    database_url: Option<String>,
    /// Where drover keeps its state (the embedded cluster, master.json, control.sock): a
    /// directory of the master's user, which it makes private (docs/security.md).
    #[arg(long, env = "DROVER_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Worker processes.
    #[arg(long)]
    workers: Option<usize>,
    /// Jobs each worker may hold at once (passed to workers as DROVER_PREFETCH).
    #[arg(long)]
    prefetch: Option<u32>,
    /// Queues to serve, highest priority first (repeat or comma-separate).
    #[arg(long = "queue", value_delimiter = ',')]
    queues: Vec<String>,
    /// Kill a worker whose job runs longer than this (0 = no limit).
    #[arg(long, value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// How long a started job may go on past the end of a lease the master cannot renew (the
    /// database unreachable) before its worker is stopped; no other master takes it back
    /// meanwhile (docs/leases.md, "Outage grace"). Default 0.
    #[arg(long, value_parser = parse_duration)]
    outage_grace: Option<Duration>,
    /// A queue's fleet-wide budget, QUEUE=JOBS: at most JOBS of its jobs leased at once across
    /// every master of the database (docs/budgets.md). Repeat for more queues.
    #[arg(long = "budget", value_parser = parse_budget)]
    budgets: Vec<(String, i64)>,
    /// A fair queue: its claims take jobs by the fair tag given at enqueue, its keys (tenants) in
    /// turn (docs/limits.md, "Fair share"). Repeat for more queues.
    #[arg(long = "fair")]
    fair_queues: Vec<String>,
    /// Lease length (at least 3 s); renewed every third of it while a worker lives.
    #[arg(long, value_parser = parse_duration)]
    lease: Option<Duration>,
    /// How long a graceful shutdown waits for running jobs.
    #[arg(long, value_parser = parse_duration)]
    shutdown_grace: Option<Duration>,
    /// The fallback poll interval (NOTIFY wakes the master at once).
    #[arg(long, value_parser = parse_duration)]
    poll_interval: Option<Duration>,
    /// The longest frame a worker may send.
    #[arg(long)]
    max_frame_bytes: Option<usize>,
    /// How often workers' PSS is checked against their pool's memory limit.
    #[arg(long, value_parser = parse_interval, default_value = "5s")]
    memory_check_interval: Duration,
    /// OS user for the embedded PostgreSQL when started as root.
    #[arg(long)]
    postgres_user: Option<String>,
    /// The OS user the master serves as (e.g. www-data): started as root, it becomes that user
    /// before it opens anything, and so do its workers; started as another user, it refuses.
    #[arg(long)]
    user: Option<String>,
    /// Keep each completed job in drover.recent_jobs for this many minutes (0: none).
    #[arg(long, env = "DROVER_HISTORY_MINUTES")]
    history_minutes: Option<u64>,
    /// Serve GET /metrics (Prometheus) and GET /healthz on this address, e.g. 127.0.0.1:9187;
    /// a port alone (9187) is on 127.0.0.1.
    #[arg(long, env = "DROVER_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// The bearer token GET /metrics asks for (prefer the environment variable: a flag shows in
    /// ps).
    #[arg(long, env = "DROVER_METRICS_TOKEN", hide_env_values = true)]
    metrics_token: Option<String>,
    /// How workers are started: `exec` (each boots on its own) or `fork` (forked from a zygote
    /// that booted once: the worker command, run with DROVER_ZYGOTE=1).
    #[arg(long, value_parser = parse_spawn, default_value = "exec")]
    spawn: SpawnMode,
    /// Log as JSON lines instead of text.
    #[arg(long)]
    log_json: bool,
    /// Stop gracefully (exit 0) once every queue has no ready job and no worker holds one; jobs
    /// delayed until later do not count (as `queue:work --stop-when-empty`).
    #[arg(long)]
    stop_when_empty: bool,
    /// Stop gracefully (exit 0) after this many jobs have run, in all pools (0: no limit).
    #[arg(long)]
    max_jobs: Option<u64>,
    /// Stop gracefully (exit 0) after serving this long, e.g. `3600` or `1h` (0: no limit).
    #[arg(long, value_parser = parse_duration)]
    max_time: Option<Duration>,
    /// The worker command, after `--`, e.g. `-- php vendor/bin/drover-worker handler.php`.
    #[arg(last = true)]
    worker: Vec<OsString>,
}

/// The database URL: the flag (or DROVER_DATABASE_URL, which clap reads for it), else
/// DATABASE_URL. Empty values count as unset.
fn database_url_or_environment(flag: Option<String>) -> Option<String> {
    flag.filter(|u| !u.is_empty())
        .or_else(|| std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()))
}

fn parse_spawn(s: &str) -> Result<SpawnMode, String> {
    match s {
        "exec" => Ok(SpawnMode::Exec),
        "fork" => Ok(SpawnMode::Fork),
        _ => Err(format!("{s:?}: use exec or fork")),
    }
}

/// `QUEUE=JOBS` (the range is checked with the rest of the configuration).
fn parse_budget(s: &str) -> Result<(String, i64), String> {
    let (queue, jobs) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not QUEUE=JOBS, e.g. --budget api=10"))?;
    let jobs = jobs
        .trim()
        .parse()
        .map_err(|_| format!("{jobs:?} in --budget {s} is not a whole number of jobs"))?;
    Ok((queue.trim().to_string(), jobs))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 500ms, 2s, 1m, 1h"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is out of range"))
}

/// A period of a timer: a duration above zero (a zero period would make the timer spin).
fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("{s:?}: an interval must be more than 0, e.g. 5s"));
    }
    Ok(d)
}

/// Runs the command; a failure is printed and exits 1, or 78 when only an operator can make a
/// start succeed (`drover::rules::exit_code`: the units do not restart on it).
fn main() -> std::process::ExitCode {
    let Err(error) = main_result() else {
        return std::process::ExitCode::SUCCESS;
    };
    let code = drover::rules::exit_code::for_error(error.chain());
    if code == drover::rules::exit_code::NEEDS_OPERATOR {
        // The error last, on its own lines and without a backtrace: it names what to change.
        eprintln!("{}", drover::rules::exit_code::needs_operator_line());
        eprintln!("Error: {error:#}");
    } else {
        eprintln!("Error: {error:?}");
    }
    std::process::ExitCode::from(code)
}

fn main_result() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::LeaseGuard = cli.command {
        return Ok(drover::process::lease_guard::run_on_stdin()?);
    }
    init_logging(&cli);
    // Who this process is decided while it has one thread, before the runtime starts.
    let command = match cli.command {
        Command::Launch(args) => {
            let never = privileges::launch(&privileges::Launch {
                user: args.user,
                app: args.app,
                php: args.php,
                args: args.artisan,
            })?;
            match never {}
        }
        Command::Run(args) => {
            let check = args.memory_check_interval;
            let stop_when = StopWhen {
                empty: args.stop_when_empty,
                max_jobs: args.max_jobs.filter(|&n| n > 0),
                max_time: args.max_time.filter(|d| !d.is_zero()),
            };
            let (config, path) = run_config(*args)?;
            serve_as(&config)?;
            return runtime()?.block_on(run(config, path, check, stop_when));
        }
        other => other,
    };
    runtime()?.block_on(dispatch(command))
}

/// The master's runtime: one thread.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Who the master serves as (docs/security.md, "Who runs as whom"): the configured `user` — a
/// master started as root with one becomes it here, before it opens its state directory, its
/// database or a socket — or, without one, the user that started it (root only on a laptop:
/// warned).
fn serve_as(config: &RunConfig) -> anyhow::Result<()> {
    let user = |problem: String| drover::MasterError::Config {
        source_name: "user".into(),
        problems: vec![problem],
    };
    let account = match &config.user {
        Some(name) => Some(Account::lookup(name).map_err(user)?),
        None => None,
    };
    let euid = nix::unistd::geteuid().as_raw();
    match privileges::rules::at_run(euid, account.as_ref().map(|a| (a.name.as_str(), a.uid))) {
        AtRun::AsIs => Ok(()),
        AtRun::Root => {
            tracing::warn!("the master runs as root and no `user` is configured: the application's code runs as root too; set user (DROVER_USER) to the application's user, or start the master as that user (docs/security.md)");
            Ok(())
        }
        AtRun::Become => {
            let account = account.expect("Become is decided for a configured user");
            StateDir::create_for(&config.state_dir, account.uid, account.gid)?;
            privileges::become_account(&account)?;
            tracing::info!(
                user = account.name,
                "started as root: the master, its workers and every command it runs are {}'s from here on",
                account.name
            );
            Ok(())
        }
        AtRun::Refuse(why) => Err(user(why).into()),
    }
}

/// Logs to stderr: as JSON lines with `--log-json` (or DROVER_LOG_JSON=1, for `php artisan
/// drover`, which passes no flags), else as text; filtered by DROVER_LOG.
fn init_logging(cli: &Cli) {
    // `--log-json`, or DROVER_LOG_JSON=1 (for `php artisan drover`, which passes no flags).
    let json = matches!(&cli.command, Command::Run(a) if a.log_json)
        || std::env::var("DROVER_LOG_JSON").is_ok_and(|v| v == "1" || v == "true");
    // DROVER_LOG: a level, or `info,drover=debug,tokio_postgres=warn` per target. (A `Targets`
    // filter, not `EnvFilter`: no regex engine in the binary, a smaller master.)
    let filter: tracing_subscriber::filter::Targets = std::env::var("DROVER_LOG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            "info,tokio_postgres=warn"
                .parse()
                .expect("a valid default filter")
        });
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            )
            .init();
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    // Colours only on a terminal: journald and log files get plain text.
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
            )
            .init();
    }
}

/// Each command but the lease guard's, on the runtime.
async fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run(_) | Command::Launch(_) => unreachable!("started before the runtime"),
        Command::Migrate {
            print_roles: true, ..
        } => {
            print!("{}", drover_broker::roles::print_sql());
            Ok(())
        }
        Command::Migrate {
            database_url,
            create_roles,
            ..
        } => migrate(database_url, create_roles).await,
        Command::Status { state_dir, json } => status(&state_dir, json).await,
        Command::Version { json } => {
            version(json);
            Ok(())
        }
        Command::LeaseGuard => unreachable!("run before the runtime starts"),
        Command::Pause { state_dir, pool } => {
            send_for(&state_dir, ControlCommand::Pause, pool.as_deref()).await
        }
        Command::Continue { state_dir, pool } => {
            send_for(&state_dir, ControlCommand::Continue, pool.as_deref()).await
        }
        Command::Terminate { state_dir } => send(&state_dir, ControlCommand::Terminate).await,
        Command::Restart { state_dir } => send(&state_dir, ControlCommand::Restart).await,
    }
}

/// `drover migrate`.
async fn migrate(database_url: Option<String>, create_roles: bool) -> anyhow::Result<()> {
    let database_url = database_url_or_environment(database_url).context(
        "no database to migrate: give --database-url, or set DROVER_DATABASE_URL (or DATABASE_URL)",
    )?;
    let mut client = drover_broker::connect::connect_once(&database_url).await?;
    let n = drover_broker::migrate::migrate(&mut client).await?;
    println!("drover: {n} migration(s) applied");
    if create_roles {
        drover_broker::roles::create(&client).await?;
        let names: Vec<&str> = drover_broker::roles::ROLES.iter().map(|r| r.0).collect();
        println!(
            "drover: roles {} ready; give each login role its own (GRANT drover_master TO ...; docs/postgres-roles.md)",
            names.join(", ")
        );
    }
    Ok(())
}

/// `drover version`.
fn version(json: bool) {
    let (version, schema) = (env!("CARGO_PKG_VERSION"), drover_broker::migrate::latest());
    if json {
        println!(
            "{}",
            serde_json::json!({"version": version, "contract": CONFIG_VERSION, "schema": schema})
        );
    } else {
        println!("drover {version} (configuration contract {CONFIG_VERSION}, schema {schema})");
    }
}

/// One configuration whether it came from flags or from `--config`; flags given with `--config`
/// (state dir, database URL, timings) override the file.
fn run_config(args: RunArgs) -> anyhow::Result<(RunConfig, Option<PathBuf>)> {
    let path = match &args.config {
        Some(p) => Some(
            std::path::absolute(p).with_context(|| format!("the config file {}", p.display()))?,
        ),
        None => None,
    };
    let mut config = match &args.config {
        Some(path) => RunConfig::from_file(path)?,
        None => {
            let (program, rest) = args
                .worker
                .split_first()
                .context("no worker command: give one after `--` (e.g. `drover run -- php worker.php`) or use --config")?;
            let mut command = vec![program.to_string_lossy().into_owned()];
            command.extend(rest.iter().map(|a| a.to_string_lossy().into_owned()));
            let prefetch = args.prefetch.unwrap_or(1);
            let mut pool = PoolSpec::defaults_with(
                "default",
                if args.queues.is_empty() {
                    vec!["default".into()]
                } else {
                    args.queues.clone()
                },
                args.workers.unwrap_or(4),
                command,
            );
            pool.prefetch = prefetch;
            pool.timeout = args.timeout.map(|t| t.as_secs()).unwrap_or(0);
            pool.outage_grace = args.outage_grace.map_or(0.0, |g| g.as_secs_f64());
            pool.env = BTreeMap::from([("DROVER_PREFETCH".to_string(), prefetch.to_string())]);
            pool.spawn = args.spawn;
            RunConfig::defaults_with(vec![pool])
        }
    };
    if let Some(url) = database_url_or_environment(args.database_url) {
        config.database_url = Some(url);
    }
    if let Some(dir) = args.state_dir {
        config.state_dir = dir;
    }
    // Relative paths are the working directory's at start: a master whose working directory is
    // later deleted (an old release) still finds its state.
    config.state_dir = std::path::absolute(&config.state_dir)
        .with_context(|| format!("the state directory {}", config.state_dir.display()))?;
    if let Some(d) = args.lease {
        config.lease = d.as_secs_f64();
    }
    if let Some(d) = args.shutdown_grace {
        config.shutdown_grace = d.as_secs_f64();
    }
    if let Some(d) = args.poll_interval {
        config.poll_interval = d.as_secs_f64();
    }
    if let Some(n) = args.max_frame_bytes {
        config.max_frame_bytes = n;
    }
    if let Some(user) = args.postgres_user {
        config.postgres_user = user;
    }
    if let Some(user) = args.user {
        config.user = Some(user);
    }
    if let Some(minutes) = args.history_minutes {
        config.history_minutes = minutes;
    }
    if let Some(addr) = args.metrics_listen.filter(|a| !a.is_empty()) {
        config.metrics_listen = Some(addr);
    }
    if let Some(token) = args.metrics_token.filter(|t| !t.is_empty()) {
        config.metrics_token = Some(drover::config::MetricsToken::new(token));
    }
    config.queue_budgets.extend(args.budgets);
    config.fair_queues.extend(args.fair_queues);
    config
        .validate()
        .map_err(|problems| drover::MasterError::Config {
            source_name: "the command line".into(),
            problems,
        })?;
    Ok((config, path))
}

/// `drover run`: the state directory, the control socket and metrics listener, the database,
/// the broker, the pools, then the master until it stops.
async fn run(
    config: RunConfig,
    config_path: Option<PathBuf>,
    memory_check_interval: Duration,
    stop_when: StopWhen,
) -> anyhow::Result<()> {
    // First: from here on no signal the master answers can kill it by its default action.
    let mut signals = Signals::install().context("installing signal handlers")?;
    // A root master's embedded PostgreSQL runs as `postgres_user`, who must pass through.
    let root_embedded = nix::unistd::geteuid().is_root() && config.database_url.is_none();
    let state_dir = StateDir::open(&config.state_dir, root_embedded)?;
    let context = WorkerContext::new();
    let listeners = Listeners::open(&config, &state_dir).await?;
    let mut database = Database::start(&config).await?;
    // A master of this state directory that did not exit cleanly left its master.json: its node
    // row goes once this master is registered (it holds the directory's lock, so that one is gone).
    let predecessor = state_file::read_predecessor(&state_dir);
    let Some(broker) = connect(&config, &mut database, &mut signals, stop_when).await? else {
        return Ok(());
    };
    remove_predecessor(&broker, predecessor).await;
    let wakes = listener::Wakes::default();
    let listener = listener::spawn(database.url.clone(), wakes.clone());

    let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
    // The scheduler runs whether or not this configuration has a schedule: a reload may bring one.
    let (schedule_tx, schedule_rx) = tokio::sync::watch::channel(config.schedule.clone());
    let (published_tx, published_rx) = tokio::sync::watch::channel(Arc::default());
    let mut scheduling = Scheduling {
        spec: schedule_rx,
        run: RunCommand {
            // From the schedule's settings, at each run.
            command: Vec::new(),
            // As the workers get it: the application boots the same way.
            env: database
                .embedded
                .as_ref()
                .map(|pg| ("DROVER_PDO_DSN".into(), pg.pdo_dsn().into()))
                .into_iter()
                .collect(),
            cwd: config.cwd.clone(),
        },
        // The pools' zygotes, once they are set up (below).
        forks: None,
        published: published_tx,
        // Counted from the end of the master's own shutdown (its workers drained): a service
        // manager's stop timeout leaves room for the shutdown grace and the settles, not for a
        // second grace.
        grace: SCHEDULED_RUN_GRACE_AT_EXIT,
    };
    let (pools, reloading) = match start_pools(
        &config,
        config_path,
        context,
        &database,
        &events_tx,
        &state_dir,
    ) {
        Ok(started) => started,
        Err(e) => {
            leave(&broker).await;
            return Err(e.into());
        }
    };
    scheduling.forks = reloading
        .context
        .zygotes
        .clone()
        .map(|z| Arc::new(z) as Arc<dyn drover::scheduling::forking::Forks>);
    if config.pools.is_empty() {
        tracing::warn!("no pools in the configuration: this master runs no workers (for a Laravel application: does drover.environments have an entry for this environment?)");
    }
    let control_task = control::serve(listeners.control, listeners.requests);
    let master_config = master_config(
        &config,
        memory_check_interval,
        listeners.exposition,
        stop_when,
    );
    if let Err(e) = state_file::write(&state_dir, broker.node(), database.embedded.as_ref()) {
        leave(&broker).await;
        return Err(e.into());
    }
    let notifier = Notifier::from_environment();
    warn_of_a_late_watchdog(&notifier, config.lease());
    // The master's own handle on its row: a master that fails to run leaves it (`leave`).
    let own_row = broker.clone();
    let master = Master::new(
        master_config,
        broker,
        pools,
        (events_tx, events_rx),
        listeners.inbox,
        wakes,
        reloading.with_schedule(schedule_tx),
        notifier,
        drover::process::lease_guard::GuardClient::start(),
    )
    .with_schedule_view(drover::scheduling::status::ScheduleView {
        tasks: published_rx,
        store: own_row.clone(),
    });
    let scheduler = drover::scheduling::spawn(scheduling, own_row.clone());
    let result = serve(master, signals, database, listener, &own_row).await;
    // Its runs went on while the workers drained; then SCHEDULED_RUN_GRACE_AT_EXIT, and a little
    // more to record their ends.
    scheduler
        .stop(SCHEDULED_RUN_GRACE_AT_EXIT + Duration::from_secs(3))
        .await;
    control_task.abort();
    if let Some(task) = listeners.metrics_task {
        task.abort();
    }
    let _ = state_dir.remove("control.sock");
    state_file::remove(&state_dir);
    exit_result(result?)
}

/// How long a scheduled run still out when the master has stopped its workers may go on before
/// it is killed (and recorded as failed).
const SCHEDULED_RUN_GRACE_AT_EXIT: Duration = Duration::from_secs(5);

/// `drover run`'s own result from how the master stopped: an error names what was left undone.
fn exit_result(exit: Exit) -> anyhow::Result<()> {
    match exit {
        Exit::Clean => Ok(()),
        Exit::SettlesUnwritten { count } => anyhow::bail!(
            "stopped with {count} settle(s) unwritten: the database did not answer within {:?} of the last worker's exit; those jobs run again once their leases expire",
            drover::master::SETTLE_WAIT_AT_EXIT
        ),
        Exit::Failed { why } => anyhow::bail!("stopped: {why}"),
    }
}

/// What the master answers on, bound before it reaches its database: the control socket (with
/// the state directory's lock) and the metrics listener.
struct Listeners {
    /// The state directory's lock, held for the master's life: one master per directory.
    _one_master: nix::fcntl::Flock<std::fs::File>,
    /// The control socket, served once the master is built.
    control: tokio::net::UnixListener,
    /// Where the control socket and the metrics listener send their requests to the loop.
    requests: UnboundedSender<ControlRequest>,
    /// The loop's end of `requests`: they wait there until it runs.
    inbox: UnboundedReceiver<ControlRequest>,
    /// The job series, fed by the master and rendered by the metrics listener; none without a
    /// listener (nothing would read them: no registry, no per-job bookkeeping).
    exposition: Option<Arc<drover::metrics::Exposition>>,
    /// The metrics listener (`metrics_listen`), if any.
    metrics_task: Option<tokio::task::JoinHandle<()>>,
}

impl Listeners {
    /// Takes the state directory's lock, binds the control socket and starts the metrics
    /// listener.
    async fn open(config: &RunConfig, state_dir: &StateDir) -> anyhow::Result<Listeners> {
        // One master per state directory: a flock held for the master's life, then the socket.
        let one_master = state_dir.lock()?;
        let control = control::bind(state_dir)?;
        // Bound before the database is reached, so a probe during a long connect gets a 503
        // rather than a refused connection; requests wait in the control channel until the loop
        // runs.
        let (requests, inbox) = tokio::sync::mpsc::unbounded_channel();
        let (metrics_task, exposition) = drover::metrics::http::listen(config, requests.clone())
            .await?
            .unzip();
        Ok(Listeners {
            _one_master: one_master,
            control,
            requests,
            inbox,
            exposition,
            metrics_task,
        })
    }
}

/// The database the master runs on.
struct Database {
    /// Its URL (the embedded cluster's, when this master started one).
    url: String,
    /// The cluster this master started, without a database URL; it stops with the master.
    embedded: Option<EmbeddedPostgres>,
}

impl Database {
    /// The configured database, or the embedded cluster started in the state directory.
    async fn start(config: &RunConfig) -> anyhow::Result<Database> {
        let (url, embedded) = match config.database_url.clone() {
            Some(url) => (url, None),
            None => {
                let mut embedded = EmbeddedConfig::new(&config.state_dir);
                embedded.os_user = config.postgres_user.clone();
                let pg = EmbeddedPostgres::start(&embedded).await?;
                // Waited for by `pg` (a subreaper master's sweep of strays leaves it alone).
                if let Some(pid) = pg.pid() {
                    drover_supervisor::strays::waited_for(pid);
                }
                (pg.url().to_string(), Some(pg))
            }
        };
        Ok(Database { url, embedded })
    }

    /// Stops the embedded cluster, if this master started one.
    async fn stop(&mut self) {
        if let Some(pg) = self.embedded.take() {
            pg.stop().await;
        }
    }
}

/// The broker, registered. The database may be down: keep trying, but let a signal end the wait
/// (`None`: stop). A master told to stop by itself (a CI drain, `queue:work --once`) gives it one
/// lease, then exits 1 naming it: such a run has no service manager to outlast an outage for.
async fn connect(
    config: &RunConfig,
    database: &mut Database,
    signals: &mut Signals,
    stop_when: StopWhen,
) -> anyhow::Result<Option<Arc<Broker>>> {
    let mut broker_config = BrokerConfig::new(database.url.clone());
    broker_config.lease = config.lease();
    broker_config.node_timeout = config.lease() * 10;
    broker_config.outage_grace = config.longest_outage_grace();
    broker_config.auto_migrate = config.auto_migrate;

    let start = Broker::start(broker_config, Arc::new(SystemClock));
    tokio::pin!(start);
    let give_up = stop_when
        .any()
        .then(|| tokio::time::Instant::now() + config.lease());
    loop {
        tokio::select! {
            b = &mut start => return Ok(Some(Arc::new(b?))),
            _ = async {
                match give_up {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                database.stop().await;
                let at = drover_broker::connect::parse(&database.url)
                    .map(|t| t.address)
                    .unwrap_or_else(|_| "the database".to_string());
                anyhow::bail!(
                    "the database at {at} did not answer within {:?} (the lease) and this master stops by itself (--stop-when-empty, --max-jobs or --max-time), so it does not wait: check the database URL and that the server is up",
                    config.lease()
                );
            }
            sig = signals.recv() => match sig {
                Sig::Terminate | Sig::Interrupt | Sig::Quit => {
                    database.stop().await;
                    return Ok(None);
                }
                other => tracing::warn!("{} while connecting to the database: ignored (the master is not running yet)", other.name()),
            },
        }
    }
}

/// Removes the node row of the previous master of this state directory, which did not exit
/// cleanly (`state_file::read_predecessor`).
async fn remove_predecessor(broker: &Broker, predecessor: Option<(i64, i32)>) {
    if let Some((node, pid)) = predecessor {
        match broker.remove_predecessor(node, pid).await {
            Ok(true) => tracing::warn!(node, pid, "removed the node row of this state directory's previous master, which did not exit cleanly (queue pauses no longer wait for it)"),
            Ok(false) => {}
            Err(e) => tracing::warn!(database = %broker.address(), "{e}"),
        }
    }
}

/// The fork socket, `<state_dir>/fork.sock`, mode 0600 (the workers are the master's user),
/// bound through the checked state directory as the control socket is.
fn bind_fork_socket(state_dir: &StateDir) -> Result<Arc<Rendezvous>, drover::MasterError> {
    let at = state_dir.socket_slot("fork.sock")?;
    let listener =
        tokio::net::UnixListener::bind(&at).map_err(|source| drover::MasterError::Io {
            about: format!("binding the fork socket {}", state_dir.shown("fork.sock")),
            source,
        })?;
    state_dir.set_socket_mode("fork.sock", 0o600)?;
    Ok(Rendezvous::listen(
        listener,
        &state_dir.path().join("fork.sock"),
    ))
}

/// The configuration's pools, their workers told of the embedded cluster and of the zygotes
/// (fork mode), and what a reload re-reads.
fn start_pools(
    config: &RunConfig,
    config_path: Option<PathBuf>,
    context: WorkerContext,
    database: &Database,
    events_tx: &UnboundedSender<WorkerEvent>,
    state_dir: &StateDir,
) -> Result<(Vec<PoolRuntime>, Reloading), drover_supervisor::SupervisorError> {
    // Where forked workers reach the master (fork mode); without it pools start workers by exec.
    let rendezvous = bind_fork_socket(state_dir).map_err(|e| e.to_string());
    let zygotes = Zygotes::new(rendezvous, events_tx.clone());
    let context = context
        .embedded_dsn(
            database
                .embedded
                .as_ref()
                .map(|pg| pg.pdo_dsn().to_string()),
        )
        .zygotes(zygotes.clone());
    zygotes.sync(config, &context, false);
    let pools = build_pools(config, &context, events_tx)?;
    let reloading = Reloading::new(
        ConfigSource {
            path: config_path,
            reload_command: config.reload_command.clone(),
            cwd: config.cwd.clone(),
        },
        config.clone(),
        context,
    );
    Ok((pools, reloading))
}

/// The master's own settings, from the run configuration and the command line.
fn master_config(
    config: &RunConfig,
    memory_check_interval: Duration,
    exposition: Option<Arc<drover::metrics::Exposition>>,
    stop_when: StopWhen,
) -> MasterConfig {
    MasterConfig {
        shutdown_grace: config.shutdown_grace(),
        poll_interval: config.poll_interval(),
        memory_check_interval,
        recorder: RecorderConfig {
            record: config.record_metrics,
            keep: Duration::from_secs(config.metrics_trim.saturating_mul(60)),
            history: Duration::from_secs(config.history_minutes.saturating_mul(60)),
            ..RecorderConfig::default()
        },
        exposition,
        stop_when,
        traces: config.traces.clone(),
        ..MasterConfig::default()
    }
}

/// Warns when systemd's watchdog would kill a hung master only after its leases lapsed.
fn warn_of_a_late_watchdog(notifier: &Notifier, lease: Duration) {
    if let Some(every) = notifier.watchdog_interval() {
        // systemd kills a hung master at WatchdogSec (twice this interval); the lease guard
        // stops its workers at their deadline anyway, but a master restarted within the lease
        // keeps the jobs it held from waiting out a whole lease.
        if every * 2 >= lease / 2 {
            tracing::warn!(
                "WatchdogSec ({:?}) is not well under half the lease ({:?}): a hung master is killed only after its leases have lapsed; set WatchdogSec to a third of the lease or less",
                every * 2,
                lease
            );
        }
    }
}

/// Runs the master until it stops — beside the embedded cluster, when there is one, which ends
/// it if the cluster stops — then stops listening for wakes and stops the cluster.
async fn serve(
    master: Master,
    signals: Signals,
    database: Database,
    listener: tokio::task::JoinHandle<()>,
    own_row: &Broker,
) -> anyhow::Result<Exit> {
    // An embedded cluster stops with the master: its rows with it.
    let own_database = database.embedded.is_some();
    let result = match database.embedded {
        Some(mut pg) => {
            let outcome = tokio::select! {
                r = master.run(signals) => r.map_err(anyhow::Error::from),
                why = pg.exited() => Err(anyhow::anyhow!("the embedded PostgreSQL stopped: {why}")),
            };
            listener.abort();
            pg.stop().await;
            outcome
        }
        None => {
            let outcome = master.run(signals).await.map_err(anyhow::Error::from);
            listener.abort();
            outcome
        }
    };
    if result.is_err() && !own_database {
        // It failed before it served (a pool that cannot start) or lost its database: its row
        // must not outlive it (a clean stop has removed it already).
        leave(own_row).await;
    }
    result
}

/// A master that registered and cannot go on removes its node row, so that nobody waits for it
/// (a queue pause would, for two leases; a service restarting a master that cannot start would
/// leave a fresh row every few seconds). A database that does not answer within 5 s is left to
/// drop the row itself.
async fn leave(broker: &Broker) {
    match tokio::time::timeout(Duration::from_secs(5), broker.deregister()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(database = %broker.address(), "{e}"),
        Err(_) => tracing::warn!("this master's node row was not removed in 5 s: the database does not answer (the row expires by itself)"),
    }
}

async fn send(state_dir: &Path, command: ControlCommand) -> anyhow::Result<()> {
    send_for(state_dir, command, None).await
}

async fn send_for(
    state_dir: &Path,
    command: ControlCommand,
    pool: Option<&str>,
) -> anyhow::Result<()> {
    let answer = control::request_for(state_dir, command, pool).await?;
    if let Some(error) = answer.get("error") {
        let error = error
            .as_str()
            .map(str::to_string)
            .unwrap_or(error.to_string());
        anyhow::bail!("the master refused: {error}");
    }
    println!("{answer}");
    Ok(())
}

/// `drover status`. Exit code: the master's own verdict (0 serving, 1 paused, 3 degraded, 5 the
/// database unreachable), 2 when no master answers, 4 when this user may not ask (a master may be
/// running).
async fn status(state_dir: &Path, json: bool) -> anyhow::Result<()> {
    let answer = match control::request(state_dir, ControlCommand::Status).await {
        Ok(a) => a,
        Err(e) => {
            let (running, code) = match e {
                drover::MasterError::ControlDenied { .. } => (serde_json::Value::Null, 4),
                _ => (false.into(), 2),
            };
            if json {
                println!(
                    "{}",
                    serde_json::json!({"running": running, "error": e.to_string()})
                );
            } else {
                eprintln!("drover: {e}");
            }
            std::process::exit(code);
        }
    };
    if json {
        println!("{answer}");
    } else {
        match serde_json::from_value::<drover::status_document::Status>(answer.clone()) {
            Ok(status) => print!("{}", status.text()),
            // A master of another version: its document as it is, rather than nothing.
            Err(e) => {
                eprintln!("drover: this master's status document is not one this drover reads ({e}); here it is as JSON");
                println!("{answer}");
            }
        }
    }
    let code = answer["exit_code"].as_i64().unwrap_or(3);
    std::process::exit(i32::try_from(code).unwrap_or(3));
}
