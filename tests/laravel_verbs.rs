//! Laravel's own queue verbs on a drover connection: `queue:listen` (the dev loop, edited code on
//! the next job, Ctrl-C), `queue:work` with its flags, `--once` and `--stop-when-empty`, and
//! `php artisan drover --stop-when-empty`. Every scenario on Laravel 8.83 and 12.67. (`queue:pause`
//! and `queue:resume` have their own file, `queue_pauses.rs`.)

mod support;

use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
use support::*;

fn signal(pid: u32, sig: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
}

/// Writes a file of `storage/scratch` (see the fixture's ScratchServiceProvider), dated a few
/// seconds ahead so an edit is seen whatever the filesystem's time resolution.
fn write_scratch(app: &LaravelApp, name: &str, text: &str) {
    let dir = app.storage_dir().join("scratch");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let ahead = SystemTime::now() + Duration::from_secs(3);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(ahead)
        .unwrap();
}

/// A job class `Scratch\NAME` that journals `said` (a PHP expression) under its label, then does
/// `then` (PHP).
fn scratch_job(app: &LaravelApp, name: &str, said: &str, then: &str) {
    write_scratch(
        app,
        &format!("{name}.php"),
        &format!(
            r#"<?php
namespace Scratch;

class {name} implements \Illuminate\Contracts\Queue\ShouldQueue
{{
    use \Illuminate\Bus\Queueable, \Illuminate\Foundation\Bus\Dispatchable, \Illuminate\Queue\InteractsWithQueue;

    public function __construct(public string $label) {{}}

    public function handle(): void
    {{
        \App\Support\Journal::record($this->label, 'said ' . ({said}), $this->attempts(), $this->job?->getConnectionName());
        {then}
    }}
}}
"#
        ),
    );
}

/// What the scratch jobs of `label` said, in order (not the queue events the fixture journals).
async fn journal_of(client: &tokio_postgres::Client, label: &str) -> Vec<String> {
    client
        .query(
            "SELECT substr(event, 6) FROM journal WHERE label = $1 AND event LIKE 'said %' ORDER BY id",
            &[&label],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

async fn wait_journal(client: &tokio_postgres::Client, label: &str, event: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = journal_of(client, label).await;
        if events.iter().any(|e| e == event) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "{label}: no {event} after 60s; journal: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The PIDs whose parent is `pid`.
fn children_of(pid: u32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            found.push(child);
        }
    }
    found
}

fn dispatch(app: &LaravelApp, php: &str) {
    app.artisan(&["app:eval", php]);
}

/// The skeleton's `composer run dev` line, `php artisan queue:listen --tries=1`, on a drover
/// connection: the job's class edited between two dispatches runs its new code, and so does a
/// file loaded at boot; Ctrl-C stops the master and every process it started.
async fn queue_listen_runs_edited_code_on_the_next_job_and_ctrl_c_leaves_nothing_running(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("QUEUE_CONNECTION".into(), "drover".into()));
    write_scratch(
        &app,
        "boot.php",
        "<?php define('SCRATCH_BOOT', 'boot 1');\n",
    );
    scratch_job(&app, "EditedJob", "'version 1, ' . SCRATCH_BOOT", "");
    let mut listen = app.spawn(&["queue:listen", "--tries=1"], "listen.log");

    dispatch(&app, r#"dispatch(new Scratch\EditedJob("first"));"#);
    assert_eq!(
        wait_journal(&client, "first", "version 1, boot 1").await,
        ["version 1, boot 1"]
    );
    // The next worker is up and booted (with the old boot file loaded) before the edit.
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.log("listen.log").matches("worker started").count() < 2 {
        assert!(Instant::now() < deadline, "{}", app.log("listen.log"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The edit a developer makes between two dispatches: the job, and a file loaded at boot.
    scratch_job(&app, "EditedJob", "'version 2, ' . SCRATCH_BOOT", "");
    write_scratch(
        &app,
        "boot.php",
        "<?php define('SCRATCH_BOOT', 'boot 2');\n",
    );
    dispatch(&app, r#"dispatch(new Scratch\EditedJob("second"));"#);
    assert_eq!(
        wait_journal(&client, "second", "version 2, boot 2").await,
        ["version 2, boot 2"],
        "{}",
        app.log("listen.log")
    );
    let log = app.log("listen.log");
    assert!(
        log.contains("a drover master in the foreground") && log.contains("worker started"),
        "{log}"
    );

    // Ctrl-C: the terminal's SIGINT reaches the master (artisan's PID: it exec'd drover).
    let master = listen.id();
    let children = children_of(master);
    assert!(!children.is_empty(), "the master started no process?");
    signal(master, Signal::SIGINT);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = listen.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "{}", app.log("listen.log"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}: {}", app.log("listen.log"));
    for pid in children {
        wait_process_gone(pid, Duration::from_secs(10)).await;
    }
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 0);
    db.stop().await;
}

/// `queue:work` on a drover connection runs the queues, tries and stop flags of its command line;
/// `--once` runs one job; `php artisan drover --stop-when-empty` drains and exits 0; queue:work on
/// another connection is still Laravel's own.
async fn queue_work_on_a_drover_connection_honours_its_flags_once_and_stop_when_empty(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = LaravelApp::new(&db, laravel);
    scratch_job(&app, "OkJob", "'ran'", "");
    scratch_job(
        &app,
        "AlwaysFails",
        "'ran'",
        "throw new \\RuntimeException('always');",
    );
    dispatch(
        &app,
        r#"Scratch\OkJob::dispatch("high 1")->onQueue("high");
           Scratch\OkJob::dispatch("high 2")->onQueue("high");
           Scratch\AlwaysFails::dispatch("fails")->onQueue("high");
           Scratch\OkJob::dispatch("default 1");
           Scratch\OkJob::dispatch("default 2");"#,
    );

    // --queue=high and --tries=3 (the job sets none), until the queue is empty.
    let out = app
        .command(&[
            "queue:work",
            "drover",
            "--queue=high",
            "--tries=3",
            "--backoff=0",
            "--stop-when-empty",
        ])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    for label in ["high 1", "high 2"] {
        assert_eq!(journal_of(&client, label).await, ["ran"], "{said}");
    }
    assert_eq!(
        journal_of(&client, "fails").await,
        ["ran", "ran", "ran"],
        "three tries: {said}"
    );
    // A line per job on the terminal, as queue:work prints them.
    let lines: Vec<&str> = said.lines().filter(|l| l.contains("Scratch\\")).collect();
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("Scratch\\OkJob") && l.ends_with("DONE"))
            .count()
            == 2
            && lines
                .iter()
                .any(|l| l.contains("Scratch\\AlwaysFails") && l.ends_with("FAIL"))
            && lines
                .iter()
                .any(|l| l.contains("Scratch\\OkJob") && l.ends_with("RUNNING")),
        "{said}"
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        1,
        "{said}"
    );
    // The default queue was not served.
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 2);

    // --once on the default connection and its default queue: one job, then exit 0.
    let out = app.command(&["queue:work", "--once"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 1);

    // php artisan drover --stop-when-empty: the configured pools drain, exit 0.
    let out = app
        .command(&["drover", "--stop-when-empty"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--stop-when-empty"));
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 0);
    for label in ["default 1", "default 2"] {
        assert_eq!(journal_of(&client, label).await, ["ran"]);
    }

    // --once with nothing to do exits at once.
    let started = Instant::now();
    let out = app.command(&["queue:work", "--once"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(started.elapsed() < Duration::from_secs(20));

    // A bad flag is named, and nothing starts.
    let out = app
        .command(&["queue:work", "drover", "--tries=many"])
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("--tries must be a whole number"), "{said}");

    // queue:work on another connection is Laravel's own.
    let out = app
        .command(&["queue:work", "database", "--stop-when-empty"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    db.stop().await;
}

/// A new application with no PostgreSQL configured (Laravel 12's default, SQLite) and
/// QUEUE_CONNECTION=drover: `queue:listen` runs drover's embedded PostgreSQL, a dispatch reaches
/// it, the job runs, and Ctrl-C stops the master and its cluster.
async fn queue_listen_without_a_postgresql_configured_runs_on_the_embedded_one(laravel: Laravel) {
    let db = Cluster::start().await;
    let app = LaravelApp::new_with(
        &db,
        laravel,
        &[
            ("DB_CONNECTION", "sqlite"),
            // Nothing may reach a PostgreSQL through the application's own configuration.
            ("DB_HOST", "/nonexistent"),
            ("QUEUE_CONNECTION", "drover"),
        ],
    );
    db.stop().await;
    scratch_job(&app, "OkJob", "'ran'", "");
    let mut listen = app.spawn(&["queue:listen", "--tries=1"], "listen.log");
    let master_json = app.state_dir().join("master.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !master_json.exists() {
        assert!(
            Instant::now() < deadline && listen.try_wait().unwrap().is_none(),
            "{}",
            app.log("listen.log")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    dispatch(&app, r#"Scratch\OkJob::dispatch("on the embedded one");"#);
    let ran = r#"return \Illuminate\Support\Facades\DB::table("journal")->where("label", "on the embedded one")->where("event", "said ran")->count();"#;
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.artisan(&["app:eval", ran]).trim() != "1" {
        assert!(Instant::now() < deadline, "{}", app.log("listen.log"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let master = listen.id();
    let children = children_of(master);
    signal(master, Signal::SIGINT);
    let status = loop {
        if let Some(status) = listen.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline + Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}: {}", app.log("listen.log"));
    // The workers, the lease guard and the embedded postgres are gone with it.
    for pid in children {
        wait_process_gone(pid, Duration::from_secs(10)).await;
    }
}

on_every_laravel!(
    queue_listen_runs_edited_code_on_the_next_job_and_ctrl_c_leaves_nothing_running,
    queue_work_on_a_drover_connection_honours_its_flags_once_and_stop_when_empty,
    queue_listen_without_a_postgresql_configured_runs_on_the_embedded_one,
);
