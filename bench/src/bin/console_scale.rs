//! console_scale: the console at scale (issue 41). A Laravel application's dashboard over
//! 1,000,000 pending jobs, 1,000,000 completed ones (the history) and 100,000 failed ones
//! (Laravel's failer), each page and search requested over HTTP from `php artisan serve` and
//! timed end to end (the framework's boot included: an upper bound of server time), against the
//! 300 ms target; then a bulk action over 100,000 jobs while a consumer claims as the master does,
//! with claim time before and during compared against the 20 % target.
//!
//! ```sh
//! cargo build --release -p drover-bench --bin console_scale
//! ./target/release/console_scale                 # Laravel 12, the sizes of the issue
//! ./target/release/console_scale --laravel 8 --pending 100000
//! ```
//! The report goes to stdout and to `bench/results/console_scale.md`.

use std::fmt::Write as _;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use drover_bench::serve;
use drover_broker::{
    connect, Broker, BrokerConfig, EmbeddedConfig, EmbeddedPostgres, Lease, SystemClock,
};

#[derive(Parser)]
#[command(about = "The console's pages and bulk actions over a million jobs")]
struct Args {
    /// 8 or 12.
    #[arg(long, default_value = "12")]
    laravel: u8,
    /// Pending jobs in drover.jobs.
    #[arg(long, default_value_t = 1_000_000)]
    pending: i64,
    /// Completed jobs in the history (drover.recent_jobs).
    #[arg(long, default_value_t = 1_000_000)]
    completed: i64,
    /// Failed jobs in Laravel's failer (failed_jobs).
    #[arg(long, default_value_t = 100_000)]
    failed: i64,
    /// Jobs the bulk action deletes (of one class among the pending).
    #[arg(long, default_value_t = 100_000)]
    bulk: i64,
    /// Timed requests per page (after one to warm up).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// After seeding, serve the dashboard and wait (for looking at plans by hand): prints the
    /// database's URL and the dashboard's address.
    #[arg(long)]
    keep: bool,
}

/// The job classes the seeded payloads carry, the first most common.
const CLASSES: [&str; 10] = [
    "SendInvoice",
    "ChargeCard",
    "SyncCrm",
    "ResizeImage",
    "SendWelcome",
    "ExportReport",
    "IndexSearch",
    "NotifySlack",
    "PruneCarts",
    "Reconcile",
];

/// The seeds: Laravel-shaped payloads (~700 bytes, a serialized command with a customer id and a
/// tag `customer:N` of 5,000 customers).
const SEED: &str = r#"
CREATE OR REPLACE FUNCTION pg_temp.payload(g bigint, cls text) RETURNS text LANGUAGE sql AS $$
  SELECT format('{"uuid":"%s","displayName":"App\\Jobs\\%s","job":"Illuminate\\Queue\\CallQueuedHandler@call","maxTries":3,"maxExceptions":null,"failOnTimeout":false,"backoff":null,"timeout":null,"retryUntil":null,"tags":["customer:%s"],"data":{"commandName":"App\\Jobs\\%s","command":"O:%s:\"App\\Jobs\\%s\":3:{s:8:\"customer\";i:%s;s:7:\"invoice\";s:12:\"INV-%s\";s:4:\"note\";s:300:\"%s\";}"}}',
    md5(g::text)::uuid, cls, g % 5000, cls, 9 + length(cls), cls, g % 5000, lpad((g % 100000000)::text, 8, '0'), repeat('x', 300))
$$;
"#;

fn class_of(g: &str) -> String {
    // The first class takes 10 % (so a bulk action of 100,000 over 1,000,000 finds them), the
    // rest share the others.
    let list = CLASSES
        .iter()
        .map(|c| format!("'{c}'"))
        .collect::<Vec<_>>()
        .join(",");
    format!("(ARRAY[{list}])[1 + ({g} % 10)]")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = drover_bench::laravel_fixture(&root, args.laravel, "soak/laravel12")?;
    let dir = tempfile::Builder::new()
        .prefix("drover-console-scale-")
        .tempdir_in("/tmp")?;
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let pg = EmbeddedPostgres::start(&EmbeddedConfig::new(dir.path().join("pg")))
        .await
        .context("starting PostgreSQL")?;
    let socket_dir = pg.data_dir().display().to_string();
    let mut admin = connect::connect_once(pg.url()).await?;
    drover_broker::migrate::migrate(&mut admin).await?;
    let host = dir.path().join("host");
    for d in [
        "storage/framework/cache/data",
        "storage/framework/views",
        "storage/framework/sessions",
        "storage/logs",
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
        ("APP_ENV", "local".into()),
        ("APP_DEBUG", "false".into()),
        ("SESSION_DRIVER", "file".into()),
        ("DROVER_HISTORY_MINUTES", "1440".into()),
        ("LOG_CHANNEL", "stderr".into()),
        ("LOG_LEVEL", "error".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let artisan = |a: &[&str]| {
        let mut cmd = Command::new("php");
        cmd.arg(source.join("artisan")).args(a).current_dir(&source);
        for k in ["DATABASE_URL", "DROVER_DATABASE_URL", "DB_CONNECTION"] {
            cmd.env_remove(k);
        }
        cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd
    };
    let out = artisan(&["migrate", "--force"]).output()?;
    if !out.status.success() {
        bail!("migrate: {}", String::from_utf8_lossy(&out.stderr));
    }

    // The seed.
    let t = Instant::now();
    admin.batch_execute(SEED).await?;
    let cls = class_of("g");
    admin
        .batch_execute(&format!(
            "INSERT INTO drover.jobs (queue, payload, created_at, available_at)
             SELECT 'q' || (g % 10), pg_temp.payload(g, {cls}), now() - (g % 3600) * interval '1 s', now() - (g % 3600) * interval '1 s'
             FROM generate_series(1, {}) g;
             INSERT INTO drover.recent_jobs (id, attempt, queue, class, payload, node, hostname, worker_pid, started_at, finished_at, runtime_ms, wait_ms, cpu_ms, memory_kib)
             SELECT 10000000 + g, 1, 'q' || (g % 10), 'App\\Jobs\\' || {cls}, pg_temp.payload(g, {cls}), 1, 'web-' || (g % 3), 1000 + g % 50,
                    now() - (g % 86400) * interval '1 s' - interval '80 ms', now() - (g % 86400) * interval '1 s', 80, 5, 40, 30000
             FROM generate_series(1, {}) g;
             INSERT INTO public.failed_jobs (uuid, connection, queue, payload, exception, failed_at)
             SELECT md5('f' || g)::uuid, 'drover', 'q' || (g % 10), pg_temp.payload(g, {cls}),
                    CASE WHEN g % 4 = 0 THEN 'GuzzleHttp\\Exception\\ConnectException: cURL error 28: Operation timed out' ELSE 'RuntimeException: the API said 503' END || repeat(E'\\n#0 /app/vendor/x.php(10): y()', 30),
                    now() - (g % 604800) * interval '1 s'
             FROM generate_series(1, {}) g;",
            args.pending, args.completed, args.failed
        ))
        .await?;
    for table in ["drover.jobs", "drover.recent_jobs", "public.failed_jobs"] {
        admin
            .batch_execute(&format!("VACUUM ANALYZE {table}"))
            .await?;
    }
    let seeded = t.elapsed();
    let sizes = admin
        .query_one(
            "SELECT pg_total_relation_size('drover.jobs'), pg_total_relation_size('drover.recent_jobs'), pg_total_relation_size('public.failed_jobs')",
            &[],
        )
        .await?;
    let mib = |i: usize| sizes.get::<_, i64>(i) as f64 / 1048576.0;

    let mut report = String::new();
    writeln!(
        report,
        "# console_scale (Laravel {}, {})\n\n{} pending jobs in drover.jobs ({:.0} MiB with indexes), {} completed in drover.recent_jobs ({:.0} MiB), {} failed in failed_jobs ({:.0} MiB); seeded in {:.0} s. PostgreSQL 15 (fsync on, shipped settings), 2 cores. Each page: {} timed requests after one to warm up, over HTTP from `php artisan serve` (one PHP process), end to end: the framework's boot is included, so these are upper bounds of server time. Target: 300 ms.\n",
        args.laravel,
        chrono_free_now(),
        args.pending, mib(0), args.completed, mib(1), args.failed, mib(2), seeded.as_secs_f64(), args.repeat
    )?;

    // The pages.
    let port = serve::free_port()?;
    let mut server = serve::spawn(artisan(&[]), port, File::create(host.join("serve.log"))?)?;
    // `artisan serve` runs PHP's server as its child: the group goes as one.
    let server_group = nix::unistd::Pid::from_raw(server.id() as i32);
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(port, "/drover/actions").map(|r| r.0).unwrap_or(0) != 200 {
        if Instant::now() > deadline {
            let _ = nix::sys::signal::killpg(server_group, nix::sys::signal::Signal::SIGKILL);
            bail!(
                "the dashboard never answered: {}",
                std::fs::read_to_string(host.join("serve.log"))?
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if args.keep {
        println!(
            "database: {}\ndashboard: http://127.0.0.1:{port}/drover\n(waiting; Ctrl-C ends)",
            pg.url()
        );
        tokio::signal::ctrl_c().await?;
        let _ = nix::sys::signal::killpg(server_group, nix::sys::signal::Signal::SIGKILL);
        return Ok(());
    }
    let since = "2026-01-01";
    let pages: Vec<(&str, String)> = vec![
        ("overview", "/drover".into()),
        (
            "pending (50 oldest per queue)",
            "/drover/jobs/pending".into(),
        ),
        ("completed", "/drover/completed".into()),
        ("failed", "/drover/failed".into()),
        (
            "a job class's charts",
            "/drover/class?class=App%5CJobs%5CSendInvoice".into(),
        ),
        (
            "tag page (customer:42)",
            "/drover/tags?tag=customer%3A42".into(),
        ),
        ("audit trail", "/drover/actions".into()),
        (
            "search: pending, no filter",
            "/drover/search?state=pending".into(),
        ),
        (
            "search: pending, one queue",
            "/drover/search?state=pending&queue=q3".into(),
        ),
        (
            "search: pending, a class (10 %)",
            "/drover/search?state=pending&class=SendInvoice".into(),
        ),
        (
            "search: pending, a class in a queue",
            "/drover/search?state=pending&class=ChargeCard&queue=q1".into(),
        ),
        (
            "search: pending, a tag (1 in 5,000)",
            "/drover/search?state=pending&tag=customer%3A42".into(),
        ),
        (
            "search: pending, payload text (1 in 5,000)",
            "/drover/search?state=pending&text=INV-00004242".into(),
        ),
        (
            "search: pending, dispatched in a minute",
            format!(
                "/drover/search?state=pending&since={}&until={}",
                minute_ago(30),
                minute_ago(29)
            ),
        ),
        (
            "search: completed, no filter",
            "/drover/search?state=completed".into(),
        ),
        (
            "search: completed, a class and a host",
            "/drover/search?state=completed&class=SyncCrm&host=web-1".into(),
        ),
        (
            "search: failed, no filter",
            "/drover/search?state=failed".into(),
        ),
        (
            "search: failed, exception text",
            "/drover/search?state=failed&exception=timed+out".into(),
        ),
        (
            "search: failed, a class since a date",
            format!("/drover/search?state=failed&class=ResizeImage&since={since}"),
        ),
        (
            "confirm a bulk delete of a class",
            "/drover/actions/confirm?state=pending&class=SendInvoice&verb=delete".into(),
        ),
    ];
    writeln!(
        report,
        "| page | median ms | max ms | status | count shown |\n|---|---:|---:|---|---|"
    )?;
    let mut over = 0;
    for (name, path) in &pages {
        let _ = get(port, path);
        let mut times = Vec::new();
        let mut status = 0;
        let mut shown = String::new();
        for _ in 0..args.repeat {
            let t = Instant::now();
            let (s, body) = get(port, path)?;
            times.push(t.elapsed());
            status = s;
            shown = count_shown(&body);
        }
        times.sort();
        let median = times[times.len() / 2].as_secs_f64() * 1000.0;
        let max = times[times.len() - 1].as_secs_f64() * 1000.0;
        if max > 300.0 {
            over += 1;
        }
        writeln!(
            report,
            "| {name} | {median:.0} | {max:.0} | {status} | {shown} |"
        )?;
        println!("{name}: median {median:.0} ms, max {max:.0} ms ({status}) {shown}");
    }
    writeln!(
        report,
        "\n{over} of {} pages over 300 ms at their slowest.\n",
        pages.len()
    )?;

    // A bulk action over `bulk` jobs while a consumer claims.
    let broker = Broker::start(BrokerConfig::new(pg.url()), Arc::new(SystemClock)).await?;
    admin
        .batch_execute(
            "INSERT INTO drover.jobs (queue, payload) SELECT 'live', '{\"job\":\"noop\"}' FROM generate_series(1, 200000)",
        )
        .await?;
    // The action as the console's confirmation records it: on what its preview matched (the
    // point it was taken at, after the jobs above committed; docs/dashboard.md, "Only what was
    // previewed").
    admin
        .batch_execute(
            "INSERT INTO drover.console_actions (actor, verb, target, state, upto)
             SELECT 'console_scale', 'delete',
                    jsonb_build_object('search', jsonb_build_object('state', 'pending', 'class', 'SendInvoice'),
                                       'preview', jsonb_build_object('at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),
                                                                     'horizon', txid_snapshot_xmin(txid_current_snapshot())::text,
                                                                     'count', NULL, 'exact', false)),
                    'requested', (SELECT max(id) FROM drover.jobs)::text",
        )
        .await?;
    let action: i64 = admin
        .query_one("SELECT max(id) FROM drover.console_actions", &[])
        .await?
        .get(0);
    let queues = vec!["live".to_string()];
    let claim_for = |secs: u64| {
        let broker = &broker;
        let queues = &queues;
        async move {
            let mut times = Vec::new();
            let mut riding: Vec<Lease> = Vec::new();
            let end = Instant::now() + Duration::from_secs(secs);
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            while Instant::now() < end {
                tick.tick().await;
                let t = Instant::now();
                let claimed = broker.claim_with_acks(queues, 32, &riding).await?;
                times.push(t.elapsed());
                riding = claimed
                    .jobs
                    .iter()
                    .map(|j| Lease {
                        id: j.id,
                        token: j.token,
                    })
                    .collect();
            }
            anyhow::Ok(times)
        }
    };
    let before = claim_for(10).await?;
    let php = format!(
        "$t = microtime(true); $row = (new Drover\\Dashboard\\Actions\\Bulk(Drover\\Dashboard\\DashboardDatabase::connection()))->run({action}); echo json_encode(['secs' => microtime(true) - $t, 'acted' => $row->acted, 'passed' => $row->passed, 'state' => $row->state]);"
    );
    let mut bulk = artisan(&["app:eval", &php])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let during_start = Instant::now();
    let mut during = Vec::new();
    while bulk.try_wait()?.is_none() {
        during.extend(claim_for(1).await?);
    }
    let bulk_secs = during_start.elapsed().as_secs_f64();
    let out = bulk.wait_with_output()?;
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let after = claim_for(10).await?;
    let q = |v: &[Duration], p: f64| {
        let mut v = v.to_vec();
        v.sort();
        v[((v.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
    };
    writeln!(
        report,
        "## A bulk delete of {} jobs while a consumer claims\n\nA consumer claims up to 32 jobs every 10 ms from another queue (200,000 no-op jobs), the previous claim's acks riding, as a master does; meanwhile `Bulk::run` deletes every pending SendInvoice job ({} batches of 500). It said: `{}` ({:.1} s).\n\n| | claims | p50 ms | p90 ms | p99 ms |\n|---|---:|---:|---:|---:|\n| before | {} | {:.2} | {:.2} | {:.2} |\n| during | {} | {:.2} | {:.2} | {:.2} |\n| after | {} | {:.2} | {:.2} | {:.2} |\n\nClaims drift slower as the consumer's queue churns (dead tuples, autovacuum), bulk action or not, so the during-run is compared with the runs on either side of it (A-B-A): during / mean(before, after), p50: {:.2}×, p99: {:.2}× (target: at most 1.20×). Against before alone, p50: {:.2}×.",
        args.bulk,
        (args.pending / 10 + 499) / 500,
        said.trim(),
        bulk_secs,
        before.len(), q(&before, 0.5), q(&before, 0.9), q(&before, 0.99),
        during.len(), q(&during, 0.5), q(&during, 0.9), q(&during, 0.99),
        after.len(), q(&after, 0.5), q(&after, 0.9), q(&after, 0.99),
        q(&during, 0.5) / ((q(&before, 0.5) + q(&after, 0.5)) / 2.0),
        q(&during, 0.99) / ((q(&before, 0.99) + q(&after, 0.99)) / 2.0),
        q(&during, 0.5) / q(&before, 0.5),
    )?;
    let _ = nix::sys::signal::killpg(server_group, nix::sys::signal::Signal::SIGKILL);
    let _ = server.wait();
    println!("{report}");
    std::fs::write(root.join("bench/results/console_scale.md"), &report)?;
    drop(pg);
    Ok(())
}

/// What the page says it counted ("31 jobs match", "More than 10,000 jobs match", "Not counted").
fn count_shown(body: &str) -> String {
    let Some(start) = body.find("<p id=\"count\"><b>") else {
        return String::new();
    };
    let rest = &body[start + 17..];
    let end = rest.find("</b>").unwrap_or(rest.len());
    let text = rest[..end].trim();
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(60)
        .collect()
}

fn minute_ago(minutes: i64) -> String {
    let out = Command::new("date")
        .args(["-d", &format!("{minutes} minutes ago"), "+%Y-%m-%d %H:%M"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    out.replace(' ', "+").replace(':', "%3A")
}

fn chrono_free_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// GET `path` of the dashboard: (status, body).
fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    serve::get(port, path, Duration::from_secs(60))
}
