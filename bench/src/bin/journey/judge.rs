//! What the journey asserts at its end, from what was recorded as it ran: each job's every
//! execution (the job's own records, `storage/journey-runs/PID.log` on each host), each scheduled
//! task's every run (`storage/schedule-runs.log`, written by the fixture's TestSchedule), and the
//! producer's every dispatch.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::producer::{job_ms, Dispatch};
use crate::walk::{Check, Deploy, Journey};

/// One execution of a job: its start and, if it got there, its end.
#[derive(Debug, Clone)]
pub struct Execution {
    pub seq: u64,
    pub attempt: u32,
    pub host: String,
    pub release: String,
    pub connection: String,
    pub started: f64,
    pub ended: Option<f64>,
}

/// Every execution recorded under `storage` (a host's shared storage).
pub fn executions(storages: &[&Path]) -> anyhow::Result<Vec<Execution>> {
    let mut by: BTreeMap<(u64, u32, i32, String), Execution> = BTreeMap::new();
    for storage in storages {
        let dir = storage.join("journey-runs");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let text = std::fs::read_to_string(entry?.path())?;
            for line in text.lines() {
                let f: Vec<&str> = line.split(' ').collect();
                if f.len() != 8 {
                    continue; // a line being written
                }
                let (Ok(seq), Ok(attempt), Ok(pid), Ok(at)) = (
                    f[1].parse::<u64>(),
                    f[2].parse::<u32>(),
                    f[3].parse::<i32>(),
                    f[7].parse::<f64>(),
                ) else {
                    continue;
                };
                let e = by
                    .entry((seq, attempt, pid, f[4].to_string()))
                    .or_insert(Execution {
                        seq,
                        attempt,
                        host: f[4].to_string(),
                        release: f[5].to_string(),
                        connection: f[6].to_string(),
                        started: at,
                        ended: None,
                    });
                match f[0] {
                    "S" => e.started = at,
                    "E" => e.ended = Some(at),
                    _ => {}
                }
            }
        }
    }
    Ok(by.into_values().collect())
}

/// One run of a scheduled task: `journey-one` or `journey-each`, who ran it (`cron`, `drover`),
/// when it started and where.
#[derive(Debug, Clone)]
pub struct ScheduleRun {
    pub task: String,
    pub by: String,
    pub at: f64,
    pub host: String,
}

pub fn schedule_runs(storages: &[&Path]) -> Vec<ScheduleRun> {
    let mut out = Vec::new();
    for storage in storages {
        let text = std::fs::read_to_string(storage.join("schedule-runs.log")).unwrap_or_default();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let Some((task, by)) = f.first().and_then(|n| n.split_once(':')) else {
                continue;
            };
            let (Some(at), Some(host)) = (f.get(1).and_then(|t| t.parse().ok()), f.get(3)) else {
                continue;
            };
            out.push(ScheduleRun {
                task: task.to_string(),
                by: by.to_string(),
                at,
                host: host.to_string(),
            });
        }
    }
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

/// "v7" → 7.
pub fn version_number(v: &str) -> u32 {
    v.trim_start_matches('v').parse().unwrap_or(0)
}

/// p50, p99 and max of `v` (NaN when empty).
pub fn percentiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    (at(0.5), at(0.99), v[v.len() - 1])
}

/// What the jobs did, in figures.
#[derive(Debug, Default, Clone)]
pub struct Jobs {
    pub dispatched: usize,
    pub failed_dispatches: usize,
    /// Why dispatches failed (first words), and how many each.
    pub failed_why: BTreeMap<String, usize>,
    /// Dispatches that went through, by connection.
    pub by_connection: BTreeMap<String, usize>,
    pub executions: usize,
    /// Executions by who ran them (connection) and host.
    pub ran_by: BTreeMap<(String, String), usize>,
    pub lost: Vec<u64>,
    pub doubled: Vec<u64>,
    pub overlapping: Vec<u64>,
    /// Executions that began and never ended (killed), and those on a later attempt.
    pub killed: usize,
    pub retried: usize,
    pub ran_after_failed_dispatch: Vec<u64>,
    /// Pickup (first start − the dispatch's start), seconds, by connection: p50, p99, max.
    pub pickup: BTreeMap<String, (f64, f64, f64)>,
}

/// Per deploy: jobs dispatched after it completed, and around it.
#[derive(Debug, Default, Clone)]
pub struct DeployJobs {
    /// Jobs dispatched from its completion to the next deploy's start, and those of them that
    /// ran an older release's code (seq, the version it ran).
    pub after: usize,
    pub old_code: Vec<(u64, String)>,
    /// Jobs dispatched between the last host's queue:restart and the completion that ran older
    /// code (the reload's window).
    pub old_in_window: usize,
    pub in_window: usize,
    /// Pickup of jobs dispatched from 5 s before the deploy's start to 5 s after its completion.
    pub pickup_around: (f64, f64, f64),
}

/// Per minute of the schedule's check: the runs of each task, by who.
#[derive(Debug, Default, Clone)]
pub struct Minute {
    pub minute: i64,
    pub one: Vec<String>,
    pub each: Vec<String>,
}

pub struct Verdict {
    pub checks: Vec<Check>,
    pub jobs: Jobs,
    pub deploys: Vec<DeployJobs>,
    pub minutes: Vec<Minute>,
}

/// Everything the journey asserts at its end.
pub fn judge(j: &Journey) -> anyhow::Result<Verdict> {
    let storages: Vec<std::path::PathBuf> =
        j.hosts.iter().map(|h| h.site().join("storage")).collect();
    let storages: Vec<&Path> = storages.iter().map(|p| p.as_path()).collect();
    let ex = executions(&storages)?;
    let dispatches: Vec<Dispatch> = j.producer.as_ref().map(|p| p.all()).unwrap_or_default();
    let mut checks = Vec::new();
    let mut jobs = Jobs {
        dispatched: dispatches.len(),
        executions: ex.len(),
        ..Jobs::default()
    };
    let mut by_seq: HashMap<u64, Vec<&Execution>> = HashMap::new();
    for e in &ex {
        by_seq.entry(e.seq).or_default().push(e);
        *jobs
            .ran_by
            .entry((e.connection.clone(), e.host.clone()))
            .or_default() += 1;
        if e.ended.is_none() {
            jobs.killed += 1;
        }
        if e.attempt > 1 {
            jobs.retried += 1;
        }
    }
    let mut pickups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for d in &dispatches {
        if !d.ok {
            jobs.failed_dispatches += 1;
            let why: String = d
                .why
                .split(['_', ':'])
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            *jobs.failed_why.entry(why).or_default() += 1;
            if by_seq.contains_key(&d.seq) {
                jobs.ran_after_failed_dispatch.push(d.seq);
            }
            continue;
        }
        *jobs.by_connection.entry(d.connection.clone()).or_default() += 1;
        let mut runs = by_seq.get(&d.seq).cloned().unwrap_or_default();
        runs.sort_by(|a, b| a.started.total_cmp(&b.started));
        match runs.iter().filter(|e| e.ended.is_some()).count() {
            0 => jobs.lost.push(d.seq),
            1 => {}
            _ => jobs.doubled.push(d.seq),
        }
        // A killed execution ran at most its length (and a second) past its start.
        let end = |e: &Execution| {
            e.ended
                .unwrap_or(e.started + job_ms(e.seq) as f64 / 1000.0 + 1.0)
        };
        if runs.windows(2).any(|w| w[1].started < end(w[0])) {
            jobs.overlapping.push(d.seq);
        }
        if let Some(first) = runs.first() {
            pickups
                .entry(first.connection.clone())
                .or_default()
                .push(first.started - d.began);
        }
    }
    for (conn, v) in pickups {
        jobs.pickup.insert(conn, percentiles(v));
    }
    let few = |v: &[u64]| format!("{:?}", &v[..v.len().min(12)]);
    checks.push(Check {
        what: "every job dispatched ran to its end once: none lost".into(),
        ok: jobs.lost.is_empty(),
        detail: format!(
            "{} dispatched, {} went through, {} lost {}",
            jobs.dispatched,
            jobs.dispatched - jobs.failed_dispatches,
            jobs.lost.len(),
            few(&jobs.lost)
        ),
    });
    checks.push(Check {
        what: "none completed twice".into(),
        ok: jobs.doubled.is_empty(),
        detail: format!("{} doubled {}", jobs.doubled.len(), few(&jobs.doubled)),
    });
    checks.push(Check {
        what: "no two executions of one job overlapping".into(),
        ok: jobs.overlapping.is_empty(),
        detail: format!(
            "{} overlapping {}; {} executions killed before their end, {} on a later attempt",
            jobs.overlapping.len(),
            few(&jobs.overlapping),
            jobs.killed,
            jobs.retried
        ),
    });
    checks.push(Check {
        what: "no job runs whose dispatch failed".into(),
        ok: jobs.ran_after_failed_dispatch.is_empty(),
        detail: format!(
            "{} failed dispatches, {} of them ran {}",
            jobs.failed_dispatches,
            jobs.ran_after_failed_dispatch.len(),
            few(&jobs.ran_after_failed_dispatch)
        ),
    });

    // Every job dispatched after a deploy completed (every worker on its release) ran its code or
    // a later release's.
    let mut deploys = Vec::new();
    for (i, deploy) in j.deploys.iter().enumerate() {
        let next = j.deploys.get(i + 1).map_or(f64::INFINITY, Deploy::started);
        deploys.push(deploy_jobs(deploy, next, &dispatches, &by_seq));
    }
    for (deploy, dj) in j.deploys.iter().zip(&deploys) {
        checks.push(Check {
            what: format!(
                "every job dispatched after {} ({}) completed ran its code",
                deploy.step, deploy.version
            ),
            ok: dj.old_code.is_empty() && (dj.after > 0 || j.sizes.short),
            detail: format!(
                "{} jobs, {} ran older code {:?}",
                dj.after,
                dj.old_code.len(),
                &dj.old_code[..dj.old_code.len().min(8)]
            ),
        });
    }

    // Every due time of the onOneServer() task, once.
    let runs = schedule_runs(&storages);
    let from = (j.schedule_from / 60.0).floor() as i64;
    let to = (j.schedule_to / 60.0).floor() as i64;
    let mut minutes: Vec<Minute> = (from..=to)
        .map(|m| Minute {
            minute: m,
            ..Minute::default()
        })
        .collect();
    for r in &runs {
        let m = (r.at / 60.0).floor() as i64;
        if let Some(slot) = minutes.get_mut((m - from) as usize).filter(|_| m >= from) {
            let who = format!("{}@{} :{:04.1}", r.by, r.host, r.at - (m * 60) as f64);
            match r.task.as_str() {
                "journey-one" => slot.one.push(who),
                "journey-each" => slot.each.push(who),
                _ => {}
            }
        }
    }
    let wrong: Vec<String> = minutes
        .iter()
        .filter(|m| m.one.len() != 1)
        .map(|m| {
            format!(
                "{} ({} runs: {:?})",
                minute_name(m.minute),
                m.one.len(),
                m.one
            )
        })
        .collect();
    checks.push(Check {
        what: "every due time of the onOneServer() task ran once".into(),
        ok: wrong.is_empty() && !minutes.is_empty(),
        detail: format!(
            "{} due times, from {} to {}; not once: {}",
            minutes.len(),
            minutes
                .first()
                .map_or("-".into(), |m| minute_name(m.minute)),
            minutes.last().map_or("-".into(), |m| minute_name(m.minute)),
            if wrong.is_empty() {
                "none".into()
            } else {
                wrong.join(", ")
            }
        ),
    });
    let overlap: Vec<&Minute> = minutes
        .iter()
        .filter(|m| j.overlap_minutes.contains(&m.minute))
        .collect();
    checks.push(Check {
        what: "a due time came while cron and the masters both ran the schedule".into(),
        ok: !overlap.is_empty()
            && overlap.iter().all(|m| {
                m.each.iter().any(|w| w.starts_with("cron"))
                    && m.each.iter().any(|w| w.starts_with("drover"))
            }),
        detail: overlap
            .iter()
            .map(|m| {
                format!(
                    "{}: onOneServer() by {:?}, the other task by {:?}",
                    minute_name(m.minute),
                    m.one,
                    m.each
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    });
    Ok(Verdict {
        checks,
        jobs,
        deploys,
        minutes,
    })
}

fn deploy_jobs(
    deploy: &Deploy,
    next: f64,
    dispatches: &[Dispatch],
    by_seq: &HashMap<u64, Vec<&Execution>>,
) -> DeployJobs {
    let v = version_number(&deploy.version);
    let mut dj = DeployJobs::default();
    let mut around = Vec::new();
    for d in dispatches.iter().filter(|d| d.ok) {
        let runs = by_seq.get(&d.seq).cloned().unwrap_or_default();
        let older: Vec<&&Execution> = runs
            .iter()
            .filter(|e| version_number(&e.release) < v)
            .collect();
        if d.began >= deploy.completed && d.began < next {
            dj.after += 1;
            if let Some(e) = older.first() {
                dj.old_code.push((d.seq, e.release.clone()));
            }
        }
        if d.began >= deploy.last_restart() && d.began < deploy.completed {
            dj.in_window += 1;
            if !older.is_empty() {
                dj.old_in_window += 1;
            }
        }
        if d.began >= deploy.started() - 5.0 && d.began < deploy.completed + 5.0 {
            if let Some(first) = runs.iter().map(|e| e.started).min_by(f64::total_cmp) {
                around.push(first - d.began);
            }
        }
    }
    dj.pickup_around = percentiles(around);
    dj
}

/// A Unix minute as `HH:MM` (UTC).
pub fn minute_name(m: i64) -> String {
    format!("{:02}:{:02}", (m / 60) % 24, m % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_the_values_at_their_ranks() {
        let (p50, p99, max) = percentiles((1..=100).map(f64::from).collect());
        assert_eq!((p50, p99, max), (50.0, 99.0, 100.0));
        assert!(percentiles(vec![]).0.is_nan());
    }

    #[test]
    fn records_are_read_back_as_executions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("journey-runs")).unwrap();
        std::fs::write(
            dir.path().join("journey-runs/1.log"),
            "S 7 1 1 h1 v3 drover 100.5\nE 7 1 1 h1 v3 drover 100.7\nS 8 1 1 h1 v3 drover 101.0\nE 8 1",
        )
        .unwrap();
        let ex = executions(&[dir.path()]).unwrap();
        assert_eq!(ex.len(), 2);
        assert_eq!(ex[0].ended, Some(100.7));
        assert_eq!(ex[1].ended, None, "a half-written line is not an end");
        assert_eq!(version_number(&ex[0].release), 3);
        assert_eq!(minute_name(61), "01:01");
    }
}
