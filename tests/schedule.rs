//! The application's schedule run by the master, without cron (issue 39, docs/schedule.md):
//! `php artisan drover` reads the fixture's schedule (App\Console\TestSchedule, Laravel 8's
//! Kernel::schedule and Laravel 12's withSchedule), runs each due time through
//! `drover:schedule-run` with Laravel's semantics, and records each run in
//! `drover.schedule_runs`. Every scenario runs on Laravel 8.83 and 12.67.

mod support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
use support::*;

/// One run as the history holds it.
#[derive(Debug)]
struct Run {
    summary: String,
    host: String,
    due_at: SystemTime,
    scope: String,
    status: String,
    reason: Option<String>,
    late: Option<Duration>,
    output_tail: Option<String>,
}

async fn runs(client: &tokio_postgres::Client) -> Vec<Run> {
    client
        .query(
            "SELECT summary, due_at, scope, status, reason, started_at, output_tail, host
             FROM drover.schedule_runs ORDER BY due_at, summary, host",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let due_at: SystemTime = r.get(1);
            let started: Option<SystemTime> = r.get(5);
            Run {
                summary: r.get(0),
                host: r.get(7),
                due_at,
                scope: r.get(2),
                status: r.get(3),
                reason: r.get(4),
                late: started.map(|s| s.duration_since(due_at).unwrap_or_default()),
                output_tail: r.get(6),
            }
        })
        .collect()
}

/// The master runs the schedule: at a minute's due time, a closure of onOneServer() and a
/// command ran and succeeded (the command's output kept), a task whose filter says no and one
/// for another environment were skipped, a task that throws failed with its exception; an
/// expression cron cannot read is named in the log and left out; on Laravel 12 a task every two
/// seconds ran at each of its due times. The history holds one row per task and due time.
async fn the_master_runs_the_schedule_without_cron_and_records_each_run(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    // A task alerts from its first failure (the default is three in a row).
    let app = LaravelApp::new_with(
        &db,
        laravel,
        &[
            ("DROVER_TEST_SCHEDULE", "basics"),
            ("DROVER_SCHEDULE_ALERT_FAILURES", "1"),
        ],
    );
    // A run of `overlapping` still out, as far as Laravel's mutex says (its cache lock).
    app.artisan(&[
        "app:eval",
        "foreach (app(Illuminate\\Console\\Scheduling\\Schedule::class)->events() as $e) { if ($e->description === 'overlapping') { $e->mutex->create($e); } }",
    ]);
    let mut master = app.spawn(&["drover"], "drover.log");

    // The first minute whose due time every minute task passed (ended), up to ~a minute away.
    let minute_tasks = [
        "artisan app:scheduled hello",
        "artisan app:no-such-command",
        "closure",
        "elsewhere",
        "filtered",
        "throws",
        "hooked",
        "between",
        "unless-between",
        "zoned",
        "overlapping",
    ];
    let deadline = Instant::now() + Duration::from_secs(100);
    let first_minute = loop {
        let all = runs(&client).await;
        let closure_due = all
            .iter()
            .find(|r| r.summary == "closure" && r.status != "running")
            .map(|r| r.due_at);
        if let Some(due) = closure_due {
            let ended: Vec<&str> = all
                .iter()
                .filter(|r| r.due_at == due && r.status != "running")
                .map(|r| r.summary.as_str())
                .filter(|s| minute_tasks.contains(s))
                .collect();
            if ended.len() == minute_tasks.len() {
                break due;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no minute's due time ended for every task in 100 s: {all:#?}\n{}",
            app.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let all = runs(&client).await;
    let at = |summary: &str| -> &Run {
        let found: Vec<&Run> = all
            .iter()
            .filter(|r| r.summary == summary && r.due_at == first_minute)
            .collect();
        assert_eq!(found.len(), 1, "{summary} at {first_minute:?}: {all:#?}");
        found[0]
    };
    let closure = at("closure");
    assert_eq!(closure.status, "succeeded", "{closure:?}");
    assert_eq!(closure.scope, "", "onOneServer: one run across masters");
    let command = at("artisan app:scheduled hello");
    assert_eq!(command.status, "succeeded", "{command:?}");
    assert_ne!(
        command.scope, "",
        "a task without onOneServer runs once per host"
    );
    assert!(
        command
            .output_tail
            .as_deref()
            .unwrap_or("")
            .contains("scheduled says hello"),
        "{command:?}"
    );
    let filtered = at("filtered");
    assert_eq!(filtered.status, "skipped", "{filtered:?}");
    assert!(filtered.reason.as_deref().unwrap_or("").contains("filters"));
    let elsewhere = at("elsewhere");
    assert_eq!(elsewhere.status, "skipped", "{elsewhere:?}");
    assert!(elsewhere
        .reason
        .as_deref()
        .unwrap_or("")
        .contains("environment"));
    let overlapping = at("overlapping");
    assert_eq!(overlapping.status, "skipped", "{overlapping:?}");
    assert!(
        overlapping
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("overlapping"),
        "{overlapping:?}"
    );
    let missing = at("artisan app:no-such-command");
    assert_eq!(missing.status, "failed", "{missing:?}");
    let throws = at("throws");
    assert_eq!(throws.status, "failed", "{throws:?}");
    assert!(
        throws
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("the task broke"),
        "{throws:?}"
    );
    for run in [closure, command, filtered, elsewhere, throws, missing] {
        // Started at its due second (the bench measures how close; this only rules out a run
        // a minute late, or before its time).
        let late = run.late.expect("started");
        assert!(late < Duration::from_secs(2), "{run:?}");
    }
    // The closure and the command ran (the log they append to), once for that minute.
    let log = std::fs::read_to_string(app.storage_dir().join("schedule-runs.log")).unwrap();
    let due_s = first_minute
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let lines_in_minute = |name: &str| {
        log.lines()
            .filter(|l| {
                let mut parts = l.split(' ');
                parts.next() == Some(name)
                    && parts
                        .next()
                        .and_then(|t| t.parse::<f64>().ok())
                        .is_some_and(|t| t >= due_s && t < due_s + 60.0)
            })
            .count()
    };
    assert_eq!(lines_in_minute("closure"), 1, "{log}");
    // Forked from the pool's zygote (the application booted once), not started as a command;
    // but a task with a between() window by its command, which works the window out anew.
    assert!(
        log.lines()
            .filter(|l| l.starts_with("closure "))
            .all(|l| l.ends_with(" fork")),
        "{log}"
    );
    assert!(
        log.lines()
            .filter(|l| l.starts_with("between "))
            .all(|l| l.ends_with(" exec")),
        "{log}"
    );
    assert_eq!(lines_in_minute("command"), 1, "{log}");
    assert_eq!(lines_in_minute("filtered"), 0, "{log}");
    assert_eq!(lines_in_minute("elsewhere"), 0, "{log}");
    assert!(!log.contains("bad-cron"), "{log}");
    let master_log = app.log("drover.log");
    assert!(
        master_log.contains("bad-cron") || master_log.contains("61 * * * *"),
        "the task with an expression cron cannot read is named: {master_log}"
    );

    if laravel == Laravel::V12 {
        // Every two seconds, onOneServer: each due time from its first on record to its last,
        // once, succeeded (the last may still run). Five of them at least — read again until
        // there are: a test that started a few seconds before a minute's turn saw its minute
        // end after four.
        let deadline = Instant::now() + Duration::from_secs(30);
        let all = loop {
            let all = runs(&client).await;
            if all.iter().filter(|r| r.summary == "two-seconds").count() >= 5
                || Instant::now() > deadline
            {
                break all;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let two: Vec<&Run> = all.iter().filter(|r| r.summary == "two-seconds").collect();
        assert!(two.len() >= 5, "{two:#?}");
        for pair in two.windows(2) {
            assert_eq!(
                pair[1].due_at.duration_since(pair[0].due_at).unwrap(),
                Duration::from_secs(2),
                "{two:#?}"
            );
        }
        for run in &two[..two.len() - 1] {
            assert_eq!(run.status, "succeeded", "{run:?}");
            assert!(run.late.unwrap() < Duration::from_secs(2), "{run:?}");
        }
    }

    // The two failing tasks raised the alert (Drover\Events\ScheduledTaskAlert), once each:
    // the cooldown holds the next failures' alerts.
    let deadline = Instant::now() + Duration::from_secs(20);
    let alerts = loop {
        let mut alerts = journal(&client, "schedule_alert").await;
        if alerts.len() >= 2 || Instant::now() > deadline {
            alerts.sort();
            break alerts;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        alerts,
        ["artisan app:no-such-command", "throws"],
        "{}",
        app.log("drover.log")
    );
    assert!(
        app.log("drover.log")
            .contains("the scheduled task throws failed 1 time(s) in a row"),
        "{}",
        app.log("drover.log")
    );

    // drover:status lists each task with its next due time and its latest run.
    let text = app.artisan(&["drover:status"]);
    assert!(text.contains("schedule: "), "{text}");
    let closure_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("closure ["))
        .unwrap_or_else(|| panic!("no line for the closure task: {text}"));
    assert!(
        closure_line.contains(", one server] next in "),
        "{closure_line}"
    );
    assert!(closure_line.contains("; last "), "{closure_line}");
    let throws_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("throws ["))
        .unwrap_or_else(|| panic!("no line for the task that throws: {text}"));
    assert!(throws_line.contains("failed in a row"), "{throws_line}");

    // Every name drover's runs recorded in that minute (its sub-minute task aside; read now,
    // when its background and shell commands are long done), for the oracle below.
    let log = std::fs::read_to_string(app.storage_dir().join("schedule-runs.log")).unwrap();
    let mut drover_minute: Vec<String> = log
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            let name = parts.next()?;
            let t = parts.next()?.parse::<f64>().ok()?;
            (t >= due_s && t < due_s + 60.0 && name != "two-seconds").then(|| name.to_string())
        })
        .collect();
    drover_minute.sort_unstable();
    drover_minute.dedup();
    // The background command was handed over (its end is schedule:finish's), the file
    // command's output went to its file, and the job reached a worker.
    let background = all
        .iter()
        .find(|r| r.summary == "artisan app:scheduled background" && r.due_at == first_minute)
        .unwrap_or_else(|| panic!("{all:#?}"));
    assert_eq!(background.status, "started", "{background:?}");
    let output =
        std::fs::read_to_string(app.storage_dir().join("scheduled-output.txt")).unwrap_or_default();
    assert!(output.contains("scheduled says file"), "{output}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !journal(&client, "processed")
        .await
        .iter()
        .any(|l| l == "scheduled_job")
    {
        assert!(
            Instant::now() < deadline,
            "the scheduled job was not processed: {:?}",
            journal(&client, "processed").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The verbs: run a task now (the master takes the request within seconds), pause and
    // resume it; a name that is no task's is refused by name.
    app.artisan(&["drover:schedule-run-now", "closure"]);
    let deadline = Instant::now() + Duration::from_secs(15);
    while count(
        &client,
        "SELECT count(*) FROM drover.schedule_runs WHERE summary = 'closure' AND status = 'succeeded' AND asked_by LIKE 'drover:schedule-run-now on %'",
    )
    .await
        < 1
    {
        assert!(Instant::now() < deadline, "{:#?}", runs(&client).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    app.artisan(&["drover:schedule-pause", "closure"]);
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.schedule_pauses WHERE summary = 'closure'"
        )
        .await,
        1
    );
    let resumed = app.artisan(&["drover:schedule-resume", "closure"]);
    assert!(resumed.contains("is resumed"), "{resumed}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.schedule_pauses").await,
        0
    );
    let refused = app
        .command(&["drover:schedule-pause", "no-such-task"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no task of the schedule is named")
            || String::from_utf8_lossy(&refused.stdout)
                .contains("no task of the schedule is named"),
        "{refused:?}"
    );

    app.artisan(&["drover:terminate"]);
    let status = master.wait().unwrap();
    let master_log = app.log("drover.log");
    assert!(status.success(), "{status}:\n{master_log}");
    assert!(!master_log.contains("panicked"), "{master_log}");
    // The tasks without onOneServer() are named at start: they run on every host with a master.
    assert!(
        master_log.contains("without onOneServer() run on every host")
            && master_log.contains("artisan app:scheduled hello"),
        "{master_log}"
    );

    // The oracle: Laravel's own `schedule:run` over the same schedule (without the sub-minute
    // task) runs what drover ran in its minute — the closure and the command, not the filtered
    // task nor the other environment's — and, run beside drover, says that it does.
    let log_path = app.storage_dir().join("schedule-runs.log");
    let before = std::fs::read_to_string(&log_path).unwrap().len();
    let out = app
        .command(&["schedule:run"])
        .env("DROVER_TEST_ORACLE", "1")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // (Its background command ends after it returns.)
    std::thread::sleep(Duration::from_secs(3));
    let log = std::fs::read_to_string(&log_path).unwrap();
    let mut oracle: Vec<String> = log[before..]
        .lines()
        .filter_map(|l| l.split(' ').next().map(str::to_string))
        .collect();
    oracle.sort_unstable();
    oracle.dedup();
    let expected = [
        "after",
        "before",
        "between",
        "closure",
        "command",
        "command-background",
        "command-file",
        "exec",
        "hooked",
        "on-success",
        "zoned",
    ];
    assert_eq!(
        oracle, expected,
        "schedule:run ({}) said:\n{said}",
        out.status
    );
    assert_eq!(
        drover_minute, oracle,
        "what drover ran in its minute, against schedule:run"
    );
    assert!(
        said.contains("drover: this schedule is also run by drover"),
        "{said}"
    );
    db.stop().await;
}

fn signal(child: &std::process::Child, sig: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig);
}

/// A master of the fixture app on a host of its own (its own UTS namespace, named `host`), with
/// its own state directory and a 3 s lease (so that a dead master's row goes 30 s after it).
fn master_on(app: &LaravelApp, host: &str) -> Spawned {
    let log = std::fs::File::create(app.storage_dir().join(format!("{host}.log"))).unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--uts",
        "sh",
        "-c",
        "hostname \"$0\" && exec php \"$1\" drover",
    ])
    .arg(host)
    .arg(app.dir.join("artisan"))
    .current_dir(&app.dir)
    .env_remove("DATABASE_URL");
    for (k, v) in &app.env {
        cmd.env(k, v);
    }
    cmd.env(
        "DROVER_STATE_DIR",
        app.storage_dir().join(format!("drover-{host}")),
    )
    .env("DROVER_LEASE", "3")
    .stdin(Stdio::null())
    .stdout(log.try_clone().unwrap())
    .stderr(log);
    Spawned(cmd.spawn().unwrap())
}

/// Two masters, on hosts h1 and h2, run the schedule; h1 is SIGKILLed while a run of its is in
/// progress. Every due time of the task of onOneServer() from its first to its last on record
/// has one run — every one succeeded but at most the one h1 had out at the kill, which is lost —
/// and ran once (the task's own log); the task without onOneServer ran on each host at each due
/// time while both lived, then on h2 alone. Every ten seconds on Laravel 12 (the kill after 15 s,
/// then the 30 s until h1's row goes: about a minute), every minute on Laravel 8, which has nothing shorter (the kill at the first
/// due time, then the next on h2 alone: about two minutes).
async fn two_masters_run_each_due_time_once_and_a_killed_one_loses_only_its_run_in_progress(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = LaravelApp::new_with(&db, laravel, &[("DROVER_TEST_SCHEDULE", "fleet")]);
    let period = if laravel == Laravel::V12 { 10 } else { 60 };
    let mut h1 = master_on(&app, "h1");
    let mut h2 = master_on(&app, "h2");
    let started = Instant::now();

    // Kill h1 while its run of the per-host task is out (it takes 3 s), once the run of a due
    // time before it has ended on both hosts, and no sooner than halfway.
    let halfway = Duration::from_secs(if laravel == Laravel::V12 { 15 } else { 0 });
    let deadline = Instant::now() + Duration::from_secs(150);
    let killed_due = loop {
        let all = runs(&client).await;
        let ended_on = |host: &str| {
            all.iter()
                .any(|r| r.summary == "fleet-each" && r.host == host && r.status == "succeeded")
        };
        let out_on_h1 = all.iter().find(|r| {
            r.summary == "fleet-each" && r.host == "h1" && r.status == "running" && r.late.is_some()
        });
        // On Laravel 8 (a minute apart) the first run will do: the test is long enough.
        let before = laravel == Laravel::V8 || (ended_on("h1") && ended_on("h2"));
        if let Some(run) = out_on_h1.filter(|_| before && started.elapsed() >= halfway) {
            let due = run.due_at;
            signal(&h1, Signal::SIGKILL);
            break due;
        }
        assert!(
            Instant::now() < deadline,
            "h1 never had a run out after a due time had ended on both hosts: {all:#?}\n{}",
            app.log("h1.log")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let _ = h1.wait();

    // h2 goes on: it takes every due time, and finds h1's run lost once h1's row is gone.
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let all = runs(&client).await;
        let lost = all.iter().any(|r| r.host == "h1" && r.status == "lost");
        let after = all
            .iter()
            .filter(|r| {
                r.summary == "fleet-one" && r.status == "succeeded" && r.due_at > killed_due
            })
            .count();
        let wanted = if laravel == Laravel::V12 { 2 } else { 1 };
        if lost && after >= wanted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the kill: lost {lost}, {after} runs of fleet-one: {all:#?}\n{}",
            app.log("h2.log")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    signal(&h2, Signal::SIGTERM);
    let status = h2.wait().unwrap();
    assert!(status.success(), "{status}:\n{}", app.log("h2.log"));

    let all = runs(&client).await;
    // onOneServer: every due time from the first to the last has one run; all succeeded but
    // the one h1 had out (lost), if the kill took one of its.
    let one: Vec<&Run> = all.iter().filter(|r| r.summary == "fleet-one").collect();
    for pair in one.windows(2) {
        assert_eq!(
            pair[1].due_at.duration_since(pair[0].due_at).unwrap(),
            Duration::from_secs(period),
            "a due time missing or twice: {one:#?}"
        );
    }
    let not_succeeded: Vec<&&Run> = one.iter().filter(|r| r.status != "succeeded").collect();
    assert!(
        not_succeeded.len() <= 1
            && not_succeeded
                .iter()
                .all(|r| r.host == "h1" && r.status == "lost"),
        "{one:#?}"
    );
    // Per host: each due time on both hosts before the kill, on h2 alone after it.
    let mut each: BTreeMap<SystemTime, Vec<(&str, &str)>> = BTreeMap::new();
    for r in all.iter().filter(|r| r.summary == "fleet-each") {
        each.entry(r.due_at)
            .or_default()
            .push((r.host.as_str(), r.status.as_str()));
    }
    for (due, hosts) in &each {
        let want: &[(&str, &str)] = if *due < killed_due {
            &[("h1", "succeeded"), ("h2", "succeeded")]
        } else if *due == killed_due {
            &[("h1", "lost"), ("h2", "succeeded")]
        } else {
            &[("h2", "succeeded")]
        };
        assert_eq!(hosts.as_slice(), want, "{due:?}: {each:#?}");
    }
    assert!(each.keys().any(|d| *d > killed_due), "{each:#?}");
    if laravel == Laravel::V12 {
        assert!(each.keys().any(|d| *d < killed_due), "{each:#?}");
    }
    // What ran, by the tasks' own log: fleet-one once per due time; fleet-each once per host and
    // due time. A run starts within a second of its due time here (the first test bounds it).
    let log = std::fs::read_to_string(app.storage_dir().join("schedule-runs.log")).unwrap();
    let mut ran: BTreeMap<(String, String, u64), usize> = BTreeMap::new();
    for line in log.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let (Some(name), Some(at), Some(host)) = (
            parts.first(),
            parts.get(1).and_then(|t| t.parse::<f64>().ok()),
            parts.get(3),
        ) else {
            continue;
        };
        *ran.entry((name.to_string(), host.to_string(), (at as u64) / period))
            .or_default() += 1;
    }
    assert!(
        ran.values().all(|n| *n == 1),
        "a task ran twice at one due time: {ran:#?}"
    );
    let one_windows: std::collections::BTreeSet<u64> = ran
        .keys()
        .filter(|(name, _, _)| name == "fleet-one")
        .map(|(_, _, w)| *w)
        .collect();
    let one_lines = ran
        .keys()
        .filter(|(name, _, _)| name == "fleet-one")
        .count();
    assert_eq!(
        one_windows.len(),
        one_lines,
        "fleet-one ran on two hosts at one due time: {ran:#?}"
    );
    db.stop().await;
}

on_every_laravel!(
    the_master_runs_the_schedule_without_cron_and_records_each_run,
    two_masters_run_each_due_time_once_and_a_killed_one_loses_only_its_run_in_progress
);
