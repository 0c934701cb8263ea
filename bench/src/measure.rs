//! What every shape uses to measure a run: the producer (`bench:dispatch`) started and what it
//! printed read, the drain awaited, the checks every run must pass, the jobs' commit times, the
//! database's size, the statements that took its time, the workers' gaps between jobs and
//! percentiles.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::engines::{Engine, Running};
use crate::records::Runs;
use crate::stack::Stack;

/// Milliseconds; NaN (null in JSON) when not measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Percentiles {
    #[serde(deserialize_with = "nan_if_null")]
    pub p50_ms: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p95_ms: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p99_ms: f64,
}

/// serde_json writes NaN as null; read it back as NaN.
pub(crate) fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

pub(crate) fn percentiles(mut v: Vec<f64>) -> Percentiles {
    if v.is_empty() {
        // Not measured (a backlog queued before the run has no commit-to-start latency).
        return Percentiles {
            p50_ms: f64::NAN,
            p95_ms: f64::NAN,
            p99_ms: f64::NAN,
        };
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] * 1000.0;
    Percentiles {
        p50_ms: at(0.50),
        p95_ms: at(0.95),
        p99_ms: at(0.99),
    }
}

pub(crate) async fn committed(stack: &Stack, n: i64) -> anyhow::Result<Vec<f64>> {
    let rows = stack
        .client
        .query("SELECT seq, committed_at FROM public.bench_dispatch", &[])
        .await?;
    let mut out = vec![f64::NAN; n as usize + 1];
    for r in rows {
        let seq: i32 = r.get(0);
        if (seq as usize) < out.len() {
            out[seq as usize] = r.get(1);
        }
    }
    Ok(out)
}

/// The checks every run must pass to count.
pub(crate) async fn validate(
    stack: &Stack,
    engine: Engine,
    n: i64,
    r: &Runs,
) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut seen = vec![0u32; n as usize + 1];
    for s in &r.seq {
        match seen.get_mut(*s as usize) {
            Some(c) if *s > 0 => *c += 1,
            _ => problems.push(format!("unknown job {s}")),
        }
    }
    let missing = seen.iter().skip(1).filter(|c| **c == 0).count();
    let dupes = seen.iter().filter(|c| **c > 1).count();
    if missing > 0 {
        problems.push(format!("{missing} jobs never completed"));
    }
    if dupes > 0 {
        problems.push(format!("{dupes} jobs completed more than once"));
    }
    if r.attempt.iter().any(|a| *a != 1) {
        problems.push("some jobs ran on an attempt other than 1".into());
    }
    let backlog = engine.backlog(stack).await?;
    if backlog != 0 {
        problems.push(format!("{backlog} jobs left in the queue"));
    }
    let failed = stack
        .scalar_i64("SELECT count(*) FROM public.failed_jobs")
        .await?;
    if failed != 0 {
        problems.push(format!("{failed} failed jobs"));
    }
    Ok(problems)
}

pub(crate) fn dispatch(
    stack: &Stack,
    engine: Engine,
    n: i64,
    ms: u32,
    extra: &[&str],
) -> anyhow::Result<std::process::Child> {
    let mut args = vec![
        "bench:dispatch".to_string(),
        engine.connection().to_string(),
        n.to_string(),
        ms.to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    Ok(stack
        .with_env(&engine.app_env(), &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()?)
}

pub(crate) fn first_dispatch(child: std::process::Child) -> anyhow::Result<f64> {
    Ok(produced(child)?.0)
}

/// What `bench:dispatch` printed: the time of its first dispatch, and its CPU per dispatch (µs).
pub(crate) fn produced(child: std::process::Child) -> anyhow::Result<(f64, f64)> {
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "bench:dispatch failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text
        .lines()
        .last()
        .context("bench:dispatch printed nothing")?
        .trim()
        .parse()
        .context("first dispatch time")?;
    let cpu = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("cpu_per_dispatch_us="))
        .context("bench:dispatch printed no cpu_per_dispatch_us")?
        .parse()
        .context("cpu per dispatch")?;
    Ok((first, cpu))
}

/// Waits for `n` completions, supervising queue:work processes meanwhile.
pub(crate) async fn drain(
    stack: &Stack,
    running: &mut Running,
    n: i64,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        running.supervise(stack)?;
        let done = stack.completed()?;
        if done >= n {
            // Let stragglers (duplicates, if any) land before validating.
            tokio::time::sleep(Duration::from_millis(300)).await;
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {done} of {n} jobs completed within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The database's size without the measurement's own table (the dispatch times grow with the job
/// count whatever the engine).
pub(crate) async fn db_size(stack: &Stack) -> anyhow::Result<i64> {
    stack
        .scalar_i64(
            "SELECT pg_database_size(current_database())
                    - pg_total_relation_size('public.bench_dispatch')",
        )
        .await
}

/// Per tenth of the drain (by start order), the median time a worker waited between finishing
/// a job and starting its next one — the claim-plus-delivery latency as the workers see it.
pub(crate) fn claim_gaps(r: &Runs) -> Vec<f64> {
    let mut by_pid: std::collections::HashMap<i32, Vec<(f64, f64)>> =
        std::collections::HashMap::new();
    for i in 0..r.seq.len() {
        by_pid
            .entry(r.pid[i])
            .or_default()
            .push((r.started[i], r.finished[i]));
    }
    let mut gaps: Vec<(f64, f64)> = Vec::new(); // (start time, gap)
    for runs in by_pid.values_mut() {
        runs.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        for w in runs.windows(2) {
            gaps.push((w[1].0, (w[1].0 - w[0].1).max(0.0)));
        }
    }
    gaps.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    if gaps.is_empty() {
        return Vec::new();
    }
    (0..10)
        .map(|d| {
            let slice = &gaps[d * gaps.len() / 10
                ..((d + 1) * gaps.len() / 10)
                    .max(d * gaps.len() / 10 + 1)
                    .min(gaps.len())];
            percentiles(slice.iter().map(|g| g.1).collect()).p50_ms
        })
        .collect()
}

/// The statements that took the most of the database's time, and any other called at least once
/// per 10 units (pg_stat_statements, top level, reset before the run), per unit of `n` (job,
/// step); and every statement's execution summed, ms per unit.
pub(crate) async fn statements(
    stack: &Stack,
    n: i64,
) -> anyhow::Result<(Vec<(f64, f64, String)>, f64)> {
    if !stack.stat_statements {
        return Ok((Vec::new(), f64::NAN));
    }
    let top = stack
        .client
        .query(
            "WITH s AS (SELECT calls, total_exec_time, query,
                               rank() OVER (ORDER BY total_exec_time DESC) AS by_time
                          FROM pg_stat_statements
                         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()))
             SELECT calls::float8, total_exec_time, query FROM s
              WHERE by_time <= 8 OR calls >= $1::bigint / 10
              ORDER BY total_exec_time DESC LIMIT 16",
            &[&n],
        )
        .await?
        .iter()
        .map(|row| {
            let q: String = row.get(2);
            let words: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
            (
                row.get::<_, f64>(0) / n as f64,
                row.get::<_, f64>(1) / n as f64,
                words.chars().take(90).collect(),
            )
        })
        .collect();
    let total: f64 = stack
        .client
        .query_one(
            "SELECT coalesce(sum(total_exec_time), 0)::float8 FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .await?
        .get(0);
    Ok((top, total / n as f64))
}

/// The median of the finite values (the mean of the middle two for an even count); NaN without
/// any. Every shape's figures over runs and jobs.
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}
