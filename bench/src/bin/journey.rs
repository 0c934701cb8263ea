//! journey: docs/guide.md walked as one run (issue 57) — three hosts, one PostgreSQL, one redis,
//! Laravel 12.67, from Horizon on redis and cron's `schedule:run` line to drover and back:
//!
//! - **Before the guide.** Each host's site is deployed by Forge's zero-downtime script
//!   (`bench/journey/forge-deploy.sh`, the macros written out), Horizon runs on each under a
//!   supervisord-like program, h1's crontab runs `schedule:run` at second 0 of each minute, and a
//!   producer dispatches a few jobs a second, open loop, with the application's default
//!   connection (redis), from each host's `current` in turn.
//! - **Steps 1 and 2**, once, in the application's repository: `php artisan drover:install`, then
//!   `drover:import-horizon --dry-run` and `drover:import-horizon --force` (config/drover.php from
//!   config/horizon.php); committed and deployed (the deploy migrates).
//! - **Step 5**: on h2, h3, then h1 (the host with cron), the master started (`php current/artisan
//!   drover`, the unit's ExecStart) and, on h1, cron's line removed, in one step — a minute's due
//!   time coming while h1's cron and the other masters both run the schedule; the deploy script
//!   ends with `queue:restart`; `QUEUE_CONNECTION=drover` deployed; redis drained
//!   (`queue:monitor`); `horizon:terminate` and Horizon's program removed on each host.
//! - **Step 6**: two deploys with Forge's script.
//! - **Step 8**: each host first onto the previous release's binary (built from the commit
//!   `RELEASES` names, where bench/src/bin/rolling_upgrade.rs builds it), then upgraded host by
//!   host: the binary replaced, `systemctl restart` (SIGTERM, the new binary started),
//!   `php artisan drover:status` checked. The package stays this tree's: see bench/README.md.
//! - **Step 7**: the database stopped (`pg_ctl stop -m fast`) for 60 s: `drover:status` on every
//!   host must exit 5 naming "database unreachable" during it and 0 after.
//! - **Step 11**: back to Horizon: Horizon and cron's line back, `DROVER_SCHEDULE=false`,
//!   `QUEUE_CONNECTION=redis` deployed, drover drained, the masters stopped.
//!
//! Asserted at the end, from each job's own records (every execution's start and end, with its
//! host, pid, connection and release): every dispatched job ran exactly once to its end — none
//! lost, none completed twice, no two executions of one job overlapping — across Horizon and
//! drover; every due time of the `onOneServer()` task once (its own log of runs, by minute); every
//! job dispatched after a deploy completed ran that release's code; and the health checks above.
//! The summary goes to stdout and, for the full run, to `bench/results/journey.md`. Exit 1 if a
//! check failed.
//!
//! ```sh
//! cargo build --release && cargo run --release -p drover-bench --bin journey      # ~12 min
//! cargo run -p drover-bench --bin journey -- --short     # the test command's form (bench/tests/journey.rs)
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;

#[path = "journey/app.rs"]
mod app;
#[allow(dead_code)]
#[path = "../horizon.rs"]
mod horizon;
#[path = "journey/judge.rs"]
mod judge;
#[path = "journey/producer.rs"]
mod producer;
#[path = "journey/report.rs"]
mod report;
#[allow(dead_code)]
#[path = "../sampler.rs"]
mod sampler;
#[path = "journey/walk.rs"]
mod walk;
#[path = "journey/world.rs"]
mod world;

use walk::{Journey, Previous, Sizes};

#[derive(Parser)]
#[command(about = "docs/guide.md walked on three hosts: Horizon and cron to drover and back")]
struct Args {
    /// The test command's form: short waits, a 10 s outage, no previous release (a restart onto
    /// the same binary in step 8), no report file unless --out.
    #[arg(long)]
    short: bool,
    /// The drover binary (default target/release/drover, or target/debug/drover with --short).
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The previous release for step 8, a version RELEASES records (default its newest).
    #[arg(long)]
    previous: Option<String>,
    /// Step 8 without the previous release: a restart onto the same binary, host by host.
    #[arg(long)]
    no_previous: bool,
    /// Jobs dispatched a second.
    #[arg(long)]
    rate: Option<f64>,
    /// The database outage, seconds.
    #[arg(long)]
    outage: Option<f64>,
    /// Seconds of service after each step that changes what serves.
    #[arg(long)]
    service: Option<f64>,
    /// The deploy script (default bench/journey/forge-deploy.sh).
    #[arg(long)]
    deploy_script: Option<PathBuf>,
    /// Where the summary goes (default bench/results/journey.md; none with --short).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Deploys while Horizon runs (steps 5c and 11b) without Horizon's own restart
    /// (`horizon:terminate`), `queue:restart` alone as the guide's step 5b said before: Horizon's
    /// workers restart on the release Horizon booted from.
    #[arg(long)]
    no_horizon_restart: bool,
    /// Keep the run's directory (hosts, logs, the database) even when every check held.
    #[arg(long)]
    keep: bool,
}

/// The previous release's binary: where bench/src/bin/rolling_upgrade.rs builds it
/// (`target/rolling-upgrade/vX.Y.Z-target/release/drover`, from a worktree of the commit
/// `RELEASES` names), built here the same way if it is missing.
fn previous_binary(root: &Path, version: Option<&str>) -> anyhow::Result<Previous> {
    let releases = drover_bench::releases::read(root)?;
    let release = drover_bench::releases::pick(&releases, version)?.clone();
    let dir = root.join("target/rolling-upgrade");
    let tree = dir.join(format!("v{}", release.version));
    let target = dir.join(format!("v{}-target", release.version));
    let binary = target.join("release/drover");
    if !binary.exists() {
        std::fs::create_dir_all(&dir)?;
        if !tree.exists() {
            let status = Command::new("git")
                .current_dir(root)
                .args(["worktree", "add", "--detach"])
                .arg(&tree)
                .arg(&release.commit)
                .status()?;
            if !status.success() {
                bail!("git worktree add {} {}", tree.display(), release.commit);
            }
        }
        let toml = std::fs::read_to_string(tree.join("Cargo.toml"))?;
        if drover_bench::releases::cargo_version(&toml) != Some(release.version.as_str()) {
            bail!(
                "{} does not say version {}: RELEASES names another commit than the worktree holds",
                tree.display(),
                release.version
            );
        }
        println!(
            "journey: building drover {} from {} (a few minutes, once)",
            release.version, release.commit
        );
        let status = Command::new("cargo")
            .current_dir(&tree)
            .env("CARGO_TARGET_DIR", &target)
            .args(["build", "--release", "--bin", "drover"])
            .status()?;
        if !status.success() || !binary.exists() {
            bail!("building drover {} in {}", release.version, tree.display());
        }
    }
    let runs_schedule =
        drover_bench::releases::file_at(root, &release.commit, "src/scheduling/mod.rs").is_ok();
    Ok(Previous {
        version: format!("{} ({})", release.version, &release.commit[..7]),
        binary,
        runs_schedule,
    })
}

fn git(root: &Path, args: &[&str]) -> String {
    Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

async fn run(args: Args) -> anyhow::Result<i32> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the repository's root")?
        .to_path_buf();
    let binary = match &args.binary {
        Some(b) => root.join(b),
        None if args.short => root.join("target/debug/drover"),
        None => root.join("target/release/drover"),
    };
    if !binary.exists() {
        bail!(
            "{} is missing: cargo build{}",
            binary.display(),
            if args.short { "" } else { " --release" }
        );
    }
    let binary = std::fs::canonicalize(&binary)?;
    let script = std::fs::canonicalize(
        root.join(
            args.deploy_script
                .clone()
                .unwrap_or_else(|| PathBuf::from("bench/journey/forge-deploy.sh")),
        ),
    )
    .context("the deploy script")?;
    let mut sizes = if args.short {
        Sizes {
            short: true,
            rate: 3.0,
            horizon_era: Duration::ZERO,
            service: Duration::from_secs(1),
            outage: Duration::from_secs(10),
            deploy_wait: Duration::from_secs(30),
            restart_horizon: !args.no_horizon_restart,
        }
    } else {
        Sizes {
            short: false,
            rate: 4.0,
            horizon_era: Duration::from_secs(60),
            service: Duration::from_secs(20),
            outage: Duration::from_secs(60),
            deploy_wait: Duration::from_secs(60),
            restart_horizon: !args.no_horizon_restart,
        }
    };
    if let Some(r) = args.rate {
        sizes.rate = r;
    }
    if let Some(o) = args.outage {
        sizes.outage = Duration::from_secs_f64(o);
    }
    if let Some(s) = args.service {
        sizes.service = Duration::from_secs_f64(s);
    }
    let previous = if args.short || args.no_previous {
        None
    } else {
        Some(previous_binary(&root, args.previous.as_deref())?)
    };

    // The application: the Laravel 12 fixture with Horizon, a build of its own.
    let build = drover_bench::laravel_fixture(&root, 12, "journey-laravel12-app")?;
    horizon::prepare(&root, &build)?;

    let scratch = tempfile::Builder::new()
        .prefix("drover-journey-")
        .tempdir_in("/tmp")?;
    std::fs::set_permissions(
        scratch.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let db = world::Database::start(scratch.path()).await?;
    let redis = world::Redis::start(scratch.path()).await?;
    let mut hosts = Vec::new();
    for name in ["h1", "h2", "h3"] {
        hosts.push(world::Host::new(scratch.path(), name, &binary)?);
    }
    let dev_env: Vec<(String, String)> = [
        ("APP_NAME", "journey".to_string()),
        ("APP_ENV", "local".into()),
        (
            "APP_KEY",
            "base64:9wLMy0Lq0Qe6nW2wvp2vAz2yv0oQw3b+gHbd4Xl8iZs=".into(),
        ),
        ("LOG_CHANNEL", "stderr".into()),
        ("DB_CONNECTION", "pgsql".into()),
        ("DB_HOST", db.host.clone()),
        ("DB_PORT", db.port.to_string()),
        ("DB_DATABASE", "drover".into()),
        ("DB_USERNAME", "drover".into()),
        ("REDIS_HOST", "127.0.0.1".into()),
        ("REDIS_PORT", redis.port.to_string()),
        ("CACHE_STORE", "redis".into()),
        ("QUEUE_CONNECTION", "redis".into()),
        ("DROVER_BINARY", binary.display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let repo = app::Repo::create(&root, &build, scratch.path().join("repo"), dev_env).await?;
    let laravel = Command::new("php")
        .arg(build.join("artisan"))
        .args(["--version", "--no-ansi"])
        .env("LOG_CHANNEL", "stderr")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let mut j = Journey {
        sizes: sizes.clone(),
        binary: binary.clone(),
        previous: previous.clone(),
        script: script.clone(),
        db,
        redis,
        repo,
        hosts,
        producer: None,
        t0: world::now(),
        events: Vec::new(),
        deploys: Vec::new(),
        releases: Default::default(),
        checks: Vec::new(),
        restarts: Vec::new(),
        outage: None,
        overlap_minutes: Vec::new(),
        schedule_from: 0.0,
        schedule_to: 0.0,
        workers: 2,
    };
    let walked = j.walk().await;
    if let Err(e) = &walked {
        j.check("the walk reached its end", false, format!("{e:#}"));
        j.abandon().await;
    }
    let verdict = judge::judge(&j)?;
    let command = format!(
        "cargo run{} -p drover-bench --bin journey{}",
        if args.short { "" } else { " --release" },
        std::env::args()
            .skip(1)
            .map(|a| format!(" {a}"))
            .collect::<String>()
    );
    let dirty = !git(&root, &["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let conditions = vec![
        format!(
            "commit {}{}",
            git(&root, &["rev-parse", "--short", "HEAD"]),
            if dirty {
                " (with uncommitted edits)"
            } else {
                ""
            }
        ),
        git(&root, &["log", "-1", "--format=%cd", "--date=short"]),
        format!(
            "{} cores, load {:.2} at the end",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            sampler::load_average_1m()
        ),
        laravel,
        format!(
            "drover {}{}",
            walk::version_of(&binary),
            previous
                .as_ref()
                .map(|p| format!(", the previous release {}", p.version))
                .unwrap_or_default()
        ),
        format!(
            "{} jobs/s; {:.0} s outage; {:.0} s of service after each step",
            sizes.rate,
            sizes.outage.as_secs_f64(),
            sizes.service.as_secs_f64()
        ),
    ];
    let md = report::markdown(&j, &verdict, &command, &conditions);
    println!("\n{md}");
    let out = match (&args.out, args.short) {
        (Some(o), _) => Some(root.join(o)),
        (None, false) => Some(root.join("bench/results/journey.md")),
        (None, true) => None,
    };
    if let Some(out) = &out {
        std::fs::write(out, &md)?;
        println!("journey: wrote {}", out.display());
    }
    let failed = j
        .checks
        .iter()
        .chain(&verdict.checks)
        .filter(|c| !c.ok)
        .count();
    let Journey { db, redis, .. } = j;
    db.stop().await;
    redis.stop().await;
    if failed > 0 || args.keep {
        let kept = scratch.keep();
        println!(
            "journey: the run's hosts, logs and records are kept in {}",
            kept.display()
        );
    }
    if failed > 0 {
        eprintln!("journey: {failed} checks failed (the summary above says which)");
        return Ok(1);
    }
    println!("journey: every check held");
    Ok(0)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let code = local.block_on(&rt, run(args))?;
    std::process::exit(code);
}
