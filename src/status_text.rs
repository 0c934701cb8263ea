//! `drover status` as text: the status document ([`Status`]) for a terminal.

use std::fmt::Write as _;

use std::collections::BTreeMap;

use crate::status_document::{
    Circuit, Groups, Horizon, JobProgress, PoolStatus, ReadOrWhy, ScheduledTask, Status,
    WorkerStatus, Workflows,
};

impl Status {
    /// The lines `drover status` prints.
    pub fn text(&self) -> String {
        let mut out = self.master_text();
        let progress = match &self.progress {
            Some(ReadOrWhy::Read(progress)) => Some(progress),
            _ => None,
        };
        for pool in &self.pools {
            out += &pool_text(pool, progress);
        }
        if let Some(ReadOrWhy::Failed { error }) = &self.progress {
            let _ = writeln!(out, "progress of running jobs: could not be read: {error}");
        }
        if let Some(ReadOrWhy::Read(backlog)) = &self.backlog {
            let parts: Vec<String> = backlog.iter().map(|(q, n)| format!("{q} {n}")).collect();
            let _ = writeln!(out, "backlog (jobs waiting): {}", parts.join(", "));
        }
        if let Some(ReadOrWhy::Read(groups)) = &self.groups {
            out += &groups_text(groups);
        }
        match &self.workflows {
            Some(ReadOrWhy::Read(w)) => {
                if let Some(line) = workflows_line(w) {
                    let _ = writeln!(out, "{line}");
                }
            }
            Some(ReadOrWhy::Failed { error }) => {
                let _ = writeln!(out, "workflows: could not be read: {error}");
            }
            None => {}
        }
        match &self.schedule {
            Some(ReadOrWhy::Read(tasks)) => out += &schedule_text(tasks),
            Some(ReadOrWhy::Failed { error }) => {
                let _ = writeln!(out, "schedule: its history could not be read: {error}");
            }
            None => {}
        }
        if let Some(ReadOrWhy::Read(hosts)) = &self.schedulers_beside {
            for h in hosts {
                let _ = writeln!(
                    out,
                    "{}",
                    scheduler_beside_line(&h.host, &h.task, &h.at, &h.status)
                );
            }
        }
        match &self.horizon {
            Some(ReadOrWhy::Read(horizon)) => out += &horizon_text(horizon),
            Some(ReadOrWhy::Failed { error }) => {
                let _ = writeln!(out, "vacuum horizon: could not be read: {error}");
            }
            None => {}
        }
        let t = &self.totals;
        let _ = writeln!(
            out,
            "totals: {} claimed, {} done, {} released, {} failed, {} timed out, {} returned unstarted",
            t.claimed, t.done, t.released, t.failed, t.timed_out, t.returned_unstarted
        );
        if t.completed_within > 0 {
            let _ = writeln!(
                out,
                "completed within their own transaction: {} of the done ({} learned from the database after their worker died)",
                t.completed_within, t.completed_after_exit
            );
        }
        out
    }

    /// The master's line, then what degrades it and the queues paused by name.
    fn master_text(&self) -> String {
        let mut out = format!(
            "master pid {} node {}: {}, {}{}{}\n",
            self.pid,
            self.node,
            word(&self.health),
            word(&self.phase),
            if self.paused { ", paused" } else { "" },
            if self.reloading { ", reloading" } else { "" }
        );
        for problem in &self.problems {
            let _ = writeln!(out, "DEGRADED: {problem}");
        }
        for (queue, left) in &self.paused_queues {
            let _ = match left {
                Some(secs) => writeln!(
                    out,
                    "queue {queue} paused for {secs:.0}s more (queue:pause)"
                ),
                None => writeln!(out, "queue {queue} paused until resumed (queue:pause)"),
            };
        }
        out
    }
}

/// A pool's line (its circuit and how it starts workers), what an outage does to its jobs, and
/// its workers' table (with their running jobs' progress, when the answer read it).
fn pool_text(pool: &PoolStatus, progress: Option<&BTreeMap<String, JobProgress>>) -> String {
    let mut out = String::new();
    let circuit = match &pool.circuit {
        Circuit::Open { retry_in_secs } => format!(
            "circuit OPEN after {} failed starts (retry in {retry_in_secs:.0}s)",
            pool.failures_in_a_row
        ),
        Circuit::HalfOpen => "circuit half-open (probing)".to_string(),
        Circuit::Closed => "circuit closed".to_string(),
    };
    let spawn = match (
        &pool.spawn.fell_back,
        pool.spawn.mode.as_str(),
        &pool.spawn.zygote,
    ) {
        (Some(cause), _, _) => format!("workers started by exec: {cause}"),
        (None, "fork", zygote) => format!(
            "workers forked from zygote pid {} ({})",
            zygote
                .as_ref()
                .and_then(|z| z.pid)
                .map_or("-".to_string(), |pid| pid.to_string()),
            zygote.as_ref().map_or("?", |z| z.state.as_str())
        ),
        _ => "workers started by exec".to_string(),
    };
    let _ = writeln!(
        out,
        "pool {} (queues {}): {} processes, {} serving, generation {}, {}{}; {spawn}",
        pool.name,
        pool.queues.join(","),
        pool.processes,
        pool.serving,
        pool.generation,
        circuit,
        if pool.retired { ", retired" } else { "" }
    );
    if let Some(o) = &pool.outage {
        let _ = writeln!(
            out,
            "  outage: a running job outlives a database outage of {:.0}-{:.0}s (outage_grace {:.0}s{}); a lost host's jobs come back within {:.0}s",
            o.outlives_secs[0],
            o.outlives_secs[1],
            o.grace_secs,
            if o.in_force {
                ""
            } else {
                ", not in force while a master of drover 0.1 has a row"
            },
            o.lost_host_return_secs
        );
    }
    out += &workers_text(&pool.workers, progress);
    out
}

/// The workers' table: a header, then a row per worker; a last column with the progress its
/// running job last reported when the answer read the progress (`-`: none reported).
fn workers_text(
    workers: &[WorkerStatus],
    progress: Option<&BTreeMap<String, JobProgress>>,
) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "  {:>6} {:>8} {:>9} {:>4} {:>5} {:>10} {:>9} {:>8} {:>8}",
        "worker", "pid", "state", "gen", "held", "running", "finished", "PSS MiB", "uptime"
    );
    out += if progress.is_some() {
        "  progress\n"
    } else {
        "\n"
    };
    for w in workers {
        let _ = write!(
            out,
            "  {:>6} {:>8} {:>9} {:>4} {:>5} {:>10} {:>9} {:>8} {:>8}",
            w.id,
            w.pid,
            w.state,
            w.generation,
            w.held,
            w.running.map_or("-".to_string(), |j| j.to_string()),
            w.finished,
            w.pss_kib
                .map_or("-".to_string(), |k| format!("{:.1}", k as f64 / 1024.0)),
            format!("{}s", w.uptime_secs)
        );
        if let Some(progress) = progress {
            let report = w.running.and_then(|j| progress.get(&j.to_string()));
            let _ = write!(out, "  {}", report.map_or("-".to_string(), progress_words));
        }
        out.push('\n');
    }
    out
}

/// A job's progress as status shows it beside its worker: `41% parsed 4,000 rows`, the note cut
/// at 60 characters, and how long ago when that is a minute or more (`41% parsed (5m 3s ago)`).
/// `drover:status` says the same (php-client's StatusLines).
pub(crate) fn progress_words(p: &JobProgress) -> String {
    let mut out = format!("{}%", p.percent);
    if let Some(note) = p.note.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
        out.push(' ');
        if note.chars().count() > PROGRESS_NOTE_SHOWN {
            out.extend(note.chars().take(PROGRESS_NOTE_SHOWN - 1));
            out.push('…');
        } else {
            out.push_str(note);
        }
    }
    if p.reported_secs_ago >= 60.0 {
        let _ = write!(out, " ({} ago)", duration_words(p.reported_secs_ago));
    }
    out
}

/// The characters of a progress note status shows (a note holds up to 500).
const PROGRESS_NOTE_SHOWN: usize = 60;

/// The workflows' line (docs/workflows.md): none while no workflow is pending or running and none
/// failed in the last hour.
pub(crate) fn workflows_line(w: &Workflows) -> Option<String> {
    if w.pending == 0 && w.running == 0 && w.failed_last_hour == 0 {
        return None;
    }
    Some(format!(
        "workflows: {} running, {} pending; nodes waiting: {} for a signal, {} for a time; {} failed in the last hour",
        w.running, w.pending, w.nodes_waiting_for_signal, w.nodes_waiting_for_time, w.failed_last_hour
    ))
}

/// An enum's word as the document spells it.
fn word(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_string(),
    }
}

/// The ordered groups (docs/ordered-groups.md): per queue with groups, their counts and the
/// oldest head's age; then each held group with the job that holds it and what lets it go on.
/// Nothing when no queue has a group.
fn groups_text(groups: &Groups) -> String {
    let mut out = String::new();
    let parts: Vec<String> = groups
        .queues
        .iter()
        .filter(|(_, g)| g.groups > 0)
        .map(|(q, g)| {
            format!(
                "{q} {} ({} held, {} jobs waiting, oldest head {:.1}s)",
                g.groups,
                g.held,
                g.waiting,
                g.oldest_head_secs.unwrap_or(0.0)
            )
        })
        .collect();
    if !parts.is_empty() {
        let _ = writeln!(out, "groups (with jobs): {}", parts.join(", "));
    }
    for h in &groups.held {
        let uuid = h.uuid.as_deref().unwrap_or("?");
        let _ = writeln!(
            out,
            "  held: {}/{} by failed job {} ({}), {} waiting behind it: php artisan queue:retry {uuid} (it runs first) or queue:forget {uuid}",
            h.queue,
            h.group,
            h.job,
            h.error.as_deref().unwrap_or("failed"),
            h.waiting,
        );
    }
    out
}

/// Laravel's own scheduler on `host`, by its latest run: what status says of it.
pub(crate) fn scheduler_beside_line(host: &str, task: &str, at: &str, status: &str) -> String {
    format!("Laravel's own scheduler still runs beside drover on {host}: it ran {task} ({at}, {status}); remove it from cron there (docs/schedule.md, \"Beside cron\")")
}

/// The schedule: a line per task — when it is due, when next, its latest run, and how long it has
/// failed.
fn schedule_text(tasks: &[ScheduledTask]) -> String {
    let mut out = format!("schedule: {} task(s)\n", tasks.len());
    for t in tasks {
        let every = match t.repeat_seconds {
            Some(s) => format!(" every {s}s"),
            None => String::new(),
        };
        let next = match t.next_due_in_secs {
            Some(secs) => format!("next in {}", duration_words(secs)),
            None => "never due again".to_string(),
        };
        let latest = match &t.latest {
            Some(l) => {
                let why = l
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                format!("last {} (due {}, {}){why}", l.status, l.due_at, l.host)
            }
            None => "never run".to_string(),
        };
        let failing = if t.failed_in_a_row > 0 {
            format!(", {} failed in a row", t.failed_in_a_row)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {} [{} {}{}{}] {next}; {latest}{failing}",
            t.summary,
            t.expression,
            t.timezone,
            every,
            if t.one_server { ", one server" } else { "" },
        );
    }
    out
}

/// What holds the vacuum horizon back, and whether the master could see every session.
fn horizon_text(h: &Horizon) -> String {
    let dead = h
        .jobs_dead_tuples
        .map(|n| format!("; {n} dead tuples in drover.jobs"))
        .unwrap_or_default();
    let mut out = match &h.oldest {
        None => format!("vacuum horizon: nothing holds it back{dead}\n"),
        Some(o) => {
            let mut who = vec![o.name.clone()];
            who.extend(o.role.clone());
            who.extend(o.state.clone());
            format!(
                "vacuum horizon: held by {}{} ({}){}, {} transactions old{dead}\n",
                o.kind.replace('_', " "),
                o.pid.map(|p| format!(" pid {p}")).unwrap_or_default(),
                who.join(", "),
                o.open_secs
                    .map(|s| format!(", open {}", duration_words(s)))
                    .unwrap_or_default(),
                o.xid_age,
            )
        }
    };
    if !h.sees_all_sessions {
        out +=
            "  the master's role cannot see other roles' snapshots: GRANT pg_read_all_stats TO it \
                (docs/operations.md)\n";
    }
    out
}

/// `42s`, `5m 3s`, `3h 20m`, `12d 4h`.
fn duration_words(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(percent: u8, note: Option<&str>, ago: f64) -> JobProgress {
        JobProgress {
            percent,
            note: note.map(String::from),
            reported_secs_ago: ago,
        }
    }

    /// The document PHP's tests read (generated from `status_document`'s sample).
    fn sample() -> Status {
        let text = std::fs::read_to_string(crate::contract_files::path(
            "php-client/tests/fixtures/status.json",
        ))
        .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn a_progress_report_is_its_percent_and_note_and_its_age_once_it_is_a_minute_old() {
        assert_eq!(
            progress_words(&report(41, Some("parsed 4,000 rows"), 0.8)),
            "41% parsed 4,000 rows"
        );
        assert_eq!(progress_words(&report(100, None, 2.0)), "100%");
        assert_eq!(progress_words(&report(7, Some("  "), 59.9)), "7%");
        assert_eq!(
            progress_words(&report(41, Some("parsed"), 303.0)),
            "41% parsed (5m 3s ago)"
        );
        let long = "é".repeat(500);
        let shown = progress_words(&report(3, Some(&long), 0.0));
        assert_eq!(shown, format!("3% {}…", "é".repeat(59)));
    }

    #[test]
    fn the_workflows_line_is_left_out_while_none_runs_waits_or_failed_lately() {
        let mut w = Workflows {
            pending: 0,
            running: 0,
            nodes_waiting_for_signal: 0,
            nodes_waiting_for_time: 0,
            failed_last_hour: 0,
        };
        assert_eq!(workflows_line(&w), None);
        w.failed_last_hour = 1;
        assert_eq!(
            workflows_line(&w).as_deref(),
            Some("workflows: 0 running, 0 pending; nodes waiting: 0 for a signal, 0 for a time; 1 failed in the last hour")
        );
        w.running = 14;
        w.nodes_waiting_for_signal = 3;
        assert!(workflows_line(&w)
            .unwrap()
            .starts_with("workflows: 14 running, 0 pending; nodes waiting: 3 for a signal"));
    }

    #[test]
    fn each_worker_shows_its_running_jobs_progress_when_the_answer_read_it() {
        let status = sample();
        let text = status.text();
        let lines: Vec<&str> = text.lines().collect();
        let header = lines.iter().position(|l| l.contains("PSS MiB")).unwrap();
        assert!(lines[header].ends_with("  uptime  progress"), "{text}");
        assert!(
            lines[header + 1].ends_with("  3600s  41% parsed 4,000 rows"),
            "the busy worker runs job 981: {text}"
        );
        assert!(
            lines[header + 2].ends_with("  3599s  -"),
            "the idle one: {text}"
        );
        assert!(text.contains(
            "\nworkflows: 14 running, 2 pending; nodes waiting: 3 for a signal, 5 for a time; 1 failed in the last hour\n"
        ));

        // The node row's document (no database figures): no progress column, no workflows line.
        let mut row = status.clone();
        row.progress = None;
        row.workflows = None;
        let text = row.text();
        assert!(
            !text.contains("progress") && !text.contains("workflows"),
            "{text}"
        );
        assert!(text.contains("  3600s\n"), "{text}");

        let mut failed = status;
        failed.progress = Some(ReadOrWhy::Failed {
            error: "the database did not answer in 2 s".into(),
        });
        let text = failed.text();
        assert!(text.contains(
            "\nprogress of running jobs: could not be read: the database did not answer in 2 s\n"
        ));
        assert!(!text.contains("  progress\n"), "{text}");
    }
}
