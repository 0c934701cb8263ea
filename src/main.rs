//! `drover`: the master and broker in one binary. This file only wires the parts together.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use drover::{Master, MasterConfig};
use drover_broker::{
    listener, Broker, BrokerConfig, EmbeddedConfig, EmbeddedPostgres, SystemClock,
};
use drover_supervisor::{Pool, PoolConfig, WorkerCommand};
use tokio::signal::unix::{signal, SignalKind};

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
    Run(RunArgs),
    /// Apply the schema migrations and exit.
    Migrate {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
}

#[derive(Args)]
struct RunArgs {
    /// PostgreSQL URL; without it drover starts a private cluster in the state directory.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// Where drover keeps its state (the embedded cluster, master.json).
    #[arg(long, env = "DROVER_STATE_DIR", default_value = ".drover")]
    state_dir: PathBuf,
    /// Worker processes.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Jobs each worker may hold at once (passed to workers as DROVER_PREFETCH).
    #[arg(long, default_value_t = 1)]
    prefetch: u32,
    /// Queues to serve, highest priority first (repeat or comma-separate).
    #[arg(long = "queue", value_delimiter = ',', default_value = "default")]
    queues: Vec<String>,
    /// Lease length; renewed every third of it while a worker lives.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    lease: Duration,
    /// How long a graceful shutdown waits for running jobs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    shutdown_grace: Duration,
    /// The fallback poll interval (NOTIFY wakes the master at once).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    poll_interval: Duration,
    /// The longest frame a worker may send.
    #[arg(long, default_value_t = 1 << 20)]
    max_frame_bytes: usize,
    /// OS user for the embedded PostgreSQL when started as root.
    #[arg(long, default_value = "postgres")]
    postgres_user: String,
    /// Log as JSON lines instead of text.
    #[arg(long)]
    log_json: bool,
    /// The worker command, after `--`, e.g. `-- php vendor/bin/drover-worker handler.php`.
    #[arg(last = true, required = true)]
    worker: Vec<OsString>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 500ms, 2s, 1m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s or m)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let json = matches!(&cli.command, Command::Run(a) if a.log_json);
    let filter = tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG")
        .unwrap_or_else(|_| "info,tokio_postgres=warn".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Migrate { database_url } => {
                let mut client = drover_broker::connect::connect_once(&database_url).await?;
                let n = drover_broker::migrate::migrate(&mut client).await?;
                println!("drover: {n} migration(s) applied");
                Ok(())
            }
        }
    })
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;

    let (url, embedded) = match args.database_url.clone() {
        Some(url) => (url, None),
        None => {
            let mut config = EmbeddedConfig::new(&args.state_dir);
            config.os_user = args.postgres_user.clone();
            let pg = EmbeddedPostgres::start(&config).await?;
            (pg.url().to_string(), Some(pg))
        }
    };
    let mut broker_config = BrokerConfig::new(url.clone());
    broker_config.lease = args.lease;
    broker_config.node_timeout = args.lease * 10;

    // The database may be down: keep trying, but let a signal end the wait.
    let broker = tokio::select! {
        b = Broker::start(broker_config, Arc::new(SystemClock)) => Arc::new(b?),
        _ = sigterm.recv() => { stop_embedded(embedded).await; return Ok(()) }
        _ = sigint.recv() => { stop_embedded(embedded).await; return Ok(()) }
    };
    drop((sigterm, sigint));

    let wake = Arc::new(tokio::sync::Notify::new());
    let listener = listener::spawn(url, wake.clone());

    let (program, worker_args) = args
        .worker
        .split_first()
        .context("no worker command after --")?;
    let mut env = vec![("DROVER_PREFETCH".into(), args.prefetch.to_string().into())];
    if let Some(pg) = &embedded {
        env.push(("DROVER_PDO_DSN".into(), pg.pdo_dsn().into()));
    }
    let mut pool_config = PoolConfig::new(WorkerCommand {
        program: program.into(),
        args: worker_args.to_vec(),
        env,
        cwd: None,
    });
    pool_config.processes = args.workers;
    pool_config.max_frame_bytes = args.max_frame_bytes;
    let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
    let pool = Pool::new(pool_config, events_tx)?;

    let master_config = MasterConfig {
        queues: args.queues.clone(),
        shutdown_grace: args.shutdown_grace,
        poll_interval: args.poll_interval,
        ..MasterConfig::default()
    };
    let state_file = write_state_file(&args, broker.node(), embedded.as_ref())?;
    let master = Master::new(master_config, broker, pool, events_rx, wake);

    let result = match embedded {
        Some(mut pg) => {
            let outcome = tokio::select! {
                r = master.run() => r.map_err(anyhow::Error::from),
                why = pg.exited() => Err(anyhow::anyhow!("the embedded PostgreSQL stopped: {why}")),
            };
            listener.abort();
            pg.stop().await;
            outcome
        }
        None => {
            let outcome = master.run().await.map_err(anyhow::Error::from);
            listener.abort();
            outcome
        }
    };
    let _ = std::fs::remove_file(&state_file);
    result
}

async fn stop_embedded(pg: Option<EmbeddedPostgres>) {
    if let Some(pg) = pg {
        pg.stop().await;
    }
}

/// `<state_dir>/master.json`: the master's PID and node, and in the embedded default the PDO DSN
/// that producers use. Removed on exit.
fn write_state_file(
    args: &RunArgs,
    node: i64,
    pg: Option<&EmbeddedPostgres>,
) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(&args.state_dir)
        .with_context(|| format!("creating state directory {}", args.state_dir.display()))?;
    let path = args.state_dir.join("master.json");
    let state = serde_json::json!({
        "pid": std::process::id(),
        "node": node,
        "pdo_dsn": pg.map(|p| p.pdo_dsn()),
        "database_url": pg.map(|p| p.url()),
    });
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&state)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
