//! held_snapshot: claim time while another session holds a snapshot that keeps PostgreSQL's
//! horizon back (a report in REPEATABLE READ, a `pg_dump`, an idle-in-transaction request).
//!
//! Every settled job leaves dead index entries and a dead heap tuple that VACUUM may not remove
//! while the snapshot is held; a claim that reads an index in its order walks past all of them.
//! This starts a private PostgreSQL (fsync on, autovacuum as shipped), an open-loop producer of
//! `--rate` jobs/s (one INSERT every 20 ms) and a consumer that claims as the master does —
//! `Broker::claim_with_acks`, the previous claim's jobs acked riding on the next, every
//! `--every-ms` — and a third session that holds a REPEATABLE READ snapshot from `--hold-at` for
//! `--hold` seconds. Every `--sample` seconds it prints claim time p50/p99, index tuples read per
//! claim, dead tuples, the table's size and the oldest snapshot's age.
//!
//! ```sh
//! cargo run --release -p drover-bench --bin held_snapshot                      # 500 jobs/s, 5-minute hold
//! cargo run --release -p drover-bench --bin held_snapshot -- --hold 60 --after 60
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use drover_broker::{
    connect, Broker, BrokerConfig, EmbeddedConfig, EmbeddedPostgres, Lease, SystemClock,
};

#[derive(Parser)]
#[command(about = "Claim time at a steady rate while another session holds a snapshot")]
struct Args {
    /// Jobs enqueued per second (open loop, one INSERT every 20 ms).
    #[arg(long, default_value_t = 500.0)]
    rate: f64,
    /// Milliseconds between claims (the master claims on each wake-up; 10 ms is 100 claims/s).
    #[arg(long, default_value_t = 10)]
    every_ms: u64,
    /// Jobs per claim at most.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Seconds of traffic before the snapshot is taken.
    #[arg(long, default_value_t = 60)]
    hold_at: u64,
    /// Seconds the snapshot is held.
    #[arg(long, default_value_t = 300)]
    hold: u64,
    /// Seconds of traffic after the snapshot is released.
    #[arg(long, default_value_t = 120)]
    after: u64,
    /// Seconds per printed sample.
    #[arg(long, default_value_t = 10)]
    sample: u64,
    /// Also print, per sample, the three statements that touched the most buffers
    /// (pg_stat_statements): what a slow claim spends its time on.
    #[arg(long)]
    statements: bool,
    /// Bytes of each job's payload.
    #[arg(long, default_value_t = 600)]
    payload_bytes: usize,
}

/// Per-sample counters.
#[derive(Default)]
struct Sample {
    /// Each claim's time.
    claims: Vec<Duration>,
    /// Jobs leased.
    jobs: u64,
    /// Largest wait of a leased job (enqueue to claim).
    max_wait: Duration,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::Builder::new()
        .prefix("drover-held-snapshot-")
        .tempdir_in("/tmp")?;
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let mut config = EmbeddedConfig::new(dir.path().join("state"));
    if args.statements {
        config.settings.push((
            "shared_preload_libraries".into(),
            "pg_stat_statements".into(),
        ));
    }
    let pg = EmbeddedPostgres::start(&config)
        .await
        .context("starting PostgreSQL")?;
    let broker = Broker::start(BrokerConfig::new(pg.url()), Arc::new(SystemClock)).await?;
    let admin = connect::connect_once(pg.url()).await?;
    let producer = connect::connect_once(pg.url()).await?;
    let holder = connect::connect_once(pg.url()).await?;
    if args.statements {
        admin
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .await?;
    }
    println!(
        "held_snapshot: {} jobs/s enqueued, a claim of up to {} every {} ms (acks riding), a REPEATABLE READ snapshot held {} s from {} s, {} s after; PostgreSQL 15, fsync on, autovacuum as shipped",
        args.rate, args.batch, args.every_ms, args.hold, args.hold_at, args.after
    );

    let total = Duration::from_secs(args.hold_at + args.hold + args.after);
    let start = Instant::now();
    let per_tick = args.rate / 50.0;
    let payload = format!(
        "{{\"job\":\"{}\"}}",
        "x".repeat(args.payload_bytes.saturating_sub(12))
    );
    let produce = tokio::spawn(async move {
        let mut owed = 0.0f64;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        while start.elapsed() < total {
            tick.tick().await;
            owed += per_tick;
            let n = owed.floor() as i64;
            owed -= n as f64;
            if n > 0 {
                producer
                    .execute(
                        "INSERT INTO drover.jobs (queue, payload) SELECT 'default', $1 FROM generate_series(1, $2::int8)",
                        &[&payload, &n],
                    )
                    .await?;
            }
        }
        anyhow::Ok(())
    });

    let sample_len = Duration::from_secs(args.sample);
    let queues = vec!["default".to_string()];
    let mut sample = Sample::default();
    let mut sample_start = Instant::now();
    let mut previous = stats(&admin).await?;
    let mut riding: Vec<Lease> = Vec::new();
    let mut held = false;
    let mut tick = tokio::time::interval(Duration::from_millis(args.every_ms));
    println!(
        "{:>5} {:>7} {:>8} {:>8} {:>8} {:>12} {:>10} {:>9} {:>9}  snapshot",
        "s",
        "claims",
        "jobs/s",
        "p50 ms",
        "p99 ms",
        "idx tup/claim",
        "dead tup",
        "size MiB",
        "wait max"
    );
    while start.elapsed() < total {
        tick.tick().await;
        if produce.is_finished() {
            break;
        }
        let at = start.elapsed().as_secs();
        if !held && at >= args.hold_at && at < args.hold_at + args.hold {
            holder
                .batch_execute(
                    "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM drover.nodes",
                )
                .await?;
            held = true;
        } else if held && at >= args.hold_at + args.hold {
            holder.batch_execute("COMMIT").await?;
            held = false;
        }
        let t = Instant::now();
        let claimed = broker.claim_with_acks(&queues, args.batch, &riding).await?;
        sample.claims.push(t.elapsed());
        sample.jobs += claimed.jobs.len() as u64;
        riding = claimed
            .jobs
            .iter()
            .map(|j| Lease {
                id: j.id,
                token: j.token,
            })
            .collect();
        for j in &claimed.jobs {
            sample.max_wait = sample.max_wait.max(j.waited);
        }
        if sample_start.elapsed() >= sample_len {
            let now = stats(&admin).await?;
            sample.claims.sort();
            let q = |p: f64| {
                let i = ((sample.claims.len() as f64 - 1.0) * p).round() as usize;
                sample.claims[i].as_secs_f64() * 1000.0
            };
            let n = sample.claims.len() as f64;
            println!(
                "{:>5} {:>7} {:>8.0} {:>8.2} {:>8.2} {:>12.0} {:>10} {:>9.1} {:>8.0}ms  {}",
                start.elapsed().as_secs(),
                sample.claims.len(),
                sample.jobs as f64 / sample_start.elapsed().as_secs_f64(),
                q(0.5),
                q(0.99),
                (now.idx_tup_read - previous.idx_tup_read) as f64 / n,
                now.dead,
                now.bytes as f64 / 1048576.0,
                sample.max_wait.as_secs_f64() * 1000.0,
                if held {
                    format!("held, xmin age {}", now.xmin_age)
                } else {
                    "-".to_string()
                }
            );
            if args.statements {
                print_statements(&admin).await?;
            }
            previous = now;
            sample = Sample::default();
            sample_start = Instant::now();
        }
    }
    produce.await??;
    if held {
        holder.batch_execute("COMMIT").await?;
    }
    drop(broker);
    pg.stop().await;
    Ok(())
}

/// The three statements that touched the most buffers since the last call, then a reset.
async fn print_statements(admin: &tokio_postgres::Client) -> anyhow::Result<()> {
    let rows = admin
        .query(
            "SELECT calls, (shared_blks_hit + shared_blks_read)::int8, total_exec_time,
                    CASE WHEN query LIKE '%cursor AS MATERIALIZED%' THEN 'claim_from.sql'
                         WHEN query LIKE '%leased AS (%' THEN 'claim.sql'
                         ELSE left(regexp_replace(regexp_replace(query, '--[^\\n]*\\n', '', 'g'), '\\s+', ' ', 'g'), 120) END
             FROM pg_stat_statements ORDER BY shared_blks_hit + shared_blks_read DESC LIMIT 3",
            &[],
        )
        .await?;
    for r in rows {
        let calls: i64 = r.get(0);
        let blocks: i64 = r.get(1);
        let ms: f64 = r.get(2);
        let query: String = r.get(3);
        let per = |v: f64| v / calls.max(1) as f64;
        println!(
            "        {calls:>6} calls {:>9.0} blocks/call {:>7.2} ms/call  {}",
            per(blocks as f64),
            per(ms),
            query
        );
    }
    admin
        .batch_execute("SELECT pg_stat_statements_reset()")
        .await?;
    Ok(())
}

/// What the catalog says about `drover.jobs` now.
struct Stats {
    /// Index tuples read from all of its indexes since the cluster started.
    idx_tup_read: i64,
    /// Dead tuples in its heap (as the statistics collector counts them).
    dead: i64,
    /// Its size with indexes and TOAST.
    bytes: i64,
    /// The age in transactions of the oldest snapshot another session holds.
    xmin_age: i32,
}

async fn stats(admin: &tokio_postgres::Client) -> anyhow::Result<Stats> {
    let row = admin
        .query_one(
            "SELECT (SELECT sum(idx_tup_read)::int8 FROM pg_stat_user_indexes WHERE relid = 'drover.jobs'::regclass),
                    (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'drover.jobs'::regclass),
                    pg_total_relation_size('drover.jobs'),
                    coalesce((SELECT max(age(backend_xmin)) FROM pg_stat_activity WHERE pid <> pg_backend_pid()), 0)",
            &[],
        )
        .await?;
    Ok(Stats {
        idx_tup_read: row.get(0),
        dead: row.get(1),
        bytes: row.get(2),
        xmin_age: row.get(3),
    })
}
