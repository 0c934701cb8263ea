//! Ordered groups and deduplication end to end (docs/ordered-groups.md): a real master and
//! Laravel workers run grouped jobs of the fixture app (`App\Jobs\GroupJob`, which journals its
//! start and end), and the assertions run over those records — per group, no job starts before
//! every earlier job of its group has ended, and none runs twice at once — on Laravel 8.83 and 12.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::*;

/// One run of a grouped job: its label `<group>:<seq>` and its journal ids at start and end.
/// A run whose worker was killed (a timeout) has no end record: its end is taken to be its
/// start, and `killed` says so.
#[derive(Debug, Clone)]
struct Run {
    group: String,
    seq: u32,
    start: i64,
    end: i64,
    killed: bool,
}

/// Every run of every grouped job, from the journal, by group.
async fn runs(client: &tokio_postgres::Client) -> BTreeMap<String, Vec<Run>> {
    let rows = client
        .query(
            "SELECT label, event, id FROM public.journal
             WHERE event IN ('group_start', 'group_end') ORDER BY id",
            &[],
        )
        .await
        .unwrap();
    let mut open: BTreeMap<String, i64> = BTreeMap::new();
    let mut by_group: BTreeMap<String, Vec<Run>> = BTreeMap::new();
    for r in rows {
        let (label, event, id): (String, String, i64) = (r.get(0), r.get(1), r.get(2));
        let (group, seq) = label.rsplit_once(':').unwrap();
        let run = |start: i64, end: i64, killed: bool| Run {
            group: group.to_string(),
            seq: seq.parse().unwrap(),
            start,
            end,
            killed,
        };
        if event == "group_start" {
            if let Some(start) = open.insert(label.clone(), id) {
                // Started again without an end: the first run's worker was killed.
                by_group
                    .entry(group.to_string())
                    .or_default()
                    .push(run(start, start, true));
            }
            continue;
        }
        let start = open
            .remove(&label)
            .unwrap_or_else(|| panic!("{label} ended unstarted"));
        by_group
            .entry(group.to_string())
            .or_default()
            .push(run(start, id, false));
    }
    assert!(open.is_empty(), "runs that never ended: {open:?}");
    by_group
}

/// The promise per group: runs in sequence order (a retried job's runs next to each other), each
/// starting after the previous one ended — nothing overlaps, nothing overtakes a retried job —
/// and every sequence number from 0 to `len - 1` ran.
fn assert_in_order_one_at_a_time(group: &str, runs: &[Run], len: u32) {
    for pair in runs.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            b.start > a.end,
            "{group}: {}:{} started before {}:{} ended: {runs:?}",
            b.group,
            b.seq,
            a.group,
            a.seq
        );
        assert!(
            b.seq == a.seq || (b.seq == a.seq + 1 && !a.killed),
            "{group}: {}:{} ran right after {}:{} (out of order): {runs:?}",
            b.group,
            b.seq,
            a.group,
            a.seq
        );
    }
    assert_eq!(runs.first().map(|r| r.seq), Some(0), "{group}: {runs:?}");
    assert_eq!(
        runs.last().map(|r| r.seq),
        Some(len - 1),
        "{group}: {runs:?}"
    );
}

/// How long a scenario waits for what it expects (the support's `wait_count` names the query).
const PATIENCE: Duration = Duration::from_secs(60);

async fn groups_run_in_order_one_at_a_time_with_retries_in_place_and_duplicates_dropped(
    laravel: Laravel,
) {
    grouped_run(laravel, "fork").await
}

async fn groups_run_in_order_with_workers_started_by_exec(laravel: Laravel) {
    grouped_run(laravel, "exec").await
}

/// 20 groups of 10 and the rest, with the workers forked from a zygote (the default) or started
/// by exec.
async fn grouped_run(laravel: Laravel, spawn: &str) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_SPAWN".into(), spawn.into()));
    // 20 groups of 10, dispatched interleaved: groups 0-9 by the $messageGroup property, 10-14 by
    // a messageGroup() method, 15-19 by onGroup() on Laravel 12 (the property on Laravel 8). In
    // every group job 3 releases itself once and job 6 throws once: both stay their group's head.
    let on_group = if laravel == Laravel::V12 {
        "dispatch(new App\\Jobs\\GroupJob(null, \"g$g:$i\", $mode))->onGroup(\"g$g\");"
    } else {
        "dispatch(new App\\Jobs\\GroupJob(\"g$g\", \"g$g:$i\", $mode));"
    };
    let dispatch = format!(
        r#"
        for ($i = 0; $i < 10; $i++) {{
            for ($g = 0; $g < 20; $g++) {{
                $mode = $i === 3 ? 'release_once' : ($i === 6 ? 'throw_once' : 'ok');
                if ($g < 10) {{ dispatch(new App\Jobs\GroupJob("g$g", "g$g:$i", $mode)); }}
                elseif ($g < 15) {{ dispatch(new App\Jobs\GroupMethodJob("g$g", "g$g:$i", $mode)); }}
                else {{ {on_group} }}
            }}
            App\Jobs\OkJob::dispatch("ungrouped_$i");
        }}
        // A delayed head holds the job behind it.
        dispatch(new App\Jobs\GroupJob('late', 'late:0'))->delay(2);
        dispatch(new App\Jobs\GroupJob('late', 'late:1'));
        // A job that outruns its timeout is killed and retried in its place.
        dispatch(new App\Jobs\GroupJob('timeout', 'timeout:0', 'timeout_once'));
        dispatch(new App\Jobs\GroupJob('timeout', 'timeout:1'));
        // A job that fails for good lets its group go on.
        dispatch(new App\Jobs\GroupJob('failing', 'failing:0', 'fail'));
        dispatch(new App\Jobs\GroupJob('failing', 'failing:1'));
        // Deduplicated by deduplicationId(): the second dispatch is dropped; one rolled back
        // reserves nothing.
        App\Jobs\DedupJob::dispatch('order-1', 'dedup_first');
        App\Jobs\DedupJob::dispatch('order-1', 'dedup_second');
        try {{ DB::transaction(function () {{ App\Jobs\DedupJob::dispatch('order-2', 'dedup_rolled_back'); throw new RuntimeException('abort'); }}); }} catch (RuntimeException $e) {{}}
        App\Jobs\DedupJob::dispatch('order-2', 'dedup_after_rollback');
    "#
    );
    app.artisan(&["app:eval", &dispatch]);
    if laravel == Laravel::V12 {
        // withDeduplicator() and a queued listener's group are Laravel 12's.
        app.artisan(&[
            "app:eval",
            r#"
            App\Support\GroupDispatch::closureDeduplicated('closure_first');
            App\Support\GroupDispatch::closureDeduplicated('closure_second');
            for ($i = 0; $i < 6; $i++) { App\Events\GroupedEvent::dispatch('listener', "listener:$i"); }
        "#,
        ]);
    }
    let bad = app
        .command(&[
            "app:eval",
            "dispatch(new App\\Jobs\\GroupJob(str_repeat('x', 129), 'too_long:0'));",
        ])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&bad.stderr).to_string() + &String::from_utf8_lossy(&bad.stdout);
    assert!(
        !bad.status.success()
            && said.contains("message group of App\\Jobs\\GroupJob is 129 characters long"),
        "a group id over the limit is refused at dispatch: {said}"
    );

    let master = start_master(&app, 4).await;
    wait_count(
        &client,
        "SELECT (SELECT count(*) FROM drover.jobs) + (SELECT count(*) FROM drover.group_jobs)",
        0,
        PATIENCE,
    )
    .await;
    let log = stop_master(&app, master).await;
    assert_spawned(&log, spawn);

    let by_group = runs(&client).await;
    for g in 0..20 {
        let name = format!("g{g}");
        let runs = &by_group[&name];
        assert_in_order_one_at_a_time(&name, runs, 10);
        // Jobs 3 and 6 ran twice each (released once, thrown once), the others once.
        assert_eq!(runs.len(), 12, "{name}: {runs:?}\n{log}");
    }
    assert_in_order_one_at_a_time("late", &by_group["late"], 2);
    assert_in_order_one_at_a_time("failing", &by_group["failing"], 2);
    let timeout = &by_group["timeout"];
    assert_in_order_one_at_a_time("timeout", timeout, 2);
    assert!(
        timeout.len() == 3 && timeout[0].killed && !timeout[1].killed,
        "timeout:0 was killed once, ran again, then timeout:1 ran: {timeout:?}"
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.journal WHERE event = 'handle' AND label LIKE 'ungrouped_%'").await,
        10
    );
    let mut dedup = journal(&client, "dedup").await;
    dedup.sort();
    assert_eq!(dedup, ["dedup_after_rollback", "dedup_first"]);
    if laravel == Laravel::V12 {
        assert_eq!(
            count(&client, "SELECT count(*) FROM public.journal WHERE event = 'handle' AND label LIKE 'closure_%'").await,
            1,
            "withDeduplicator dropped the second dispatch"
        );
        // A queued listener's messageGroup() (Laravel 12 gives it to the listener's job).
        assert_in_order_one_at_a_time("listener", &by_group["listener"], 6);
        assert_eq!(by_group["listener"].len(), 6);
    }
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.groups").await,
        0,
        "no group is left behind"
    );
    db.stop().await;
}

async fn a_group_under_hold_stops_at_its_failed_job_until_queue_retry_runs_it_first_or_forget_flush_or_prune_lets_it_go(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = LaravelApp::new(&db, laravel);
    app.artisan(&[
        "app:eval",
        r#"
        dispatch(new App\Jobs\GroupJob('held', 'held:0', 'fail_once'));
        dispatch(new App\Jobs\GroupJob('held', 'held:1'));
        dispatch(new App\Jobs\GroupJob('forgotten', 'forgotten:0', 'fail_once'));
        dispatch(new App\Jobs\GroupJob('forgotten', 'forgotten:1'));
        dispatch(new App\Jobs\GroupJob('free', 'free:0'));
    "#,
    ]);
    let master = start_master(&app, 4).await;
    wait_count(
        &client,
        "SELECT count(*) FROM drover.groups WHERE held_by IS NOT NULL AND head IS NULL",
        2,
        PATIENCE,
    )
    .await;
    wait_count(&client, "SELECT count(*) FROM drover.jobs", 0, PATIENCE).await;
    // Held: held:1 waits behind the failed job while other groups run.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM public.journal WHERE label = 'held:1'"
        )
        .await,
        0,
        "the job behind a held failure does not run"
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM public.journal WHERE label = 'free:0' AND event = 'group_end'"
        )
        .await,
        1
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        2
    );
    // drover status names each held group, the job that holds it and what lets it go on.
    let status = app.artisan(&["drover:status"]);
    assert!(
        status.contains("held: default/held by failed job") && status.contains("queue:retry"),
        "{status}"
    );
    // Forgetting a failed job that holds a group lets the group go on without it.
    let forgotten: String = client
        .query_one(
            "SELECT uuid FROM public.failed_jobs WHERE payload LIKE '%forgotten:0%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    app.artisan(&["queue:forget", &forgotten]);
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'forgotten:1' AND event = 'group_end'",
        1,
        PATIENCE,
    )
    .await;
    // Laravel's own retry pushes the failed payload again: it goes first and the group goes on.
    app.artisan(&["queue:retry", "all"]);
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'held:1' AND event = 'group_end'",
        1,
        PATIENCE,
    )
    .await;
    // queue:prune-failed and queue:flush delete failed jobs too: each lets the group its job held
    // go on.
    for (group, command) in [
        ("pruned", vec!["queue:prune-failed", "--hours=0"]),
        ("flushed", vec!["queue:flush"]),
    ] {
        app.artisan(&[
            "app:eval",
            &format!(
                "dispatch(new App\\Jobs\\GroupJob('{group}', '{group}:0', 'fail_once')); dispatch(new App\\Jobs\\GroupJob('{group}', '{group}:1'));"
            ),
        ]);
        wait_count(
            &client,
            &format!("SELECT count(*) FROM drover.groups WHERE name = '{group}' AND head IS NULL"),
            1,
            PATIENCE,
        )
        .await;
        // Laravel prunes what failed before the current second (`failed_at` has whole seconds).
        tokio::time::sleep(Duration::from_millis(1100)).await;
        app.artisan(&command);
        wait_count(
            &client,
            &format!("SELECT count(*) FROM public.journal WHERE label = '{group}:1' AND event = 'group_end'"),
            1,
            PATIENCE,
        )
        .await;
    }
    stop_master(&app, master).await;
    let by_group = runs(&client).await;
    let held = &by_group["held"];
    assert_in_order_one_at_a_time("held", held, 2);
    assert_eq!(
        held.len(),
        3,
        "held:0 failed, was retried, then held:1 ran: {held:?}"
    );
    for group in ["forgotten", "pruned", "flushed"] {
        assert_in_order_one_at_a_time(group, &by_group[group], 2);
    }
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.groups").await,
        0
    );
    db.stop().await;
}

async fn a_job_waiting_behind_a_slow_head_past_the_threshold_fires_long_wait_detected_naming_its_group(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    // Threshold 2 s; a short lease so the master checks every 3 s. The head runs 8 s: the job
    // behind it waits for its group, not for a worker, and the queue has no other wait (the head
    // is claimed at once, well within the threshold even on a loaded machine). A 6 s lease: a
    // shorter one lets a loaded machine's stalled renewal fence the head.
    app.env.push(("DROVER_WAIT_THRESHOLD".into(), "2".into()));
    app.env.push(("DROVER_LEASE".into(), "6".into()));
    // Dispatched once the workers are ready: queued before, the head could wait past the
    // threshold for the master's start on a slow host, and the alert would name the queue.
    let master = start_master(&app, 4).await;
    app.artisan(&[
        "app:eval",
        r#"
        dispatch(new App\Jobs\GroupJob('slow', 'slow:0', 'slow'));
        dispatch(new App\Jobs\GroupJob('slow', 'slow:1'));
    "#,
    ]);
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'slow:1' AND event = 'group_end'",
        1,
        PATIENCE,
    )
    .await;
    let log = stop_master(&app, master).await;
    assert_eq!(
        journal(&client, "long_wait").await,
        ["drover:default group slow"],
        "{log}"
    );
    assert!(
        log.contains(
            "long wait: a job of group slow (behind its head) in queue default has waited"
        ),
        "{log}"
    );
    db.stop().await;
}

on_every_laravel!(
    groups_run_in_order_with_workers_started_by_exec,
    a_job_waiting_behind_a_slow_head_past_the_threshold_fires_long_wait_detected_naming_its_group,
    groups_run_in_order_one_at_a_time_with_retries_in_place_and_duplicates_dropped,
    a_group_under_hold_stops_at_its_failed_job_until_queue_retry_runs_it_first_or_forget_flush_or_prune_lets_it_go,
);
