//! A queue paused by name holds from the moment the pause returns, as under `queue:work`
//! (docs/laravel-compatibility.md, "Pausing a queue"): on every master of the database, for jobs
//! dispatched at once from the process that paused and from another, for the jobs workers hold
//! prefetched, for `pauseFor`, and a resume is seen as fast as a new job is. Every scenario on
//! Laravel 8.83 (drover's own verbs and API: Laravel 8 has no `queue:pause`) and 12.67 (Laravel's
//! `queue:pause`, `queue:resume`, `Queue::pause()` and `Queue::pauseFor()`).
//!
//! Jobs journal their start (`handle`) by the database's clock; "when the pause returned" is the
//! database's clock read once the pausing command or PHP code has returned.

mod support;

use std::time::{Duration, Instant};

use support::*;

fn eval(app: &LaravelApp, php: &str) -> String {
    app.artisan(&["app:eval", php])
}

/// PHP that pauses `queue` of the drover connection, for the rest of the same process.
fn pause_in_php(laravel: Laravel, queue: &str) -> String {
    match laravel {
        Laravel::V12 => {
            format!(r#"\Illuminate\Support\Facades\Queue::pause("drover", "{queue}");"#)
        }
        Laravel::V8 => format!(
            r#"\Drover\Queue\QueuePauses::forQueueConnection(app(), "drover")->pause("{queue}");"#
        ),
    }
}

/// Pauses `queue` of the drover connection from the command line: `queue:pause` on Laravel 12,
/// `drover:pause --queue` on Laravel 8.
fn pause_command(app: &LaravelApp, queue: &str) -> String {
    match app.laravel {
        Laravel::V12 => app.artisan(&["queue:pause", &format!("drover:{queue}")]),
        Laravel::V8 => app.artisan(&["drover:pause", &format!("--queue=drover:{queue}")]),
    }
}

fn resume_command(app: &LaravelApp, queue: &str) -> String {
    match app.laravel {
        Laravel::V12 => app.artisan(&["queue:resume", &format!("drover:{queue}")]),
        Laravel::V8 => app.artisan(&["drover:continue", &format!("--queue=drover:{queue}")]),
    }
}

/// The database's clock now, as text for the next statement.
async fn db_now(client: &tokio_postgres::Client) -> String {
    client
        .query_one("SELECT clock_timestamp()::text", &[])
        .await
        .unwrap()
        .get(0)
}

/// Milliseconds from `from` to `to`, two timestamps of the database's clock.
async fn ms_between(client: &tokio_postgres::Client, from: &str, to: &str) -> f64 {
    client
        .query_one(
            "SELECT extract(epoch FROM $2::text::timestamptz - $1::text::timestamptz)::float8 * 1000",
            &[&from, &to],
        )
        .await
        .unwrap()
        .get(0)
}

/// Starts of jobs whose label is LIKE `labels`, after `at` (`None`: all of them).
async fn starts(client: &tokio_postgres::Client, labels: &str, after: Option<&str>) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM journal WHERE event = 'handle' AND label LIKE $1
             AND ($2::text IS NULL OR at > $2::text::timestamptz)",
            &[&labels, &after],
        )
        .await
        .unwrap()
        .get(0)
}

/// The first and last start of jobs whose label is LIKE `labels`, once `n` have started.
async fn wait_starts(client: &tokio_postgres::Client, labels: &str, n: i64) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while starts(client, labels, None).await < n {
        assert!(Instant::now() < deadline, "{labels}: not {n} started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let row = client
        .query_one(
            "SELECT min(at)::text, max(at)::text FROM journal WHERE event = 'handle' AND label LIKE $1",
            &[&labels],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// The master's status document, whatever its verdict (`drover:status` exits 3 while a pool has
/// no worker serving, as right after a frozen master's workers were stopped).
fn status(app: &LaravelApp) -> serde_json::Value {
    let out = app.command(&["drover:status", "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "drover:status --json ({}): {e}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Paused in one process and dispatched in the same breath, then dispatched from another process
/// served by a second master: nothing starts on either master until the resume, while another
/// queue runs on; both masters' status and /metrics show the pause the moment it returned; after
/// the resume every job starts within the pickup time of an idle queue.
async fn a_pause_holds_on_every_master_from_the_moment_it_returns_until_resumed(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let port = free_port();
    let mut first = LaravelApp::new(&db, laravel);
    first.env.push(("DROVER_PROCESSES".into(), "2".into()));
    first
        .env
        .push(("DROVER_METRICS_LISTEN".into(), format!("127.0.0.1:{port}")));
    let mut second = LaravelApp::new(&db, laravel);
    second.env.push(("DROVER_PROCESSES".into(), "2".into()));
    let a = start_master(&first, 2).await;
    let b = start_master(&second, 2).await;

    let took = eval(
        &first,
        &format!(
            r#"$t = hrtime(true); {} echo round((hrtime(true) - $t) / 1e6, 1);
               foreach (range(1, 5) as $i) {{ App\Jobs\NapJob::dispatch("same process $i"); }}"#,
            pause_in_php(laravel, "default")
        ),
    );
    eprintln!(
        "the pause returned in {} ms (two masters confirmed it)",
        took.trim()
    );
    // The pause holds on both masters as it returns: their status says so without waiting.
    for app in [&first, &second] {
        let status = status(app);
        assert_eq!(
            status["paused_queues"],
            serde_json::json!({"default": null}),
            "{status}"
        );
        let text = app.artisan(&["drover:status"]);
        assert!(
            text.contains("queue default paused until resumed"),
            "{text}"
        );
    }
    let (code, metrics) = http_get(port, "/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains(r#"drover_queue_paused{queue="default"} 1"#)
            && metrics.contains(r#"drover_queue_paused{queue="high"} 0"#),
        "{metrics}"
    );
    eval(
        &second,
        r#"foreach (range(1, 5) as $i) { App\Jobs\NapJob::dispatch("another process $i"); }
           App\Jobs\NapJob::dispatch("another queue")->onQueue("high");"#,
    );
    // Both masters serve on: the other queue's job runs; then a while more for the paused ones.
    wait_starts(&client, "another queue", 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        starts(&client, "% process %", None).await,
        0,
        "a paused queue's job started:\n{}\n{}",
        first.log("drover.log"),
        second.log("drover.log")
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE queue = 'default' AND lease_token IS NULL AND attempts = 0"
        )
        .await,
        10,
        "all ten wait, none held, none charged"
    );

    // An idle queue's pickup, measured the same way as the resume's: from the command's return.
    eval(
        &second,
        r#"App\Jobs\NapJob::dispatch("idle pickup")->onQueue("high");"#,
    );
    let dispatched = db_now(&client).await;
    let (picked, _) = wait_starts(&client, "idle pickup", 1).await;
    let pickup = ms_between(&client, &dispatched, &picked).await;

    resume_command(&first, "default");
    let resumed = db_now(&client).await;
    let (_, last) = wait_starts(&client, "% process %", 10).await;
    let after_resume = ms_between(&client, &resumed, &last).await;
    eprintln!("resume to the last of ten starts: {after_resume:.1} ms; an idle queue's pickup: {pickup:.1} ms (both from the command's return)");
    assert!(
        after_resume < pickup.max(0.0) + 500.0,
        "the resume was seen {after_resume} ms late (an idle queue's pickup: {pickup} ms)"
    );
    for app in [&first, &second] {
        assert_eq!(status(app)["paused_queues"], serde_json::json!({}));
    }
    stop_master(&first, a).await;
    stop_master(&second, b).await;
    db.stop().await;
}

/// Two workers with prefetch 8 in the middle of a backlog of 40 ms jobs: `queue:pause` returns,
/// and no job that had not started by then starts afterwards; the jobs the workers held go back
/// unstarted and uncharged, and after the resume every job runs once, on its first attempt.
async fn with_prefetch_8_and_a_backlog_no_job_unstarted_when_the_pause_returned_starts_afterwards(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "2".into()));
    app.env.push(("DROVER_PREFETCH_JOBS".into(), "8".into()));
    app.env.push((
        "DROVER_LOG".into(),
        "info,drover::master::queue_pauses=debug".into(),
    ));
    let master = start_master(&app, 2).await;
    eval(
        &app,
        r#"foreach (range(1, 120) as $i) { App\Jobs\NapJob::dispatch("backlog $i", 40); }"#,
    );
    wait_starts(&client, "backlog %", 10).await;

    let said = pause_command(&app, "default");
    let paused = db_now(&client).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let late = starts(&client, "backlog %", Some(&paused)).await;
    if late > 0 {
        let rows = client
            .query(
                "SELECT label || ' at ' || at::text || ' pid ' || pid FROM journal
                 WHERE event = 'handle' AND at > $1::text::timestamptz - interval '200 ms' ORDER BY at",
                &[&paused],
            )
            .await
            .unwrap();
        let rows: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        panic!(
            "{late} jobs started after the pause returned at {paused} ({said}):\n{}\n{}",
            rows.join("\n"),
            app.log("drover.log")
        );
    }
    let started = starts(&client, "backlog %", None).await;
    assert!(
        started <= 120 - 16,
        "the backlog ran out before the pause ({started} started): nothing was prefetched to hold"
    );
    // What the workers held went back: nothing is leased, and no attempt was spent on it.
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs WHERE lease_token IS NOT NULL",
        0,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE attempts > 0"
        )
        .await,
        0
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.jobs").await,
        120 - started
    );

    resume_command(&app, "default");
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'end' AND label LIKE 'backlog %'",
        120,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM (SELECT label FROM journal WHERE event = 'handle' AND label LIKE 'backlog %'
             GROUP BY label HAVING count(*) = 1 AND min(attempt) = 1) once"
        )
        .await,
        120,
        "every job ran once, on its first attempt"
    );
    stop_master(&app, master).await;
    db.stop().await;
}

/// A worker busy with a 4 s job, its next jobs 40 KiB each, prefetch 8: the pause is written
/// to it and returns while that job still runs, rather than behind job frames the worker cannot
/// read until it ends (its socket holds about 180 KiB; what a busy worker is sent stays within a
/// third of it, `rules::assignments`). Nothing of the queue starts after the pause returned.
async fn a_busy_worker_with_large_jobs_prefetched_does_not_hold_the_pause_up(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    app.env.push(("DROVER_PREFETCH_JOBS".into(), "8".into()));
    let master = start_master(&app, 1).await;
    eval(
        &app,
        r#"foreach (range(1, 8) as $i) { App\Jobs\NapJob::dispatch("large $i", $i === 1 ? 4000 : 100, 40); }"#,
    );
    wait_starts(&client, "large %", 1).await;
    let said = pause_command(&app, "default");
    let paused = db_now(&client).await;
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'end' AND label LIKE 'large %'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let ended: String = client
        .query_one(
            "SELECT min(at)::text FROM journal WHERE event = 'end' AND label LIKE 'large %'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let ran_on = ms_between(&client, &paused, &ended).await;
    assert!(
        ran_on > 0.0,
        "the pause returned only {} ms after the running job ended ({said})",
        -ran_on
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(starts(&client, "large %", Some(&paused)).await, 0);
    assert_eq!(starts(&client, "large %", None).await, 1);
    resume_command(&app, "default");
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'end' AND label LIKE 'large %'",
        8,
        Duration::from_secs(60),
    )
    .await;
    stop_master(&app, master).await;
    db.stop().await;
}

/// Paused for two seconds (`Queue::pauseFor` on Laravel 12, `drover:pause --for=2` on Laravel 8),
/// with jobs dispatched at once: none starts before the pause ends, and they start on time after,
/// without anyone resuming it.
async fn a_pause_for_two_seconds_ends_by_itself_on_time(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "1".into()));
    let master = start_master(&app, 1).await;
    let dispatch =
        r#"foreach (range(1, 3) as $i) { App\Jobs\NapJob::dispatch("for a while $i"); }"#;
    match laravel {
        Laravel::V12 => {
            eval(
                &app,
                &format!(
                    r#"\Illuminate\Support\Facades\Queue::pauseFor("drover", "default", 2); {dispatch}"#
                ),
            );
        }
        Laravel::V8 => {
            app.artisan(&["drover:pause", "--queue=drover:default", "--for=2"]);
            eval(&app, dispatch);
        }
    }
    let until: String = client
        .query_one(
            "SELECT until::text FROM drover.paused_queues WHERE queue = 'default'",
            &[],
        )
        .await
        .expect("the pause is still in force")
        .get(0);
    let (first, last) = wait_starts(&client, "for a while %", 3).await;
    let early = ms_between(&client, &until, &first).await;
    let late = ms_between(&client, &until, &last).await;
    eprintln!("pauseFor(2): the jobs started {early:.1} to {late:.1} ms after it ended");
    assert!(
        early > 0.0,
        "a job started {} ms before the pause ended",
        -early
    );
    assert!(late < 1000.0, "the pause ended {late} ms late");
    stop_master(&app, master).await;
    db.stop().await;
}

/// The master is frozen (SIGSTOP) while its two workers run 2 s jobs with three more each
/// prefetched, and the queue is paused: the pause cannot be confirmed by a master that does not
/// run, so it returns only once that master has been silent for two leases (6 s each here), when
/// its lease guard has stopped the workers; and no job starts after it returned, before or after
/// the master is thawed, until the resume. Then every job is settled: it ran to its end, or it is
/// one the guard stopped in the middle (then Laravel's tries decide, as for any killed worker:
/// the fixture's one try fails it).
async fn a_frozen_master_is_waited_for_until_it_can_hand_out_nothing(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    for (key, value) in [
        ("DROVER_PROCESSES", "2"),
        ("DROVER_PREFETCH_JOBS", "4"),
        ("DROVER_LEASE", "6"),
    ] {
        app.env.push((key.into(), value.into()));
    }
    let mut master = start_master(&app, 2).await;
    eval(
        &app,
        r#"foreach (range(1, 12) as $i) { App\Jobs\NapJob::dispatch("frozen $i", 2000); }"#,
    );
    wait_starts(&client, "frozen %", 2).await;
    let pid = nix::unistd::Pid::from_raw(master.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();

    let asked = Instant::now();
    let said = pause_command(&app, "default");
    let waited = asked.elapsed();
    let paused = db_now(&client).await;
    eprintln!("the pause waited {waited:?} for the frozen master");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    // Thawed, it learns of the pause and starts nothing of the queue either.
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&app)["paused_queues"] != serde_json::json!({"default": null}) {
        assert!(
            Instant::now() < deadline,
            "the thawed master never saw the pause"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let late = starts(&client, "frozen %", Some(&paused)).await;
    assert_eq!(
        late,
        0,
        "{late} jobs started after the pause returned ({said}) at {paused}:\n{}",
        app.log("drover.log")
    );
    // Two leases (12 s) from its last heartbeat, which is half a lease (3 s) old or, on a loaded
    // machine, older: more than one lease after the freeze either way (a rule of one lease would
    // return within it).
    assert!(
        waited > Duration::from_secs(6),
        "the pause returned after {waited:?}, before the frozen master had been silent two leases"
    );
    assert!(waited < Duration::from_secs(25), "{waited:?}");

    resume_command(&app, "default");
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(90),
    )
    .await;
    let unfinished = client
        .query_one(
            "SELECT count(*) FROM generate_series(1, 12) AS g WHERE NOT EXISTS (
                 SELECT 1 FROM journal WHERE label = 'frozen ' || g AND event = 'end')",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    let stopped_before = client
        .query_one(
            "SELECT count(*) FROM generate_series(1, 12) AS g WHERE NOT EXISTS (
                 SELECT 1 FROM journal WHERE label = 'frozen ' || g AND event = 'end')
             AND EXISTS (SELECT 1 FROM journal WHERE label = 'frozen ' || g AND event = 'handle'
                         AND at < $1::text::timestamptz)",
            &[&paused],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(
        unfinished, stopped_before,
        "a job without an end that was not one running when the guard stopped its worker"
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(DISTINCT label) FROM journal WHERE event = 'failed' AND label LIKE 'frozen %'"
        )
        .await,
        unfinished,
        "each of those failed through Laravel's failer (JobFailed), its tries spent"
    );
    let _ = master.kill();
    let _ = master.wait();
    db.stop().await;
}

on_every_laravel!(
    a_pause_holds_on_every_master_from_the_moment_it_returns_until_resumed,
    with_prefetch_8_and_a_backlog_no_job_unstarted_when_the_pause_returned_starts_afterwards,
    a_pause_for_two_seconds_ends_by_itself_on_time,
    a_busy_worker_with_large_jobs_prefetched_does_not_hold_the_pause_up,
    a_frozen_master_is_waited_for_until_it_can_hand_out_nothing,
);
