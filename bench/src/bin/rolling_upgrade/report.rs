//! The judging and the report of a rolling-upgrade run: every assertion over `public.runs`,
//! `drover.jobs`, `drover.failed_jobs`, the masters' logs and the samples, and the Markdown that
//! `bench/results/rolling_upgrade.md` holds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{git, group_of, strip_ansi, version_line, Pause, Release, Run, WorkerSeen};

/// One execution of one job, from `public.runs`.
#[derive(Debug, Clone)]
struct Execution {
    job: i64,
    pid: i32,
    attempt: i32,
    start: f64,
    last: f64,
    finish: Option<f64>,
}

struct Check {
    name: String,
    ok: bool,
    detail: String,
}

fn interesting(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    [
        "schema",
        "migrat",
        "protocol",
        "release",
        "grace",
        "reload",
        "newer",
        "refus",
        "error",
        "warn",
        "panic",
        "paus",
        "drover 0.",
    ]
    .iter()
    .any(|k| l.contains(k))
}

pub(super) async fn report(
    r: &mut Run,
    producer: Vec<String>,
    pause: Option<Pause>,
    (schema_at_start, schema_at_end): (i32, i32),
    (old_schema, new_schema): (i32, i32),
) -> anyhow::Result<(String, bool)> {
    let mut checks: Vec<Check> = vec![];
    let mut check = |name: &str, ok: bool, detail: String| {
        println!("{} {name}: {detail}", if ok { "PASS" } else { "FAIL" });
        checks.push(Check {
            name: name.to_string(),
            ok,
            detail,
        });
    };

    // What was enqueued.
    let mut enqueued: BTreeMap<i64, (i64, i64)> = BTreeMap::new(); // id -> (seq, ms)
    let mut enqueue_at: Vec<(f64, f64)> = vec![]; // (time, ms the enqueue took)
    let mut dispatched: BTreeMap<i64, f64> = BTreeMap::new(); // id -> when
    for line in &producer {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 5 {
            let id: i64 = f[0].parse()?;
            enqueued.insert(id, (f[1].parse()?, f[2].parse()?));
            enqueue_at.push((f[4].parse()?, f[3].parse()?));
            dispatched.insert(id, f[4].parse()?);
        }
    }
    let longs = enqueued.values().filter(|(_, ms)| *ms >= 3000).count();
    // The producer enqueued throughout: no enqueue failed or waited long (the migration at
    // step 1 takes locks on drover.jobs).
    let longest_gap = enqueue_at
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .fold(0.0, f64::max);
    let slowest = enqueue_at.iter().map(|(_, ms)| *ms).fold(0.0, f64::max);
    check(
        "the producer enqueued throughout",
        r.producer_failed.is_none() && longest_gap < 1.0,
        format!(
            "{}; {} enqueues, the longest took {slowest:.1} ms, the longest gap between two {:.0} ms (the pace is {:.0} ms)",
            r.producer_failed
                .as_ref()
                .map(|e| format!("it exited {e}"))
                .unwrap_or("it exited 0".into()),
            enqueue_at.len(),
            longest_gap * 1000.0,
            1000.0 / r.args.rate
        ),
    );

    // What ran.
    let execs: Vec<Execution> =
        r.db.query(
            "SELECT job_id, pid, attempt,
                    extract(epoch FROM min(at) FILTER (WHERE event = 'start'))::float8,
                    extract(epoch FROM max(at))::float8,
                    extract(epoch FROM min(at) FILTER (WHERE event = 'finish'))::float8
             FROM runs GROUP BY job_id, pid, attempt
             HAVING count(*) FILTER (WHERE event = 'start') > 0
             ORDER BY job_id, 4",
            &[],
        )
        .await?
        .iter()
        .map(|row| Execution {
            job: row.get(0),
            pid: row.get(1),
            attempt: row.get(2),
            start: row.get(3),
            last: row.get(4),
            finish: row.get(5),
        })
        .collect();
    let finishes_per_exec: Vec<(i64, i64)> =
        r.db.query(
            "SELECT job_id, count(*) FROM runs WHERE event = 'finish' GROUP BY job_id",
            &[],
        )
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let failed: Vec<(i64, String)> =
        r.db.query("SELECT id, error FROM drover.failed_jobs ORDER BY id", &[])
            .await?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
    let left: i64 =
        r.db.query_one(
            "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.group_jobs)",
            &[],
        )
        .await?
        .get(0);

    let finished: BTreeMap<i64, i64> = finishes_per_exec.iter().copied().collect();
    let failed_ids: BTreeSet<i64> = failed.iter().map(|(id, _)| *id).collect();
    let lost: Vec<i64> = enqueued
        .keys()
        .filter(|id| !finished.contains_key(id) && !failed_ids.contains(id))
        .copied()
        .collect();
    let doubled: Vec<(i64, i64)> = finished
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, n)| (*id, *n))
        .collect();
    let strangers: Vec<i64> = finished
        .keys()
        .filter(|id| !enqueued.contains_key(id))
        .copied()
        .collect();
    check(
        "nothing lost",
        lost.is_empty() && left == 0,
        format!(
            "{} enqueued, {} finished, {} in drover.failed_jobs, {} never finished nor failed{}, {} left in drover.jobs and drover.group_jobs",
            enqueued.len(),
            finished.len(),
            failed.len(),
            lost.len(),
            if lost.is_empty() { String::new() } else { format!(" (first: {:?})", &lost[..lost.len().min(10)]) },
            left
        ),
    );
    check(
        "nothing failed",
        failed.is_empty(),
        if failed.is_empty() {
            "drover.failed_jobs is empty".into()
        } else {
            format!(
                "{} failed: {:?}",
                failed.len(),
                &failed[..failed.len().min(5)]
            )
        },
    );
    check(
        "nothing doubled",
        doubled.is_empty() && strangers.is_empty(),
        format!(
            "{} jobs finished more than once{}; {} finished jobs never enqueued",
            doubled.len(),
            if doubled.is_empty() {
                String::new()
            } else {
                format!(" {:?}", &doubled[..doubled.len().min(10)])
            },
            strangers.len()
        ),
    );

    // Overlap: an execution ended at its finish; one without a finish within its run time
    // after its start (or two beats after its last record, for a long job).
    let mut overlaps = vec![];
    let mut reruns = 0;
    let mut by_job: BTreeMap<i64, Vec<&Execution>> = BTreeMap::new();
    for e in &execs {
        by_job.entry(e.job).or_default().push(e);
    }
    for (job, runs) in &by_job {
        reruns += usize::from(runs.len() > 1);
        for pair in runs.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let ms = enqueued.get(job).map_or(3000, |(_, ms)| *ms) as f64 / 1000.0;
            let ended = a
                .finish
                .unwrap_or_else(|| (a.start + ms + 0.1).max(a.last + 0.2));
            if ended >= b.start {
                overlaps.push(format!(
                    "job {job}: pid {} (attempt {}) ran until {:.3}, pid {} (attempt {}) started at {:.3}",
                    a.pid, a.attempt, ended, b.pid, b.attempt, b.start
                ));
            }
        }
    }
    let unfinished = execs.iter().filter(|e| e.finish.is_none()).count();
    let max_attempt = execs.iter().map(|e| e.attempt).max().unwrap_or(0);
    check(
        "no overlapping executions",
        overlaps.is_empty(),
        format!(
            "{} executions of {} jobs; {} jobs ran more than once, {} executions never finished, highest attempt {}{}",
            execs.len(),
            by_job.len(),
            reruns,
            unfinished,
            max_attempt,
            if overlaps.is_empty() { String::new() } else { format!(": {:?}", &overlaps[..overlaps.len().min(5)]) }
        ),
    );

    // Attribution of every execution to a master and a worker release.
    let (workers, ambiguous) = {
        let tr = r.tracker.lock().unwrap();
        (tr.workers.clone(), tr.ambiguous.clone())
    };
    let unattributed: BTreeSet<i32> = execs
        .iter()
        .filter(|e| !workers.contains_key(&e.pid) || ambiguous.contains(&e.pid))
        .map(|e| e.pid)
        .collect();
    check(
        "every execution attributed to a master",
        unattributed.is_empty(),
        format!(
            "{} worker processes seen under the masters; {} pids of executions not attributed {:?}",
            workers.len(),
            unattributed.len(),
            unattributed
        ),
    );

    // Protocol refusals, in every master's log.
    let mut refusals = vec![];
    for inc in &r.incarnations {
        let text = strip_ansi(&std::fs::read_to_string(&inc.log).unwrap_or_default());
        for line in text
            .lines()
            .filter(|l| l.contains("speaks protocol version"))
        {
            refusals.push(format!("host {} #{}: {line}", inc.host, inc.n));
        }
    }
    check(
        "no worker refused for its protocol",
        refusals.is_empty(),
        if refusals.is_empty() {
            format!(
                "no \"speaks protocol version\" in the {} masters' logs",
                r.incarnations.len()
            )
        } else {
            refusals[..refusals.len().min(5)].join("; ")
        },
    );

    // Every master served after its step: finishes by its workers, per step interval.
    let step_ends: Vec<f64> = r
        .steps
        .iter()
        .skip(1)
        .map(|s| s.2)
        .chain([f64::INFINITY])
        .collect();
    let mut per_step: Vec<BTreeMap<String, usize>> = vec![BTreeMap::new(); r.steps.len()];
    let combo = |w: &WorkerSeen| {
        format!(
            "{} ({} bin / {} pkg)",
            w.host,
            w.bin.label(),
            w.worker.label()
        )
    };
    for e in &execs {
        let (Some(f), Some(w)) = (e.finish, workers.get(&e.pid)) else {
            continue;
        };
        if let Some(i) = r
            .steps
            .iter()
            .zip(&step_ends)
            .position(|(s, end)| f >= s.2 && f < *end)
        {
            *per_step[i].entry(combo(w)).or_default() += 1;
        }
    }
    let mut not_served = vec![];
    for (i, (name, h, _began, done)) in r.steps.iter().enumerate() {
        if *h > 2 {
            continue;
        }
        let host = ["A", "B", "C"][*h];
        // Finishes by the upgraded host after the step was done, before the next step.
        let served = execs
            .iter()
            .filter(|e| {
                e.finish.is_some_and(|f| f >= *done && f < step_ends[i])
                    && workers.get(&e.pid).is_some_and(|w| w.host == host)
            })
            .count();
        if served == 0 {
            not_served.push(format!("{name}: host {host} finished nothing after it"));
        }
    }
    for inc in &r.incarnations {
        if finished_by(inc.pid, &workers, &execs) == 0 {
            not_served.push(format!(
                "host {} #{} ({} binary, pid {}) finished no job",
                inc.host,
                inc.n,
                inc.bin.label(),
                inc.pid
            ));
        }
    }
    check(
        "every master served after its step",
        not_served.is_empty(),
        if not_served.is_empty() {
            "each upgraded host finished jobs after its step, and every master that ran finished jobs".into()
        } else {
            not_served.join("; ")
        },
    );

    // The previous binary started again on the migrated schema (host B #2): it served, saying
    // that each newer migration lets it.
    let old = Release::Old.label();
    let again = r
        .incarnations
        .iter()
        .find(|i| i.host == "B" && i.n == 2 && i.bin == Release::Old);
    let again_said = again
        .map(|i| strip_ansi(&std::fs::read_to_string(&i.log).unwrap_or_default()))
        .and_then(|t| {
            t.lines()
                .find(|l| l.contains("may run on it"))
                .map(str::to_string)
        });
    check(
        &format!("the {old} binary restarted on the migrated schema serves (the window)"),
        again.is_some_and(|i| i.serving_at.is_some() && finished_by(i.pid, &workers, &execs) > 0)
            && again_said.is_some(),
        match again {
            Some(i) => {
                format!(
                "host B #2 (pid {}) served {} after its start and finished {} jobs; its log: {}",
                i.pid,
                i.serving_at
                    .map(|t| format!("{:.2} s", t - i.started))
                    .unwrap_or("never".into()),
                finished_by(i.pid, &workers, &execs),
                again_said.as_deref().unwrap_or("(no line saying it may run on the newer schema)")
            )
            }
            None => "host B was not restarted on the previous binary".into(),
        },
    );

    let clean: Vec<String> = r
        .incarnations
        .iter()
        .filter(|i| !i.exit_ok)
        .map(|i| {
            format!(
                "host {} #{} ({}): {}",
                i.host,
                i.n,
                i.bin.label(),
                i.exit.clone().unwrap_or("never stopped".into())
            )
        })
        .collect();
    check(
        "every master stopped cleanly (the one the run SIGKILLed aside)",
        clean.is_empty(),
        if clean.is_empty() {
            "each drained master exited 0; the crashed one died of SIGKILL".into()
        } else {
            clean.join("; ")
        },
    );
    check(
        &format!(
            "schema migrated {old_schema} -> {new_schema} (the previous release's to this tree's, from the binaries)"
        ),
        old_schema > 0 && schema_at_start == old_schema && schema_at_end == new_schema,
        format!("schema {schema_at_start} at the start, {schema_at_end} at the end"),
    );

    // The crash: every job the killed master held was reaped and finished once, by another
    // master, after the kill.
    if let Some(crash) = &r.crash {
        let mut rerun = vec![];
        let mut wrong = vec![];
        for job in &crash.leased {
            let after: Vec<&Execution> = execs
                .iter()
                .filter(|e| e.job == *job && e.start > crash.at && e.finish.is_some())
                .collect();
            let by_other = after.iter().all(|e| {
                workers
                    .get(&e.pid)
                    .is_some_and(|w| w.master_pid != crash.pid)
            });
            match after.first() {
                Some(e) if after.len() == 1 && by_other => rerun.push((
                    e.start - crash.at,
                    workers.get(&e.pid).map(combo).unwrap_or_default(),
                )),
                // A prefetched job the worker never started may have been finished before the
                // kill by nobody: it must still finish once, after.
                _ => wrong.push(format!(
                    "job {job}: {} executions after the kill",
                    after.len()
                )),
            }
        }
        let delays: Vec<f64> = rerun.iter().map(|(d, _)| *d).collect();
        let by: BTreeSet<&String> = rerun.iter().map(|(_, w)| w).collect();
        // The crash took a running job with it (started by its worker, not finished).
        let running = crash
            .leased
            .iter()
            .filter(|job| {
                execs.iter().any(|e| {
                    e.job == **job
                        && e.start < crash.at
                        && e.finish.is_none_or(|f| f > crash.at)
                        && workers
                            .get(&e.pid)
                            .is_some_and(|w| w.master_pid == crash.pid)
                })
            })
            .count();
        check(
            "a crashed master's leases are reaped and its jobs run again, once, by the other masters",
            wrong.is_empty() && running > 0,
            format!(
                "pid {} SIGKILLed holding {} leases, {running} of them running; each run again {} s after the kill (lease {} s), by {:?}{}",
                crash.pid,
                crash.leased.len(),
                if delays.is_empty() {
                    "-".to_string()
                } else {
                    format!(
                        "{:.1}-{:.1}",
                        delays.iter().copied().fold(f64::MAX, f64::min),
                        delays.iter().copied().fold(0.0, f64::max)
                    )
                },
                r.args.lease,
                by,
                if wrong.is_empty() {
                    String::new()
                } else {
                    format!("; {wrong:?}")
                }
            ),
        );
    }

    // Ordered groups: each group's jobs ran in their dispatch order, one at a time, across
    // masters of both releases.
    if r.args.group_every > 0 {
        let mut groups: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new(); // group -> (seq, id)
        for (id, (seq, _)) in &enqueued {
            if let Some(g) = group_of(*seq, r.args.group_every, r.args.groups) {
                groups.entry(g).or_default().push((*seq, *id));
            }
        }
        let (mut pairs, mut waited, mut problems) = (0, 0, vec![]);
        for (g, jobs) in groups.iter_mut() {
            jobs.sort();
            for pair in jobs.windows(2) {
                let ((_, a), (_, b)) = (pair[0], pair[1]);
                let (Some(a_runs), Some(b_runs)) = (by_job.get(&a), by_job.get(&b)) else {
                    continue;
                };
                pairs += 1;
                // a's last execution, the one that finished; b's first.
                let a_end = a_runs.iter().filter_map(|e| e.finish).fold(0.0, f64::max);
                let b_start = b_runs.iter().map(|e| e.start).fold(f64::MAX, f64::min);
                let b_enqueued = dispatched.get(&b).copied();
                if b_enqueued.is_some_and(|t| t < a_end) {
                    waited += 1;
                }
                if b_start < a_end {
                    problems.push(format!(
                        "group {g}: job {b} started {:.3} s before job {a} (ahead of it) finished",
                        a_end - b_start
                    ));
                }
            }
        }
        check(
            "ordered groups: each group's jobs in order, one at a time",
            problems.is_empty() && waited > 0,
            format!(
                "{} grouped jobs in {} groups; {pairs} consecutive pairs, {waited} of them dispatched before the job ahead finished (they waited behind it){}",
                groups.values().map(Vec::len).sum::<usize>(),
                groups.len(),
                if problems.is_empty() {
                    String::new()
                } else {
                    format!(": {:?}", &problems[..problems.len().min(5)])
                }
            ),
        );
    }

    let samples = r.samples.lock().unwrap().clone();
    // Which release each node row's master runs: from the pids the run started.
    let release_of_pid: BTreeMap<i32, Release> =
        r.incarnations.iter().map(|i| (i.pid, i.bin)).collect();
    let old_row = |nodes: &[(i32, Option<String>)]| {
        nodes
            .iter()
            .any(|(pid, _)| release_of_pid.get(pid) == Some(&Release::Old))
    };

    // The budget: never more of the queue leased at once than it allows, by masters of both
    // releases.
    if r.args.budget > 0 {
        let budget = i64::from(r.args.budget);
        let max = samples.iter().map(|s| s.leased).max().unwrap_or(0);
        let at = samples.iter().filter(|s| s.leased == budget).count();
        let mixed_at = samples
            .iter()
            .filter(|s| s.leased == budget && old_row(&s.nodes))
            .count();
        check(
            &format!("the queue's budget ({budget}) held across the fleet"),
            max <= budget,
            format!(
                "{} samples (every 200 ms): at most {max} jobs leased at once; {at} samples at the budget, {mixed_at} of them while a {old} master had a row",
                samples.len()
            ),
        );
    }

    // Outage grace: given while a master of the previous release has a row (it honours it).
    let graced_mixed = samples
        .iter()
        .filter(|s| s.graced.unwrap_or(0) > 0 && old_row(&s.nodes))
        .count();
    let graced_total = samples.iter().filter(|s| s.graced.unwrap_or(0) > 0).count();
    check(
        &format!("an outage grace is given while a {old} master has a row"),
        graced_mixed > 0,
        format!(
            "{} samples; {graced_mixed} with a graced lease while a {old} master had a row ({graced_total} in all)",
            samples.len()
        ),
    );

    // The pause: confirmed by every master, and no master started a job of the queue after it.
    let mut pause_md = String::new();
    if let Some(p) = &pause {
        // (seconds after the confirmation, worker, job) of each job started while paused.
        let starts_after: Vec<(f64, WorkerSeen, i64)> = match p.confirmed {
            Some(c) => execs
                .iter()
                .filter(|e| e.start > c && e.start < p.resumed)
                .filter_map(|e| workers.get(&e.pid).map(|w| (e.start - c, w.clone(), e.job)))
                .collect(),
            None => vec![],
        };
        let starts: Vec<String> = starts_after
            .iter()
            .map(|(d, w, j)| format!("job {j} on {} +{:.3} s", combo(w), d))
            .collect();
        let not_held: Vec<i32> = p
            .held
            .iter()
            .filter(|(_, _, held)| !held)
            .map(|(pid, _, _)| *pid)
            .collect();
        let (before, during) = {
            // Starts per second in the 4 s before the pause and while it held, fleet-wide.
            let c = p.confirmed.unwrap_or(p.paused);
            let n = |a: f64, b: f64| {
                execs.iter().filter(|e| e.start >= a && e.start < b).count() as f64
            };
            (
                n(p.paused - 4.0, p.paused) / 4.0,
                n(c, p.resumed) / (p.resumed - c),
            )
        };
        let label = |pid: &i32| {
            release_of_pid
                .get(pid)
                .map_or("?".to_string(), |r| r.label().to_string())
        };
        let _ = writeln!(
            pause_md,
            "`SELECT drover.pause_queue('default')` at {}, with the masters' rows (pid, release of its binary) {:?}. The first look at `drover.pause_unconfirmed('default')` listed {:?}; it was empty {} (the pause returns then). The rows holding the pause's version then (pid, binary, held): {:?}. Resumed at {}.\n",
            r.rel_t(p.paused),
            p.nodes
                .iter()
                .map(|(pid, _)| format!("{pid} {}", label(pid)))
                .collect::<Vec<_>>(),
            p.first_unconfirmed,
            p.confirmed
                .map(|c| format!("{:.0} ms after the pause", (c - p.paused) * 1000.0))
                .unwrap_or("never".into()),
            p.held
                .iter()
                .map(|(pid, _, held)| format!("{pid} {} {held}", label(pid)))
                .collect::<Vec<_>>(),
            r.rel_t(p.resumed),
        );
        let _ = writeln!(
            pause_md,
            "Jobs started per second, fleet-wide: {before:.1} in the 4 s before the pause, {during:.1} while it held. Started after the confirmation and before the resume: {}{}.",
            starts.len(),
            if starts.is_empty() {
                String::new()
            } else {
                format!(": {starts:?}")
            },
        );
        check(
            "queue pause with mixed masters: every master confirms, none starts a job after",
            p.confirmed.is_some() && starts.is_empty() && not_held.is_empty(),
            format!(
                "confirmed in {} by every master (rows not holding it then: {not_held:?}); {} jobs started after it{}",
                p.confirmed
                    .map(|c| format!("{:.0} ms", (c - p.paused) * 1000.0))
                    .unwrap_or("never".into()),
                starts.len(),
                if starts.is_empty() {
                    String::new()
                } else {
                    format!(" {starts:?}")
                },
            ),
        );
    }

    // Each worker process: which release, under which master, and what it was told.
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for w in workers.values() {
        *kinds
            .entry(format!(
                "{} package under a {} master: DROVER_PROTOCOL={}",
                w.worker.label(),
                w.bin.label(),
                w.told.as_deref().unwrap_or("(unset)")
            ))
            .or_default() += 1;
    }
    // A master of the previous release (0.2) tells protocol 2; this tree's its newest, 2 or more.
    let told_wrong: Vec<String> = workers
        .iter()
        .filter(|(_, w)| {
            let told: Option<u32> = w.told.as_deref().and_then(|t| t.parse().ok());
            match w.bin {
                Release::Old => told != Some(2),
                Release::New => told.is_none_or(|t| t < 2),
            }
        })
        .map(|(p, w)| format!("pid {p} under {}: {:?}", combo(w), w.told))
        .collect();
    let told_kinds = kinds
        .iter()
        .map(|(k, n)| format!("{n} x {k}"))
        .collect::<Vec<_>>()
        .join("; ");
    // Forked Laravel workers: /proc/PID/environ is the zygote's memory, which PHP's
    // cli_set_process_title wrote its title over, so what the master told them cannot be read
    // there. What they speak is checked from the masters' logs instead (the next check).
    let forked = r.mode != super::Mode::Plain && r.args.spawn == "fork";
    if forked {
        r.notes.push(format!(
            "Not asserted with forked workers: DROVER_PROTOCOL as /proc/PID/environ shows it ({told_kinds}); a forked worker's environment memory is its zygote's, which PHP's process title overwrote. That no worker fell back to protocol 1 is asserted from the masters' logs."
        ));
    } else {
        check(
            &format!("each master tells its workers its protocol ({old}: 2, head: its newest)"),
            told_wrong.is_empty(),
            told_kinds,
        );
    }
    // What each worker spoke, by its master's word: a master names every worker that speaks
    // protocol 1 (`worker speaks protocol 1 ... pid=N`); packages of 0.2 and later speak 2 or more.
    let mut spoke_one = vec![];
    for inc in &r.incarnations {
        let text = strip_ansi(&std::fs::read_to_string(&inc.log).unwrap_or_default());
        for line in text
            .lines()
            .filter(|l| l.contains("worker speaks protocol 1"))
        {
            spoke_one.push(format!("host {} #{}: {line}", inc.host, inc.n));
        }
    }
    check(
        "no worker fell back to protocol 1",
        spoke_one.is_empty(),
        if spoke_one.is_empty() {
            format!(
                "no \"worker speaks protocol 1\" in the {} masters' logs ({} workers)",
                r.incarnations.len(),
                workers.len()
            )
        } else {
            spoke_one[..spoke_one.len().min(5)].join("; ")
        },
    );
    let ok = checks.iter().all(|c| c.ok);

    // The report.
    let a = &r.args;
    let mut md = String::new();
    let tree_head = git(&r.rel.new_tree, &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let old_head = git(&r.rel.old_tree, &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let tree_dirty = git(&r.rel.new_tree, &["status", "--porcelain"]).unwrap_or_default();
    let laravel = r.apps.as_ref().map(|apps| apps.name());
    let _ = writeln!(
        md,
        "# Rolling upgrade {} → this tree: three masters under load{}\n",
        Release::Old.label(),
        laravel
            .as_ref()
            .map(|l| format!(", {l} applications"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        md,
        "Written by `cargo run --release -p drover-bench --bin rolling_upgrade{}` (bench/src/bin/rolling_upgrade.rs, which says what each step does). Verdict: **{}**.\n",
        std::env::args().skip(1).map(|s| format!(" {s}")).collect::<String>(),
        if ok { "every assertion held" } else { "an assertion FAILED" }
    );
    let _ = writeln!(md, "## Conditions\n");
    let (old_worker, new_worker) = match &r.apps {
        None => (
            "its worker `php-client/bin/drover-worker` and `tests/fixtures/handler.php` from the same worktree".to_string(),
            "its worker and handler from the same worktree".to_string(),
        ),
        Some(apps) => {
            let app = |rel: Release| {
                if apps.laravel == 8 {
                    format!("its application `{}/tests/laravel-app` (Debian's framework; drover/laravel is that tree's `php-client/`)", r.rel.tree(rel).strip_prefix(&r.rel.root).unwrap_or(r.rel.tree(rel)).display())
                } else {
                    format!("its application `{}`, built by that tree's `tests/laravel12-app/build` (the offline reference tree; Composer installed that tree's drover/laravel from a path repository)", apps.source(rel).strip_prefix(&r.rel.root).unwrap_or(apps.source(rel)).display())
                }
            };
            (app(Release::Old), app(Release::New))
        }
    };
    let _ = writeln!(
        md,
        "- {}: `{}` built from a worktree of the commit `RELEASES` names for it, {} (checked out: {old_head}): `{}`; {old_worker}.",
        r.rel.old_release.version,
        r.rel.old_bin.strip_prefix(&r.rel.root).unwrap_or(&r.rel.old_bin).display(),
        r.rel.old_release.commit,
        version_line(&r.rel.old_bin)
    );
    let _ = writeln!(
        md,
        "- head: `{}` {} (this repository's `{}` when the run began; the working tree's uncommitted edits are not in it{}): `{}`; {new_worker}.",
        r.rel.new_bin.strip_prefix(&r.rel.root).unwrap_or(&r.rel.new_bin).display(),
        if a.new_bin.is_some() {
            format!("(given with --new-bin), the PHP package from a worktree of {tree_head}")
        } else {
            format!("built from a worktree of commit {tree_head}")
        },
        a.new_rev,
        if tree_dirty.is_empty() { String::new() } else { format!("; the worktree differs from its commit: {}", tree_dirty.replace('\n', ", ")) },
        version_line(&r.rel.new_bin)
    );
    // The slowest enqueue (or dispatch), and when.
    let longest_ms = enqueue_at.iter().map(|(_, ms)| *ms).fold(0.0, f64::max);
    let longest_at = enqueue_at
        .iter()
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .map(|(t, _)| r.rel_t(*t))
        .unwrap_or_default();
    match &r.apps {
        None => {
            let _ = writeln!(
                md,
                "- One PostgreSQL 15 (private cluster, fsync off); three masters (hosts A, B, C: one state directory each, `drover run --config FILE`), lease {} s, {} workers each (`spawn: exec`), prefetch {}; `outage_grace` {} s on a host once it runs the new binary and package; `queue_budgets` {{\"default\": {}}}.",
                a.lease, a.workers, a.prefetch, a.outage_grace, a.budget
            );
            let _ = writeln!(
                md,
                "- Producer: the previous package's `Drover\\Producer` (PHP, one INSERT per job, autocommit; `enqueueGrouped`, through `drover.enqueue`, for every {}th job, in turn over {} groups), {} jobs/s throughout, max {} attempts; every {}th job runs 3 s (beating every 100 ms), the others 50-500 ms (uniform). {} jobs enqueued, {} of them 3 s long; the longest enqueue took {:.1} ms (at {}).",
                a.group_every,
                a.groups,
                a.rate,
                a.max_attempts,
                a.long_every,
                enqueued.len(),
                longs,
                longest_ms,
                longest_at
            );
        }
        Some(apps) => {
            let _ = writeln!(
                md,
                "- {} (`php artisan --version`: {}), PHP {}.",
                apps.name(),
                apps.versions.join(" / "),
                php_version()
            );
            let _ = writeln!(
                md,
                "- One PostgreSQL 15 (private cluster, fsync off); three hosts A, B, C, each a deploy layout (`site/releases/N-drover-X`, `site/current`), a shared `storage/`, its own state directory and `bin/drover` (`DROVER_BINARY`); its master is `php site/current/artisan drover` (the unit's ExecStart; it execs the binary). A package upgrade deploys a new release directory (`ln -sfn`, `php current/artisan migrate --force`) and runs `php current/artisan drover:restart`; a binary upgrade replaces `bin/drover` and restarts the master (SIGTERM, then `php current/artisan drover`). Each release's config/drover.php: lease {} s, pool `default` of {} workers (`spawn: {}`), prefetch {}, tries {}; `budgets` `drover:default` => {}; no `fair` queue (the fixture's, which the previous binary does not know); `outage_grace` {} s in the releases deployed once the host runs the new binary.",
                a.lease, a.workers, a.spawn, a.prefetch, a.max_attempts, a.budget, a.outage_grace
            );
            let _ = writeln!(
                md,
                "- Producer: the same application on the previous package (a host of its own, never upgraded), `php artisan app:eval` dispatching `Bench\\UpgradeJob` (a `ShouldQueue` job; bench/src/bin/rolling_upgrade/laravel.rs) with `Bus::dispatchToQueue` on the `drover` connection, {} jobs/s throughout, `$tries` {}; every {}th job in an ordered group (`$messageGroup`, in turn over {} groups); every {}th job runs 3 s (beating every 100 ms), the others 50-500 ms (uniform); each job records its start, beats and finish in `public.runs`. {} jobs dispatched, {} of them 3 s long; the longest dispatch took {:.1} ms (at {}).",
                a.rate,
                a.max_attempts,
                a.group_every,
                a.groups,
                a.long_every,
                enqueued.len(),
                longs,
                longest_ms,
                longest_at
            );
        }
    }
    let _ = writeln!(
        md,
        "- {} s of service before each step and after the last. Times below are seconds since the cluster started. Machine: {} cores, load average {} when the report was written; {}.\n",
        a.service,
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        match flock_ancestor() {
            Some(cmd) => format!("the run was started under `{cmd}`, so no other benchmark held it meanwhile"),
            None => "the run was not started under `flock` (no benchmark lock held)".to_string(),
        }
    );

    let _ = writeln!(md, "## Assertions\n");
    let _ = writeln!(md, "| assertion | result | figures |\n|---|---|---|");
    for c in &checks {
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            c.name,
            if c.ok { "pass" } else { "**FAIL**" },
            c.detail.replace('|', "\\|")
        );
    }

    let _ = writeln!(md, "\n## Steps\n");
    let _ = writeln!(
        md,
        "Jobs finished in each interval (from the step's start to the next step's), by the host and the releases of its master's binary and worker that finished them.\n"
    );
    let _ = writeln!(
        md,
        "| step | began | serving again | jobs finished, by host (binary / worker) |\n|---|---|---|---|"
    );
    for (i, (name, h, began, done)) in r.steps.iter().enumerate() {
        let total: usize = per_step[i].values().sum();
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {total}: {} |",
            r.rel_t(*began),
            if *h > 2 {
                "-".to_string()
            } else {
                format!("{} (+{:.2} s)", r.rel_t(*done), done - began)
            },
            per_step[i]
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !pause_md.is_empty() {
        let _ = writeln!(md, "\n## Queue pause with mixed masters\n\n{pause_md}");
    }
    let _ = writeln!(md, "\n## Masters\n");
    let _ = writeln!(
        md,
        "| host | # | binary | pid | started | serving | SIGTERM | exited | exit | jobs finished by its workers |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for inc in &r.incarnations {
        let n = finished_by(inc.pid, &workers, &execs);
        let t = |x: Option<f64>| x.map(|x| r.rel_t(x)).unwrap_or("-".into());
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            inc.host,
            inc.n,
            inc.bin.label(),
            inc.pid,
            r.rel_t(inc.started),
            t(inc.serving_at),
            t(inc.term_at),
            t(inc.exited_at),
            inc.exit.clone().unwrap_or_default(),
            n
        );
    }
    let _ = writeln!(md, "\n## What each master's log said\n");
    let _ = writeln!(
        md,
        "Lines about the schema, migrations, protocol, release, grace, reloads and pauses, and every warning or error (log level info; `host B #2` is the previous binary started again on the migrated schema, later SIGKILLed).\n"
    );
    for inc in &r.incarnations {
        let text = strip_ansi(&std::fs::read_to_string(&inc.log).unwrap_or_default());
        let lines: Vec<&str> = text.lines().filter(|l| interesting(l)).collect();
        let warns = text
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .count();
        let _ = writeln!(
            md,
            "**host {} #{} ({} binary, pid {})**: {} lines, {} at WARN or ERROR.\n",
            inc.host,
            inc.n,
            inc.bin.label(),
            inc.pid,
            text.lines().count(),
            warns
        );
        if !lines.is_empty() {
            let _ = writeln!(md, "```");
            for l in lines.iter().take(25) {
                let l: String = l.chars().take(400).collect();
                let _ = writeln!(md, "{l}");
            }
            if lines.len() > 25 {
                let _ = writeln!(md, "... {} more", lines.len() - 25);
            }
            let _ = writeln!(md, "```\n");
        }
    }
    let _ = writeln!(md, "## Status at each step\n");
    for (label, line) in &r.statuses {
        let _ = writeln!(md, "- {label}: {line}");
    }
    let _ = writeln!(md, "\n## Timeline\n\n```");
    for (t, what) in &r.events {
        let _ = writeln!(md, "{:>8} {what}", r.rel_t(*t));
    }
    let _ = writeln!(md, "```");
    if !r.notes.is_empty() {
        let _ = writeln!(md, "\n## Notes\n");
        for n in &r.notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    // Node rows and leases over time, coarsely.
    let _ = writeln!(md, "\n## Node rows (every 5 s of samples)\n\n```");
    let mut next = 0.0;
    for s in &samples {
        if s.at >= next {
            let _ = writeln!(
                md,
                "{:>8} nodes {:?} leased {} graced {} ready/delayed {}",
                r.rel_t(s.at),
                s.nodes
                    .iter()
                    .map(|(p, _)| format!(
                        "{p}:{}",
                        release_of_pid.get(p).map_or("?", |r| r.label())
                    ))
                    .collect::<Vec<_>>(),
                s.leased,
                s.graced.map(|g| g.to_string()).unwrap_or("-".into()),
                s.backlog
            );
            next = s.at + 5.0;
        }
    }
    let _ = writeln!(md, "```");
    println!("\n{md}");
    Ok((md, ok))
}

/// The command line of a `flock` this process runs under (an ancestor), if any.
fn flock_ancestor() -> Option<String> {
    let mut pid = std::process::id() as i32;
    for _ in 0..16 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let ppid: i32 = stat
            .rsplit(')')
            .next()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        if ppid <= 1 {
            return None;
        }
        let cmd = std::fs::read(format!("/proc/{ppid}/cmdline")).ok()?;
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.first().is_some_and(|a| a.ends_with("flock")) {
            return Some(args.iter().take(2).cloned().collect::<Vec<_>>().join(" "));
        }
        pid = ppid;
    }
    None
}

fn php_version() -> String {
    std::process::Command::new("php")
        .args(["-r", "echo PHP_VERSION;"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// How many jobs the workers of the master `master_pid` finished.
fn finished_by(master_pid: i32, workers: &BTreeMap<i32, WorkerSeen>, execs: &[Execution]) -> usize {
    execs
        .iter()
        .filter(|e| {
            e.finish.is_some()
                && workers
                    .get(&e.pid)
                    .is_some_and(|w| w.master_pid == master_pid)
        })
        .count()
}
