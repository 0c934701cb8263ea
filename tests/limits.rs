//! Limits end to end (docs/limits.md): a real master and Laravel workers run jobs of the fixture
//! app under Laravel's `WithoutOverlapping` and `RateLimited` and drover's `LimitConcurrency`
//! and `LimitRate` (`App\Jobs\LimitedJob`, which journals its start and end), and the assertions
//! run over those records — per key, never more at once than its limit, never more starts in a
//! window than its rate; every job run once, on its first attempt, with no release and no
//! failure — on Laravel 8.83 and 12.67. The same overlapping
//! jobs through `queue:work database` are the oracle for what the jobs do (each handled once,
//! never two of a key at once), and show what Laravel's way costs: releases, attempts used.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use support::*;

/// How long a scenario waits for what it expects.
const PATIENCE: Duration = Duration::from_secs(60);

/// One run of a limited job: its label `<key>:<seq>`, its attempt, its journal ids at start and
/// end (the journal's ids are one sequence: their order is the order of the records).
#[derive(Debug, Clone)]
struct Run {
    label: String,
    attempt: i32,
    start: i64,
    end: i64,
}

/// Every completed run of every limited job, by key.
async fn runs(client: &tokio_postgres::Client) -> BTreeMap<String, Vec<Run>> {
    let rows = client
        .query(
            "SELECT label, event, id, attempt FROM public.journal
             WHERE event IN ('limit_start', 'limit_end') ORDER BY id",
            &[],
        )
        .await
        .unwrap();
    let mut open: BTreeMap<String, (i64, i32)> = BTreeMap::new();
    let mut by_key: BTreeMap<String, Vec<Run>> = BTreeMap::new();
    for r in rows {
        let (label, event, id, attempt): (String, String, i64, i32) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        if event == "limit_start" {
            assert!(
                open.insert(label.clone(), (id, attempt)).is_none(),
                "{label} started twice without an end"
            );
            continue;
        }
        let (start, attempt) = open
            .remove(&label)
            .unwrap_or_else(|| panic!("{label} ended unstarted"));
        let key = label.rsplit_once(':').unwrap().0.to_string();
        by_key.entry(key).or_default().push(Run {
            label,
            attempt,
            start,
            end: id,
        });
    }
    assert!(open.is_empty(), "runs that never ended: {open:?}");
    by_key
}

/// Runs `code` with `app:eval`: whether it failed, and what it said, on one line (the console
/// is made wide enough not to wrap the message).
fn dispatch_fails(app: &LaravelApp, code: &str) -> (bool, String) {
    let out = app
        .command(&["app:eval", code])
        .env("COLUMNS", "2000")
        .output()
        .unwrap();
    let text = (String::from_utf8_lossy(&out.stderr).to_string()
        + &String::from_utf8_lossy(&out.stdout))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!out.status.success(), text)
}

/// The most runs of one key that were running at once.
fn most_at_once(runs: &[Run]) -> usize {
    let mut edges: Vec<(i64, i32)> = runs
        .iter()
        .flat_map(|r| [(r.start, 1), (r.end, -1)])
        .collect();
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

/// The overlapping jobs both runners get: 3 keys of 6 jobs, interleaved.
const OVERLAP_DISPATCH: &str = r#"
    for ($i = 0; $i < 6; $i++) {
        for ($k = 0; $k < 3; $k++) { dispatch(new App\Jobs\LimitedJob("overlap-$k", "overlap-$k:$i")); }
    }
"#;

async fn jobs_under_limits_wait_for_their_key_and_run_once_on_attempt_one(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = LaravelApp::new(&db, laravel);
    app.artisan(&["app:eval", OVERLAP_DISPATCH]);
    // drover's own: 2 keys of cap 2, 8 jobs each, of 300 ms; and unlimited jobs beside them.
    app.artisan(&[
        "app:eval",
        r#"
        for ($i = 0; $i < 8; $i++) {
            for ($k = 0; $k < 2; $k++) { dispatch(new App\Jobs\LimitedJob("tenant-$k", "tenant-$k:$i", 2, 300)); }
            App\Jobs\OkJob::dispatch("free_$i");
        }
    "#,
    ]);
    for (code, said) in [
        (
            "dispatch(new App\\Jobs\\LimitedJob('k', 'bad:0', -1));",
            "LimitConcurrency of key 'k' allows -1 jobs at once; give at least 1",
        ),
        (
            "dispatch(new App\\Jobs\\LimitedJob(str_repeat('k', 256), 'bad:1', 2));",
            "the key of LimitConcurrency is 256 characters long; at most 255 are allowed",
        ),
    ] {
        let (failed, text) = dispatch_fails(&app, code);
        assert!(failed && text.contains(said), "refused at dispatch: {text}");
    }

    let master = start_master(&app, 4).await;
    wait_count(
        &client,
        "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.limit_waiting)",
        0,
        PATIENCE,
    )
    .await;
    let log = stop_master(&app, master).await;

    let by_key = runs(&client).await;
    for (key, cap, jobs) in [
        ("overlap-0", 1, 6),
        ("overlap-1", 1, 6),
        ("overlap-2", 1, 6),
        ("tenant-0", 2, 8),
        ("tenant-1", 2, 8),
    ] {
        let runs = &by_key[key];
        assert_eq!(runs.len(), jobs, "{key}: each job once: {runs:?}\n{log}");
        assert!(
            runs.iter().all(|r| r.attempt == 1),
            "{key}: every job on its first attempt, none released: {runs:?}"
        );
        assert!(
            most_at_once(runs) <= cap,
            "{key}: {} at once, limit {cap}: {runs:?}",
            most_at_once(runs)
        );
    }
    // The cap of 2 was used, not run one at a time: the check above could have failed.
    assert_eq!(
        most_at_once(&by_key["tenant-0"]),
        2,
        "{:?}",
        by_key["tenant-0"]
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM public.journal WHERE event = 'handle' AND label LIKE 'free_%'"
        )
        .await,
        8
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.failed_jobs").await,
        0
    );
    let claimed = stopped_count(&log, "claimed");
    assert_eq!(
        claimed,
        6 * 3 + 8 * 2 + 8,
        "one claim of each job, no release: {log}"
    );
    assert_eq!(stopped_count(&log, "released"), 0, "{log}");

    // The oracle: the same overlapping jobs through 4 `queue:work database` processes.
    client
        .batch_execute("TRUNCATE public.journal")
        .await
        .unwrap();
    app.artisan(&[
        "app:eval",
        &format!("config(['queue.default' => 'database']); {OVERLAP_DISPATCH}"),
    ]);
    let args = ["queue:work", "database", "--sleep=0", "--timeout=60"];
    let mut workers: Vec<Spawned> = (0..4)
        .map(|i| app.spawn(&args, &format!("queue-work-{i}.log")))
        .collect();
    wait_count(&client, "SELECT count(*) FROM public.jobs", 0, PATIENCE).await;
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    let oracle = runs(&client).await;
    let (mut attempts, mut overlapped) = (0, 0);
    for k in 0..3 {
        let key = format!("overlap-{k}");
        let runs = &oracle[&key];
        let mut labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
        labels.sort_unstable();
        let mut want: Vec<&str> = by_key[&key].iter().map(|r| r.label.as_str()).collect();
        want.sort_unstable();
        assert_eq!(labels, want, "{key}: the same jobs handled once each");
        // Not asserted: Laravel's lock on the file cache store is not atomic across processes
        // on Laravel 8 (its `add` reads, then writes), and two of a key were once seen to run
        // at once there. Reported, as the cost figures are.
        overlapped = overlapped.max(most_at_once(runs));
        attempts += runs.iter().map(|r| r.attempt as usize).sum::<usize>();
    }
    eprintln!(
        "{laravel:?}: 18 overlapping jobs used {attempts} attempts on queue:work database (at most {overlapped} of a key at once), 18 on drover (1)"
    );
    db.stop().await;
}

/// A job under a limit waits while its key is full however long the queue behind it is, and a
/// job of another key, or of none, dispatched after it is not held behind it. Ordered groups
/// under a shared key keep both: the key's cap and each group's order. The long-wait alert names
/// the key.
async fn a_full_key_holds_only_its_own_jobs(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    // The jobs waiting for the busy key wait past a long-wait threshold of 2 s (checked every
    // 3 s, half the lease); being dispatched first, they are the queue's longest wait.
    app.env.push(("DROVER_WAIT_THRESHOLD".into(), "2".into()));
    app.env.push(("DROVER_LEASE".into(), "6".into()));
    // One key of cap 1 with a slow job, then 40 more of it, then jobs of another key and none.
    app.artisan(&[
        "app:eval",
        r#"
        dispatch(new App\Jobs\LimitedJob('busy', 'busy:0', 1, 5000));
        for ($i = 1; $i <= 40; $i++) { dispatch(new App\Jobs\LimitedJob('busy', "busy:$i", 1, 10)); }
        for ($i = 0; $i < 6; $i++) { dispatch(new App\Jobs\LimitedJob('other', "other:$i", 3, 10)); App\Jobs\OkJob::dispatch("free_$i"); }
        foreach (['a', 'b', 'c'] as $g) {
            for ($i = 0; $i < 3; $i++) { $j = new App\Jobs\LimitedJob('shared', "shared:$g$i", 2, 100); $j->messageGroup = $g; dispatch($j); }
        }
    "#,
    ]);
    let started = Instant::now();
    let master = start_master(&app, 4).await;
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE event IN ('handle', 'limit_end') AND (label LIKE 'free_%' OR label LIKE 'other:%')",
        12,
        PATIENCE,
    )
    .await;
    // Operators see the key at its limit: its line and its slot, in drover:status.
    let status: serde_json::Value =
        serde_json::from_str(&app.artisan(&["drover:status", "--json"])).unwrap();
    let busy = status["limits"]
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["key"] == "busy"))
        .cloned()
        .unwrap_or_else(|| panic!("no key busy in {}", status["limits"]));
    assert_eq!(
        (busy["waiting"].as_i64(), busy["held"].as_i64()),
        (Some(40), Some(1)),
        "{busy}"
    );
    let busy_done = count(
        &client,
        "SELECT count(*) FROM public.journal WHERE event = 'limit_end' AND label = 'busy:0'",
    )
    .await;
    assert_eq!(
        busy_done,
        0,
        "the other jobs ran while the busy key's first job still ran ({:?} after start)",
        started.elapsed()
    );
    wait_count(
        &client,
        "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.limit_waiting) \
         + (SELECT count(*) FROM drover.group_jobs)",
        0,
        PATIENCE,
    )
    .await;
    let log = stop_master(&app, master).await;
    // The long-wait alert names the key its jobs waited for.
    assert_eq!(
        journal(&client, "long_wait").await,
        ["drover:default key busy"],
        "{log}"
    );
    assert!(
        log.contains("long wait: a job waiting for limit key busy in queue default has waited"),
        "{log}"
    );
    let by_key = runs(&client).await;
    assert_eq!(by_key["busy"].len(), 41);
    assert_eq!(most_at_once(&by_key["busy"]), 1);
    // Three ordered groups under one key of cap 2: never more than 2 of the key, and each group
    // one job at a time in dispatch order.
    let shared = &by_key["shared"];
    assert_eq!(shared.len(), 9);
    assert!(most_at_once(shared) <= 2, "{shared:?}");
    for g in ["a", "b", "c"] {
        let mut of: Vec<&Run> = shared
            .iter()
            .filter(|r| r.label.starts_with(&format!("shared:{g}")))
            .collect();
        of.sort_by_key(|r| r.start);
        let order: Vec<&str> = of.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            order,
            [
                format!("shared:{g}0"),
                format!("shared:{g}1"),
                format!("shared:{g}2")
            ],
            "{of:?}"
        );
        assert!(
            of.windows(2).all(|w| w[0].end < w[1].start),
            "group {g} overlapped: {of:?}"
        );
        assert!(of.iter().all(|r| r.attempt == 1), "{of:?}");
    }
    db.stop().await;
}

/// Start times of the key's runs, seconds by the database's clock, in order, and their attempts.
async fn starts(client: &tokio_postgres::Client, key: &str) -> Vec<(f64, i32)> {
    client
        .query(
            "SELECT extract(epoch FROM at)::float8, attempt FROM public.journal
             WHERE event = 'limit_start' AND label LIKE $1 || ':%' ORDER BY at",
            &[&key],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// No `per + 1` of these starts fall within `window` seconds of each other.
fn assert_rate(key: &str, starts: &[(f64, i32)], per: usize, window: f64) {
    for pair in starts.windows(per + 1) {
        let span = pair[per].0 - pair[0].0;
        assert!(
            span >= window,
            "{key}: {} starts within {span:.3} s, the rate is {per} per {window} s: {starts:?}",
            per + 1
        );
    }
}

/// drover's `LimitRate` and Laravel's `RateLimited` (3 per second; Laravel 8 counts in minutes,
/// 3 per minute): jobs over the rate wait unclaimed for the key's next window, never more start
/// in a window than the rate, and the worker's own `RateLimited`, which still runs, never finds
/// its limiter spent: every job starts on attempt 1.
async fn rates_hold_jobs_unclaimed_until_their_window_and_laravels_limiter_never_releases_one(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = LaravelApp::new(&db, laravel);
    let laravels = if laravel == Laravel::V12 { 9 } else { 4 };
    app.artisan(&[
        "app:eval",
        &format!(
            r#"
        for ($i = 0; $i < 9; $i++) {{ dispatch(new App\Jobs\LimitedJob('own', "own:$i", 0, 10, 3)); }}
        for ($i = 0; $i < {laravels}; $i++) {{ dispatch(new App\Jobs\LimitedJob('laravel', "laravel:$i", 0, 10, 0, 'tests_rate')); }}
    "#
        ),
    ]);
    let master = start_master(&app, 4).await;
    let done = if laravel == Laravel::V12 { 18 } else { 12 };
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE event = 'limit_end'",
        done,
        PATIENCE,
    )
    .await;
    if laravel == Laravel::V8 {
        // The fourth waits for the minute's window, unclaimed: no attempt, no release.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            count(
                &client,
                "SELECT count(*) FROM drover.limit_waiting WHERE payload LIKE '%laravel:3%'"
            )
            .await,
            1
        );
        assert_eq!(
            count(
                &client,
                "SELECT count(*) FROM public.journal WHERE label = 'laravel:3'"
            )
            .await,
            0
        );
    }
    let log = stop_master(&app, master).await;
    let own = starts(&client, "own").await;
    let theirs = starts(&client, "laravel").await;
    assert_eq!(own.len(), 9, "{log}");
    assert_eq!(theirs.len(), done as usize - 9, "{log}");
    assert!(
        own.iter().chain(&theirs).all(|(_, attempt)| *attempt == 1),
        "every job started on attempt 1, none released: {own:?} {theirs:?}"
    );
    // drover's own rate bounds admissions to 3 a second; a start follows its admission by a few
    // milliseconds, by more or less from one job to the next, so starts are allowed that jitter.
    assert_rate("own", &own, 3, 0.9);
    let window = if laravel == Laravel::V12 { 1.0 } else { 60.0 };
    assert_rate("laravel", &theirs, 3, window);
    // The rate bound: 9 jobs of 10 ms at 3 a second could not have started in under two.
    assert!(own[8].0 - own[0].0 >= 1.8, "{own:?}");
    assert_eq!(stopped_count(&log, "released"), 0, "{log}");
    db.stop().await;
}

/// A fair queue (`fair` in the fixture's config/drover.php): one tenant's 200 jobs are
/// dispatched, then 5 each of four others; the workers take the tenants in turn, so every small
/// tenant's jobs start among the first starts, not after the backlog. A job naming a fair key on
/// a queue that is not fair is refused at dispatch.
async fn a_fair_queue_takes_its_tenants_in_turn(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_QUEUES".into(), "tenants".into()));
    app.artisan(&[
        "app:eval",
        r#"
        for ($i = 0; $i < 200; $i++) { dispatch(new App\Jobs\TenantJob('big', "big:$i")); }
        for ($i = 0; $i < 5; $i++) { foreach (['a', 'b', 'c', 'd'] as $t) { dispatch(new App\Jobs\TenantJob($t, "$t:$i")); } }
    "#,
    ]);
    let (failed, said) = dispatch_fails(
        &app,
        r"dispatch((new App\Jobs\TenantJob('x', 'x:0'))->onQueue('default'));",
    );
    assert!(
        failed && said.contains("names the fair key 'x' but queue 'default' is not fair"),
        "{said}"
    );
    let master = start_master(&app, 4).await;
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE event = 'fair_start'",
        220,
        PATIENCE,
    )
    .await;
    stop_master(&app, master).await;
    let order: Vec<String> = client
        .query(
            "SELECT label FROM public.journal WHERE event = 'fair_start' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let last_small = order.iter().rposition(|l| !l.starts_with("big:")).unwrap();
    // In turn: 5 rounds of five tenants, give or take the jobs a claim or a prefetch took ahead.
    assert!(
        last_small < 60,
        "the small tenants' last job started {}th of 220: {order:?}",
        last_small + 1
    );
    db.stop().await;
}

/// A worker running a job under `WithoutOverlapping` (no `expireAfter`: Laravel's lock never
/// expires) is SIGKILLed: the lock stays in the cache, where under `queue:work` it would release
/// every later attempt of the key until they fail. drover takes the job back, its next worker
/// forces the dead attempt's lock free, and the job runs again and finishes, then the next of its
/// key — each once to the end, never two at once.
async fn a_worker_killed_holding_an_overlap_lock_does_not_leave_its_key_locked(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = LaravelApp::new(&db, laravel);
    app.artisan(&[
        "app:eval",
        r#"
        dispatch(new App\Jobs\LimitedJob('locked', 'locked:0', 0, 3000));
        dispatch(new App\Jobs\LimitedJob('locked', 'locked:1', 0, 10));
    "#,
    ]);
    let master = start_master(&app, 4).await;
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'locked:0' AND event = 'limit_start'",
        1,
        PATIENCE,
    )
    .await;
    let pid: i32 = client
        .query_one(
            "SELECT pid FROM public.journal WHERE label = 'locked:0' AND event = 'limit_start'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE event = 'limit_end'",
        2,
        PATIENCE,
    )
    .await;
    let log = stop_master(&app, master).await;
    assert!(
        log.contains("forced it free"),
        "the next worker freed the dead attempt's lock:\n{log}"
    );
    let starts: Vec<(String, i32)> = client
        .query(
            "SELECT label, attempt FROM public.journal WHERE event = 'limit_start' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        starts,
        [
            ("locked:0".to_string(), 1),
            ("locked:0".to_string(), 2),
            ("locked:1".to_string(), 1)
        ],
        "the killed job again, then the next of its key, each without a release"
    );
    db.stop().await;
}

on_every_laravel!(
    jobs_under_limits_wait_for_their_key_and_run_once_on_attempt_one,
    a_full_key_holds_only_its_own_jobs,
    rates_hold_jobs_unclaimed_until_their_window_and_laravels_limiter_never_releases_one,
    a_fair_queue_takes_its_tenants_in_turn,
    a_worker_killed_holding_an_overlap_lock_does_not_leave_its_key_locked,
);
