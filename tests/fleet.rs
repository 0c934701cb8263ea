//! Three masters on one database, as three application hosts run them (each its own state
//! directory and workers): `drover:status --fleet` on any host shows all three, the work spreads
//! over all three, a queue pause returns once all three hold it and holds on each,
//! `drover:restart --fleet` replaces every host's workers one host at a time, and when one host's master is SIGKILLed with jobs running, the other
//! two finish those jobs — none lost, none completed twice, no two executions of one job
//! overlapping. A queue with a fleet-wide budget of two runs at most two jobs at once across
//! the three hosts. On Laravel 8.83 and 12.67.
//!
//! docs/deploy.md, "Three hosts", says what is per host and what per fleet.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use support::*;

/// Each host's worker pids, from its master's status.
fn worker_pids(app: &LaravelApp) -> BTreeSet<i32> {
    let out = app.command(&["drover:status", "--json"]).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    status["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["workers"].as_array().cloned().unwrap_or_default())
        .filter_map(|w| w["pid"].as_i64().map(|p| p as i32))
        .collect()
}

/// A row of the journal: label, event, attempt, pid, and when, in seconds since the epoch.
type Row = (String, String, i32, i32, f64);

/// The journal's rows for labels LIKE `like`, in time order.
async fn journal(client: &tokio_postgres::Client, like: &str) -> Vec<Row> {
    client
        .query(
            "SELECT label, event, attempt, pid, extract(epoch FROM at)::float8 FROM journal
             WHERE label LIKE $1 ORDER BY at",
            &[&like],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect()
}

/// How many of the journal's jobs each host started, by its workers' pids.
fn started_per_host(ran: &[Row], pids: &[BTreeSet<i32>]) -> Vec<usize> {
    pids.iter()
        .map(|p| {
            ran.iter()
                .filter(|r| r.1 == "handle" && p.contains(&r.3))
                .count()
        })
        .collect()
}

async fn wait_ends(client: &tokio_postgres::Client, like: &str, n: i64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let ends = count(
            client,
            &format!("SELECT count(*) FROM journal WHERE event = 'end' AND label LIKE '{like}'"),
        )
        .await;
        if ends >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{ends} of {n} '{like}' jobs ended within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn three_masters_share_the_work_hold_a_pause_and_finish_a_killed_hosts_jobs(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let hosts: Vec<LaravelApp> = (0..3)
        .map(|_| {
            let mut app = LaravelApp::new(&db, laravel);
            app.env.push(("DROVER_PROCESSES".into(), "2".into()));
            // Short leases: a killed host's jobs come back within seconds, not a minute.
            app.env.push(("DROVER_LEASE".into(), "3".into()));
            // `budgeted` runs at most two jobs at once across the three hosts.
            app.env
                .push(("DROVER_QUEUES".into(), "default,budgeted".into()));
            app.env.push(("DROVER_BUDGETS".into(), "budgeted=2".into()));
            app
        })
        .collect();
    let mut masters = Vec::new();
    for app in &hosts {
        masters.push(start_master(app, 2).await);
    }
    let pids: Vec<BTreeSet<i32>> = hosts.iter().map(worker_pids).collect();
    assert!(pids.iter().all(|p| p.len() == 2), "{pids:?}");
    let before_restart = pids.clone();

    // `drover:status --fleet` on any host shows every host, from the status each master writes
    // into its node row.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = hosts[1]
            .command(&["drover:status", "--fleet", "--json"])
            .output()
            .unwrap();
        let fleet: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let nodes = fleet.as_array().cloned().unwrap_or_default();
        let written = nodes
            .iter()
            .filter(|n| n["status"]["pools"][0]["serving"] == 2)
            .count();
        if out.status.code() == Some(0) && nodes.len() == 3 && written == 3 {
            assert!(
                nodes
                    .iter()
                    .all(|n| n["release"] == env!("CARGO_PKG_VERSION")),
                "{fleet:#}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "drover:status --fleet ({}): {fleet:#}",
            out.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let text = hosts[0].artisan(&["drover:status", "--fleet"]);
    assert_eq!(text.matches("heard from").count(), 3, "{text}");

    // The work spreads: every host runs some of 60 short jobs.
    eval(
        &hosts[0],
        r#"foreach (range(1, 60) as $i) { App\Jobs\FleetJob::dispatch("spread $i", 200); }"#,
    );
    wait_ends(&client, "spread %", 60, Duration::from_secs(60)).await;
    let ran = journal(&client, "spread %").await;
    let per_host = started_per_host(&ran, &pids);
    eprintln!("60 jobs over three hosts: {per_host:?}");
    assert!(
        per_host.iter().all(|n| *n > 0),
        "a host ran nothing: {per_host:?}"
    );
    assert_eq!(per_host.iter().sum::<usize>(), 60);

    // A fleet-wide budget: twelve 300 ms jobs of `budgeted` for six workers on three hosts run
    // at most two at a time, and every one of them once.
    let sent = Instant::now();
    eval(
        &hosts[0],
        r#"foreach (range(1, 12) as $i) { App\Jobs\FleetJob::dispatch("budget $i", 300)->onQueue("budgeted"); }"#,
    );
    wait_ends(&client, "budget %", 12, Duration::from_secs(60)).await;
    let took = sent.elapsed();
    let ran = journal(&client, "budget %").await;
    let (mut now, mut most) = (0, 0);
    for r in &ran {
        match r.1.as_str() {
            "handle" => now += 1,
            "end" => now -= 1,
            _ => {}
        }
        most = most.max(now);
    }
    let per_host = started_per_host(&ran, &pids);
    eprintln!(
        "12 budgeted jobs (budget 2) in {took:?}, at most {most} at once, per host {per_host:?}"
    );
    assert_eq!(most, 2, "the budget is 2 across the fleet: {ran:?}");
    assert_eq!(
        ran.iter().filter(|r| r.1 == "handle").count(),
        12,
        "each budgeted job ran once: {ran:?}"
    );
    assert!(
        took < Duration::from_secs(20),
        "six rounds of two 300 ms jobs took {took:?}"
    );

    // A pause returns once all three hold it, and holds on each.
    let took = eval(
        &hosts[1],
        &format!(
            r#"$t = hrtime(true); {} echo round((hrtime(true) - $t) / 1e6, 1);
               foreach (range(1, 6) as $i) {{ App\Jobs\FleetJob::dispatch("paused $i"); }}"#,
            match laravel {
                Laravel::V12 => r#"\Illuminate\Support\Facades\Queue::pause("drover", "default");"#,
                Laravel::V8 =>
                    r#"\Drover\Queue\QueuePauses::forQueueConnection(app(), "drover")->pause("default");"#,
            }
        ),
    );
    eprintln!(
        "the pause returned in {} ms (three masters confirmed it)",
        took.trim()
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM journal WHERE label LIKE 'paused %'"
        )
        .await,
        0,
        "a paused queue's job started on some host"
    );
    eval(
        &hosts[2],
        r#"\Drover\Queue\QueuePauses::forQueueConnection(app(), "drover")->resume("default");"#,
    );
    wait_ends(&client, "paused %", 6, Duration::from_secs(30)).await;

    // `drover:restart --fleet` from one host replaces every host's workers, one host at a time,
    // while jobs run.
    eval(
        &hosts[0],
        r#"foreach (range(1, 12) as $i) { App\Jobs\FleetJob::dispatch("restart $i", 300); }"#,
    );
    let out = hosts[0]
        .command(&["drover:restart", "--fleet", "--timeout=60"])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{said}");
    assert!(out.status.success(), "drover:restart --fleet: {said}");
    let steps: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("asked to reload") || l.contains("every worker replaced"))
        .collect();
    assert_eq!(steps.len(), 6, "{said}");
    for pair in steps.chunks(2) {
        assert!(
            pair[0].contains("asked to reload") && pair[1].contains("every worker replaced"),
            "one host at a time: {said}"
        );
    }
    let pids: Vec<BTreeSet<i32>> = hosts.iter().map(worker_pids).collect();
    for (host, (before, after)) in before_restart.iter().zip(&pids).enumerate() {
        assert!(
            before.is_disjoint(after) && after.len() == 2,
            "host {host}: workers {before:?} before, {after:?} after"
        );
    }
    wait_ends(&client, "restart %", 12, Duration::from_secs(30)).await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM journal WHERE event = 'end' AND label LIKE 'restart %'"
        )
        .await,
        12,
        "a job ran twice across the restart"
    );

    // Six 4 s jobs, one per worker; the third host's master is SIGKILLed while they run.
    eval(
        &hosts[0],
        r#"foreach (range(1, 6) as $i) { App\Jobs\FleetJob::dispatch("long $i", 4000); }"#,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'handle' AND label LIKE 'long %'",
    )
    .await
        < 6
    {
        assert!(
            Instant::now() < deadline,
            "the six long jobs did not all start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed_at: f64 = client
        .query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])
        .await
        .unwrap()
        .get(0);
    let mut dead = masters.pop().unwrap();
    let _ = dead.kill(); // SIGKILL: its workers die with it (their parent-death signal)
    let _ = dead.wait();
    wait_ends(&client, "long %", 6, Duration::from_secs(60)).await;

    let rows = journal(&client, "long %").await;
    let mut by_label: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in &rows {
        by_label.entry(r.0.as_str()).or_default().push(r);
    }
    let mut rerun = 0;
    for (label, events) in &by_label {
        let ends: Vec<_> = events.iter().filter(|e| e.1 == "end").collect();
        assert_eq!(
            ends.len(),
            1,
            "{label} ended {} times: {events:?}",
            ends.len()
        );
        let handles: Vec<_> = events.iter().filter(|e| e.1 == "handle").collect();
        if handles.len() > 1 {
            rerun += 1;
            // Run on the killed host, then again elsewhere: after the kill, never beside it.
            assert_eq!(handles.len(), 2, "{label}: {events:?}");
            assert!(
                pids[2].contains(&handles[0].3),
                "{label}: first run not on the killed host: {events:?}"
            );
            assert!(!pids[2].contains(&handles[1].3), "{label}: {events:?}");
            assert!(
                handles[1].4 > killed_at,
                "{label} ran again before its host was killed: {events:?}"
            );
        } else {
            assert!(
                !pids[2].contains(&handles[0].3),
                "{label} ran once, on the killed host, yet ended: {events:?}"
            );
        }
    }
    eprintln!("{rerun} of the killed host's jobs ran again on the other two");
    assert_eq!(rerun, 2, "the killed host ran two of the six: {rows:?}");
    // The last end is journalled inside handle(), just before the worker says done.
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(count(
            &client,
            // drover's own failures and Laravel's (the test connects as role drover, whose
            // search path finds drover.failed_jobs first).
            "SELECT (SELECT count(*) FROM drover.failed_jobs) + (SELECT count(*) FROM public.failed_jobs)",
        )
        .await, 0);

    for (app, master) in hosts.iter().zip(masters) {
        stop_master(app, master).await;
    }
    db.stop().await;
}

fn eval(app: &LaravelApp, php: &str) -> String {
    app.artisan(&["app:eval", php])
}

on_every_laravel!(three_masters_share_the_work_hold_a_pause_and_finish_a_killed_hosts_jobs);
