//! Limits at scale (issue 38, "Measured"; docs/limits.md), into `bench/results/limits-scale.md`
//! (`--limits-scale`; RESULTS.md is left alone). drover alone, forked workers, the shape-2 no-op
//! job (`App\Jobs\BenchJob`, ms = 0) with the payload `DroverQueue` makes for it (fetched from
//! the app once) and a `droverLimits` field as `JobLimits` writes it.
//!
//! **The key run.** `keys` distinct keys (1,000,000), none before the run, in pairs: pair p is a
//! concurrency key `c<p>` of cap 1 (drover's `LimitConcurrency("c<p>", 1)`) and a rate key
//! `r<p>@1s` of 1 start per 1,000 ms (`LimitRate::perSecond(1, "r<p>")`), and each of its
//! `jobs_per_key` jobs (2) takes both. So half the keys are concurrency keys and half rates,
//! and 1,000,000 keys are 1,000,000 jobs. A pair's jobs are enqueued back to back (job i of
//! pair p has seq p·J + i + 1) by open-loop producers ([`produce`], 2 connections, a pair's
//! jobs always through the same one, so in order) at a steady `rate` jobs/s while 4 workers
//! drain; each job is its own transaction, `SELECT drover.enqueue_limited(...)`, 64 pipelined
//! per connection. The second job of a pair waits for the first (its slot, then its window):
//! every key is made, used, and left behind by its jobs while the run goes on. Sampled every second ([`Sample`]): completions, the
//! master's PSS, the claim's, ack's and admission's pg_stat_statements counters, `count(*)` of
//! drover.limit_keys (and the other limit tables), the database's size. Figures per tenth of the
//! run by completions ([`tenths`]), as shape 6 does.
//!
//! **The control**: the same producer at the same rate with the same payloads without
//! `droverLimits`, through the plain INSERT `DroverQueue` makes for an unlimited job: what the
//! same jobs cost without limits on this machine (its length is `control_jobs`).
//!
//! **Nothing blocks the head.** A concurrency key `hot` of cap 1 is taken by one job on the
//! queue `parked`, which no worker serves (admitted by one `drover.limit_pass()` of the bench's),
//! then `waiting` jobs (1,000,000) are enqueued on `default` under `hot` with
//! `SELECT drover.enqueue_limited(...) FROM generate_series(...)` in batches; none of them can
//! run. `plain` unlimited no-op jobs (20,000) are queued (one INSERT … SELECT) before 4 workers
//! start, and drained: jobs/s (first start → last finish) and the claim statement's mean time
//! (pg_stat_statements, reset before the master starts). `drains` times without the million
//! waiting, then the same with it: the first right after the million was enqueued (the masters'
//! notes as the enqueue left them), the others once every note was consumed.

use crate::measure::median;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio_postgres::types::ToSql;

use crate::engines::{Engine, Running, WorkerSettings};
use crate::groups::{in_order, now_s, INSERT_SQL, IN_FLIGHT};
use crate::records::Runs;
use crate::report::Conditions;
use crate::sampler::{load_average_1m, pss_kib};
use crate::stack::Stack;

/// Workers of every run (one master, forked).
const WORKERS: usize = 4;
/// drover's prefetch per worker, as shapes 2 and 6.
const PREFETCH: usize = 8;
/// Producer connections of the key run and the control.
const PRODUCERS: usize = 2;
/// Seqs of the head-blocking drains: drain d has seqs from `DRAIN_SEQ` · (d + 1) + 1.
const DRAIN_SEQ: i32 = 10_000_000;
/// Seqs of the jobs waiting on the held key (none of them may run).
const WAITING_SEQ: i32 = 1_000_000_000;
/// The held key, and the queue of the job that holds it.
const HOT_KEY: &str = "hot";
const PARKED_QUEUE: &str = "parked";
/// Jobs per `enqueue_limited … FROM generate_series` statement.
const WAITING_BATCH: u32 = 50_000;

/// The sizes.
#[derive(Debug, Clone, Copy)]
pub struct ScaleSizes {
    /// Distinct keys of the key run (half concurrency, half rate: a pair per job).
    pub keys: u32,
    /// Jobs per pair of keys, enqueued back to back.
    pub jobs_per_key: u32,
    /// The producers' steady rate, jobs/s (both connections together).
    pub rate: f64,
    /// Jobs of the control (the same producer and rate, no limits).
    pub control_jobs: u32,
    /// Jobs waiting on the held key.
    pub waiting: u32,
    /// Unlimited jobs per head-blocking drain.
    pub plain: u32,
    /// Drains without the million, and with it.
    pub drains: usize,
}

impl ScaleSizes {
    pub fn full() -> ScaleSizes {
        ScaleSizes {
            keys: 1_000_000,
            jobs_per_key: 2,
            rate: 1000.0,
            control_jobs: 100_000,
            waiting: 1_000_000,
            plain: 20_000,
            drains: 3,
        }
    }
    pub fn quick() -> ScaleSizes {
        ScaleSizes {
            keys: 20_000,
            jobs_per_key: 2,
            rate: 500.0,
            control_jobs: 20_000,
            waiting: 20_000,
            plain: 5_000,
            drains: 2,
        }
    }
    /// Pairs of keys: each pair's jobs take both of its keys.
    pub fn pairs(&self) -> u64 {
        u64::from(self.keys.div_ceil(2))
    }
    pub fn jobs(&self) -> u64 {
        self.pairs() * u64::from(self.jobs_per_key.max(1))
    }
}

/// A key's limit: (key, cap, window ms; 0 for a concurrency limit).
pub type Limit = (String, i32, i32);

/// Job `seq`'s pair of keys and its position among the pair's jobs (seqs from 1, a pair's jobs
/// back to back).
pub fn pair_of(seq: u64, jobs_per_key: u32) -> (u64, u32) {
    let j = u64::from(jobs_per_key.max(1));
    ((seq - 1) / j, ((seq - 1) % j) as u32)
}

/// The limits of pair p's jobs: a concurrency key of cap 1 (`LimitConcurrency("c<p>", 1)`) and a
/// rate of 1 per second (`LimitRate::perSecond(1, "r<p>")`, which names it `r<p>@1s`, window
/// 1,000 ms exactly), in the order `JobLimits` reads them.
pub fn limits_of(p: u64) -> [Limit; 2] {
    [(format!("c{p}"), 1, 0), (format!("r{p}@1s"), 1, 1000)]
}

/// BenchJob's payload as `DroverQueue` writes it, cut where the uuid and the seq go.
#[derive(Clone)]
struct Template {
    /// Up to the uuid's value; from after it through the seq's `i:`; from after the seq to the
    /// payload's closing brace (excluded).
    parts: [String; 3],
}

/// The seq BenchJob is built with for the template, found and replaced per job.
const SENTINEL_SEQ: &str = "987654321";

impl Template {
    /// The payload of `new BenchJob(SENTINEL_SEQ, 0)` on the drover connection, as
    /// `createPayload` makes it (shape 6's template).
    fn fetch(stack: &Stack) -> anyhow::Result<Template> {
        let code = format!(
            "$q = Queue::connection('drover'); \
             $f = \\Closure::bind(fn ($job) => $this->createPayload($job, $this->getQueue(null), ''), $q, get_class($q)); \
             return $f(new App\\Jobs\\BenchJob({SENTINEL_SEQ}, 0));"
        );
        let text = stack.artisan(&["app:eval", &code])?;
        Template::parse(text.trim())
    }

    fn parse(text: &str) -> anyhow::Result<Template> {
        anyhow::ensure!(
            text.starts_with('{') && text.ends_with('}'),
            "BenchJob's payload is not a JSON object: {text}"
        );
        let uuid_key = "\"uuid\":\"";
        let uuid_at = text.find(uuid_key).context("no uuid in the payload")? + uuid_key.len();
        let uuid_end = uuid_at + 36;
        let seq = format!("i:{SENTINEL_SEQ};");
        anyhow::ensure!(
            text.matches(&seq).count() == 1,
            "the payload does not carry the seq once: {text}"
        );
        let seq_at = text.find(&seq).context("seq")? + 2;
        anyhow::ensure!(uuid_end < seq_at, "the uuid comes after the seq: {text}");
        Ok(Template {
            parts: [
                text[..uuid_at].to_string(),
                text[uuid_end..seq_at].to_string(),
                text[seq_at + SENTINEL_SEQ.len()..text.len() - 1].to_string(),
            ],
        })
    }

    /// Job `seq`'s payload, with its limit as `JobLimits::into` writes it (`droverLimits`: a
    /// list of [key, cap, window ms]).
    fn payload(&self, seq: u64, limits: &[Limit]) -> String {
        use std::fmt::Write;
        let mut out = String::with_capacity(1100);
        out.push_str(&self.parts[0]);
        let _ = write!(out, "00000000-0000-4000-8000-{seq:012x}");
        out.push_str(&self.parts[1]);
        let _ = write!(out, "{seq}");
        out.push_str(&self.parts[2]);
        if !limits.is_empty() {
            out.push_str(",\"droverLimits\":[");
            for (i, (key, cap, window)) in limits.iter().enumerate() {
                let comma = if i > 0 { "," } else { "" };
                let _ = write!(out, "{comma}[\"{key}\",{cap},{window}]");
            }
            out.push(']');
        }
        out.push('}');
        out
    }
}

/// One limited job, its own transaction, as `DroverQueue` enqueues a job with `droverLimits`;
/// returns the database's clock at the statement's end.
const ENQUEUE_LIMITED_SQL: &str = "SELECT drover.enqueue_limited('default', $1, 0, $2::text[], $3::int[], $4::int[], NULL, 0, 0::smallint, NULL), extract(epoch FROM clock_timestamp())::float8";

/// Producer `part` of `of`: the jobs of the keys k with k mod `of` = `part`, in seq order, at
/// its share of `rate`. `limited`: through `drover.enqueue_limited`, else the plain INSERT.
fn produce(
    url: String,
    template: Template,
    (n, jobs_per_key): (u64, u32),
    (part, of): (usize, usize),
    limited: bool,
    rate: f64,
    enqueued: Arc<AtomicU64>,
) -> std::thread::JoinHandle<anyhow::Result<Vec<(u64, f64)>>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let client = drover_broker::connect::connect_once(&url).await?;
            let statement = client
                .prepare(if limited {
                    ENQUEUE_LIMITED_SQL
                } else {
                    INSERT_SQL
                })
                .await?;
            let mine: Vec<u64> = (1..=n)
                .filter(|s| pair_of(*s, jobs_per_key).0 as usize % of == part)
                .collect();
            let mut commits = Vec::with_capacity(mine.len());
            let t0 = tokio::time::Instant::now();
            for (c, chunk) in mine.chunks(IN_FLIGHT).enumerate() {
                if rate > 0.0 {
                    let due = (c * IN_FLIGHT) as f64 / (rate / of as f64);
                    tokio::time::sleep_until(t0 + Duration::from_secs_f64(due)).await;
                }
                type Arrays = (Vec<String>, Vec<i32>, Vec<i32>);
                let jobs: Vec<(String, Arrays)> = chunk
                    .iter()
                    .map(|s| {
                        let limits = limits_of(pair_of(*s, jobs_per_key).0);
                        let payload = template.payload(*s, if limited { &limits } else { &[] });
                        let arrays = (
                            limits.iter().map(|l| l.0.clone()).collect(),
                            limits.iter().map(|l| l.1).collect(),
                            limits.iter().map(|l| l.2).collect(),
                        );
                        (payload, arrays)
                    })
                    .collect();
                let params: Vec<Vec<&(dyn ToSql + Sync)>> = jobs
                    .iter()
                    .map(|(payload, (keys, caps, windows))| {
                        let mut p: Vec<&(dyn ToSql + Sync)> = vec![payload];
                        if limited {
                            p.extend([keys as &(dyn ToSql + Sync), caps, windows]);
                        }
                        p
                    })
                    .collect();
                let futures: Vec<_> = params
                    .iter()
                    .map(|p| Box::pin(client.query_one(&statement, p)))
                    .collect();
                for (s, row) in chunk.iter().zip(in_order(futures).await) {
                    let row = row.with_context(|| format!("enqueueing job {s}"))?;
                    let id: Option<i64> = row.get(0);
                    anyhow::ensure!(id.is_some(), "job {s} was not enqueued");
                    commits.push((*s, row.get::<_, f64>(1)));
                }
                enqueued.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
            Ok(commits)
        })
    })
}

/// Cumulative pg_stat_statements counters of one kind of statement.
#[derive(Debug, Clone, Copy, Default)]
pub struct StmtStat {
    pub calls: f64,
    pub ms: f64,
    pub rows: f64,
}

/// The statements timed (`LIKE` patterns on pg_stat_statements' normalized text).
const STATEMENTS: [(&str, &str); 6] = [
    // broker/queries/claim.sql (shape 6's pattern: its token is a parameter reserved ahead).
    ("claim", "%FOR UPDATE SKIP LOCKED%leased AS (%SET lease_token%"),
    // broker/queries/ack.sql: its DELETE's trigger frees a limited job's slot and admits.
    ("ack", "%DELETE FROM drover.jobs AS j%USING unnest($1::bigint[], $2::bigint[]) AS s(id, token)%RETURNING j.id"),
    // broker/queries/limit_pass.sql, the master's admission pass.
    ("pass", "%LATERAL drover.limit_pass()%"),
    // broker/queries/limit_purge.sql, on the reap tick.
    ("purge", "%drover.limit_purge()%"),
    ("enqueue", "%SELECT drover.enqueue_limited(%"),
    (
        "insert",
        "%INSERT INTO drover.jobs (queue, payload, available_at) VALUES (%clock_timestamp()) RETURNING id, extract(%",
    ),
];
const CLAIM: usize = 0;
const ACK: usize = 1;
const PASS: usize = 2;
const PURGE: usize = 3;

async fn stmt_stats(stack: &Stack) -> anyhow::Result<[StmtStat; 6]> {
    let mut out = [StmtStat::default(); 6];
    if !stack.stat_statements {
        return Ok(out);
    }
    let cases: String = STATEMENTS
        .iter()
        .enumerate()
        .map(|(i, (_, like))| format!(" WHEN query LIKE '{like}' THEN {i}"))
        .collect();
    let rows = stack
        .client
        .query(
            &format!(
                "SELECT k, sum(calls)::float8, sum(total_exec_time)::float8, sum(rows)::float8
                 FROM (SELECT CASE{cases} END AS k, calls, total_exec_time, rows
                       FROM pg_stat_statements
                       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())) s
                 WHERE k IS NOT NULL GROUP BY k"
            ),
            &[],
        )
        .await?;
    for r in rows {
        let k: i32 = r.get(0);
        out[k as usize] = StmtStat {
            calls: r.get(1),
            ms: r.get(2),
            rows: r.get(3),
        };
    }
    Ok(out)
}

/// One sample of the key run, every second.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Seconds since the producers started.
    pub t: f64,
    pub enqueued: u64,
    pub completed: u64,
    /// The master's PSS (KiB; 0: not read).
    pub master_pss_kib: u64,
    pub db_bytes: i64,
    /// `count(*)` of drover.limit_keys, drover.limit_waiting, drover.limit_holders,
    /// drover.limit_pending, drover.limit_wakes.
    pub limit_keys: i64,
    pub waiting: i64,
    pub holders: i64,
    pub pending: i64,
    pub wakes: i64,
    pub load1: f64,
    pub stmts: [StmtStat; 6],
}

async fn sample(
    stack: &Stack,
    t: f64,
    enqueued: u64,
    completed: u64,
    master: Option<i32>,
) -> anyhow::Result<Sample> {
    let row = stack
        .client
        .query_one(
            "SELECT pg_database_size(current_database()) - pg_total_relation_size('public.bench_dispatch'),
                    (SELECT count(*) FROM drover.limit_keys), (SELECT count(*) FROM drover.limit_waiting),
                    (SELECT count(*) FROM drover.limit_holders), (SELECT count(*) FROM drover.limit_pending),
                    (SELECT count(*) FROM drover.limit_wakes)",
            &[],
        )
        .await?;
    Ok(Sample {
        t,
        enqueued,
        completed,
        master_pss_kib: master.and_then(pss_kib).unwrap_or(0),
        db_bytes: row.get(0),
        limit_keys: row.get(1),
        waiting: row.get(2),
        holders: row.get(3),
        pending: row.get(4),
        wakes: row.get(5),
        load1: load_average_1m(),
        stmts: stmt_stats(stack).await?,
    })
}

/// One tenth of a run, by completions: tenth d ends at the first sample with at least
/// (d + 1)·n/10 completions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tenth {
    /// Seconds since the producers started, at its end.
    pub t_end: f64,
    /// Completions / seconds over the tenth (NaN: within one sample).
    pub completions_per_s: f64,
    /// The highest master PSS sampled in it, KiB.
    pub master_pss_kib: u64,
    /// The claim's mean execution time per call, ms (NaN: no call, or no pg_stat_statements).
    pub claim_ms: f64,
    /// The ack's, and the admission pass's.
    pub ack_ms: f64,
    pub pass_ms: f64,
    /// Admission passes per second.
    pub passes_per_s: f64,
    /// drover.limit_keys rows and the database's size at its end; the most keys in it.
    pub limit_keys: i64,
    pub limit_keys_max: i64,
    pub db_bytes: i64,
    /// Jobs enqueued and not completed at its end.
    pub backlog: u64,
}

/// The run's samples split in ten by completions (n jobs in all), as shape 6 splits its run.
pub fn tenths(n: u64, samples: &[Sample]) -> Vec<Tenth> {
    if samples.is_empty() {
        return Vec::new();
    }
    let at = |count: u64| {
        samples
            .iter()
            .position(|s| s.completed >= count)
            .unwrap_or(samples.len() - 1)
    };
    let bounds: Vec<usize> = (0..=10u64)
        .map(|d| if d == 0 { 0 } else { at(d * n / 10) })
        .collect();
    (0..10)
        .map(|d| {
            let (a, b) = (bounds[d], bounds[d + 1]);
            let (x, y) = (&samples[a], &samples[b]);
            let per_call = |k: usize| {
                let calls = y.stmts[k].calls - x.stmts[k].calls;
                if calls > 0.0 {
                    (y.stmts[k].ms - x.stmts[k].ms) / calls
                } else {
                    f64::NAN
                }
            };
            let dt = y.t - x.t;
            let inside = &samples[(a + 1).min(b)..=b];
            Tenth {
                t_end: y.t,
                completions_per_s: if dt > 0.0 {
                    (y.completed - x.completed) as f64 / dt
                } else {
                    f64::NAN
                },
                master_pss_kib: inside.iter().map(|s| s.master_pss_kib).max().unwrap_or(0),
                claim_ms: per_call(CLAIM),
                ack_ms: per_call(ACK),
                pass_ms: per_call(PASS),
                passes_per_s: if dt > 0.0 {
                    (y.stmts[PASS].calls - x.stmts[PASS].calls) / dt
                } else {
                    f64::NAN
                },
                limit_keys: y.limit_keys,
                limit_keys_max: inside.iter().map(|s| s.limit_keys).max().unwrap_or(0),
                db_bytes: y.db_bytes,
                backlog: y.enqueued.saturating_sub(y.completed),
            }
        })
        .collect()
}

/// What the verifier found in the key run's records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    pub expected: u64,
    pub completed: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub unknown: u64,
    pub other_attempts: u64,
    /// Consecutive jobs of a concurrency key of cap 1 whose later one started before the earlier
    /// one finished: two out at once, which the cap forbids.
    pub overlaps: u64,
    /// Pairs of a key's consecutive jobs whose later one was enqueued before the earlier one
    /// finished (so it waited for the key): only these tested the limit.
    pub waited: u64,
    /// Consecutive jobs of a rate key of 1 per second that started (`handle()`) less than a
    /// second apart. Not a fault by itself: the window is timed from the first job's lease, and
    /// a prefetched job starts after its lease.
    pub rate_closer_than_window: u64,
    /// Of the rate pairs, the shortest gap between their starts, seconds.
    pub rate_min_gap_s: f64,
}

impl Verdict {
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        for (n, what) in [
            (self.lost, "jobs never completed"),
            (self.duplicated, "jobs completed more than once"),
            (self.unknown, "records of jobs not enqueued"),
            (self.other_attempts, "records of an attempt other than 1"),
            (self.overlaps, "pairs of a cap-1 key's jobs out at once"),
        ] {
            if n > 0 {
                p.push(format!("{n} {what}"));
            }
        }
        p
    }
}

/// Checks the records of seqs 1..=n (others are not this run's) against the plan.
pub fn verify(n: u64, jobs_per_key: u32, commits: &[f64], r: &Runs, limited: bool) -> Verdict {
    let mut v = Verdict {
        expected: n,
        rate_min_gap_s: f64::INFINITY,
        ..Verdict::default()
    };
    let mut count = vec![0u32; n as usize + 1];
    let mut times = vec![(f64::NAN, f64::NAN); n as usize + 1];
    for i in 0..r.len() {
        let seq = r.seq[i];
        if seq < 1 || seq as u64 > n {
            v.unknown += 1;
            continue;
        }
        let s = seq as usize;
        count[s] += 1;
        if count[s] == 1 || r.started[i] < times[s].0 {
            times[s] = (r.started[i], r.finished[i]);
        }
        if r.attempt[i] != 1 {
            v.other_attempts += 1;
        }
    }
    v.completed = count.iter().skip(1).filter(|c| **c > 0).count() as u64;
    v.lost = count.iter().skip(1).filter(|c| **c == 0).count() as u64;
    v.duplicated = count.iter().filter(|c| **c > 1).count() as u64;
    if limited {
        for s in 2..=n {
            if pair_of(s, jobs_per_key).1 == 0 {
                continue;
            }
            let (a, b) = (times[s as usize - 1], times[s as usize]);
            if a.0.is_nan() || b.0.is_nan() {
                continue;
            }
            let commit = commits.get(s as usize).copied().unwrap_or(f64::NAN);
            if commit < a.1 {
                v.waited += 1;
            }
            // The pair's concurrency key of cap 1, and its rate of 1 a second.
            if b.0 < a.1 {
                v.overlaps += 1;
            }
            let gap = b.0 - a.0;
            v.rate_min_gap_s = v.rate_min_gap_s.min(gap);
            if gap < 1.0 {
                v.rate_closer_than_window += 1;
            }
        }
    }
    v
}

/// A table of drover's schema after the run: name, bytes (with its indexes and TOAST), live and
/// dead tuples, autovacuums since the cluster started.
type TableAtEnd = (String, i64, i64, i64, i64);

/// One key run (limited) or its control.
struct KeyRun {
    tables: Vec<TableAtEnd>,
    jobs: u64,
    verdict: Verdict,
    problems: Vec<String>,
    /// Completed jobs / first start → last finish.
    jobs_per_s: f64,
    /// Jobs / the producers' first statement → last commit.
    enqueue_jobs_per_s: f64,
    tenths: Vec<Tenth>,
    peak_master_pss_kib: u64,
    db_bytes_before: i64,
    db_bytes_peak: i64,
    /// After the last completion: limit_keys rows then, and `purge_watch_s` later.
    keys_at_end: i64,
    keys_after_watch: i64,
    purge_watch_s: f64,
    /// The purge's calls and rows over the run (pg_stat_statements).
    purge_calls: f64,
    /// The most notes (drover.limit_wakes) and waiting jobs at a sample.
    max_wakes: i64,
    max_waiting: i64,
    max_holders: i64,
    max_pending: i64,
    max_backlog: u64,
    load_before: f64,
    load_median: f64,
}

async fn key_run(
    stack: &Stack,
    sizes: ScaleSizes,
    limited: bool,
    template: &Template,
) -> anyhow::Result<KeyRun> {
    let n = if limited {
        sizes.jobs()
    } else {
        u64::from(sizes.control_jobs)
    };
    let jpk = sizes.jobs_per_key.max(1);
    stack.reset().await?;
    let db_bytes_before = crate::measure::db_size(stack).await?;
    let load_before = load_average_1m();
    let running = Running::start(
        Engine::Drover,
        stack,
        WorkerSettings::new(WORKERS, PREFETCH, 0),
    )
    .await?;
    let master = running.master.as_ref().map(|m| m.id() as i32);
    let watched: anyhow::Result<_> = async {
        if stack.stat_statements {
            stack
                .client
                .batch_execute("SELECT pg_stat_statements_reset()")
                .await?;
        }
        let enqueued = Arc::new(AtomicU64::new(0));
        let started = now_s();
        let mut threads: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                produce(
                    stack.pg.url().to_string(),
                    template.clone(),
                    (n, jpk),
                    (p, PRODUCERS),
                    limited,
                    sizes.rate,
                    enqueued.clone(),
                )
            })
            .collect();
        let mut commits = vec![f64::NAN; n as usize + 1];
        let mut produced_at = f64::NAN;
        let t0 = Instant::now();
        let mut samples = Vec::new();
        // A generous bound: the producers' time and 10 minutes more.
        let timeout = Duration::from_secs_f64(n as f64 / sizes.rate + 600.0);
        loop {
            let completed = stack.completed()? as u64;
            let s = sample(
                stack,
                t0.elapsed().as_secs_f64(),
                enqueued.load(Ordering::Relaxed),
                completed,
                master,
            )
            .await?;
            samples.push(s);
            let mut i = 0;
            while i < threads.len() {
                if threads[i].is_finished() {
                    let done = match threads.swap_remove(i).join() {
                        Ok(r) => r.context("a producer failed")?,
                        Err(_) => bail!("a producer panicked"),
                    };
                    for (seq, at) in done {
                        commits[seq as usize] = at;
                    }
                    if threads.is_empty() {
                        produced_at = now_s();
                    }
                } else {
                    i += 1;
                }
            }
            if completed >= n && threads.is_empty() {
                break;
            }
            anyhow::ensure!(
                t0.elapsed() < timeout,
                "only {completed} of {n} jobs completed within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // What the purge does after the last completion: limit_keys rows now and a while later.
        let keys_at_end = stack
            .scalar_i64("SELECT count(*) FROM drover.limit_keys")
            .await?;
        let watch = if limited { 35.0 } else { 0.0 };
        tokio::time::sleep(Duration::from_secs_f64(watch)).await;
        let tables = stack
            .client
            .query(
                "SELECT relname::text, pg_total_relation_size(relid), n_live_tup, n_dead_tup, autovacuum_count
                 FROM pg_stat_user_tables WHERE schemaname = 'drover'
                 ORDER BY pg_total_relation_size(relid) DESC LIMIT 6",
                &[],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
            .collect::<Vec<TableAtEnd>>();
        let last = sample(
            stack,
            t0.elapsed().as_secs_f64(),
            enqueued.load(Ordering::Relaxed),
            stack.completed()? as u64,
            master,
        )
        .await?;
        Ok((
            commits,
            samples,
            started,
            produced_at,
            keys_at_end,
            last,
            watch,
            tables,
        ))
    }
    .await;
    running.stop().await?;
    let (commits, samples, started, produced_at, keys_at_end, last, watch, tables) = watched?;
    let runs = stack.runs()?;
    let verdict = verify(n, jpk, &commits, &runs, limited);
    let mut problems = verdict.problems();
    for (what, sql) in [
        (
            "jobs left in drover.jobs",
            "SELECT count(*) FROM drover.jobs",
        ),
        (
            "jobs left in drover.limit_waiting",
            "SELECT count(*) FROM drover.limit_waiting",
        ),
        (
            "slots left in drover.limit_holders",
            "SELECT count(*) FROM drover.limit_holders",
        ),
        (
            "failed jobs in drover.failed_jobs",
            "SELECT count(*) FROM drover.failed_jobs",
        ),
    ] {
        let left = stack.scalar_i64(sql).await?;
        if left > 0 {
            problems.push(format!("{left} {what}"));
        }
    }
    let first = runs.started.iter().copied().fold(f64::INFINITY, f64::min);
    let end = runs
        .finished
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    let mut loads: Vec<f64> = samples
        .iter()
        .map(|s| s.load1)
        .filter(|x| x.is_finite())
        .collect();
    loads.sort_by(f64::total_cmp);
    Ok(KeyRun {
        tables,
        jobs: n,
        problems,
        jobs_per_s: verdict.completed as f64 / (end - first),
        verdict,
        enqueue_jobs_per_s: n as f64 / (produced_at - started),
        tenths: tenths(n, &samples),
        peak_master_pss_kib: samples.iter().map(|s| s.master_pss_kib).max().unwrap_or(0),
        db_bytes_before,
        db_bytes_peak: samples.iter().map(|s| s.db_bytes).max().unwrap_or(0),
        keys_at_end,
        keys_after_watch: last.limit_keys,
        purge_watch_s: watch,
        purge_calls: last.stmts[PURGE].calls,
        max_wakes: samples.iter().map(|s| s.wakes).max().unwrap_or(0),
        max_waiting: samples.iter().map(|s| s.waiting).max().unwrap_or(0),
        max_holders: samples.iter().map(|s| s.holders).max().unwrap_or(0),
        max_pending: samples.iter().map(|s| s.pending).max().unwrap_or(0),
        max_backlog: samples
            .iter()
            .map(|s| s.enqueued.saturating_sub(s.completed))
            .max()
            .unwrap_or(0),
        load_before,
        load_median: loads.get(loads.len() / 2).copied().unwrap_or(f64::NAN),
    })
}

/// One drain of unlimited jobs queued before the workers start.
struct Drain {
    with_waiting: bool,
    /// Notes (drover.limit_wakes) when the master started and when it stopped.
    wakes_before: i64,
    wakes_after: i64,
    jobs: usize,
    jobs_per_s: f64,
    claim_calls: f64,
    claim_ms: f64,
    claim_rows_per_call: f64,
    master_pss_kib: u64,
}

async fn drain(
    stack: &Stack,
    template: &Template,
    sizes: ScaleSizes,
    d: usize,
    with_waiting: bool,
) -> anyhow::Result<Drain> {
    let base = DRAIN_SEQ * (d as i32 + 1);
    let [p0, p1, p2] = &template.parts;
    // Every drain from the same drover.jobs: the dead tuples of the drains before it gone (a
    // master that lives a few seconds never reaches its reap tick's compaction, and without
    // this the claim slowed from drain to drain whatever waited: 0.33, 0.41, 0.47 ms).
    stack.client.batch_execute("VACUUM drover.jobs").await?;
    stack
        .client
        .execute(
            "INSERT INTO drover.jobs (queue, payload, available_at)
             SELECT 'default', $1 || lpad(to_hex(s), 12, '0') || $2 || s || $3 || '}', clock_timestamp()
             FROM generate_series($4::int + 1, $4::int + $5::int) AS s",
            &[p0, p1, p2, &base, &(sizes.plain as i32)],
        )
        .await?;
    let wakes_before = stack
        .scalar_i64("SELECT count(*) FROM drover.limit_wakes")
        .await?;
    // Records so far (none of the waiting jobs runs): the drain's are those after them. Counted,
    // not read, while the drain runs: reading every record each poll cost the bench more CPU,
    // beside the workers on the 2 cores, with every drain.
    let records_before = stack.completed()?;
    if stack.stat_statements {
        stack
            .client
            .batch_execute("SELECT pg_stat_statements_reset()")
            .await?;
    }
    let running = Running::start(
        Engine::Drover,
        stack,
        WorkerSettings::new(WORKERS, PREFETCH, 0),
    )
    .await?;
    let master = running.master.as_ref().map(|m| m.id() as i32);
    let in_range = |s: i32| s > base && s <= base + sizes.plain as i32;
    let watched: anyhow::Result<u64> = async {
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut pss = 0;
        loop {
            pss = pss.max(master.and_then(pss_kib).unwrap_or(0));
            let done = (stack.completed()? - records_before).max(0) as usize;
            if done >= sizes.plain as usize {
                return Ok(pss);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "drain {d}: {done} of {} jobs in 600 s",
                sizes.plain
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    .await;
    let stmts = stmt_stats(stack).await;
    running.stop().await?;
    let pss = watched?;
    let stmts = stmts?;
    let wakes_after = stack
        .scalar_i64("SELECT count(*) FROM drover.limit_wakes")
        .await?;
    let runs = stack.runs()?;
    let (mut first, mut last, mut jobs) = (f64::INFINITY, f64::NEG_INFINITY, 0);
    for i in 0..runs.len() {
        if in_range(runs.seq[i]) {
            first = first.min(runs.started[i]);
            last = last.max(runs.finished[i]);
            jobs += 1;
        }
    }
    let c = stmts[CLAIM];
    Ok(Drain {
        with_waiting,
        wakes_before,
        wakes_after,
        jobs,
        jobs_per_s: jobs as f64 / (last - first),
        claim_calls: c.calls,
        claim_ms: if c.calls > 0.0 {
            c.ms / c.calls
        } else {
            f64::NAN
        },
        claim_rows_per_call: if c.calls > 0.0 {
            c.rows / c.calls
        } else {
            f64::NAN
        },
        master_pss_kib: pss,
    })
}

/// The head-blocking part's figures.
struct HeadBlocking {
    drains: Vec<Drain>,
    /// Seconds to enqueue the million (SQL batches), and jobs/s.
    enqueue_s: f64,
    /// Seconds the bench's own passes took to consume the notes the enqueue left, and how many.
    settle_s: f64,
    notes_consumed_by_bench: i64,
    /// Waiting jobs and held slots of the key at the end; waiting jobs that ran (must be 0).
    waiting_at_end: i64,
    hot_holders: i64,
    waiting_ran: usize,
    db_bytes_with: i64,
}

async fn head_blocking(
    stack: &Stack,
    template: &Template,
    sizes: ScaleSizes,
) -> anyhow::Result<HeadBlocking> {
    stack.reset().await?;
    let mut drains = Vec::new();
    for d in 0..sizes.drains {
        eprintln!(
            "bench: limits scale, drain {} of {} without the waiting jobs",
            d + 1,
            sizes.drains
        );
        let r = drain(stack, template, sizes, d, false).await?;
        report_drain(&r);
        drains.push(r);
    }
    // The key's one slot, taken by a job on a queue no worker serves.
    let [p0, p1, p2] = &template.parts;
    let holder = template.payload(WAITING_SEQ as u64 - 1, &[(HOT_KEY.to_string(), 1, 0)]);
    stack
        .client
        .execute(
            "SELECT drover.enqueue_limited($1, $2, 0, ARRAY[$3::text], ARRAY[1], ARRAY[0], NULL, 0, 0::smallint, NULL)",
            &[&PARKED_QUEUE, &holder, &HOT_KEY],
        )
        .await?;
    stack
        .client
        .batch_execute("SELECT * FROM drover.limit_pass()")
        .await?;
    let held = stack
        .scalar_i64("SELECT count(*) FROM drover.limit_holders WHERE key = 'hot'")
        .await?;
    anyhow::ensure!(held == 1, "the held key has {held} holders, not 1");
    eprintln!(
        "bench: limits scale, {} jobs waiting on the held key (SQL, batches of {WAITING_BATCH})",
        sizes.waiting
    );
    let t = Instant::now();
    let mut from = 0u32;
    while from < sizes.waiting {
        let count = WAITING_BATCH.min(sizes.waiting - from);
        let start = WAITING_SEQ + from as i32;
        stack
            .client
            .execute(
                "SELECT drover.enqueue_limited('default',
                        $1 || lpad(to_hex(s), 12, '0') || $2 || s || $3 || ',\"droverLimits\":[[\"hot\",1,0]]}',
                        0, ARRAY['hot'], ARRAY[1], ARRAY[0], NULL, 0, 0::smallint, NULL)
                 FROM generate_series($4::int + 1, $4::int + $5::int) AS s",
                &[p0, p1, p2, &start, &(count as i32)],
            )
            .await?;
        from += count;
    }
    let enqueue_s = t.elapsed().as_secs_f64();
    eprintln!(
        "bench:   {enqueue_s:.1} s ({:.0} jobs/s)",
        f64::from(sizes.waiting) / enqueue_s
    );
    // The table's statistics as autovacuum gives them in time (its analyze threshold is 2%).
    stack
        .client
        .batch_execute("ANALYZE drover.limit_waiting")
        .await?;
    let mut notes_consumed_by_bench = 0;
    let mut settle_s = 0.0;
    for d in sizes.drains..2 * sizes.drains {
        if d == sizes.drains + 1 {
            // Every note consumed, as the masters' passes would in time.
            let t = Instant::now();
            notes_consumed_by_bench = stack
                .scalar_i64("SELECT count(*) FROM drover.limit_wakes")
                .await?;
            while stack
                .scalar_i64("SELECT count(*) FROM drover.limit_wakes")
                .await?
                > 0
            {
                stack
                    .client
                    .batch_execute("SELECT * FROM drover.limit_pass()")
                    .await?;
            }
            settle_s = t.elapsed().as_secs_f64();
            stack
                .client
                .batch_execute("VACUUM drover.limit_wakes")
                .await?;
        }
        eprintln!(
            "bench: limits scale, drain {} of {} with {} jobs waiting on the held key",
            d - sizes.drains + 1,
            sizes.drains,
            sizes.waiting
        );
        let r = drain(stack, template, sizes, d, true).await?;
        report_drain(&r);
        drains.push(r);
    }
    let db_bytes_with = crate::measure::db_size(stack).await?;
    let waiting_at_end = stack
        .scalar_i64("SELECT count(*) FROM drover.limit_waiting WHERE waits_on = 'hot'")
        .await?;
    let hot_holders = stack
        .scalar_i64("SELECT count(*) FROM drover.limit_holders WHERE key = 'hot'")
        .await?;
    // The same drains again once the million is gone, so that neither condition always runs
    // first.
    stack
        .client
        .batch_execute("TRUNCATE drover.limit_waiting, drover.limit_wakes")
        .await?;
    for d in 2 * sizes.drains..3 * sizes.drains {
        eprintln!(
            "bench: limits scale, drain {} of {} without the waiting jobs, after them",
            d - 2 * sizes.drains + 1,
            sizes.drains
        );
        let r = drain(stack, template, sizes, d, false).await?;
        report_drain(&r);
        drains.push(r);
    }
    let waiting_ran = stack
        .runs()?
        .seq
        .iter()
        .filter(|s| **s >= WAITING_SEQ - 1)
        .count();
    Ok(HeadBlocking {
        drains,
        enqueue_s,
        settle_s,
        notes_consumed_by_bench,
        waiting_at_end,
        hot_holders,
        waiting_ran,
        db_bytes_with,
    })
}

fn report_drain(r: &Drain) {
    eprintln!(
        "bench:   {} jobs, {:.0} jobs/s, claim {:.3} ms mean over {:.0} calls ({:.1} jobs each), master PSS {:.2} MiB, notes {} → {}",
        r.jobs,
        r.jobs_per_s,
        r.claim_ms,
        r.claim_calls,
        r.claim_rows_per_call,
        r.master_pss_kib as f64 / 1024.0,
        r.wakes_before,
        r.wakes_after
    );
}

fn report_run(r: &KeyRun) {
    eprintln!(
        "bench:   {:.0} jobs/s, enqueue {:.0} jobs/s, peak backlog {}, master PSS {:.2} MiB, limit_keys {} at the end, {} after {:.0} s; valid: {}{}",
        r.jobs_per_s,
        r.enqueue_jobs_per_s,
        r.max_backlog,
        r.peak_master_pss_kib as f64 / 1024.0,
        r.keys_at_end,
        r.keys_after_watch,
        r.purge_watch_s,
        r.problems.is_empty(),
        if r.problems.is_empty() { String::new() } else { format!(" ({})", r.problems.join("; ")) }
    );
}

pub async fn run(
    root: &std::path::Path,
    stack: &Stack,
    sizes: ScaleSizes,
    conditions: &Conditions,
    command: &str,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        stack.stat_statements,
        "--limits-scale times the claim with pg_stat_statements, which did not load"
    );
    let template = Template::fetch(stack).context("BenchJob's payload")?;
    eprintln!(
        "bench: limits scale, {} keys in {} pairs × {} jobs at {} jobs/s",
        sizes.keys,
        sizes.pairs(),
        sizes.jobs_per_key,
        sizes.rate
    );
    let limited = key_run(stack, sizes, true, &template).await?;
    report_run(&limited);
    eprintln!(
        "bench: limits scale, the control: {} jobs at {} jobs/s without limits",
        sizes.control_jobs, sizes.rate
    );
    let control = key_run(stack, sizes, false, &template).await?;
    report_run(&control);
    let head = head_blocking(stack, &template, sizes).await?;
    let md = report(&limited, &control, &head, sizes, conditions, command);
    let path = root.join("bench/results/limits-scale.md");
    std::fs::write(&path, &md).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("bench: wrote {}", path.display());
    print!("{md}");
    Ok(())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn mb(bytes: i64) -> f64 {
    bytes as f64 / 1e6
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "not met"
    }
}

/// Whether a series stays flat: no tenth above `factor` × the median tenth.
pub fn flat(values: &[f64], factor: f64) -> Option<bool> {
    let m = median(values.to_vec());
    let max = values
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::NAN, f64::max);
    (m.is_finite() && max.is_finite()).then_some(max <= factor * m)
}

/// Whether a quantity stopped growing once the rate windows turned: from the end of the second
/// tenth to the end of the last, it grew by at most `share` (and `slack` in absolute terms).
pub fn stops_growing(values: &[f64], share: f64, slack: f64) -> Option<bool> {
    let (a, b) = (*values.get(1)?, *values.last()?);
    (a.is_finite() && b.is_finite()).then_some(b <= a * (1.0 + share) + slack)
}

fn tables_at_end(r: &KeyRun) -> String {
    let mut md = String::from("| table | MB (with indexes, TOAST) | live tuples | dead tuples | autovacuums (since the cluster started) |\n|---|---|---|---|---|\n");
    for (name, bytes, live, dead, vacuums) in &r.tables {
        md += &format!(
            "| drover.{name} | {:.1} | {live} | {dead} | {vacuums} |\n",
            mb(*bytes)
        );
    }
    md
}

fn tenth_table(r: &KeyRun) -> String {
    let mut md = String::from("| tenth | end s | completions/s | backlog | master PSS MiB | claim mean ms | ack mean ms | admission passes/s | pass mean ms | drover.limit_keys rows (most in it) | database MB |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    let f = |x: f64, d: usize| {
        if x.is_finite() {
            format!("{x:.d$}")
        } else {
            "–".into()
        }
    };
    for (d, t) in r.tenths.iter().enumerate() {
        md += &format!(
            "| {} | {:.0} | {} | {} | {:.2} | {} | {} | {} | {} | {} ({}) | {:.1} |\n",
            d + 1,
            t.t_end,
            f(t.completions_per_s, 0),
            t.backlog,
            mib(t.master_pss_kib),
            f(t.claim_ms, 3),
            f(t.ack_ms, 3),
            f(t.passes_per_s, 1),
            f(t.pass_ms, 3),
            t.limit_keys,
            t.limit_keys_max,
            mb(t.db_bytes)
        );
    }
    md
}

fn report(
    limited: &KeyRun,
    control: &KeyRun,
    head: &HeadBlocking,
    sizes: ScaleSizes,
    conditions: &Conditions,
    command: &str,
) -> String {
    let mut md = String::from("# Limits at scale (issue 38)\n\n");
    md += &format!("`{command}` (bench/src/limits_scale.rs), one run, on this machine:\n\n");
    for line in conditions.lines.iter().filter(|l| {
        ["commit", "machine", "PostgreSQL", "PHP"]
            .iter()
            .any(|p| l.starts_with(p))
    }) {
        md += &format!("- {line}\n");
    }
    md += &format!(
        "- drover alone, {WORKERS} workers forked from a zygote, prefetch {PREFETCH}, the default lease (30 s: the reap tick, which runs the purge of drover.limit_keys, every 15 s); the no-op `App\\Jobs\\BenchJob` of shape 2 with its `DroverQueue` payload (fetched from the app once) and `droverLimits` as `JobLimits` writes it; pg_stat_statements loaded\n"
    );
    md += &format!(
        "- sizes: {} keys × {} jobs = {} limited jobs at {} jobs/s; the control {} jobs at the same rate; {} jobs waiting on the held key; {} unlimited jobs per drain, {} drains without, {} with, {} without again\n",
        sizes.keys, sizes.jobs_per_key, sizes.jobs(), sizes.rate, sizes.control_jobs, sizes.waiting, sizes.plain, sizes.drains, sizes.drains, sizes.drains
    );
    md += &format!(
        "- load average (1 min) before the key run {:.2}, its median over the run {:.2} (the run's own processes included; 2 cores)\n",
        limited.load_before, limited.load_median
    );

    md += &format!(
        "\n## A million distinct keys\n\n{} distinct keys, none before the run, in pairs: pair p is a concurrency key `c<p>` of cap 1 (`LimitConcurrency('c<p>', 1)`) and a rate key `r<p>@1s` of 1 start per 1,000 ms (`LimitRate::perSecond(1, 'r<p>')`), and each of its {} jobs takes both (half the keys concurrency, half rates; one job per two keys). A pair's jobs are enqueued back to back (job i of pair p is seq p·{} + i + 1) by 2 producer connections at a steady {} jobs/s (each job its own transaction, `SELECT drover.enqueue_limited(...)`, 64 pipelined per connection; a pair's jobs always through one connection) while {WORKERS} workers drain: a pair's second job waits for its first (the slot, then the window). Sampled every second; tenths by completions (tenth d ends at the first sample with d·n/10 jobs completed, as shape 6). Claim, ack and admission pass: mean execution time per call from pg_stat_statements over the tenth; PSS: the master's `smaps_rollup`, the highest sample of the tenth; drover.limit_keys: `count(*)` at the tenth's end (and the most sampled in it); database: `pg_database_size` at the tenth's end.\n\n",
        sizes.keys, sizes.jobs_per_key, sizes.jobs_per_key, sizes.rate
    );
    let v = &limited.verdict;
    md += &format!(
        "{} jobs, {} completed ({} lost, {} duplicated, {} on another attempt), {:.0} jobs/s (first start → last finish); producers {:.0} jobs/s; peak backlog {}; pairs of a pair's jobs whose second was enqueued before the first finished (it waited for the keys): {}; pairs out at once (cap 1): {}; pairs whose `handle()` started less than 1 s apart (rate 1/s): {} (closest {:.3} s; the window is timed from the first job's lease, and a prefetched job starts after its lease); most rows sampled in drover.limit_waiting {}, drover.limit_wakes {}, drover.limit_holders {}, drover.limit_pending {}. Valid: **{}**{}\n\n",
        limited.jobs, v.completed, v.lost, v.duplicated, v.other_attempts, limited.jobs_per_s, limited.enqueue_jobs_per_s, limited.max_backlog, v.waited, v.overlaps, v.rate_closer_than_window,
        if v.rate_min_gap_s.is_finite() { v.rate_min_gap_s } else { f64::NAN },
        limited.max_waiting, limited.max_wakes, limited.max_holders, limited.max_pending,
        if limited.problems.is_empty() { "yes" } else { "no" },
        if limited.problems.is_empty() { String::new() } else { format!(" ({})", limited.problems.join("; ")) }
    );
    md += &tenth_table(limited);
    md += &format!(
        "\nAfter the last completion: {} rows in drover.limit_keys, {} after {:.0} s more with the master still running (its purge forgets keys 1,000 a call, calling again while a call forgot 1,000, for up to 2 s a reap tick; {:.0} purge calls over the run). Database {:.1} MB before the run, {:.1} MB at its largest sample.\n",
        limited.keys_at_end, limited.keys_after_watch, limited.purge_watch_s, limited.purge_calls, mb(limited.db_bytes_before), mb(limited.db_bytes_peak)
    );
    md += "\ndrover's largest tables then (`pg_stat_user_tables`):\n\n";
    md += &tables_at_end(limited);
    md += &format!(
        "\n### The control: the same jobs without limits\n\nThe same producers, rate and payloads without `droverLimits` (the plain INSERT `DroverQueue` makes for an unlimited job), {} jobs: {:.0} jobs/s, peak backlog {}, master PSS {:.2} MiB at most, valid: **{}**{}.\n\n",
        control.jobs, control.jobs_per_s, control.max_backlog, mib(control.peak_master_pss_kib),
        if control.problems.is_empty() { "yes" } else { "no" },
        if control.problems.is_empty() { String::new() } else { format!(" ({})", control.problems.join("; ")) }
    );
    md += &tenth_table(control);
    md += "\ndrover's largest tables at its end:\n\n";
    md += &tables_at_end(control);

    // Head blocking.
    md += &format!(
        "\n## Nothing blocks the head\n\nA concurrency key `{HOT_KEY}` of cap 1, its slot taken by one job on the queue `{PARKED_QUEUE}`, which no worker serves; then {} jobs on `default` under `{HOT_KEY}` (`SELECT drover.enqueue_limited(...) FROM generate_series(...)`, batches of {WAITING_BATCH}: {:.1} s, {:.0} jobs/s). Each drain: `VACUUM drover.jobs` (the same table for every drain: a master that lives a few seconds never reaches its reap tick's compaction, and without it the claim slowed from drain to drain whatever waited), then {} unlimited no-op jobs queued (one INSERT … SELECT) before {WORKERS} workers start, drained; jobs/s from the first start to the last finish, the claim statement's mean time over the drain (pg_stat_statements, reset before the master started; the master's claims while the queue is empty included, the same in both). The first drain with the waiting jobs ran with the notes (drover.limit_wakes, one per enqueue) as the enqueue left them; before the next, the bench ran `drover.limit_pass()` until none was left ({} notes, {:.1} s), as a master's passes do one after another (a pass that took a full batch of notes asks for the next at once) (and ANALYZE of drover.limit_waiting after the enqueue, as autovacuum does in time). After the drains with them, the waiting jobs and their notes were removed (TRUNCATE) and the drains without them ran again, so that neither condition always runs first; \"without\" is the median of the drains before and after. Database with the waiting jobs: {:.1} MB.\n\n",
        sizes.waiting, head.enqueue_s, f64::from(sizes.waiting) / head.enqueue_s, sizes.plain, head.notes_consumed_by_bench, head.settle_s, mb(head.db_bytes_with)
    );
    md += "| drain | jobs waiting on the held key | notes at start → end | jobs | jobs/s | claim mean ms | claim calls | jobs per claim | master PSS MiB |\n|---|---|---|---|---|---|---|---|---|\n";
    for (i, d) in head.drains.iter().enumerate() {
        md += &format!(
            "| {} | {} | {} → {} | {} | {:.0} | {:.3} | {:.0} | {:.1} | {:.2} |\n",
            i + 1,
            if d.with_waiting { sizes.waiting } else { 0 },
            d.wakes_before,
            d.wakes_after,
            d.jobs,
            d.jobs_per_s,
            d.claim_ms,
            d.claim_calls,
            d.claim_rows_per_call,
            mib(d.master_pss_kib)
        );
    }
    let pick = |with: bool, f: fn(&Drain) -> f64| {
        median(
            head.drains
                .iter()
                .filter(|d| d.with_waiting == with)
                .map(f)
                .collect::<Vec<f64>>(),
        )
    };
    let (without_jps, with_jps) = (pick(false, |d| d.jobs_per_s), pick(true, |d| d.jobs_per_s));
    let (without_claim, with_claim) = (pick(false, |d| d.claim_ms), pick(true, |d| d.claim_ms));
    md += &format!(
        "\nAt the end: {} jobs still waiting on `{HOT_KEY}`, {} holder of its slot, {} of the waiting jobs ran (must be 0).\n",
        head.waiting_at_end, head.hot_holders, head.waiting_ran
    );

    // Targets.
    md += "\n## Targets\n\n";
    let peak_pss = limited
        .tenths
        .iter()
        .map(|t| t.master_pss_kib)
        .max()
        .unwrap_or(0);
    let pss: Vec<f64> = limited
        .tenths
        .iter()
        .map(|t| mib(t.master_pss_kib))
        .collect();
    let (lo, hi) = (
        pss.iter().copied().fold(f64::INFINITY, f64::min),
        pss.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let control_pss = mib(control.peak_master_pss_kib);
    md += &format!(
        "- Master PSS ≤ 3 MiB (the issue's target): {:.2} MiB at most (the control, without limits: {:.2} MiB): **{}**\n",
        mib(peak_pss),
        control_pss,
        met(mib(peak_pss) <= 3.0)
    );
    let pss_flat = flat(&pss, 1.1).unwrap_or(false) && mib(peak_pss) <= 1.1 * control_pss;
    md += &format!(
        "- Master PSS flat as the keys come and go (no tenth above 1.1× the median tenth) and within 10% of the control: tenths {lo:.2}–{hi:.2} MiB against {control_pss:.2} MiB: **{}**\n",
        met(pss_flat)
    );
    let claims: Vec<f64> = limited.tenths.iter().map(|t| t.claim_ms).collect();
    let claim_flat = flat(&claims, 2.0);
    md += &format!(
        "- Claim time flat by tenth (no tenth above 2× the median tenth, shape 6's rule): max {:.3} ms, median {:.3} ms (the control's median {:.3} ms): **{}**\n",
        claims.iter().copied().filter(|x| x.is_finite()).fold(f64::NAN, f64::max),
        median(claims.clone()),
        median(control.tenths.iter().map(|t| t.claim_ms).collect::<Vec<f64>>()),
        claim_flat.map_or("not measured", met)
    );
    let keys: Vec<f64> = limited.tenths.iter().map(|t| t.limit_keys as f64).collect();
    let keys_ok = stops_growing(&keys, 0.5, 1000.0);
    md += &format!(
        "- drover.limit_keys flat once the windows turn (its rows at the end of the last tenth ≤ 1.5× those at the end of the second, + 1,000): {} → {} rows: **{}**\n",
        keys.get(1).copied().unwrap_or(f64::NAN),
        keys.last().copied().unwrap_or(f64::NAN),
        keys_ok.map_or("not measured", met)
    );
    let size: Vec<f64> = limited.tenths.iter().map(|t| mb(t.db_bytes)).collect();
    let size_ok = stops_growing(&size, 0.1, 0.0);
    let csize: Vec<f64> = control.tenths.iter().map(|t| mb(t.db_bytes)).collect();
    md += &format!(
        "- Database size flat once the windows turn (the end of the last tenth ≤ 1.1× the end of the second): {:.1} → {:.1} MB (the control: {:.1} → {:.1} MB): **{}**\n",
        size.get(1).copied().unwrap_or(f64::NAN),
        size.last().copied().unwrap_or(f64::NAN),
        csize.get(1).copied().unwrap_or(f64::NAN),
        csize.last().copied().unwrap_or(f64::NAN),
        size_ok.map_or("not measured", met)
    );
    md += &format!(
        "- Every limited job once, on attempt 1, never two of a cap-1 key out at once, nothing left: **{}**{}\n",
        met(limited.problems.is_empty()),
        if limited.problems.is_empty() { String::new() } else { format!(" ({})", limited.problems.join("; ")) }
    );
    let share = with_jps / without_jps;
    md += &format!(
        "- Nothing blocks the head, throughput (median drain with the {} waiting ≥ 90% of the median without): {:.0} against {:.0} jobs/s, {:.0}%: **{}**\n",
        sizes.waiting, with_jps, without_jps, share * 100.0, met(share >= 0.9)
    );
    let ratio = with_claim / without_claim;
    md += &format!(
        "- Nothing blocks the head, claim (median claim mean with ≤ 1.2× without): {:.3} against {:.3} ms, {:.2}×: **{}**\n",
        with_claim, without_claim, ratio, met(ratio <= 1.2)
    );
    md += &format!(
        "- None of the waiting jobs ran while the key was held: {} ran: **{}**\n",
        head.waiting_ran,
        met(head.waiting_ran == 0 && head.hot_holders == 1)
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, completed: u64, claims: f64, claim_ms: f64, keys: i64) -> Sample {
        let mut s = Sample {
            t,
            enqueued: completed + 5,
            completed,
            master_pss_kib: 2000 + completed,
            db_bytes: 1000 + completed as i64,
            limit_keys: keys,
            ..Sample::default()
        };
        s.stmts[CLAIM] = StmtStat {
            calls: claims,
            ms: claim_ms,
            rows: claims,
        };
        s
    }

    #[test]
    fn each_pair_has_a_concurrency_and_a_rate_key_and_its_jobs_are_back_to_back() {
        assert_eq!(pair_of(1, 2), (0, 0));
        assert_eq!(pair_of(2, 2), (0, 1));
        assert_eq!(pair_of(3, 2), (1, 0));
        assert_eq!(pair_of(5, 1), (4, 0));
        assert_eq!(
            limits_of(7),
            [("c7".to_string(), 1, 0), ("r7@1s".to_string(), 1, 1000)]
        );
        let sizes = ScaleSizes::full();
        assert_eq!((sizes.pairs(), sizes.jobs()), (500_000, 1_000_000));
        // A million keys, all distinct: the names carry the key's number.
        let names: std::collections::HashSet<String> =
            (0..5_000).flat_map(|p| limits_of(p).map(|l| l.0)).collect();
        assert_eq!(names.len(), 10_000);
    }

    #[test]
    fn the_payload_carries_the_seq_the_uuid_and_the_limit_as_joblimits_writes_it() {
        let t = Template::parse(
            "{\"uuid\":\"0b0b0b0b-0000-4000-8000-000000000000\",\"data\":{\"command\":\"O:15:\\\"App\\\\Jobs\\\\BenchJob\\\":2:{s:3:\\\"seq\\\";i:987654321;s:2:\\\"ms\\\";i:0;}\"}}",
        )
        .unwrap();
        let p = t.payload(42, &limits_of(3));
        let v: serde_json::Value = serde_json::from_str(&p).unwrap();
        assert_eq!(v["uuid"], "00000000-0000-4000-8000-00000000002a");
        assert!(v["data"]["command"].as_str().unwrap().contains("i:42;"));
        assert_eq!(
            v["droverLimits"],
            serde_json::json!([["c3", 1, 0], ["r3@1s", 1, 1000]])
        );
        let plain: serde_json::Value = serde_json::from_str(&t.payload(42, &[])).unwrap();
        assert!(plain.get("droverLimits").is_none());
    }

    #[test]
    fn tenths_split_the_run_by_completions() {
        // 100 jobs, one sample a second, 10 completions a second; the claim's total time grows
        // by 1 ms per call in the first half and 3 ms per call in the second.
        let mut samples = Vec::new();
        let (mut calls, mut ms) = (0.0, 0.0);
        for i in 0..=10u64 {
            samples.push(sample(i as f64, i * 10, calls, ms, 100 * i as i64));
            calls += 4.0;
            ms += if i < 5 { 4.0 } else { 12.0 };
        }
        let t = tenths(100, &samples);
        assert_eq!(t.len(), 10);
        for (d, x) in t.iter().enumerate() {
            assert_eq!(x.t_end, (d + 1) as f64);
            assert_eq!(x.completions_per_s, 10.0);
            assert_eq!(x.limit_keys, 100 * (d as i64 + 1));
            assert_eq!(x.master_pss_kib, 2000 + 10 * (d as u64 + 1));
            assert_eq!(x.backlog, 5);
        }
        assert_eq!(t[0].claim_ms, 1.0);
        assert_eq!(t[9].claim_ms, 3.0);
    }

    #[test]
    fn a_tenth_within_one_sample_has_no_rate_and_a_short_run_still_has_ten() {
        let samples = vec![sample(0.0, 0, 0.0, 0.0, 0), sample(1.0, 100, 2.0, 1.0, 0)];
        let t = tenths(100, &samples);
        assert_eq!(t.len(), 10);
        assert_eq!(t[0].completions_per_s, 100.0);
        assert!(t[1].completions_per_s.is_nan());
        assert!(t[1].claim_ms.is_nan());
        assert!(tenths(100, &[]).is_empty());
    }

    fn runs(records: &[(i32, f64, f64)]) -> Runs {
        let mut r = Runs::default();
        for (seq, s, f) in records {
            r.seq.push(*seq);
            r.attempt.push(1);
            r.pid.push(1);
            r.started.push(*s);
            r.finished.push(*f);
        }
        r
    }

    #[test]
    fn the_verifier_finds_overlaps_of_a_cap_1_key_and_counts_close_rate_starts() {
        // Pair 0: seq 1, 2; pair 1: seq 3, 4; pair 2: seq 5, 6.
        let commits = vec![f64::NAN, 0.0, 0.1, 0.0, 0.1, 0.0, 9.0];
        let r = runs(&[
            (1, 1.0, 2.0),
            (2, 2.1, 2.5), // 1.1 s after 1, after it finished
            (3, 1.0, 1.1),
            (4, 1.6, 1.7), // after 3 finished, but 0.6 s after it started
            (5, 3.0, 3.1),
            (6, 3.05, 9.6), // overlaps 5; enqueued after 5 finished: did not wait
            (6, 9.7, 9.8),  // duplicate
            (99, 0.0, 0.1),
        ]);
        let v = verify(6, 2, &commits, &r, true);
        assert_eq!(
            (
                v.completed,
                v.overlaps,
                v.waited,
                v.rate_closer_than_window,
                v.duplicated,
                v.unknown
            ),
            (6, 1, 2, 2, 1, 1)
        );
        assert!((v.rate_min_gap_s - 0.05).abs() < 1e-9);
        assert_eq!(v.problems().len(), 3);
        // The control has no keys: the same records make no overlap.
        assert_eq!(verify(6, 2, &commits, &r, false).overlaps, 0);
    }

    #[test]
    fn flat_and_stops_growing_judge_the_series() {
        assert_eq!(flat(&[1.0, 1.1, 0.9, 1.9], 2.0), Some(true));
        assert_eq!(flat(&[1.0, 1.1, 0.9, 2.5], 2.0), Some(false));
        assert_eq!(flat(&[f64::NAN, 1.0, 1.0], 2.0), Some(true));
        assert_eq!(flat(&[f64::NAN], 2.0), None);
        assert_eq!(
            stops_growing(&[5.0, 100.0, 120.0, 140.0], 0.5, 0.0),
            Some(true)
        );
        assert_eq!(
            stops_growing(&[5.0, 100.0, 120.0, 160.0], 0.5, 0.0),
            Some(false)
        );
        assert_eq!(stops_growing(&[0.0, 0.0, 900.0], 0.5, 1000.0), Some(true));
        assert_eq!(stops_growing(&[1.0], 0.5, 0.0), None);
    }

    /// SQL's LIKE with `%` only.
    fn like(text: &str, pattern: &str) -> bool {
        let parts: Vec<&str> = pattern.split('%').collect();
        let mut at = 0;
        for (i, part) in parts.iter().enumerate() {
            if i == 0 {
                if !text.starts_with(part) {
                    return false;
                }
                at = part.len();
            } else if i == parts.len() - 1 && !part.is_empty() {
                return text[at..].ends_with(part);
            } else {
                match text[at..].find(part) {
                    Some(p) => at += p + part.len(),
                    None => return false,
                }
            }
        }
        true
    }

    #[test]
    fn the_timed_statements_match_the_masters_sql() {
        let find = |name: &str| STATEMENTS.iter().find(|s| s.0 == name).unwrap().1;
        let claim = drover_broker::queries::claim().trim();
        let ack = include_str!("../../broker/queries/ack.sql").trim();
        let pass = include_str!("../../broker/queries/limit_pass.sql").trim();
        let purge = include_str!("../../broker/queries/limit_purge.sql").trim();
        assert!(like(claim, find("claim")));
        assert!(like(ack, find("ack")));
        assert!(like(pass, find("pass")));
        assert!(like(purge, find("purge")));
        assert!(!like(claim, find("pass")));
        assert!(like(ENQUEUE_LIMITED_SQL, find("enqueue")));
        assert!(like(INSERT_SQL, find("insert")));
    }
}
