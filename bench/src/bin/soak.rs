//! soak: months in production, compressed into an hour (issue 40). A Laravel application on
//! drover under a steady open-loop load, with what production does to it on a schedule: a rolling
//! deploy (a new symlinked release, `php current/artisan drover:restart`) every tenth of the run,
//! workers recycled by `max_jobs`, one `pg_ctl restart -m fast` half way, and a report that holds
//! a REPEATABLE READ snapshot open twice. Every `--sample` seconds it records the master's, the
//! lease guard's, the zygote's and the workers' PSS, their open file descriptors, claim time
//! (pg_stat_statements over the claim statements: mean and max, since PostgreSQL keeps no
//! percentiles), pickup (the master's per-minute wait histograms in `drover.metrics`: p50, p99),
//! the database's size, `drover.jobs`' dead tuples and the oldest snapshot's age. At the end it
//! drains, stops, and checks every job's records in `public.runs`: none lost, none doubled, no
//! two executions of one job overlapping; and fits a line to memory and descriptors after the
//! first sixth of the run (the warm-up), against the noise around it. The master is judged on its
//! heap (`Pss_Anon`): its whole PSS also counts its binary's pages, which become resident as code
//! paths are first used and are divided among the processes mapping them (bench/RESULTS.md, "An
//! hour of production").
//!
//! The load: `--rate` jobs/s (default: half of what the pool drains at the mix's mean run time),
//! dispatched by `php current/artisan app:eval` as the application does (`Bus::dispatchToQueue`
//! on the `drover` connection): 80 % run 10-100 ms, 19 % 100-1000 ms, 1 % fail for good; of them
//! 5 % delayed 1-30 s, 5 % in one of ten ordered groups, 5 % under a concurrency limit of 2.
//!
//! ```sh
//! cargo build --release && cargo run --release -p drover-bench --bin soak                  # an hour on each Laravel
//! cargo run --release -p drover-bench --bin soak -- --laravel 12 --minutes 10              # a quick run
//! ```
//! The report goes to stdout and to `bench/results/soak-laravel<8|12>.md`.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use drover_broker::{connect, EmbeddedConfig, EmbeddedPostgres};

#[derive(Parser, Clone)]
#[command(
    about = "An hour of production on drover: load, deploys, a database restart, held snapshots"
)]
struct Args {
    /// 8, 12 or both.
    #[arg(long, default_value = "both")]
    laravel: String,
    /// Length of the run (the events scale with it).
    #[arg(long, default_value_t = 60)]
    minutes: u64,
    /// Jobs dispatched per second; 0: half the pool's capacity at the mix's mean run time.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Worker processes.
    #[arg(long, default_value_t = 4)]
    processes: usize,
    /// Jobs a worker runs before it is replaced (`max_jobs`).
    #[arg(long, default_value_t = 500)]
    max_jobs: u64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 60)]
    sample: u64,
    /// Seconds each of the two snapshots is held; 0: a twelfth of the run, at most 300.
    #[arg(long, default_value_t = 0)]
    hold: u64,
}

/// The mix's mean run time in seconds: 0.8 × 55 ms + 0.19 × 550 ms + 0.01 × 0.
const MEAN_RUN_SECS: f64 = 0.8 * 0.055 + 0.19 * 0.55;

/// The bench's job, written into each release's `bootstrap/` and loaded before the application.
const JOB_PHP: &str = r#"<?php
// The soak's job (bench/src/bin/soak.rs): records its start and finish in public.runs by seq.
namespace Bench;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;

class SoakJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tries = 5;

    public $timeout = 60;

    public $backoff = 1;

    public $messageGroup;

    public function __construct(public int $seq, public int $ms, public bool $failing, ?string $group, public ?string $limit)
    {
        $this->messageGroup = $group;
        if ($failing) {
            $this->tries = 1;
        }
    }

    public function middleware(): array
    {
        return $this->limit === null ? [] : [new \Drover\Middleware\LimitConcurrency($this->limit, 2)];
    }

    public function handle(): void
    {
        $record = fn (string $event) => DB::insert(
            'INSERT INTO public.runs (job_id, seq, attempt, pid, event) VALUES (?, ?, ?, ?, ?)',
            [(int) $this->job->getJobId(), $this->seq, $this->job->attempts(), getmypid(), $event]
        );
        $record('start');
        usleep($this->ms * 1000);
        if ($this->failing) {
            throw new \RuntimeException("soak: job {$this->seq} fails on purpose");
        }
        $record('finish');
    }
}
"#;

/// The producer, run by `php current/artisan app:eval`: the mix at SOAK_RATE per second until
/// SOAK_STOP exists; one line per dispatch, "seq kind" (a dispatch that failed — the database
/// restarting — is tried again, and printed once it went through).
const PRODUCER_PHP: &str = r#"
[$rate, $stop] = [(float) getenv('SOAK_RATE'), getenv('SOAK_STOP')];
mt_srand(40);
$start = microtime(true);
for ($n = 1; !file_exists($stop); $n++) {
    $r = mt_rand(1, 10000);
    $failing = $r <= 100;
    $ms = $failing ? 10 : ($r <= 2000 ? mt_rand(100, 1000) : mt_rand(10, 100));
    $shape = mt_rand(1, 100);
    $group = $shape <= 5 ? 'g' . ($n % 10) : null;
    $limit = $shape > 5 && $shape <= 10 ? 'soak-limit' : null;
    $job = (new \Bench\SoakJob($n, $ms, $failing, $group, $limit))->onConnection('drover')->onQueue('default');
    $kind = $failing ? 'fail' : ($group !== null ? 'group' : ($limit !== null ? 'limit' : 'ok'));
    if ($shape > 10 && $shape <= 15) {
        $job->delay(mt_rand(1, 30));
        $kind = $failing ? 'fail' : 'delay';
    }
    for ($try = 1; ; $try++) {
        try {
            \Illuminate\Support\Facades\Bus::dispatchToQueue($job);
            break;
        } catch (\Throwable $e) {
            fwrite(STDERR, "dispatch $n try $try: " . $e->getMessage() . "\n");
            usleep(200000);
        }
    }
    fwrite(STDOUT, "$n $kind\n");
    fflush(STDOUT);
    $sleep = $start + $n / $rate - microtime(true);
    if ($sleep > 0) {
        usleep((int) ($sleep * 1e6));
    }
}
"#;

/// One sample.
#[derive(Default, Clone)]
struct Sample {
    minute: f64,
    master_kib: u64,
    /// The master's anonymous memory (its heap and stacks: `Pss_Anon`), where a leak shows; the
    /// rest of its PSS is its binary's pages, resident as code paths are first used.
    master_anon_kib: u64,
    guard_kib: u64,
    zygote_kib: u64,
    /// Mean over the workers.
    worker_kib: u64,
    workers: usize,
    master_fds: usize,
    claims: i64,
    claim_mean_ms: f64,
    claim_max_ms: f64,
    pickup_p50_ms: Option<f64>,
    pickup_p99_ms: Option<f64>,
    db_mib: f64,
    /// drover's queue tables, indexes and TOAST (not the rows kept by retention: metrics, failed
    /// jobs, history, scheduled runs).
    drover_mib: f64,
    dead_tuples: i64,
    oldest_snapshot_secs: f64,
}

/// A field of `/proc/<pid>/smaps_rollup` in KiB (`Pss:`, `Pss_Anon:`), 0 when unreadable.
fn smaps_kib(pid: i32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn pss_kib(pid: i32) -> u64 {
    smaps_kib(pid, "Pss:")
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Every descendant of `pid`.
fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out
}

fn fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The percentile `q` of a merged drover.metrics distribution (`[[upper, n], ...]`, in ms): the
/// upper bound of the bucket it falls in (buckets are an eighth of a doubling wide).
fn percentile(buckets: &[(f64, i64)], q: f64) -> Option<f64> {
    let total: i64 = buckets.iter().map(|b| b.1).sum();
    if total == 0 {
        return None;
    }
    let want = (total as f64 * q).ceil() as i64;
    let mut seen = 0;
    let mut sorted = buckets.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (upper, n) in sorted {
        seen += n;
        if seen >= want {
            return Some(upper);
        }
    }
    None
}

/// Least squares: (slope per minute, standard deviation of the residuals).
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if n < 3.0 {
        return (0.0, 0.0);
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let resid = (points
        .iter()
        .map(|p| (p.1 - (my + slope * (p.0 - mx))).powi(2))
        .sum::<f64>()
        / (n - 2.0))
        .sqrt();
    (slope, resid)
}

/// A host: a deploy tool's layout (`releases/N`, `current`), shared storage, a state directory.
struct Site {
    dir: PathBuf,
    source: PathBuf,
    laravel: u8,
    shipped: usize,
    env: Vec<(String, String)>,
}

impl Site {
    /// Ships release N+1 of the fixture application and points `current` at it.
    fn deploy(&mut self, args: &Args) -> anyhow::Result<String> {
        use std::os::unix::fs::symlink;
        self.shipped += 1;
        let name = format!("{}", self.shipped);
        let dir = self.dir.join("releases").join(&name);
        let source = &self.source;
        for d in ["bootstrap/cache", "config"] {
            std::fs::create_dir_all(dir.join(d))?;
        }
        std::fs::copy(source.join("artisan"), dir.join("artisan"))?;
        std::fs::copy(
            source.join("bootstrap/app.php"),
            dir.join("bootstrap/app-fixture.php"),
        )?;
        std::fs::write(dir.join("bootstrap/SoakJob.php"), JOB_PHP)?;
        std::fs::write(
            dir.join("bootstrap/app.php"),
            "<?php\nrequire_once __DIR__.'/SoakJob.php';\nreturn require __DIR__.'/app-fixture.php';\n",
        )?;
        if self.laravel == 8 {
            std::fs::write(
                dir.join("bootstrap/autoload.php"),
                format!(
                    "<?php\nrequire '{}';\n",
                    source.join("bootstrap/autoload.php").display()
                ),
            )?;
        } else {
            for f in ["bootstrap/providers.php", ".env", "composer.json"] {
                std::fs::copy(source.join(f), dir.join(f))?;
            }
            symlink(source.join("vendor"), dir.join("vendor"))?;
        }
        for d in ["app", "database", "public"] {
            if source.join(d).exists() {
                symlink(source.join(d), dir.join(d))?;
            }
        }
        for entry in std::fs::read_dir(source.join("config"))? {
            let entry = entry?;
            if entry.file_name() != "drover.php" {
                symlink(entry.path(), dir.join("config").join(entry.file_name()))?;
            }
        }
        std::fs::write(
            dir.join("config/drover.php"),
            format!(
                "<?php\n// The fixture's configuration, with the soak's pool (release {name}).\n$config = require '{}';\n$config['defaults']['default'] = array_merge($config['defaults']['default'], [\n    'queue' => ['default'],\n    'processes' => {},\n    'max_jobs' => {},\n]);\nreturn $config;\n",
                source.join("config/drover.php").display(),
                args.processes,
                args.max_jobs,
            ),
        )?;
        let tmp = self.dir.join("current.tmp");
        let _ = std::fs::remove_file(&tmp);
        symlink(PathBuf::from("releases").join(&name), &tmp)?;
        std::fs::rename(&tmp, self.dir.join("current"))?;
        Ok(name)
    }

    fn current(&self) -> PathBuf {
        self.dir.join("current")
    }

    fn artisan(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("php");
        cmd.arg(self.current().join("artisan"))
            .args(args)
            .current_dir(self.current());
        for k in [
            "DATABASE_URL",
            "DROVER_DATABASE_URL",
            "DB_CONNECTION",
            "DROVER_STATE_DIR",
        ] {
            cmd.env_remove(k);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd
    }

    fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.artisan(args).output()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            bail!("artisan {args:?}: {text}");
        }
        Ok(text)
    }
}

fn pg_ctl(data_dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("runuser")
        .args([
            "-u",
            "postgres",
            "--",
            "/usr/lib/postgresql/15/bin/pg_ctl",
            "-D",
        ])
        .arg(data_dir)
        .args(args)
        .args(["-w", "-t", "60"])
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("pg_ctl {args:?} failed");
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let laravels: Vec<u8> = match args.laravel.as_str() {
        "both" => vec![8, 12],
        "8" => vec![8],
        "12" => vec![12],
        other => bail!("--laravel {other}: 8, 12 or both"),
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let binary = root.join("target/release/drover");
    if !binary.exists() {
        bail!(
            "{} is missing: cargo build --release first",
            binary.display()
        );
    }
    let mut failed = false;
    for laravel in laravels {
        let (report, ok) = soak(&args, &root, &binary, laravel).await?;
        println!("{report}");
        std::fs::write(
            root.join(format!("bench/results/soak-laravel{laravel}.md")),
            &report,
        )?;
        failed |= !ok;
    }
    if failed {
        bail!("a target of the soak was missed (the report says which)");
    }
    Ok(())
}

async fn soak(
    args: &Args,
    root: &Path,
    binary: &Path,
    laravel: u8,
) -> anyhow::Result<(String, bool)> {
    let total = Duration::from_secs(args.minutes * 60);
    let tenth = total / 10;
    let hold = if args.hold > 0 {
        Duration::from_secs(args.hold)
    } else {
        (total / 12).min(Duration::from_secs(300))
    };
    let rate = if args.rate > 0.0 {
        args.rate
    } else {
        (0.5 * args.processes as f64 / MEAN_RUN_SECS).floor()
    };
    let source = drover_bench::laravel_fixture(root, laravel, "soak/laravel12")?;

    let dir = tempfile::Builder::new()
        .prefix("drover-soak-")
        .tempdir_in("/tmp")?;
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let mut config = EmbeddedConfig::new(dir.path().join("pg"));
    config.settings.push((
        "shared_preload_libraries".into(),
        "pg_stat_statements".into(),
    ));
    let pg = EmbeddedPostgres::start(&config)
        .await
        .context("starting PostgreSQL")?;
    let data_dir = pg.data_dir().to_path_buf();
    let url = pg.url().to_string();
    let socket_dir = data_dir.display().to_string();
    let admin = connect::connect_once(&url).await?;
    admin
        .batch_execute(
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
             CREATE TABLE public.runs (job_id bigint, seq int, attempt int, pid int, event text,
                 at timestamptz NOT NULL DEFAULT clock_timestamp());
             CREATE INDEX runs_seq ON public.runs (seq);",
        )
        .await?;

    let host = dir.path().join("host");
    for d in [
        "site/releases",
        "storage/framework/cache/data",
        "storage/framework/views",
        "storage/framework/sessions",
        "storage/logs",
        "state",
    ] {
        std::fs::create_dir_all(host.join(d))?;
    }
    let p = |s: &str| host.join(s).display().to_string();
    let env: Vec<(String, String)> = [
        ("DB_HOST", socket_dir.clone()),
        ("DB_PORT", "5432".into()),
        ("DB_DATABASE", "drover".into()),
        ("DB_USERNAME", "drover".into()),
        ("QUEUE_CONNECTION", "drover".into()),
        ("APP_STORAGE", p("storage")),
        ("APP_SERVICES_CACHE", p("storage/services.php")),
        ("APP_PACKAGES_CACHE", p("storage/packages.php")),
        ("DROVER_BINARY", binary.display().to_string()),
        ("DROVER_STATE_DIR", p("state")),
        ("DROVER_LOG", "info".into()),
        ("LOG_CHANNEL", "stderr".into()),
        ("LOG_LEVEL", "error".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut site = Site {
        dir: host.join("site"),
        source,
        laravel,
        shipped: 0,
        env,
    };
    site.deploy(args)?;
    site.run(&["migrate", "--force"])?;
    let version = site.run(&["--version", "--no-ansi"])?.trim().to_string();

    let master_log = host.join("master.log");
    let mut master = site
        .artisan(&["drover"])
        .stdin(Stdio::null())
        .stdout(File::create(&master_log)?)
        .stderr(File::create(&master_log)?)
        .spawn()?;
    let master_pid = master.id() as i32;
    tokio::time::sleep(Duration::from_secs(5)).await;

    let stop = host.join("stop-producer");
    let dispatched_log = host.join("dispatched.txt");
    let mut producer: Child = site
        .artisan(&["app:eval", PRODUCER_PHP])
        .env("SOAK_RATE", rate.to_string())
        .env("SOAK_STOP", &stop)
        .stdin(Stdio::null())
        .stdout(File::create(&dispatched_log)?)
        .stderr(File::create(host.join("producer.log"))?)
        .spawn()?;

    println!(
        "soak on {version}: {rate} jobs/s for {} min, {} workers (max_jobs {}), a deploy every {:?}, pg_ctl restart at {:?}, snapshots held {:?} at {:?} and {:?}",
        args.minutes,
        args.processes,
        args.max_jobs,
        tenth,
        total / 2,
        hold,
        total / 4,
        total * 5 / 8
    );
    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut next_sample = Duration::from_secs(args.sample);
    let mut next_deploy = tenth;
    let mut restarted = false;
    let mut snapshots: Vec<Duration> = vec![total / 4, total * 5 / 8];
    let mut holding: Option<(tokio_postgres::Client, Instant)> = None;
    let mut released_at: Vec<Duration> = Vec::new();
    let mut events: Vec<String> = Vec::new();
    let mut admin = admin;
    admin
        .batch_execute("SELECT pg_stat_statements_reset()")
        .await
        .ok();
    let mut last_sample_at = Instant::now();
    while start.elapsed() < total {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = start.elapsed();
        let at = |d: Duration| format!("{:.1} min", d.as_secs_f64() / 60.0);
        if now >= next_deploy && now + tenth / 2 < total {
            next_deploy += tenth;
            let release = site.deploy(args)?;
            site.run(&["drover:restart"])?;
            events.push(format!(
                "{}: deployed release {release}, drover:restart",
                at(now)
            ));
        }
        if !restarted && now >= total / 2 {
            restarted = true;
            let t = Instant::now();
            pg_ctl(&data_dir, &["restart", "-m", "fast", "-l", "/dev/null"])?;
            events.push(format!(
                "{}: pg_ctl restart -m fast ({:.1} s)",
                at(now),
                t.elapsed().as_secs_f64()
            ));
            admin = connect::connect_once(&url).await?;
        }
        if holding.is_none() && snapshots.first().is_some_and(|s| now >= *s) {
            snapshots.remove(0);
            let report = connect::connect_once(&url).await?;
            report
                .batch_execute(
                    "SET application_name = 'soak report'; BEGIN ISOLATION LEVEL REPEATABLE READ;
                     SELECT count(*) FROM drover.jobs;",
                )
                .await?;
            holding = Some((report, Instant::now()));
            events.push(format!(
                "{}: a report holds a snapshot for {:?}",
                at(now),
                hold
            ));
        }
        if let Some((report, since)) = &holding {
            if since.elapsed() >= hold {
                report.batch_execute("COMMIT").await.ok();
                holding = None;
                released_at.push(now);
                events.push(format!("{}: the report ends", at(now)));
            }
        }
        if now >= next_sample {
            next_sample += Duration::from_secs(args.sample);
            let s = sample(&admin, master_pid, now, last_sample_at.elapsed()).await;
            last_sample_at = Instant::now();
            match s {
                Ok(s) => {
                    println!("{}", row(&s));
                    samples.push(s);
                }
                Err(e) => println!("sample at {}: {e}", at(now)),
            }
        }
    }
    if let Some((report, _)) = holding.take() {
        report.batch_execute("COMMIT").await.ok();
    }
    std::fs::write(&stop, "")?;
    let _ = producer.wait();
    // Drain: everything dispatched has run (delayed jobs are due within 30 s).
    let drain_deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let left: i64 = admin
            .query_one(
                "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.group_jobs)
                      + (SELECT count(*) FROM drover.limit_waiting)",
                &[],
            )
            .await?
            .get(0);
        if left == 0 || Instant::now() > drain_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The compactor gives a drained table back once it is empty (after a pass).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let end = admin
        .query_one(
            "SELECT pg_database_size(current_database())::float8 / 1048576,
                    (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c
                      WHERE c.relnamespace = 'drover'::regnamespace AND c.relkind = 'r'
                        AND c.relname NOT IN ('metrics', 'failed_jobs', 'recent_jobs', 'schedule_runs'))::float8 / 1048576",
            &[],
        )
        .await?;
    let (db_end_mib, drover_end_mib): (f64, f64) = (end.get(0), end.get(1));
    let terminated = site.run(&["drover:terminate"]);
    let exit = master.wait()?;

    // The records.
    let dispatched: Vec<(i32, String)> = std::fs::read_to_string(&dispatched_log)?
        .lines()
        .filter_map(|l| {
            let (seq, kind) = l.split_once(' ')?;
            Some((seq.parse().ok()?, kind.to_string()))
        })
        .collect();
    let failing: Vec<i32> = dispatched
        .iter()
        .filter(|d| d.1 == "fail")
        .map(|d| d.0)
        .collect();
    let to_finish: Vec<i32> = dispatched
        .iter()
        .filter(|d| d.1 != "fail")
        .map(|d| d.0)
        .collect();
    let finished: std::collections::HashMap<i32, i64> = admin
        .query(
            "SELECT seq, count(*) FROM public.runs WHERE event = 'finish' GROUP BY seq",
            &[],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let lost: Vec<i32> = to_finish
        .iter()
        .filter(|s| !finished.contains_key(s))
        .copied()
        .collect();
    let doubled: Vec<i32> = finished
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(s, _)| *s)
        .collect();
    // Two executions of one job overlap when an attempt finished after a later one started.
    let overlapping: i64 = admin
        .query_one(
            "SELECT count(*) FROM public.runs AS a JOIN public.runs AS b
               ON a.seq = b.seq AND a.event = 'start' AND b.event = 'start' AND b.attempt > a.attempt
             JOIN public.runs AS f ON f.seq = a.seq AND f.attempt = a.attempt AND f.event = 'finish'
             WHERE f.at > b.at",
            &[],
        )
        .await?
        .get(0);
    let failed_logged: i64 = admin
        .query_one("SELECT count(*) FROM public.failed_jobs", &[])
        .await?
        .get(0);
    let left: i64 = admin
        .query_one("SELECT count(*) FROM drover.jobs", &[])
        .await?
        .get(0);
    let master_text = std::fs::read_to_string(&master_log).unwrap_or_default();
    let panicked = master_text.contains("panicked");
    drop(admin);
    pg_ctl(&data_dir, &["stop", "-m", "fast"]).ok();
    drop(pg);

    // The report.
    let warm = samples
        .iter()
        .filter(|s| s.minute >= args.minutes as f64 / 6.0)
        .cloned()
        .collect::<Vec<_>>();
    let series = |f: &dyn Fn(&Sample) -> f64| -> (f64, f64, f64) {
        let pts: Vec<(f64, f64)> = warm.iter().map(|s| (s.minute, f(s))).collect();
        let (slope, noise) = fit(&pts);
        let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len().max(1) as f64;
        (slope, noise, mean)
    };
    let mut out = String::new();
    writeln!(out, "## Soak on {version}\n")?;
    writeln!(
        out,
        "`cargo run --release -p drover-bench --bin soak -- --laravel {laravel} --minutes {}` on this machine (2 cores, PostgreSQL 15 embedded, fsync on): {rate} jobs/s open loop (half of {} workers' capacity at the mix's mean run time of {:.0} ms), 80 % 10-100 ms, 19 % 100-1000 ms, 1 % failing for good; 5 % delayed 1-30 s, 5 % in ten ordered groups, 5 % under a concurrency limit of 2; `max_jobs` {}. Sampled every {} s.\n",
        args.minutes, args.processes, MEAN_RUN_SECS * 1000.0, args.max_jobs, args.sample
    )?;
    writeln!(out, "Events:\n")?;
    for e in &events {
        writeln!(out, "- {e}")?;
    }
    writeln!(
        out,
        "\n| min | master PSS KiB (anon) | lease guard KiB | zygote KiB | worker KiB (mean, n) | master fds | claims | claim mean / max ms | pickup p50 / p99 ms | db / drover MiB | dead tuples | oldest snapshot s |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for s in &samples {
        writeln!(out, "{}", row(s))?;
    }
    let mut ok = true;
    let mut verdicts = Vec::new();
    for (name, f, unit) in [
        (
            "master heap (Pss_Anon)",
            &(|s: &Sample| s.master_anon_kib as f64) as &dyn Fn(&Sample) -> f64,
            "KiB",
        ),
        ("lease guard PSS", &|s: &Sample| s.guard_kib as f64, "KiB"),
        ("zygote PSS", &|s: &Sample| s.zygote_kib as f64, "KiB"),
        (
            "worker PSS (mean)",
            &|s: &Sample| s.worker_kib as f64,
            "KiB",
        ),
        ("master fds", &|s: &Sample| s.master_fds as f64, ""),
    ] {
        let (slope, noise, mean) = series(f);
        let span = (warm.last().map_or(0.0, |s| s.minute) - warm.first().map_or(0.0, |s| s.minute))
            .max(1.0);
        // Flat: what the slope adds over the measured span is within twice the noise around it.
        let flat = (slope * span).abs() <= 2.0 * noise.max(1.0);
        ok &= flat;
        verdicts.push(format!(
            "- {name}: mean {mean:.0} {unit}, slope {slope:+.2} {unit}/min over {span:.0} min against noise {noise:.1} {unit}: {}",
            if flat { "flat" } else { "GROWS" }
        ));
    }
    // The master's whole PSS, reported: its binary's pages become resident as code paths are
    // first used (the first deploy, restart, held snapshot), so it steps up and then stays; a
    // leak is judged on its heap above.
    {
        let (slope, noise, mean) = series(&|s: &Sample| s.master_kib as f64);
        verdicts.push(format!(
            "- master PSS (heap and the binary's resident pages; not judged): mean {mean:.0} KiB, slope {slope:+.2} KiB/min against noise {noise:.1} KiB"
        ));
    }
    let base_db = samples.first().map_or(0.0, |s| s.db_mib);
    // drover's tables at their largest in the warm-up, the baseline their size returns to.
    let drover_base = samples
        .iter()
        .filter(|s| s.minute < args.minutes as f64 / 6.0)
        .map(|s| s.drover_mib)
        .fold(0.0, f64::max);
    let size_back = drover_end_mib <= drover_base * 1.25 + 0.5;
    ok &= size_back;
    // Claims after each snapshot's release: back to the baseline (the median claim's mean
    // before the first snapshot, +50 %, at least +0.1 ms) in the first sample a minute after.
    let mut before: Vec<f64> = samples
        .iter()
        .filter(|s| {
            s.minute * 60.0 < (total / 4).as_secs_f64() && s.minute >= args.minutes as f64 / 6.0
        })
        .map(|s| s.claim_mean_ms)
        .collect();
    before.sort_by(f64::total_cmp);
    let baseline = before.get(before.len() / 2).copied().unwrap_or(0.0);
    let mut recovered = Vec::new();
    for released in &released_at {
        let after = samples
            .iter()
            .find(|s| s.minute * 60.0 >= released.as_secs_f64() + 60.0)
            .map(|s| s.claim_mean_ms);
        let back = after.is_none_or(|a| a <= (baseline * 1.5).max(baseline + 0.1));
        ok &= back;
        recovered.push(format!(
            "- a snapshot released at {:.1} min: claim mean {} ms a minute later, baseline {baseline:.2} ms: {}",
            released.as_secs_f64() / 60.0,
            after.map_or("-".into(), |a| format!("{a:.2}")),
            match (after, back) {
                (None, _) => "not measured (the run ended within a minute of it)",
                (_, true) => "back",
                (_, false) => "NOT BACK",
            }
        ));
    }
    writeln!(out, "\nAfter the warm-up (the first sixth):\n")?;
    for v in &verdicts {
        writeln!(out, "{v}")?;
    }
    let correct = lost.is_empty() && doubled.is_empty() && overlapping == 0 && left == 0;
    ok &= correct && !panicked && exit.success() && terminated.is_ok();
    writeln!(
        out,
        "\nJobs: {} dispatched ({} to fail on purpose, {} logged in failed_jobs); lost {}, doubled {}, overlapping {}, left in drover.jobs {}{}{}.",
        dispatched.len(),
        failing.len(),
        failed_logged,
        lost.len(),
        doubled.len(),
        overlapping,
        left,
        if lost.is_empty() { String::new() } else { format!(" (lost: {:?})", &lost[..lost.len().min(20)]) },
        if doubled.is_empty() { String::new() } else { format!(" (doubled: {:?})", &doubled[..doubled.len().min(20)]) },
    )?;
    for r in &recovered {
        writeln!(out, "{r}")?;
    }
    writeln!(
        out,
        "\nDatabase: {base_db:.1} MiB at the first sample, {db_end_mib:.1} MiB at the end (with the application's tables: `runs` and `failed_jobs` keep every job's records); drover's queue tables {drover_base:.1} MiB at their largest in the warm-up, {drover_end_mib:.1} MiB drained at the end: {}. The master exited {exit}{}.",
        if size_back { "back" } else { "NOT BACK" },
        if panicked { "; its log has a panic" } else { "" }
    )?;
    Ok((out, ok))
}

async fn sample(
    admin: &tokio_postgres::Client,
    master: i32,
    now: Duration,
    since: Duration,
) -> anyhow::Result<Sample> {
    let mut s = Sample {
        minute: now.as_secs_f64() / 60.0,
        master_kib: pss_kib(master),
        master_anon_kib: smaps_kib(master, "Pss_Anon:"),
        master_fds: fds(master),
        ..Sample::default()
    };
    let mut workers = Vec::new();
    for pid in descendants(master) {
        let cmd = cmdline(pid);
        if cmd.contains("lease-guard") {
            s.guard_kib = pss_kib(pid);
        } else if cmd.contains("(drover zygote)") {
            s.zygote_kib = pss_kib(pid);
        } else if cmd.contains("php") {
            workers.push(pss_kib(pid));
        }
    }
    s.workers = workers.len();
    s.worker_kib = workers.iter().sum::<u64>() / workers.len().max(1) as u64;
    let claims = admin
        .query_one(
            "SELECT coalesce(sum(calls), 0)::int8, coalesce(sum(total_exec_time) / nullif(sum(calls), 0), 0),
                    coalesce(max(max_exec_time), 0)
               FROM pg_stat_statements
              WHERE query LIKE '-- Delete the completed jobs%' OR query LIKE '-- The claim of a fair queue%'
                 OR query LIKE '-- claim.sql from a cursor%'",
            &[],
        )
        .await?;
    s.claims = claims.get(0);
    s.claim_mean_ms = claims.get(1);
    s.claim_max_ms = claims.get(2);
    admin
        .batch_execute("SELECT pg_stat_statements_reset()")
        .await?;
    let minutes = (since.as_secs_f64() / 60.0).ceil().max(1.0) as i32;
    let rows = admin
        .query(
            "SELECT (b->>0)::float8, sum((b->>1)::int8)::int8 FROM drover.metrics,
                    jsonb_array_elements(wait->'buckets') AS b
              WHERE minute >= date_trunc('minute', now()) - make_interval(mins => $1)
              GROUP BY 1",
            &[&minutes],
        )
        .await?;
    let buckets: Vec<(f64, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    s.pickup_p50_ms = percentile(&buckets, 0.5);
    s.pickup_p99_ms = percentile(&buckets, 0.99);
    let row = admin
        .query_one(
            "SELECT pg_database_size(current_database())::float8 / 1048576,
                    (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c
                      WHERE c.relnamespace = 'drover'::regnamespace AND c.relkind = 'r'
                        AND c.relname NOT IN ('metrics', 'failed_jobs', 'recent_jobs', 'schedule_runs'))::float8 / 1048576,
                    coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'drover.jobs'::regclass), 0),
                    coalesce((SELECT max(extract(epoch FROM now() - xact_start)) FROM pg_stat_activity
                               WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()), 0)::float8",
            &[],
        )
        .await?;
    s.db_mib = row.get(0);
    s.drover_mib = row.get(1);
    s.dead_tuples = row.get(2);
    s.oldest_snapshot_secs = row.get(3);
    Ok(s)
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}

fn row(s: &Sample) -> String {
    format!(
        "| {:.1} | {} ({}) | {} | {} | {} ({}) | {} | {} | {:.2} / {:.1} | {} / {} | {:.1} / {:.1} | {} | {:.0} |",
        s.minute,
        s.master_kib,
        s.master_anon_kib,
        s.guard_kib,
        s.zygote_kib,
        s.worker_kib,
        s.workers,
        s.master_fds,
        s.claims,
        s.claim_mean_ms,
        s.claim_max_ms,
        opt(s.pickup_p50_ms),
        opt(s.pickup_p99_ms),
        s.db_mib,
        s.drover_mib,
        s.dead_tuples,
        s.oldest_snapshot_secs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_series_has_no_slope_and_a_growing_one_does() {
        let flat: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64, 100.0 + (i % 2) as f64))
            .collect();
        let (slope, noise) = fit(&flat);
        assert!(slope.abs() < 0.2 && noise < 1.0, "{slope} {noise}");
        let growing: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64, 100.0 + 5.0 * i as f64))
            .collect();
        assert!((fit(&growing).0 - 5.0).abs() < 1e-9);
    }

    #[test]
    fn percentiles_come_from_the_merged_buckets() {
        let b = [(10.0, 49), (1.0, 50), (1000.0, 1)];
        assert_eq!(percentile(&b, 0.5), Some(1.0));
        assert_eq!(percentile(&b, 0.99), Some(10.0));
        assert_eq!(percentile(&b, 1.0), Some(1000.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
