//! The journey's summary: its checks, its timeline and its figures, as markdown.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::judge::{minute_name, Verdict};
use crate::walk::Journey;

fn secs(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.2}")
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// The master logs' warnings and errors, by message (timestamps and numbers left out), with
/// their count: what a team would read in `journalctl -u drover@myapp`.
fn log_lines(j: &Journey) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    for h in &j.hosts {
        let text = std::fs::read_to_string(h.log_path("master.log")).unwrap_or_default();
        for line in text.lines() {
            let Some(level) = [" WARN ", " ERROR "].iter().find(|l| line.contains(**l)) else {
                continue;
            };
            let message = line.split_once(level).map_or(line, |(_, m)| m);
            let message: String = message
                .chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .collect();
            let message: String = message.chars().take(220).collect();
            *out.entry(format!("{}{message}", level.trim().to_lowercase() + ": "))
                .or_default() += 1;
        }
    }
    out
}

fn range(v: impl Iterator<Item = f64>) -> String {
    let v: Vec<f64> = v.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return "-".into();
    }
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    if (hi - lo).abs() < 0.05 {
        format!("{lo:.1}")
    } else {
        format!("{lo:.1}–{hi:.1}")
    }
}

/// The run in a few lines.
fn figures(j: &Journey, v: &Verdict) -> String {
    let jobs = &v.jobs;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "- jobs: {} dispatched, {} through ({}), {} failed to dispatch; lost {}, completed twice {}, overlapping {}",
        jobs.dispatched,
        jobs.dispatched - jobs.failed_dispatches,
        jobs.by_connection
            .iter()
            .map(|(c, n)| format!("{n} to {c}"))
            .collect::<Vec<_>>()
            .join(", "),
        jobs.failed_dispatches,
        jobs.lost.len(),
        jobs.doubled.len(),
        jobs.overlapping.len()
    );
    let _ = writeln!(
        out,
        "- pickup (dispatch to start): {}",
        jobs.pickup
            .iter()
            .map(|(c, (p50, p99, _))| format!(
                "{} p50 {} s, p99 {} s",
                if c == "redis" { "Horizon" } else { "drover" },
                secs(*p50),
                secs(*p99)
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let once = v.minutes.iter().filter(|m| m.one.len() == 1).count();
    let _ = writeln!(
        out,
        "- the onOneServer() task: {once} of {} due times run once (cron alone, cron and masters, masters alone, through the outage)",
        v.minutes.len()
    );
    let _ = writeln!(
        out,
        "- deploys: {}, each on every worker {} s after the last host's queue:restart; reloads per master per deploy {}; jobs after a deploy on older code: {}",
        j.deploys.len(),
        range(j.deploys.iter().skip(1).map(|d| d.completed - d.last_restart())),
        range(
            j.deploys
                .iter()
                .filter(|d| d.drover_done.values().any(Option::is_some))
                .flat_map(|d| d.reloads.values().map(|n| *n as f64))
        )
        .replace(".0", ""),
        v.deploys.iter().map(|d| d.old_code.len()).sum::<usize>()
    );
    if !j.restarts.is_empty() {
        let _ = writeln!(
            out,
            "- step 8: {} restarts, each master serving again {} s after its SIGTERM",
            j.restarts.len(),
            range(j.restarts.iter().map(|r| r.serving_s))
        );
    }
    if let Some(o) = &j.outage {
        let late: Vec<String> = v
            .minutes
            .iter()
            .filter(|m| (m.minute * 60) as f64 >= o.stopped && ((m.minute * 60) as f64) < o.started)
            .flat_map(|m| {
                m.one
                    .iter()
                    .map(move |w| format!("{} ({w})", minute_name(m.minute)))
            })
            .collect();
        let _ = writeln!(
            out,
            "- the outage: {:.1} s; drover:status exit 5 after {} s, exit 0 {} s after the return; due times in it: {}",
            o.started - o.stopped,
            range(o.degraded_after.values().flatten().copied()),
            range(o.serving_after.values().flatten().copied()),
            if late.is_empty() { "none".into() } else { late.join(", ") }
        );
    }
    out
}

pub fn markdown(j: &Journey, v: &Verdict, command: &str, conditions: &[String]) -> String {
    let mut md = String::new();
    let all: Vec<_> = j.checks.iter().chain(&v.checks).collect();
    let failed = all.iter().filter(|c| !c.ok).count();
    let _ = writeln!(md, "# The journey: docs/guide.md on three hosts\n");
    let _ = writeln!(
        md,
        "`{command}`: {}. {} checks, {}.\n",
        conditions.join("; "),
        all.len(),
        if failed == 0 {
            "all held".to_string()
        } else {
            format!("**{failed} FAILED**")
        }
    );
    let _ = writeln!(md, "## Figures\n");
    let _ = writeln!(md, "{}", figures(j, v));
    let _ = writeln!(md, "## Checks\n\n| check | | detail |\n|---|---|---|");
    for c in &all {
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            c.what,
            if c.ok { "ok" } else { "**FAILED**" },
            c.detail.replace('|', "\\|")
        );
    }

    let jobs = &v.jobs;
    let _ = writeln!(md, "\n## Jobs\n");
    let _ = writeln!(
        md,
        "{} dispatched by the producer ({} a second, open loop), {} through (by connection: {}), {} failed{}. {} executions recorded ({} killed before their end); lost {}, run twice {}, overlapping {}.\n",
        jobs.dispatched,
        j.sizes.rate,
        jobs.dispatched - jobs.failed_dispatches,
        jobs.by_connection.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", "),
        jobs.failed_dispatches,
        if jobs.failed_why.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                jobs.failed_why.iter().map(|(k, n)| format!("{n}: {k}")).collect::<Vec<_>>().join("; ")
            )
        },
        jobs.executions,
        jobs.killed,
        jobs.lost.len(),
        jobs.doubled.len(),
        jobs.overlapping.len(),
    );
    let _ = writeln!(md, "| ran by | h1 | h2 | h3 |\n|---|---|---|---|");
    let conns: Vec<String> = {
        let mut c: Vec<String> = jobs.ran_by.keys().map(|(c, _)| c.clone()).collect();
        c.dedup();
        c
    };
    for conn in conns {
        let who = if conn == "redis" {
            "Horizon (redis)"
        } else {
            "drover"
        };
        let n = |h: &str| {
            jobs.ran_by
                .get(&(conn.clone(), h.to_string()))
                .copied()
                .unwrap_or(0)
        };
        let _ = writeln!(md, "| {who} | {} | {} | {} |", n("h1"), n("h2"), n("h3"));
    }
    let _ = writeln!(
        md,
        "\nPickup, from the dispatch's start to the job's start: {}.",
        jobs.pickup
            .iter()
            .map(|(c, (p50, p99, max))| format!(
                "{} p50 {} s, p99 {} s, max {} s",
                if c == "redis" { "Horizon" } else { "drover" },
                secs(*p50),
                secs(*p99),
                secs(*max)
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );

    let _ = writeln!(md, "\n## Deploys\n");
    let _ = writeln!(
        md,
        "Forge's zero-downtime script (`bench/journey/forge-deploy.sh`) on h1, h2, h3 in turn. \"Every worker on it\": every drover worker and every `horizon:work` of every host runs in the new release's directory (polled every 200 ms), counted from the last host's `queue:restart`; per master, the same for its own workers (0.0: already before it). A master's reloads count those the earlier hosts' `queue:restart` asked for (the cache, and so the signal, is shared by every host) and those a deploy moving `current` during a reload adds. \"In the reload's window\": jobs dispatched between the last `queue:restart` and every worker on the release, which old workers still serving may run (a reload replaces workers one by one).\n"
    );
    let _ = writeln!(
        md,
        "| deploy | version | scripts (s) | every worker on it (s) | each master's workers on it (s) | reloads per master | jobs after, older code | in the reload's window, older code | pickup around p50 / max (s) |\n|---|---|---|---|---|---|---|---|---|"
    );
    for (d, dj) in j.deploys.iter().zip(&v.deploys) {
        let last = d.last_restart();
        let _ = writeln!(
            md,
            "| {}{} | {} | {} | {:.1} | {} | {} | {} / {} | {} / {} | {} / {} |",
            d.step,
            if d.restart_horizon {
                " (with horizon:terminate)"
            } else {
                ""
            },
            d.version,
            d.hosts
                .iter()
                .map(|h| format!("{:.1}", h.ended - h.started))
                .collect::<Vec<_>>()
                .join(", "),
            d.completed - last,
            d.drover_done
                .values()
                .map(|t| opt(t.map(|t| t - last)))
                .collect::<Vec<_>>()
                .join(", "),
            d.reloads
                .values()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            dj.after,
            dj.old_code.len(),
            dj.in_window,
            dj.old_in_window,
            secs(dj.pickup_around.0),
            secs(dj.pickup_around.2),
        );
    }

    let _ = writeln!(md, "\n## Schedule\n");
    let _ = writeln!(
        md,
        "`journey-one` (`everyMinute()->onOneServer()`) and `journey-each` (`everyMinute()`), each run recording who ran it (`cron` is h1's `schedule:run`, `drover` a master) and when in the minute it started (s). Minutes marked * had cron and masters running the schedule.\n\n| minute | journey-one | journey-each |\n|---|---|---|"
    );
    for m in &v.minutes {
        let _ = writeln!(
            md,
            "| {}{} | {} | {} |",
            minute_name(m.minute),
            if j.overlap_minutes.contains(&m.minute) {
                " *"
            } else {
                ""
            },
            m.one.join(", "),
            m.each.join(", ")
        );
    }

    if !j.restarts.is_empty() {
        let _ = writeln!(md, "\n## Step 8: restarts\n\n| host | what | from → to | drained (s) | serving (s) | exit | drover:status |\n|---|---|---|---|---|---|---|");
        for r in &j.restarts {
            let _ = writeln!(
                md,
                "| {} | {} | {} → {} | {:.1} | {:.1} | {} | {} |",
                r.host, r.kind, r.from, r.to, r.drained_s, r.serving_s, r.exit, r.status_exit
            );
        }
    }

    if let Some(o) = &j.outage {
        let _ = writeln!(
            md,
            "\n## Step 7: the database outage\n\n`pg_ctl stop -m fast`, {:.1} s, the cluster started again. {} dispatches failed meanwhile (the producer's, which a web request would answer 500).\n\n| host | drover:status exit 5 after (s) | said | polls after that not 5 | exit 0 after the return (s) |\n|---|---|---|---|---|",
            o.started - o.stopped,
            o.failed_dispatches
        );
        for (host, after) in &o.degraded_after {
            let _ = writeln!(
                md,
                "| {host} | {} | {} | {} | {} |",
                opt(*after),
                o.said
                    .get(host)
                    .cloned()
                    .unwrap_or_default()
                    .replace('|', "\\|"),
                o.not_degraded_polls.get(host).copied().unwrap_or(0),
                opt(o.serving_after.get(host).copied().flatten())
            );
        }
    }

    let _ = writeln!(md, "\n## Timeline\n\n| t (s) | |\n|---|---|");
    for (at, what) in &j.events {
        let _ = writeln!(md, "| {:.1} | {} |", at - j.t0, what.replace('|', "\\|"));
    }

    let lines = log_lines(j);
    let _ = writeln!(
        md,
        "\n## What the masters' logs warned of\n\nEvery WARN and ERROR line of the three masters' logs, digits as #, with how often.\n"
    );
    if lines.is_empty() {
        let _ = writeln!(md, "None.");
    }
    for (line, n) in &lines {
        let _ = writeln!(md, "- {n} × `{}`", line.replace('`', "'"));
    }
    md
}
