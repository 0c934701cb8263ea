//! Shape 6: ordered groups (issue 19) at cardinality, and a hot group.
//!
//! **The cardinality run.** `groups_total` groups (1,000,000), none before the run, each given
//! `jobs_per_group` jobs (3) of the shape-2 no-op job (`App\Jobs\BenchJob`, ms = 0) while 4
//! forked drover workers drain. Open-loop producers ([`produce`], `producers` connections, 2;
//! each group's jobs all go through one of them, so in order) enqueue them through
//! `drover.enqueue` as fast as they can (or at `rate`), never looking at completions, through a
//! window of `window` groups that moves through the range. Its order is one rule
//! ([`Plan::window`]): job k of group g is enqueued at step g + k·S, with
//! S = window / (jobs − 1) (at least 1), the steps taken in order. So group g gets its first job
//! at step g and its last one S·(jobs − 1) steps later; every group is new when first used. A
//! job's seq (its number in BenchJob and in the records) is its place in that order, so its
//! group and position follow from its seq.
//!
//! The default window is jobs − 1, so S = 1: a group's jobs are enqueued back to back, a couple of
//! statements apart on one connection, much closer together than a job's pickup and run, so each
//! job after a group's first waits behind its group's head (in drover.group_jobs) while a million
//! groups are made and deleted. (With a window of 1,000, S = 500, the drain kept up with the
//! producers and no job ever waited behind a head, so order went untested: bench/notes.md.) The
//! verifier counts the pairs that did wait; the report calls order *not measured* when none did.
//!
//! **The yardstick** is shape 2 through drover (20,000 no-op jobs queued before the workers
//! start, ungrouped), run before, between and after the groups' runs of each round; the ratio is
//! taken against their median. **The control** (on unless `--no-groups-control`) is the
//! cardinality run again with the same producer, order and job count but no group: the payload
//! without `messageGroup`, a plain INSERT into drover.jobs, as `DroverQueue` does for an
//! ungrouped job. It separates what groups cost from what a concurrent producer costs.
//!
//! **The hot-group run.** One group of `hot_jobs` (10,000) jobs enqueued first, then
//! `small_groups` (1,000) groups of `small_jobs` (10) round-robin (position 0 of every small
//! group, then position 1, ...): the worst order for the small groups, which a FIFO queue would
//! run after all of the hot group's jobs. All of it is queued (one producer) before the workers
//! start, so the producer's speed does not decide what runs when; times are from the first
//! job's start.
//!
//! **The verifier** ([`verify`]) reads the per-job records (`seq attempt pid started finished`):
//! every seq exactly once on attempt 1 (else lost, duplicated, other attempt), and within each
//! group, for each consecutive pair of positions: an enqueue inversion if the later job's
//! enqueue ended before the earlier one's (the plan's order was then not the enqueue order), an
//! order violation if the later job started before the earlier one did, an overlap if it started
//! before the earlier one finished. It counts the pairs whose later job was enqueued before the
//! earlier one finished (it waited behind its head), and of them those enqueued before the
//! earlier one had even started: only those pairs could break order or overlap. The database
//! must be empty at the end: no job, no group row, no waiting job, no deferred group move, no
//! failed job.

use crate::measure::median;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use tokio_postgres::types::ToSql;

use crate::engines::{Engine, Running, WorkerSettings};
use crate::figure::f;
use crate::measure::{self, percentiles, Percentiles};
use crate::records::Runs;
use crate::sampler::{load_average_1m, Sampler};
use crate::shapes::{self, Shape};
use crate::sizes::{stride, GroupSizes, Sizes};
use crate::stack::Stack;

/// serde_json writes NaN as null: read a list of figures back with NaN for null.
fn nans_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Ok(Vec::<Option<f64>>::deserialize(d)?
        .into_iter()
        .map(|x| x.unwrap_or(f64::NAN))
        .collect())
}

/// Workers of every shape-6 run (one master, forked workers).
pub const WORKERS: usize = 4;

/// Each job's group and position in it, in enqueue order: job `seq` is `order[seq - 1]`.
pub struct Plan {
    pub order: Vec<(u32, u32)>,
    pub groups: u32,
    naming: Naming,
}

#[derive(Clone, Copy)]
enum Naming {
    /// `g<n>`.
    Window,
    /// Group 0 is `hot`, the others `s<n>`.
    Hot,
}

impl Plan {
    /// The cardinality run's order (module doc): job k of group g at step g + k·S.
    pub fn window(groups: u32, jobs_per_group: u32, window: u32) -> Plan {
        let (g, j) = (groups as u64, jobs_per_group.max(1) as u64);
        let stride = stride(jobs_per_group, window);
        let mut order = Vec::with_capacity((g * j) as usize);
        for step in 0..g + (j - 1) * stride {
            // At one step, the oldest group's job first.
            for k in (0..j).rev() {
                let off = k * stride;
                if step >= off && step - off < g {
                    order.push(((step - off) as u32, k as u32));
                }
            }
        }
        Plan {
            order,
            groups,
            naming: Naming::Window,
        }
    }

    /// The hot-group run's order: the hot group's jobs, then the small groups round-robin.
    pub fn hot(hot_jobs: u32, small_groups: u32, small_jobs: u32) -> Plan {
        let mut order: Vec<(u32, u32)> = (0..hot_jobs).map(|k| (0, k)).collect();
        for k in 0..small_jobs {
            for g in 1..=small_groups {
                order.push((g, k));
            }
        }
        Plan {
            order,
            groups: small_groups + 1,
            naming: Naming::Hot,
        }
    }

    pub fn group_name(&self, g: u32) -> String {
        match (self.naming, g) {
            (Naming::Window, g) => format!("g{g}"),
            (Naming::Hot, 0) => "hot".into(),
            (Naming::Hot, g) => format!("s{g}"),
        }
    }
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
    /// Asks the app for the payload of `new BenchJob(SENTINEL_SEQ, 0)` on the drover connection
    /// (`createPayload`, as `bulk()` and `push()` make it: the same payload shape 2 enqueues).
    fn fetch(stack: &Stack) -> anyhow::Result<Template> {
        let code = format!(
            "$q = Queue::connection('drover'); \
             $f = \\Closure::bind(fn ($job) => $this->createPayload($job, $this->getQueue(null), ''), $q, get_class($q)); \
             return $f(new App\\Jobs\\BenchJob({SENTINEL_SEQ}, 0));"
        );
        let text = stack.artisan(&["app:eval", &code])?;
        let text = text.trim();
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

    /// Appends job `seq`'s payload (a deterministic uuid; the group as the top-level
    /// `messageGroup`, where the Laravel package writes it) to `out`.
    fn push(&self, out: &mut String, seq: usize, group: Option<&str>) {
        use std::fmt::Write;
        out.push_str(&self.parts[0]);
        let _ = write!(out, "00000000-0000-4000-8000-{seq:012x}");
        out.push_str(&self.parts[1]);
        let _ = write!(out, "{seq}");
        out.push_str(&self.parts[2]);
        if let Some(g) = group {
            let _ = write!(out, ",\"messageGroup\":\"{g}\"");
        }
        out.push('}');
    }
}

/// What the producers did.
struct Produced {
    /// By seq (index 0 unused): the database's clock at the end of the job's enqueuing
    /// statement, i.e. just before its COMMIT (Unix seconds).
    commits: Vec<f64>,
    /// Wall clock when the first statement was sent and when the last commit returned.
    started: f64,
    finished: f64,
}

/// One producer's (seq, commit time) of its jobs, and its start and end (wall clock).
type OneProducer = (Vec<(u32, f64)>, f64, f64);

/// Statements a producer has in flight on its connection (pipelined; each its own transaction).
pub(crate) const IN_FLIGHT: usize = 64;

pub(crate) fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Polls every future, each first in the order given (tokio-postgres sends a statement's
/// request when its future is first polled, so they go out, and run, in this order), until all
/// are done.
pub(crate) async fn in_order<F: Future + Unpin>(mut futures: Vec<F>) -> Vec<F::Output> {
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futures.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match Pin::new(f).poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// The producer's statements: one job each, run as its own transaction (autocommit), as
/// `DroverQueue` runs a dispatch: `drover.enqueue` for a grouped job, the plain INSERT for an
/// ungrouped one; each returns the database's clock at its end, just before its commit.
const ENQUEUE_SQL: &str = "SELECT drover.enqueue('default', $1, 0, $2, false, NULL, NULL, 0::smallint, NULL), extract(epoch FROM clock_timestamp())::float8";
pub(crate) const INSERT_SQL: &str = "INSERT INTO drover.jobs (queue, payload, available_at) VALUES ('default', $1, clock_timestamp()) RETURNING id, extract(epoch FROM clock_timestamp())::float8";

/// One of `of` open-loop producers, on a thread and a connection of its own: the jobs of the
/// groups g with g mod `of` = `part`, in the plan's order (so each group's jobs come from one
/// connection, in order). Each job is its own transaction, as a Laravel dispatch is, so a
/// producer holds a group's lock only for its one statement (a transaction of several grouped
/// enqueues would hold each of their groups' locks until its commit, and the settles meanwhile
/// would defer those groups' moves to drover.group_pending); `IN_FLIGHT` statements are
/// pipelined. With `rate` > 0 (jobs/s, all producers together) each batch of
/// `IN_FLIGHT` waits for its time on the schedule. Returns (seq, commit time) of its jobs and
/// its start and end (wall clock).
fn produce(
    url: String,
    template: Template,
    plan: Arc<Plan>,
    (part, of): (usize, usize),
    grouped: bool,
    rate: f64,
    enqueued: Arc<AtomicU64>,
) -> std::thread::JoinHandle<anyhow::Result<OneProducer>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let client = drover_broker::connect::connect_once(&url).await?;
            let statement = client
                .prepare(if grouped { ENQUEUE_SQL } else { INSERT_SQL })
                .await?;
            let mine: Vec<usize> = (0..plan.order.len())
                .filter(|i| plan.order[*i].0 as usize % of == part)
                .collect();
            let mut commits = Vec::with_capacity(mine.len());
            let started = now_s();
            let t0 = tokio::time::Instant::now();
            for (c, chunk) in mine.chunks(IN_FLIGHT).enumerate() {
                if rate > 0.0 {
                    let due = (c * IN_FLIGHT) as f64 / (rate / of as f64);
                    tokio::time::sleep_until(t0 + Duration::from_secs_f64(due)).await;
                }
                let jobs: Vec<(String, String)> = chunk
                    .iter()
                    .map(|i| {
                        let name = plan.group_name(plan.order[*i].0);
                        let mut payload = String::with_capacity(1024);
                        template.push(&mut payload, i + 1, grouped.then_some(name.as_str()));
                        (payload, name)
                    })
                    .collect();
                let params: Vec<Vec<&(dyn ToSql + Sync)>> = jobs
                    .iter()
                    .map(|(payload, name)| {
                        let mut p: Vec<&(dyn ToSql + Sync)> = vec![payload];
                        if grouped {
                            p.push(name);
                        }
                        p
                    })
                    .collect();
                let futures: Vec<_> = params
                    .iter()
                    .map(|p| Box::pin(client.query_one(&statement, p)))
                    .collect();
                for (i, row) in chunk.iter().zip(in_order(futures).await) {
                    let row = row.with_context(|| format!("enqueueing job {}", i + 1))?;
                    let id: Option<i64> = row.get(0);
                    anyhow::ensure!(
                        id.is_some(),
                        "job {} was not enqueued (deduplicated?)",
                        i + 1
                    );
                    commits.push(((i + 1) as u32, row.get::<_, f64>(1)));
                }
                enqueued.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
            Ok((commits, started, now_s()))
        })
    })
}

/// `producers` producers over the plan; `join` waits for them all.
struct Producers {
    threads: Vec<std::thread::JoinHandle<anyhow::Result<OneProducer>>>,
    done: Vec<OneProducer>,
    n: usize,
}

impl Producers {
    fn start(
        stack: &Stack,
        template: &Template,
        plan: &Arc<Plan>,
        producers: usize,
        grouped: bool,
        rate: f64,
        enqueued: &Arc<AtomicU64>,
    ) -> Producers {
        let threads = (0..producers)
            .map(|p| {
                produce(
                    stack.pg.url().to_string(),
                    template.clone(),
                    plan.clone(),
                    (p, producers),
                    grouped,
                    rate,
                    enqueued.clone(),
                )
            })
            .collect();
        Producers {
            threads,
            done: Vec::new(),
            n: plan.order.len(),
        }
    }

    /// Collects the producers that have ended (without waiting); the first one's error.
    fn check(&mut self) -> anyhow::Result<()> {
        let mut i = 0;
        while i < self.threads.len() {
            if self.threads[i].is_finished() {
                let result = match self.threads.swap_remove(i).join() {
                    Ok(r) => r.context("a producer failed")?,
                    Err(_) => bail!("a producer panicked"),
                };
                self.done.push(result);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Waits for every producer.
    fn join(mut self) -> anyhow::Result<Produced> {
        for t in std::mem::take(&mut self.threads) {
            match t.join() {
                Ok(r) => self.done.push(r.context("a producer failed")?),
                Err(_) => bail!("a producer panicked"),
            }
        }
        let mut out = Produced {
            commits: vec![f64::NAN; self.n + 1],
            started: f64::MAX,
            finished: f64::MIN,
        };
        for (commits, started, finished) in self.done {
            for (seq, at) in commits {
                out.commits[seq as usize] = at;
            }
            out.started = out.started.min(started);
            out.finished = out.finished.max(finished);
        }
        Ok(out)
    }
}

/// What the verifier found over the per-job records.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub expected: u64,
    /// Distinct jobs with a record.
    pub completed: u64,
    pub lost: u64,
    /// Jobs with more than one record.
    pub duplicated: u64,
    /// Records of a seq not in the plan.
    pub unknown: u64,
    /// Records of an attempt other than 1.
    pub other_attempts: u64,
    /// Pairs of consecutive jobs of a group where the later one started first.
    pub order_violations: u64,
    /// Pairs where the later one started before the earlier one finished.
    pub overlaps: u64,
    /// Groups with at least one completed job.
    pub groups: u64,
    /// Consecutive pairs of a group's jobs with both run and both enqueue times known: what the
    /// order and overlap checks ran over.
    #[serde(default)]
    pub pairs: u64,
    /// Of them, pairs whose later job was enqueued (its enqueuing statement ended) before the
    /// earlier one finished: it waited behind its group's head. Only these pairs could break
    /// order or overlap; with none, order was not tested.
    #[serde(default)]
    pub waited: u64,
    /// Of those, pairs whose later job was enqueued before the earlier one had even started.
    #[serde(default)]
    pub waited_unstarted: u64,
    /// Pairs whose later job's enqueue ended before the earlier one's: the plan's order was not
    /// the order of the enqueues.
    #[serde(default)]
    pub enqueue_inversions: u64,
}

impl Verdict {
    /// What makes the run invalid. `grouped`: order violations and overlaps count; without
    /// groups (the control) nothing keeps a group's jobs apart, and they are what the same
    /// checks find then, not a fault.
    fn problems(&self, grouped: bool) -> Vec<String> {
        let (violations, overlaps) = if grouped {
            (self.order_violations, self.overlaps)
        } else {
            (0, 0)
        };
        let mut p = Vec::new();
        for (n, what) in [
            (self.lost, "jobs never completed"),
            (self.duplicated, "jobs completed more than once"),
            (self.unknown, "records of jobs not enqueued"),
            (self.other_attempts, "records of an attempt other than 1"),
            (violations, "order violations within a group"),
            (overlaps, "overlaps within a group"),
            (
                self.enqueue_inversions,
                "pairs of a group's jobs enqueued out of the plan's order",
            ),
        ] {
            if n > 0 {
                p.push(format!("{n} {what}"));
            }
        }
        p
    }
}

/// What a run's order checks rested on: the consecutive same-group pairs, those that waited
/// behind their head, and what the checks found over them.
pub fn order_tested(v: &Verdict) -> String {
    format!(
        "{} consecutive same-group pairs, {} of which waited behind their head (the later job enqueued before the earlier one finished; {} before it had started), {} enqueued out of the plan's order: {} order violations, {} overlaps{}",
        v.pairs,
        v.waited,
        v.waited_unstarted,
        v.enqueue_inversions,
        v.order_violations,
        v.overlaps,
        if v.waited == 0 {
            " — order not measured: no job waited behind its group's head, so these checks could not fail"
        } else {
            ""
        }
    )
}

/// The verdict, and per job the figures the records give.
struct Checked {
    verdict: Verdict,
    /// Commit → start, seconds, every job with a record and a commit time.
    pickups: Vec<f64>,
    /// (start, start − the previous job of its group's finish, group) for every job that was
    /// enqueued before the previous one finished, i.e. that waited behind it.
    handoffs: Vec<(f64, f64, u32)>,
    /// By seq: (started, finished) of its first record (NaN if none).
    times: Vec<(f64, f64)>,
}

fn verify(plan: &Plan, commits: &[f64], r: &Runs) -> Checked {
    let n = plan.order.len();
    let mut v = Verdict {
        expected: n as u64,
        ..Verdict::default()
    };
    let mut count = vec![0u32; n + 1];
    let mut times = vec![(f64::NAN, f64::NAN); n + 1];
    for i in 0..r.len() {
        let seq = r.seq[i];
        if seq < 1 || seq as usize > n {
            v.unknown += 1;
            continue;
        }
        let seq = seq as usize;
        count[seq] += 1;
        // Of duplicates, the earliest start counts for order (the duplicate is reported).
        if count[seq] == 1 || r.started[i] < times[seq].0 {
            times[seq] = (r.started[i], r.finished[i]);
        }
        if r.attempt[i] != 1 {
            v.other_attempts += 1;
        }
    }
    v.completed = count.iter().skip(1).filter(|c| **c > 0).count() as u64;
    v.lost = count.iter().skip(1).filter(|c| **c == 0).count() as u64;
    v.duplicated = count.iter().filter(|c| **c > 1).count() as u64;

    // Each group's jobs by position: offsets into one flat array.
    let groups = plan.groups as usize;
    let mut offsets = vec![0usize; groups + 1];
    for (g, _) in &plan.order {
        offsets[*g as usize + 1] += 1;
    }
    for g in 0..groups {
        offsets[g + 1] += offsets[g];
    }
    let mut slots = vec![0usize; n];
    for (i, (g, k)) in plan.order.iter().enumerate() {
        slots[offsets[*g as usize] + *k as usize] = i + 1;
    }
    let mut handoffs = Vec::new();
    for g in 0..groups {
        let jobs = &slots[offsets[g]..offsets[g + 1]];
        if jobs.iter().any(|s| count[*s] > 0) {
            v.groups += 1;
        }
        for w in jobs.windows(2) {
            let ((sa, fa), (sb, _)) = (times[w[0]], times[w[1]]);
            if sa.is_nan() || sb.is_nan() {
                continue;
            }
            if sb < sa {
                v.order_violations += 1;
            }
            if sb < fa {
                v.overlaps += 1;
            }
            let commit = |s: usize| commits.get(s).copied().unwrap_or(f64::NAN);
            let (ca, cb) = (commit(w[0]), commit(w[1]));
            if ca.is_nan() || cb.is_nan() {
                continue;
            }
            v.pairs += 1;
            if cb < ca {
                v.enqueue_inversions += 1;
            }
            if cb < fa {
                v.waited += 1;
                handoffs.push((sb, sb - fa, g as u32));
                if cb < sa {
                    v.waited_unstarted += 1;
                }
            }
        }
    }
    let pickups = (1..=n)
        .filter(|s| !times[*s].0.is_nan() && commits.get(*s).is_some_and(|c| c.is_finite()))
        .map(|s| times[s].0 - commits[s])
        .collect();
    Checked {
        verdict: v,
        pickups,
        handoffs,
        times,
    }
}

/// One table's row counts and size, from `pg_stat_user_tables`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TableStat {
    pub live: i64,
    pub dead: i64,
    /// pg_total_relation_size (indexes and TOAST included).
    pub bytes: i64,
    /// n_tup_ins (cumulative since the cluster started).
    pub inserted: i64,
    /// autovacuum_count (cumulative).
    #[serde(default)]
    pub autovacuums: i64,
}

/// The three tables of ordered groups, in this order everywhere.
pub const TABLES: [&str; 3] = ["drover.jobs", "drover.groups", "drover.group_jobs"];

/// One sample of the run, every 500 ms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupSample {
    /// Seconds since the producer started.
    pub t: f64,
    pub enqueued: u64,
    pub completed: u64,
    pub db_bytes: i64,
    /// `count(*)` of drover.groups: the groups that have jobs.
    #[serde(default)]
    pub groups: i64,
    /// `count(*)` of drover.group_pending: group moves deferred behind a producer's lock.
    #[serde(default)]
    pub pending: i64,
    pub tables: [TableStat; 3],
    /// The machine's 1-minute load average (NaN: not read).
    #[serde(default = "no_figure", deserialize_with = "measure::nan_if_null")]
    pub load1: f64,
}

fn no_figure() -> f64 {
    f64::NAN
}

/// How loaded the machine was around a run: the 1-minute load average (`/proc/loadavg`) just
/// before its workers started, and its highest and median over the run's samples. It counts the
/// run's own processes (the workers, the master, PostgreSQL's backends, the producers) besides
/// whatever else ran on the machine; the figure before the run is the others' alone.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Load {
    pub cores: usize,
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub before: f64,
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub max: f64,
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub median: f64,
}

impl Default for Load {
    fn default() -> Load {
        Load {
            cores: 0,
            before: f64::NAN,
            max: f64::NAN,
            median: f64::NAN,
        }
    }
}

impl Load {
    fn over(before: f64, samples: &[GroupSample]) -> Load {
        Load {
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            before,
            max: samples
                .iter()
                .map(|s| s.load1)
                .filter(|x| x.is_finite())
                .fold(f64::NAN, f64::max),
            median: median(samples.iter().map(|s| s.load1)),
        }
    }
}

/// A run's conditions: its size, workers and the machine's load.
pub fn run_conditions(groups: u64, jobs: u64, workers: usize, load: &Load) -> String {
    format!(
        "{groups} groups, {jobs} jobs, {workers} workers; machine: {} cores, 1-minute load average {} just before the workers started, {} at most and {} median while they ran (the run's own processes included)",
        load.cores,
        f(load.before, 2),
        f(load.max, 2),
        f(load.median, 2)
    )
}

/// Cumulative pg_stat_statements counters of one kind of statement.
#[derive(Debug, Clone, Copy, Default)]
struct StmtStat {
    calls: f64,
    ms: f64,
    rows: f64,
}

/// The statements timed per tenth: the master's claim and ack, the producer's enqueue or insert
/// (`LIKE` patterns on pg_stat_statements' text, where constants are normalized to `$n`, so
/// each is one entry).
const STATEMENTS: [(&str, &str); 5] = [
    // The claim (broker/queries/claim.sql): its token is a parameter reserved ahead, so the
    // pattern names its structure, as shape 8's does. Its rows include the acks that rode with
    // it, which are of ungrouped jobs only.
    ("claim", "%FOR UPDATE SKIP LOCKED%leased AS (%SET lease_token%"),
    // After each settle batch: the group moves the trigger deferred behind a producer's lock.
    ("catch up", "%SELECT drover.groups_catch_up()%"),
    ("ack", "%DELETE FROM drover.jobs AS j%USING unnest($1::bigint[], $2::bigint[]) AS s(id, token)%RETURNING j.id"),
    ("enqueue", "%SELECT drover.enqueue(%"),
    (
        "insert",
        "%INSERT INTO drover.jobs (queue, payload, available_at) VALUES (%clock_timestamp()) RETURNING id, extract(%",
    ),
];

async fn table_stats(stack: &Stack) -> anyhow::Result<[TableStat; 3]> {
    let rows = stack
        .client
        .query(
            "SELECT schemaname || '.' || relname, n_live_tup, n_dead_tup,
                    pg_total_relation_size(relid), n_tup_ins, autovacuum_count
             FROM pg_stat_user_tables
             WHERE schemaname = 'drover' AND relname IN ('jobs', 'groups', 'group_jobs')",
            &[],
        )
        .await?;
    let mut out = [TableStat::default(); 3];
    for r in rows {
        let name: String = r.get(0);
        if let Some(i) = TABLES.iter().position(|t| *t == name) {
            out[i] = TableStat {
                live: r.get(1),
                dead: r.get(2),
                bytes: r.get(3),
                inserted: r.get(4),
                autovacuums: r.get(5),
            };
        }
    }
    Ok(out)
}

async fn stmt_stats(stack: &Stack) -> anyhow::Result<[StmtStat; 5]> {
    let mut out = [StmtStat::default(); 5];
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

/// Per tenth of the run: tenth d spans the completions from d·n/10 to (d+1)·n/10. The
/// statement figures are the pg_stat_statements deltas between the first samples at or past
/// those counts (NaN when a tenth fell within one sampling interval); the records' figures split
/// the jobs by start order; the table figures are the sample ending the tenth.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tenths {
    /// Seconds since the producer started, at the end of each tenth.
    #[serde(default, deserialize_with = "nans_if_null")]
    pub t_s: Vec<f64>,
    /// The master's claim statement: mean execution time per call, ms (pg_stat_statements).
    #[serde(default, deserialize_with = "nans_if_null")]
    pub claim_ms: Vec<f64>,
    /// Jobs it returned per call.
    #[serde(default, deserialize_with = "nans_if_null")]
    pub jobs_per_claim: Vec<f64>,
    /// The master's ack statement (the DELETE whose trigger moves each group's next job in).
    #[serde(default, deserialize_with = "nans_if_null")]
    pub ack_ms: Vec<f64>,
    /// The same per job claimed or acked (`total_exec_time` / `rows`): claims and acks are
    /// batched, and their batches grow with the backlog.
    #[serde(default, deserialize_with = "nans_if_null")]
    pub claim_ms_per_job: Vec<f64>,
    #[serde(default, deserialize_with = "nans_if_null")]
    pub ack_ms_per_job: Vec<f64>,
    /// `drover.groups_catch_up()`, run by the master after each settle batch.
    #[serde(default, deserialize_with = "nans_if_null")]
    pub catch_up_ms: Vec<f64>,
    /// The producer's statement (`drover.enqueue`, or the INSERT of the control).
    #[serde(default, deserialize_with = "nans_if_null")]
    pub enqueue_ms: Vec<f64>,
    /// Median wait of a worker between finishing one job and starting its next (the records).
    #[serde(default, deserialize_with = "nans_if_null")]
    pub worker_wait_ms: Vec<f64>,
    /// Median group handoff: a job's start − its group's previous job's finish (the records).
    #[serde(default, deserialize_with = "nans_if_null")]
    pub handoff_p50_ms: Vec<f64>,
    /// `count(*)` of drover.groups.
    #[serde(default)]
    pub groups: Vec<i64>,
    /// Rows of each table in `TABLES` (pg_stat_user_tables' estimates): live and dead.
    pub live: Vec<[i64; 3]>,
    pub dead: Vec<[i64; 3]>,
}

fn tenths(
    n: usize,
    samples: &[GroupSample],
    stmts: &[[StmtStat; 5]],
    r: &Runs,
    handoffs: &[(f64, f64, u32)],
    grouped: bool,
) -> Tenths {
    let mut out = Tenths::default();
    if samples.is_empty() {
        return out;
    }
    let at = |count: usize| {
        samples
            .iter()
            .position(|s| s.completed as usize >= count)
            .unwrap_or(samples.len() - 1)
    };
    let bounds: Vec<usize> = (0..=10)
        .map(|d| if d == 0 { 0 } else { at(d * n / 10) })
        .collect();
    let producer = if grouped { 3 } else { 4 };
    for d in 0..10 {
        let (a, b) = (bounds[d], bounds[d + 1]);
        let delta = |k: usize| {
            let (x, y) = (stmts[a][k], stmts[b][k]);
            (y.calls - x.calls, y.ms - x.ms, y.rows - x.rows)
        };
        let per_call = |k: usize| {
            let (calls, ms, _) = delta(k);
            if calls > 0.0 {
                ms / calls
            } else {
                f64::NAN
            }
        };
        out.claim_ms.push(per_call(0));
        let (calls, _, rows) = delta(0);
        out.jobs_per_claim
            .push(if calls > 0.0 { rows / calls } else { f64::NAN });
        out.ack_ms.push(per_call(2));
        out.catch_up_ms.push(per_call(1));
        let per_row = |k: usize| {
            let (_, ms, rows) = delta(k);
            if rows > 0.0 {
                ms / rows
            } else {
                f64::NAN
            }
        };
        out.claim_ms_per_job.push(per_row(0));
        out.ack_ms_per_job.push(per_row(2));
        out.enqueue_ms.push(per_call(producer));
        out.t_s.push(samples[b].t);
        out.groups.push(samples[b].groups);
        out.live.push(samples[b].tables.map(|t| t.live));
        out.dead.push(samples[b].tables.map(|t| t.dead));
    }
    out.worker_wait_ms = measure::claim_gaps(r);
    let mut h: Vec<(f64, f64)> = handoffs.iter().map(|(s, x, _)| (*s, *x)).collect();
    h.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.handoff_p50_ms = (0..10)
        .map(|d| {
            let slice = &h[d * h.len() / 10..(d + 1) * h.len() / 10];
            percentiles(slice.iter().map(|x| x.1).collect()).p50_ms
        })
        .collect();
    out
}

/// Shape 2's figure in the same invocation, the yardstick.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Yardstick {
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub jobs_per_s: f64,
    pub master_pss_kib: u64,
    pub valid: bool,
    pub problems: Vec<String>,
}

/// One cardinality run (grouped, or the ungrouped control).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CardinalityRun {
    pub grouped: bool,
    pub groups: u32,
    pub jobs: u64,
    /// The verifier's verdict clean and the database empty at the end.
    pub valid: bool,
    pub problems: Vec<String>,
    pub verdict: Verdict,
    /// Distinct completed jobs / (first job start → last job finish).
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub jobs_per_s: f64,
    /// Jobs / (first statement sent → last commit returned).
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub enqueue_jobs_per_s: f64,
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub enqueue_s: f64,
    /// First job start → last job finish.
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub drain_s: f64,
    /// The most jobs enqueued and not yet completed at a sample.
    pub peak_backlog: u64,
    /// Commit → start, every job.
    pub pickup: Percentiles,
    /// Group handoff: a job's start − its group's previous job's finish, over the jobs enqueued
    /// before that finish (they waited behind it): the settle, the trigger that makes the job its
    /// group's head, and then the claim, the delivery and any wait behind older jobs of other
    /// groups (a new head keeps its enqueue time, its place in the claim order).
    pub handoff: Percentiles,
    pub handoffs: u64,
    /// The database without the measurement's table.
    pub db_bytes_before: i64,
    pub db_bytes_peak: i64,
    pub db_bytes_after_drain: i64,
    pub db_bytes_after_vacuum: i64,
    /// Seconds from the last completion until the master had compacted drover.jobs (60 = it
    /// had not); None when it never grew past the compaction threshold.
    pub compacted_after_s: Option<f64>,
    /// `TABLES` after the drain (the master stopped), before the bench's VACUUM.
    pub tables_after_drain: [TableStat; 3],
    /// Rows inserted into each of `TABLES` during the run (n_tup_ins): group rows created, jobs
    /// that waited behind a head.
    pub rows_inserted: [i64; 3],
    /// Autovacuums of each of `TABLES` during the run.
    #[serde(default)]
    pub autovacuums: [i64; 3],
    /// Rows of drover.groups when the run started.
    #[serde(default)]
    pub groups_before: i64,
    /// The most dead tuples of each table at a sample.
    pub max_dead: [i64; 3],
    /// The most rows of drover.group_pending at a sample.
    #[serde(default)]
    pub max_pending: i64,
    pub master_pss_kib: u64,
    pub stack_pss_kib: u64,
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub master_cpu_s: f64,
    pub tenths: Tenths,
    pub samples: Vec<GroupSample>,
    /// Workers draining (one master).
    #[serde(default)]
    pub workers: usize,
    #[serde(default)]
    pub load: Load,
}

/// The hot-group run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HotRun {
    pub hot_jobs: u32,
    pub small_groups: u32,
    pub small_jobs: u32,
    pub valid: bool,
    pub problems: Vec<String>,
    pub verdict: Verdict,
    /// Seconds the producer took to queue every job (before the workers started).
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub enqueue_s: f64,
    /// Seconds from the first job's start: the hot group's last job finished, the last small
    /// group's last job finished, the median small group's last job finished.
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub hot_done_s: f64,
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub small_done_s: f64,
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub small_median_done_s: f64,
    /// Hot-group jobs finished when the last small group finished.
    pub hot_jobs_done_when_small_done: u64,
    /// Hot-group jobs / (its first start → its last finish).
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub hot_jobs_per_s: f64,
    /// Hot group: start − its previous job's finish.
    pub hot_handoff: Percentiles,
    #[serde(deserialize_with = "measure::nan_if_null")]
    pub jobs_per_s: f64,
    pub master_pss_kib: u64,
    #[serde(default)]
    pub workers: usize,
    #[serde(default)]
    pub load: Load,
}

/// One round of shape 6.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupRound {
    pub yardsticks: Vec<Yardstick>,
    pub grouped: CardinalityRun,
    pub control: Option<CardinalityRun>,
    pub hot: HotRun,
}

impl GroupRound {
    /// The median of the valid yardstick runs.
    pub fn yardstick_jobs_per_s(&self) -> f64 {
        median(
            self.yardsticks
                .iter()
                .filter(|y| y.valid)
                .map(|y| y.jobs_per_s),
        )
    }
    pub fn yardstick_master_pss_kib(&self) -> f64 {
        median(
            self.yardsticks
                .iter()
                .filter(|y| y.valid)
                .map(|y| y.master_pss_kib as f64),
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupFigures {
    pub sizes: GroupSizes,
    /// Each worker's prefetch (0: not recorded, runs before it was).
    #[serde(default)]
    pub prefetch: usize,
    /// Claims were timed with pg_stat_statements.
    pub stat_statements: bool,
    pub rounds: Vec<GroupRound>,
}

/// Every run of shape 6, `rounds` times: yardstick, grouped, yardstick, control, yardstick,
/// hot group.
pub async fn run(stack: &Stack, sizes: &Sizes, rounds: usize) -> anyhow::Result<GroupFigures> {
    let template = Template::fetch(stack).context("BenchJob's payload")?;
    let gs = sizes.groups;
    let mut figures = GroupFigures {
        sizes: gs,
        prefetch: sizes.prefetch,
        stat_statements: stack.stat_statements,
        rounds: Vec::new(),
    };
    for round in 1..=rounds {
        let mut yardsticks = Vec::new();
        yardstick(stack, sizes, round, rounds, &mut yardsticks).await;
        eprintln!(
            "bench: shape 6 round {round} of {rounds}: {} groups × {} jobs, grouped",
            gs.groups_total, gs.jobs_per_group
        );
        let grouped = cardinality(stack, sizes, true, &template)
            .await
            .context("shape 6, grouped")?;
        report_run(&grouped);
        yardstick(stack, sizes, round, rounds, &mut yardsticks).await;
        let control = if gs.control {
            eprintln!("bench: shape 6 round {round} of {rounds}: the ungrouped control");
            let c = cardinality(stack, sizes, false, &template)
                .await
                .context("shape 6, ungrouped control")?;
            report_run(&c);
            Some(c)
        } else {
            None
        };
        yardstick(stack, sizes, round, rounds, &mut yardsticks).await;
        eprintln!(
            "bench: shape 6 round {round} of {rounds}: a hot group of {} beside {} groups of {}",
            gs.hot_jobs, gs.small_groups, gs.small_jobs
        );
        let hot = hot_group(stack, sizes, &template)
            .await
            .context("shape 6, hot group")?;
        eprintln!(
            "bench:   hot group done at {:.1} s, the last small group at {:.1} s (median {:.1} s), {} of the hot group's jobs done by then; valid: {}{}",
            hot.hot_done_s, hot.small_done_s, hot.small_median_done_s, hot.hot_jobs_done_when_small_done, hot.valid,
            if hot.valid { String::new() } else { format!(" ({})", hot.problems.join("; ")) }
        );
        eprintln!("bench:   order: {}", order_tested(&hot.verdict));
        eprintln!(
            "bench:   conditions: {}",
            run_conditions(
                hot.verdict.groups,
                hot.verdict.expected,
                hot.workers,
                &hot.load
            )
        );
        figures.rounds.push(GroupRound {
            yardsticks,
            grouped,
            control,
            hot,
        });
    }
    Ok(figures)
}

fn report_run(r: &CardinalityRun) {
    eprintln!(
        "bench:   {:.0} jobs/s, enqueue {:.0} jobs/s, peak backlog {}, pickup p50 {:.1} ms, master PSS {:.2} MiB, valid: {}{}",
        r.jobs_per_s,
        r.enqueue_jobs_per_s,
        r.peak_backlog,
        r.pickup.p50_ms,
        r.master_pss_kib as f64 / 1024.0,
        r.valid,
        if r.valid { String::new() } else { format!(" ({})", r.problems.join("; ")) }
    );
    eprintln!("bench:   order: {}", order_tested(&r.verdict));
    eprintln!(
        "bench:   conditions: {}",
        run_conditions(r.groups as u64, r.jobs, r.workers, &r.load)
    );
}

async fn yardstick(
    stack: &Stack,
    sizes: &Sizes,
    round: usize,
    rounds: usize,
    out: &mut Vec<Yardstick>,
) {
    eprintln!(
        "bench: shape 6 round {round} of {rounds}: yardstick {} (shape 2, drover, ungrouped)",
        out.len() + 1
    );
    match shapes::run(stack, Engine::Drover, Shape::Overhead, sizes).await {
        Ok(r) => {
            eprintln!(
                "bench:   {:.0} jobs/s, master PSS {:.2} MiB, valid: {}",
                r.jobs_per_s,
                r.usage.peak_orchestrator_kib as f64 / 1024.0,
                r.valid
            );
            out.push(Yardstick {
                jobs_per_s: r.jobs_per_s,
                master_pss_kib: r.usage.peak_orchestrator_kib,
                valid: r.valid,
                problems: r.problems,
            });
        }
        Err(e) => eprintln!("bench:   yardstick failed: {e:#}"),
    }
}

/// Whatever is left in the database that should not be, waiting up to 3 s for the master's
/// last settles to land.
async fn leftovers(stack: &Stack) -> anyhow::Result<Vec<String>> {
    let checks = [
        (
            "jobs left in drover.jobs",
            "SELECT count(*) FROM drover.jobs",
        ),
        (
            "groups left in drover.groups",
            "SELECT count(*) FROM drover.groups",
        ),
        (
            "jobs left waiting in drover.group_jobs",
            "SELECT count(*) FROM drover.group_jobs",
        ),
        (
            "group moves left in drover.group_pending",
            "SELECT count(*) FROM drover.group_pending",
        ),
        (
            "held-group failures left in drover.group_failures",
            "SELECT count(*) FROM drover.group_failures",
        ),
        (
            "failed jobs in failed_jobs",
            "SELECT count(*) FROM public.failed_jobs",
        ),
        (
            "failed jobs in drover.failed_jobs",
            "SELECT count(*) FROM drover.failed_jobs",
        ),
    ];
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let mut problems = Vec::new();
        for (what, sql) in checks {
            let n = stack.scalar_i64(sql).await?;
            if n != 0 {
                problems.push(format!("{n} {what}"));
            }
        }
        if problems.is_empty() || Instant::now() > deadline {
            return Ok(problems);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Starts drover with 4 workers, then the producers (or, `queued_first`, the producers, then
/// drover once they are done); samples every 500 ms until every job has a record.
async fn produce_and_drain(
    stack: &Stack,
    sizes: &Sizes,
    plan: Arc<Plan>,
    grouped: bool,
    template: &Template,
    queued_first: bool,
) -> anyhow::Result<Drained> {
    let n = plan.order.len();
    let enqueued = Arc::new(AtomicU64::new(0));
    let settings = WorkerSettings::new(WORKERS, sizes.prefetch, 0);
    let start_producers = || {
        Producers::start(
            stack,
            template,
            &plan,
            if queued_first {
                1
            } else {
                sizes.groups.producers.max(1)
            },
            grouped,
            if queued_first { 0.0 } else { sizes.groups.rate },
            &enqueued,
        )
    };
    let mut load_before = load_average_1m();
    let (mut running, mut producers, t0) = if queued_first {
        let t0 = Instant::now();
        let producers = start_producers();
        let produced = producers.join()?;
        load_before = load_average_1m();
        let running = Running::start(Engine::Drover, stack, settings).await?;
        (running, Err(produced), t0)
    } else {
        let running = Running::start(Engine::Drover, stack, settings).await?;
        (running, Ok(None), Instant::now())
    };
    // Whatever fails from here, the engine is stopped first (its database goes with the stack).
    let watched: anyhow::Result<_> = async {
        let sampler = Sampler::start(running.pid_source());
        if stack.stat_statements {
            stack
                .client
                .batch_execute("SELECT pg_stat_statements_reset()")
                .await?;
        }
        if let Ok(p) = &mut producers {
            *p = Some(start_producers());
        }
        let mut samples = Vec::new();
        let mut stmts = Vec::new();
        // A generous bound: 200 jobs/s, at least 10 minutes.
        let timeout = Duration::from_secs((n as u64 / 200).max(600));
        loop {
            running.supervise(stack)?;
            let completed = stack.completed()? as u64;
            let sample = GroupSample {
                t: t0.elapsed().as_secs_f64(),
                enqueued: enqueued.load(Ordering::Relaxed),
                completed,
                db_bytes: measure::db_size(stack).await?,
                groups: stack
                    .scalar_i64("SELECT count(*) FROM drover.groups")
                    .await?,
                pending: stack
                    .scalar_i64("SELECT count(*) FROM drover.group_pending")
                    .await?,
                tables: table_stats(stack).await?,
                load1: load_average_1m(),
            };
            samples.push(sample);
            stmts.push(stmt_stats(stack).await?);
            if completed as usize >= n {
                break;
            }
            if let Ok(Some(p)) = &mut producers {
                p.check()?;
            }
            anyhow::ensure!(
                t0.elapsed() < timeout,
                "only {completed} of {n} jobs completed within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let drained_at = Instant::now();
        // Let stragglers (duplicates, if any) land before verifying.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let usage = sampler.finish().await;
        let produced = match producers {
            Err(produced) => produced,
            Ok(Some(p)) => p.join()?,
            Ok(None) => bail!("no producer"),
        };
        let runs = stack.runs()?;
        Ok((produced, runs, samples, stmts, usage, drained_at))
    }
    .await;
    match watched {
        Ok((produced, runs, samples, stmts, usage, drained_at)) => Ok(Drained {
            load: Load::over(load_before, &samples),
            running,
            produced,
            runs,
            samples,
            stmts,
            usage,
            drained_at,
        }),
        Err(e) => {
            let _ = running.stop().await;
            Err(e)
        }
    }
}

struct Drained {
    load: Load,
    running: Running,
    produced: Produced,
    runs: Runs,
    samples: Vec<GroupSample>,
    stmts: Vec<[StmtStat; 5]>,
    usage: crate::sampler::Usage,
    drained_at: Instant,
}

fn span(r: &Runs) -> f64 {
    let first = r.started.iter().cloned().fold(f64::MAX, f64::min);
    let last = r.finished.iter().cloned().fold(f64::MIN, f64::max);
    last - first
}

async fn cardinality(
    stack: &Stack,
    sizes: &Sizes,
    grouped: bool,
    template: &Template,
) -> anyhow::Result<CardinalityRun> {
    let gs = sizes.groups;
    let plan = Arc::new(Plan::window(gs.groups_total, gs.jobs_per_group, gs.window));
    let n = plan.order.len();
    stack.reset().await?;
    let db_bytes_before = measure::db_size(stack).await?;
    let stats_before = table_stats(stack).await?;
    let groups_before = stack
        .scalar_i64("SELECT count(*) FROM drover.groups")
        .await?;
    let d = produce_and_drain(stack, sizes, plan.clone(), grouped, template, false).await?;
    let checked = verify(&plan, &d.produced.commits, &d.runs);
    let mut problems = checked.verdict.problems(grouped);
    // Stop the engine whatever this gives.
    let after: anyhow::Result<Option<f64>> = async {
        problems.extend(leftovers(stack).await?);
        // drover compacts its drained table itself (shape 4): wait for that rather than stop
        // the master first.
        let size = "SELECT pg_total_relation_size('drover.jobs')";
        if stack.scalar_i64(size).await? <= drover_broker::compact::COMPACT_ABOVE {
            return Ok(None);
        }
        while stack.scalar_i64(size).await? > drover_broker::compact::COMPACT_ABOVE
            && d.drained_at.elapsed() < Duration::from_secs(60)
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(Some(d.drained_at.elapsed().as_secs_f64()))
    }
    .await;
    d.running.stop().await?;
    let compacted_after_s = after?;
    let db_bytes_after_drain = measure::db_size(stack).await?;
    // The master's backends flushed their statistics when they closed.
    let tables_after_drain = table_stats(stack).await?;
    // What autovacuum does on its own schedule, done now so the figure does not depend on
    // timing; one statement per call (VACUUM cannot run in a transaction).
    for t in TABLES {
        stack.client.batch_execute(&format!("VACUUM {t}")).await?;
    }
    let db_bytes_after_vacuum = measure::db_size(stack).await?;

    let samples = d.samples;
    let mut max_dead = [0i64; 3];
    for s in &samples {
        for (m, t) in max_dead.iter_mut().zip(s.tables.iter()) {
            *m = (*m).max(t.dead);
        }
    }
    let tenths = tenths(n, &samples, &d.stmts, &d.runs, &checked.handoffs, grouped);
    let enqueue_s = d.produced.finished - d.produced.started;
    Ok(CardinalityRun {
        grouped,
        groups: if grouped { gs.groups_total } else { 0 },
        jobs: n as u64,
        valid: problems.is_empty(),
        problems,
        jobs_per_s: checked.verdict.completed as f64 / span(&d.runs),
        verdict: checked.verdict,
        enqueue_jobs_per_s: n as f64 / enqueue_s,
        enqueue_s,
        drain_s: span(&d.runs),
        peak_backlog: samples
            .iter()
            .map(|s| s.enqueued.saturating_sub(s.completed))
            .max()
            .unwrap_or(0),
        pickup: percentiles(checked.pickups),
        handoffs: checked.handoffs.len() as u64,
        handoff: percentiles(checked.handoffs.iter().map(|h| h.1).collect()),
        db_bytes_before,
        db_bytes_peak: samples
            .iter()
            .map(|s| s.db_bytes)
            .max()
            .unwrap_or(0)
            .max(db_bytes_before),
        db_bytes_after_drain,
        db_bytes_after_vacuum,
        compacted_after_s,
        tables_after_drain,
        rows_inserted: [0, 1, 2].map(|i| tables_after_drain[i].inserted - stats_before[i].inserted),
        autovacuums: [0, 1, 2]
            .map(|i| tables_after_drain[i].autovacuums - stats_before[i].autovacuums),
        groups_before,
        max_dead,
        max_pending: samples.iter().map(|s| s.pending).max().unwrap_or(0),
        master_pss_kib: d.usage.peak_orchestrator_kib,
        stack_pss_kib: d.usage.peak_stack_kib,
        master_cpu_s: d.usage.orchestrator_cpu_s,
        tenths,
        samples,
        workers: WORKERS,
        load: d.load,
    })
}

async fn hot_group(stack: &Stack, sizes: &Sizes, template: &Template) -> anyhow::Result<HotRun> {
    let gs = sizes.groups;
    let plan = Arc::new(Plan::hot(gs.hot_jobs, gs.small_groups, gs.small_jobs));
    stack.reset().await?;
    let d = produce_and_drain(stack, sizes, plan.clone(), true, template, true).await?;
    let checked = verify(&plan, &d.produced.commits, &d.runs);
    let mut problems = checked.verdict.problems(true);
    let left = leftovers(stack).await;
    d.running.stop().await?;
    problems.extend(left?);

    // The backlog was queued before the workers started: times from the first job's start.
    let t0 = d.runs.started.iter().cloned().fold(f64::MAX, f64::min);
    let hot = 1..=gs.hot_jobs as usize;
    let hot_done = hot
        .clone()
        .map(|s| checked.times[s].1)
        .fold(f64::NAN, f64::max);
    let hot_first = hot
        .clone()
        .map(|s| checked.times[s].0)
        .fold(f64::NAN, f64::min);
    // Each small group's last finish.
    let mut small_last = vec![f64::NAN; gs.small_groups as usize + 1];
    for (i, (g, _)) in plan.order.iter().enumerate() {
        if *g > 0 {
            let f = checked.times[i + 1].1;
            small_last[*g as usize] = small_last[*g as usize].max(f);
        }
    }
    let small: Vec<f64> = small_last[1..].to_vec();
    let small_done = small.iter().cloned().fold(f64::NAN, f64::max);
    let small_median = median(small.iter().cloned());
    let hot_by_then = hot
        .clone()
        .filter(|s| checked.times[*s].1 <= small_done)
        .count() as u64;
    let hot_handoffs: Vec<f64> = checked
        .handoffs
        .iter()
        .filter(|h| h.2 == 0)
        .map(|h| h.1)
        .collect();
    Ok(HotRun {
        hot_jobs: gs.hot_jobs,
        small_groups: gs.small_groups,
        small_jobs: gs.small_jobs,
        valid: problems.is_empty(),
        problems,
        jobs_per_s: checked.verdict.completed as f64 / span(&d.runs),
        verdict: checked.verdict,
        enqueue_s: d.produced.finished - d.produced.started,
        hot_done_s: hot_done - t0,
        small_done_s: small_done - t0,
        small_median_done_s: small_median - t0,
        hot_jobs_done_when_small_done: hot_by_then,
        hot_jobs_per_s: gs.hot_jobs as f64 / (hot_done - hot_first),
        hot_handoff: percentiles(hot_handoffs),
        master_pss_kib: d.usage.peak_orchestrator_kib,
        workers: WORKERS,
        load: d.load,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_gives_every_group_its_jobs_in_order_and_holds_window_groups() {
        let plan = Plan::window(5000, 3, 1000);
        assert_eq!(plan.order.len(), 15_000);
        let mut next = vec![0u32; 5000];
        let mut active = std::collections::BTreeSet::new();
        let mut most = 0;
        for (g, k) in &plan.order {
            assert_eq!(next[*g as usize], *k, "group {g} out of order");
            next[*g as usize] += 1;
            if *k == 0 {
                // New when first used: no group after it has started yet.
                assert!(active.iter().all(|a| a < g));
                active.insert(*g);
            }
            if *k == 2 {
                active.remove(g);
            }
            most = most.max(active.len());
        }
        assert!(next.iter().all(|n| *n == 3));
        assert!(
            (1000..=1001).contains(&most),
            "{most} groups active at once"
        );
    }

    /// SQL's LIKE with `%` only (the patterns have no `_` meant as a wildcard).
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
    fn the_timed_statements_match_the_masters_sql_and_only_it() {
        // As pg_stat_statements keeps them: leading and trailing white space trimmed.
        let claim = drover_broker::queries::claim().trim();
        let ack = include_str!("../../broker/queries/ack.sql").trim();
        let find = |name: &str| STATEMENTS.iter().find(|s| s.0 == name).unwrap().1;
        assert!(like(claim, find("claim")));
        assert!(like(ack, find("ack")));
        assert!(!like(claim, find("ack")));
        assert!(!like(ack, find("claim")));
    }

    #[test]
    fn by_default_a_groups_jobs_are_enqueued_back_to_back() {
        let sizes = GroupSizes::full();
        assert_eq!(sizes.stride(), 1);
        let plan = Plan::window(1000, sizes.jobs_per_group, sizes.window);
        let mut at = vec![Vec::new(); 1000];
        for (i, (g, _)) in plan.order.iter().enumerate() {
            at[*g as usize].push(i);
        }
        for (g, places) in at.iter().enumerate() {
            assert_eq!(places.len(), 3, "group {g}");
            // Only the jobs of the two groups beside it come between two of its jobs.
            assert!(
                places.windows(2).all(|w| w[1] - w[0] <= 3),
                "group {g}: {places:?}"
            );
        }
    }

    #[test]
    fn the_verifier_counts_the_pairs_that_waited_behind_their_head() {
        let plan = Plan::hot(3, 1, 2); // hot: seq 1, 2, 3; s1: seq 4, 5
                                       // By seq: the database's clock at the end of each enqueue.
        let commits = vec![f64::NAN, 0.0, 0.5, 2.5, 1.0, 0.9];
        let mut r = Runs::default();
        for (seq, s, f) in [
            (1, 1.0, 2.0),
            (2, 2.1, 2.2), // enqueued at 0.5, before 1 started: waited, unstarted
            (3, 2.6, 2.7), // enqueued at 2.5, after 2 finished: did not wait
            (4, 1.0, 1.1),
            (5, 1.2, 1.3), // enqueued at 0.9, before 4's enqueue at 1.0: out of order
        ] {
            r.seq.push(seq);
            r.attempt.push(1);
            r.pid.push(1);
            r.started.push(s);
            r.finished.push(f);
        }
        let c = verify(&plan, &commits, &r);
        let v = &c.verdict;
        assert_eq!(
            (
                v.pairs,
                v.waited,
                v.waited_unstarted,
                v.enqueue_inversions,
                v.order_violations,
                v.overlaps
            ),
            (3, 2, 2, 1, 0, 0)
        );
        assert_eq!(c.handoffs.len(), 2);
        assert!(v
            .problems(true)
            .iter()
            .any(|p| p.contains("out of the plan's order")));
    }

    #[test]
    fn the_control_is_not_invalid_for_what_no_group_kept_apart() {
        let v = Verdict {
            order_violations: 2,
            overlaps: 3,
            ..Verdict::default()
        };
        assert!(v.problems(false).is_empty());
        assert_eq!(v.problems(true).len(), 2);
    }

    #[test]
    fn the_verifier_counts_lost_duplicated_out_of_order_and_overlapping_jobs() {
        let plan = Plan::hot(3, 1, 2); // hot: seq 1, 2, 3; s1: seq 4, 5
        let commits = vec![0.0; 6];
        let mut r = Runs::default();
        let mut add = |seq: i32, s: f64, f: f64| {
            r.seq.push(seq);
            r.attempt.push(1);
            r.pid.push(1);
            r.started.push(s);
            r.finished.push(f);
        };
        add(1, 1.0, 2.0);
        add(2, 1.5, 2.5); // overlaps 1
        add(3, 1.2, 1.3); // started before 2: order violation, and overlap with 2
        add(4, 1.0, 1.1);
        add(4, 3.0, 3.1); // duplicate; 5 lost
        let c = verify(&plan, &commits, &r);
        let v = c.verdict;
        assert_eq!(
            (
                v.lost,
                v.duplicated,
                v.order_violations,
                v.overlaps,
                v.completed
            ),
            (1, 1, 1, 2, 4)
        );
    }
}
