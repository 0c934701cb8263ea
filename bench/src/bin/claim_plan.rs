//! claim_plan: how fast a burst committed in one transaction drains before PostgreSQL has
//! statistics that describe it, and after `ANALYZE`.
//!
//! Each phase starts a private PostgreSQL (the broker's [`EmbeddedPostgres`], autovacuum off so
//! that no autoanalyze changes the plan during the measurement) and a [`Broker`], which claims a
//! few times from the empty queue as an idle master does (so its prepared claim statement is
//! planned before the burst). Then, by phase:
//!
//! - `fresh`: a new table, never analyzed;
//! - `steady`: statistics from steady traffic, as autoanalyze leaves them: taken while the table
//!   held a few hundred jobs, all leased (then acked);
//! - `analyzed`: `ANALYZE drover.jobs` after the burst (the rate to match).
//!
//! It inserts `--jobs` rows in one transaction, prints `EXPLAIN (ANALYZE, BUFFERS)` of the claim
//! statement (its 1st execution, a custom plan, and its 6th, the plan a prepared statement may
//! settle on), then drains the queue as the master does — `Broker::claim` of `--batch` jobs,
//! `Broker::settle` of their acks — and prints jobs/s for each second.
//!
//! ```sh
//! cargo run --release -p drover-bench --bin claim_plan                   # 200,000 jobs, all phases
//! cargo run --release -p drover-bench --bin claim_plan -- --seconds 10 --phases fresh
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use drover_broker::{
    connect, Broker, BrokerConfig, EmbeddedConfig, EmbeddedPostgres, Lease, LeasedJob, Settle,
    SystemClock,
};

#[derive(Parser)]
#[command(about = "Drain rate of a burst of jobs before and after ANALYZE of drover.jobs")]
struct Args {
    /// Jobs inserted in one transaction.
    #[arg(long, default_value_t = 200_000)]
    jobs: i64,
    /// Jobs per claim (the master claims up to its free credit; 256 here).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Stop a phase's drain after this many seconds (the queue may not be empty by then).
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Bytes of each job's payload (a Laravel payload is a few hundred).
    #[arg(long, default_value_t = 600)]
    payload_bytes: i64,
    /// fsync of the private cluster (on, as in production).
    #[arg(long, default_value = "on")]
    fsync: String,
    /// Which phases: `fresh` (no statistics yet), `steady` (statistics of a few leased jobs),
    /// `analyzed` (after ANALYZE drover.jobs).
    #[arg(long, value_delimiter = ',', default_values_t = vec!["fresh".to_string(), "steady".to_string(), "analyzed".to_string()])]
    phases: Vec<String>,
    /// Claims the master makes on the empty queue before the burst arrives (wake-ups, the
    /// fallback poll): its prepared claim statement is planned before the burst.
    #[arg(long, default_value_t = 10)]
    idle_claims: usize,
    /// Skip the EXPLAIN output.
    #[arg(long)]
    no_explain: bool,
}

/// `PREPARE` of the claim statement as the broker prepares it (`drover_broker::queries::claim`) with its parameter types, and the arguments of one `EXECUTE`: as
/// the broker binds them (production clock: no time given, the database's own).
fn prepare_claim() -> String {
    format!(
        "PREPARE bench_claim(bigint, double precision, text, timestamptz, bigint) AS {}",
        drover_broker::queries::claim().trim().trim_end_matches(';')
    )
}

fn execute_claim(node: i64, lease: Duration, batch: usize) -> String {
    format!(
        "EXECUTE bench_claim({node}, {}, 'default', NULL, {batch})",
        lease.as_secs_f64()
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "claim_plan: {} jobs in one transaction, claims of {}, acks settled after each claim, fsync={}, up to {} s per phase",
        args.jobs, args.batch, args.fsync, args.seconds
    );
    let mut summaries = Vec::new();
    for phase in &args.phases {
        let phase = match phase.as_str() {
            "fresh" => Phase::Fresh,
            "steady" => Phase::Steady,
            "analyzed" => Phase::Analyzed,
            other => anyhow::bail!("unknown phase {other:?}: fresh, steady or analyzed"),
        };
        summaries.push((phase.name(), run_phase(&args, phase).await?));
    }
    println!("\nsummary: jobs/s in each full second of the drain");
    for (phase, rates) in &summaries {
        let first: Vec<String> = rates.iter().take(12).map(|r| format!("{r:.0}")).collect();
        let mean = if rates.is_empty() {
            0.0
        } else {
            rates.iter().sum::<f64>() / rates.len() as f64
        };
        println!(
            "  {phase:<8} [{}], mean over {} s: {mean:.0}",
            first.join(", "),
            rates.len()
        );
    }
    Ok(())
}

/// What PostgreSQL knows about `drover.jobs` when the burst is claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Never analyzed.
    Fresh,
    /// Analyzed while it held a few leased jobs, as autoanalyze does under steady traffic.
    Steady,
    /// Analyzed after the burst.
    Analyzed,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Fresh => "fresh",
            Phase::Steady => "steady",
            Phase::Analyzed => "analyzed",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Phase::Fresh => "no statistics (never analyzed)",
            Phase::Steady => "statistics of steady traffic (300 jobs, all leased, when analyzed)",
            Phase::Analyzed => "after ANALYZE",
        }
    }
}

/// One phase on a cluster of its own; returns jobs/s for each full second of the drain.
async fn run_phase(args: &Args, phase: Phase) -> anyhow::Result<Vec<f64>> {
    println!("\n=== phase: {}", phase.label());
    let dir = tempfile::Builder::new()
        .prefix("drover-claim-plan-")
        .tempdir_in("/tmp")?;
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let mut config = EmbeddedConfig::new(dir.path().join("state"));
    config.settings.push(("fsync".into(), args.fsync.clone()));
    // No autoanalyze during the measurement: the phase decides whether statistics exist.
    config.settings.push(("autovacuum".into(), "off".into()));
    let pg = EmbeddedPostgres::start(&config)
        .await
        .context("starting PostgreSQL")?;
    let broker_config = BrokerConfig::new(pg.url());
    let lease = broker_config.lease;
    let broker = Broker::start(broker_config, Arc::new(SystemClock)).await?;
    let admin = connect::connect_once(pg.url()).await?;
    let queues = vec!["default".to_string()];
    for _ in 0..args.idle_claims {
        anyhow::ensure!(broker.claim(&queues, args.batch).await?.is_empty());
    }
    if phase == Phase::Steady {
        admin
            .batch_execute(
                "INSERT INTO drover.jobs (queue, payload) SELECT 'default', 'steady' FROM generate_series(1, 300)",
            )
            .await?;
        let held = broker.claim(&queues, 300).await?;
        anyhow::ensure!(held.len() == 300);
        admin.batch_execute("ANALYZE drover.jobs").await?;
        broker.settle(&acks(&held)).await?;
        for _ in 0..args.idle_claims {
            anyhow::ensure!(broker.claim(&queues, args.batch).await?.is_empty());
        }
    }

    let started = Instant::now();
    admin
        .batch_execute(&format!(
            "BEGIN;
             INSERT INTO drover.jobs (queue, payload)
                 SELECT 'default', '{{\"uuid\":\"' || g || '\",\"job\":\"' || repeat('x', {}) || '\"}}'
                 FROM generate_series(1, {}) g;
             COMMIT;",
            (args.payload_bytes - 30).max(1),
            args.jobs
        ))
        .await
        .context("inserting the burst")?;
    println!(
        "inserted {} jobs in one transaction in {:.2} s",
        args.jobs,
        started.elapsed().as_secs_f64()
    );
    if phase == Phase::Analyzed {
        let t = Instant::now();
        admin.batch_execute("ANALYZE drover.jobs").await?;
        println!(
            "ANALYZE drover.jobs took {:.0} ms",
            t.elapsed().as_secs_f64() * 1000.0
        );
    }
    let row = admin
        .query_one(
            "SELECT c.reltuples::float8, c.relpages, s.last_analyze IS NOT NULL OR s.last_autoanalyze IS NOT NULL
             FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
             WHERE c.oid = 'drover.jobs'::regclass",
            &[],
        )
        .await?;
    println!(
        "pg_class: reltuples {}, relpages {}; analyzed: {}",
        row.get::<_, f64>(0),
        row.get::<_, i32>(1),
        row.get::<_, bool>(2)
    );
    if !args.no_explain {
        explain(&admin, broker.node(), lease, args.batch).await?;
    }

    let drain_start = Instant::now();
    let mut per_second: Vec<(u64, u64, Duration)> = Vec::new(); // (jobs, claims, time in claims)
    let mut total = 0u64;
    loop {
        let elapsed = drain_start.elapsed();
        if elapsed >= Duration::from_secs(args.seconds) {
            break;
        }
        let t = Instant::now();
        let jobs = broker.claim(&queues, args.batch).await?;
        let claim_time = t.elapsed();
        if jobs.is_empty() {
            break;
        }
        let outcome = broker.settle(&acks(&jobs)).await?;
        anyhow::ensure!(outcome.acked == jobs.len(), "acks lost: {outcome:?}");
        total += jobs.len() as u64;
        let second = drain_start.elapsed().as_secs() as usize;
        if per_second.len() <= second {
            per_second.resize(second + 1, (0, 0, Duration::ZERO));
        }
        let s = &mut per_second[second];
        s.0 += jobs.len() as u64;
        s.1 += 1;
        s.2 += claim_time;
    }
    let drained_in = drain_start.elapsed();
    for (i, (jobs, claims, time)) in per_second.iter().enumerate() {
        let per_claim = if *claims > 0 {
            time.as_secs_f64() * 1000.0 / *claims as f64
        } else {
            0.0
        };
        println!(
            "second {:>2}: {jobs:>6} jobs ({claims} claims, {per_claim:.2} ms per claim)",
            i + 1
        );
    }
    println!(
        "{total} jobs in {:.2} s: {:.0} jobs/s{}",
        drained_in.as_secs_f64(),
        total as f64 / drained_in.as_secs_f64(),
        if total < args.jobs as u64 {
            " (stopped before the queue was empty)"
        } else {
            ""
        }
    );
    // Only full seconds count: the last one is cut short when the queue empties.
    let full = (drained_in.as_secs() as usize).min(per_second.len());
    let rates = per_second[..full].iter().map(|s| s.0 as f64).collect();
    drop(admin);
    drop(broker);
    pg.stop().await;
    Ok(rates)
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of the claim as a prepared statement: its 1st execution (a
/// custom plan) and its 6th (from then on PostgreSQL may use a generic plan, as it does for the
/// broker's prepared statement). Rolled back: nothing stays claimed.
async fn explain(
    admin: &tokio_postgres::Client,
    node: i64,
    lease: Duration,
    batch: usize,
) -> anyhow::Result<()> {
    admin.batch_execute("BEGIN").await?;
    admin.batch_execute(&prepare_claim()).await?;
    for n in 1..=6 {
        let rows = admin
            .query(
                &format!(
                    "EXPLAIN (ANALYZE, BUFFERS) {}",
                    execute_claim(node, lease, batch)
                ),
                &[],
            )
            .await?;
        if n == 1 || n == 6 {
            println!("EXPLAIN (ANALYZE, BUFFERS) of the claim, execution {n}:");
            for r in rows {
                println!("  | {}", r.get::<_, String>(0));
            }
        }
    }
    admin
        .batch_execute("ROLLBACK; DEALLOCATE bench_claim")
        .await?;
    Ok(())
}

/// An ack for each of these jobs, as the master settles finished ones.
fn acks(jobs: &[LeasedJob]) -> Vec<Settle> {
    jobs.iter()
        .map(|j| {
            Settle::Ack(Lease {
                id: j.id,
                token: j.token,
            })
        })
        .collect()
}
