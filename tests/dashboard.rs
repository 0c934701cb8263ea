//! The dashboard end to end in a real browser: the Laravel 12 reference app serving `/drover`
//! with `php artisan serve`, a drover master running real jobs on a real PostgreSQL, and headless
//! Chromium driven over WebDriver. Every page loads with the run's data, the retry button retries,
//! and the `viewDrover` gate refuses a guest in production. Screenshots go to
//! `target/dashboard-screenshots/`.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::browser::Browser;
use support::serve::{get_answered, serve};
use support::{count, http, wait_count, Cluster, Laravel, LaravelApp};

fn screenshots(laravel: Laravel) -> PathBuf {
    support::root().join(format!("target/dashboard-screenshots/{laravel:?}").to_lowercase())
}

#[tokio::test]
async fn on_laravel_12_every_dashboard_page_shows_a_real_run_the_retry_button_retries_and_production_refuses_a_guest(
) {
    every_page_shows_a_real_run(Laravel::V12).await;
}

#[tokio::test]
async fn on_laravel_8_every_dashboard_page_shows_a_real_run_the_retry_button_retries_and_production_refuses_a_guest(
) {
    every_page_shows_a_real_run(Laravel::V8).await;
}

async fn every_page_shows_a_real_run(laravel: Laravel) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    for (k, v) in [
        ("DROVER_PROCESSES", "2"),
        ("DROVER_HISTORY_MINUTES", "60"),
        ("SESSION_DRIVER", "file"),
        ("DROVER_BUDGETS", "default=3"),
        ("DROVER_TEST_SCHEDULE", "dashboard"),
    ] {
        app.env.push((k.into(), v.into()));
    }
    app.artisan(&[
        "app:eval",
        r#"
        foreach ([1, 2, 3, 4, 5] as $i) { App\Jobs\OkJob::dispatch("ok_$i"); }
        App\Jobs\TaggedJob::dispatch('tagged');
        App\Jobs\DoorJob::dispatch('door');
        App\Jobs\DoorJob::dispatch('door_forgotten');
        dispatch(new App\Jobs\GroupJob('held', 'held:0', 'fail_once'));
        dispatch(new App\Jobs\GroupJob('held', 'held:1'));
        App\Jobs\OkJob::dispatch('later')->delay(3600);
        foreach ([1, 2, 3] as $i) { dispatch(new App\Jobs\LimitedJob('daily', "daily:$i", 0, 10, 1, null, 86400)); }
        App\Jobs\TaggedJob::dispatch('tagged_later')->delay(3600);
        Illuminate\Support\Facades\Bus::batch([new App\Jobs\BatchedJob('batched_1'), new App\Jobs\BatchedJob('batched_2')])->name('nightly import')->dispatch();
    "#,
    ]);
    let mut master = app.spawn(&["drover"], "drover.log");
    // Everything but the delayed job ran (DoorJob failed into failed_jobs), and the master has
    // written its metrics and history (every 10 s).
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        2,
        Duration::from_secs(60),
    )
    .await;
    wait_count(
        &client,
        "SELECT least(count(*), 9) FROM drover.recent_jobs",
        9,
        Duration::from_secs(30),
    )
    .await;
    wait_count(
        &client,
        "SELECT least(count(*), 1) FROM drover.metrics WHERE class = 'App\\Jobs\\OkJob'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let journal: Vec<String> = client
        .query(
            "SELECT label || ' ' || event FROM public.journal ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        3,
        "both DoorJobs and the held group's job are in failed_jobs; journal: {journal:?}\n{}",
        app.log("drover.log")
    );

    let (_server, port) = serve(&app, "local", false);
    let base = format!("http://127.0.0.1:{port}/drover");
    let shots = screenshots(laravel);
    let browser = Browser::start();

    // Overview: the master, its two workers (as its node row has them: refreshed every 5 s), the
    // queues and the classes.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        browser.goto(&base);
        let workers = browser.text("table.pools").unwrap_or_default();
        if workers.matches("idle").count() + workers.matches("busy").count() == 2
            && browser.source().contains(">serving<")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the overview never showed two serving workers:\n{}",
            browser.source()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(browser.title().contains("Overview"), "{}", browser.source());
    assert_eq!(browser.text("#hosts").as_deref(), Some("1"));
    assert_eq!(browser.text("#workers").as_deref(), Some("2"));
    assert_eq!(browser.count("tr.worker"), 2);
    let classes = browser.text("table.classes").unwrap_or_default();
    assert!(classes.contains("App\\Jobs\\OkJob"), "{classes}");
    assert!(browser
        .text("table.queues")
        .unwrap_or_default()
        .contains("default"));
    // A queue paused by name is marked so.
    app.artisan(&["drover:pause", "--queue=drover:high", "--for=600"]);
    browser.goto(&base);
    let queues = browser.text("table.queues").unwrap_or_default();
    assert!(queues.contains("high paused for"), "{queues}");
    // The fleet-wide budget beside the queue's running count.
    assert!(queues.contains("of 3"), "{queues}");
    app.artisan(&["drover:continue", "--queue=drover:high"]);
    browser.screenshot(&shots.join("overview.png"));

    // Jobs: the delayed one, with its payload.
    // Jobs: nothing pending or running, the two delayed ones, each with its payload and tags.
    for kind in ["pending", "running"] {
        browser.goto(&format!("{base}/jobs/{kind}"));
        assert_eq!(
            browser
                .text("table.jobs")
                .unwrap_or_default()
                .matches(&format!("No {kind} jobs"))
                .count(),
            1,
            "{}",
            browser.source()
        );
    }
    browser.goto(&format!("{base}/jobs/delayed"));
    assert_eq!(
        browser.count("table.jobs tr") - 1,
        2,
        "{}",
        browser.source()
    );
    assert!(browser
        .text("table.jobs")
        .unwrap_or_default()
        .contains("customer:42"));
    browser.click("table.jobs a[href*='/job/']");
    let payload = browser.wait_for("pre.payload");
    assert!(
        payload.contains("\"tags\""),
        "the payload carries its tags: {payload}"
    );

    // Completed: the history, each with its worker and usage, and each job's page.
    browser.goto(&format!("{base}/completed"));
    assert_eq!(
        browser.count("table.completed tr") - 1,
        9,
        "{}",
        browser.source()
    );
    browser.screenshot(&shots.join("completed.png"));
    browser.click("table.completed a[href*='/completed/']");
    assert!(browser.wait_for("table.detail").contains("worker pid"));
    assert!(browser
        .text("pre.payload")
        .unwrap_or_default()
        .contains("displayName"));

    // A job class's charts.
    browser.goto(&format!("{base}/class?class=App%5CJobs%5COkJob"));
    assert_eq!(browser.count("svg.chart"), 5);
    assert!(
        browser.count("svg.chart polyline, svg.chart circle") >= 4,
        "{}",
        browser.source()
    );
    browser.screenshot(&shots.join("class.png"));

    // Batches and tags.
    browser.goto(&format!("{base}/batches"));
    assert!(browser
        .text("table.batches")
        .unwrap_or_default()
        .contains("nightly import"));
    browser.goto(&format!("{base}/tags?tag=customer%3A42"));
    let found = browser.source();
    assert!(
        found.contains("Completed (1)")
            && found.contains("Delayed (1)")
            && found.contains("Pending (0)"),
        "{found}"
    );

    // Groups: the held group with the job that holds it; its page lists the job waiting behind
    // it, and so does that job's page. Forget lets the group go on.
    browser.goto(&format!("{base}/groups"));
    let held = browser.text("table.held").unwrap_or_default();
    assert!(
        held.contains("held") && held.contains("fails until retried"),
        "{held}"
    );
    browser.screenshot(&shots.join("groups.png"));
    browser.click("tr.held-group a[href*='/group?']");
    let jobs = browser.wait_for("table.group-jobs");
    assert!(jobs.contains("waiting"), "{jobs}");
    assert_eq!(browser.count("tr.group-job"), 1);
    browser.click("tr.group-job a");
    let detail = browser.wait_for("table.detail");
    assert!(
        detail.contains("waiting behind its head, position 1"),
        "{detail}"
    );
    browser.goto(&format!("{base}/groups"));
    browser.click("tr.held-group button.forget");
    let flash = browser.wait_for("#flash");
    assert!(flash.contains("was forgotten"), "{flash}");
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'held:1' AND event = 'group_end'",
        1,
        Duration::from_secs(30),
    )
    .await;

    // Limits: one job a day under `daily`: one ran, two wait in its line.
    browser.goto(&format!("{base}/limits"));
    let limits = browser.text("table.limits").unwrap_or_default();
    assert!(limits.contains("daily@86400s"), "{limits}");
    assert_eq!(browser.count("tr.limit-key"), 1);
    let row = browser
        .text("tr.limit-key")
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        row.contains("daily@86400s 2 0 1"),
        "2 waiting, no slot, 1 started: {row}"
    );
    browser.screenshot(&shots.join("limits.png"));

    // Schedule: the task with its next due time; "Run now" runs it at once (a master takes the
    // request within seconds), its output kept; pause and resume it.
    let schedule = format!("{base}/schedule");
    browser.goto(&schedule);
    assert_eq!(browser.count("tr.schedule-task"), 1);
    let task = browser.text("tr.schedule-task").unwrap_or_default();
    for part in [
        "yearly report",
        "0 0 1 1 *",
        "one server",
        "UTC",
        "never run",
    ] {
        assert!(task.contains(part), "{part} not in {task}");
    }
    browser.click("tr.schedule-task button.run-now");
    let flash = browser.wait_for("#flash");
    assert!(flash.contains("asked to run now"), "{flash}");
    wait_count(
        &client,
        "SELECT count(*) FROM drover.schedule_runs WHERE status = 'succeeded'",
        1,
        Duration::from_secs(30),
    )
    .await;
    browser.goto(&schedule);
    let runs = browser.text("table.schedule-runs").unwrap_or_default();
    assert!(runs.contains("report written"), "the run's output: {runs}");
    assert!(runs.contains("run now, asked by"), "who asked: {runs}");
    assert!(
        browser
            .text("tr.schedule-task")
            .unwrap_or_default()
            .contains("succeeded"),
        "its latest run"
    );
    browser.click("tr.schedule-task button.pause");
    let flash = browser.wait_for("#flash");
    assert!(flash.contains("is paused"), "{flash}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.schedule_pauses").await,
        1
    );
    assert!(browser
        .text("tr.schedule-task")
        .unwrap_or_default()
        .contains("paused"));
    browser.screenshot(&shots.join("schedule.png"));
    // A page without the last action's flash, so the next flash is the resume's.
    browser.goto(&schedule);
    browser.click("tr.schedule-task button.resume");
    let flash = browser.wait_for("#flash");
    assert!(flash.contains("is resumed"), "{flash}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.schedule_pauses").await,
        0
    );

    // Failed: both DoorJobs with their exception. Forget one; open the door and retry the other.
    browser.goto(&format!("{base}/failed"));
    assert_eq!(browser.count("tr.failed-job"), 2);
    assert!(browser
        .text("table.failed")
        .unwrap_or_default()
        .contains("the door is closed"));
    let forgotten: String = client
        .query_one(
            "SELECT uuid FROM public.failed_jobs WHERE payload::json->>'label' = 'door_forgotten'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    browser.click(&format!(
        "tr.failed-job[data-key='{forgotten}'] button.forget"
    ));
    let flash = browser.wait_for("#flash");
    assert!(flash.contains("was forgotten"), "{flash}");
    assert_eq!(browser.count("tr.failed-job"), 1);
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        1
    );
    browser.click("tr.failed-job a");
    assert!(browser
        .wait_for("pre.exception")
        .contains("RuntimeException"));
    browser.screenshot(&shots.join("failed-job.png"));
    std::fs::write(app.storage_dir().join("door-open"), b"").unwrap();
    browser.click("button.retry");
    let flash = browser.wait_for("#flash");
    assert!(flash.contains("pushed back onto its queue"), "{flash}");
    wait_count(
        &client,
        "SELECT count(*) FROM public.journal WHERE label = 'door' AND event = 'processed'",
        1,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        0
    );
    console_acts_on_all_that_match(&app, &client, &browser, &base, &shots).await;
    drop(browser);

    // A POST without its CSRF token is refused.
    let (status, answer) = http(
        port,
        "POST /drover/failed/0/forget HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 419, "{answer}");

    // Production: a guest is refused; a viewDrover gate that allows is obeyed.
    let (_production, port) = serve(&app, "production", false);
    let (status, body) = get_answered(port, "/drover");
    assert_eq!(
        status,
        403,
        "{body}\n{}",
        app.log(&format!("serve-{port}.log"))
    );
    let (_allowed, port) = serve(&app, "production", true);
    let (status, body) = get_answered(port, "/drover");
    assert_eq!(
        status,
        200,
        "{}",
        body.chars().take(2000).collect::<String>()
    );
    assert!(body.contains("Overview"));
    production_refuses_actions_without_the_operate_gate(&mut app, port, &allowed_session(port));

    app.artisan(&["drover:terminate"]);
    let _ = master.wait();
    db.stop().await;
}

/// The console (issue 41): a search across a queue nobody serves finds its jobs by queue and
/// class and counts them; a secret in one of them is redacted on its page; "Delete all" previews
/// the count, runs in the background on drover's own workers and says what it did; a queue is
/// paused and resumed from the overview; every action is in the audit trail with who and what.
async fn console_acts_on_all_that_match(
    app: &LaravelApp,
    client: &tokio_postgres::Client,
    browser: &Browser,
    base: &str,
    shots: &std::path::Path,
) {
    app.artisan(&[
        "app:eval",
        r#"
        foreach (range(1, 30) as $i) { App\Jobs\OkJob::dispatch("parked_$i")->onQueue('parked'); }
        App\Jobs\SecretJob::dispatch('acme', 'hunter2-secret')->onQueue('parked');
    "#,
    ]);
    browser.goto(&format!("{base}/search?state=pending&queue=parked"));
    assert_eq!(browser.wait_for("#count"), "31 jobs match");
    assert_eq!(browser.count("tr.result"), 31);
    browser.screenshot(&shots.join("search.png"));
    browser.goto(&format!(
        "{base}/search?state=pending&queue=parked&class=SecretJob"
    ));
    assert_eq!(browser.wait_for("#count"), "1 job matches");
    browser.click("tr.result a");
    let payload = browser.wait_for("pre.payload");
    assert!(
        !payload.contains("hunter2-secret")
            && payload.contains("[redacted]")
            && payload.contains("acme"),
        "{payload}"
    );

    // Delete all 30 OkJobs of the queue: a preview, a confirmation, the background action.
    browser.goto(&format!(
        "{base}/search?state=pending&queue=parked&class=App%5CJobs%5COkJob"
    ));
    assert_eq!(browser.wait_for("#count"), "30 jobs match");
    browser.click("a.verb-delete button");
    let preview = browser.wait_for("#preview");
    assert!(preview.contains("30 jobs"), "{preview}");
    browser.screenshot(&shots.join("confirm.png"));
    browser.click("button.confirm");
    action_done(browser, app);
    assert_eq!(browser.wait_for("#acted"), "30");
    assert!(browser
        .text("#outcome")
        .unwrap_or_default()
        .starts_with("30 deleted"));
    browser.screenshot(&shots.join("action.png"));
    assert_eq!(
        count(
            client,
            "SELECT count(*) FROM drover.jobs WHERE queue = 'parked'"
        )
        .await,
        1,
        "only the SecretJob is left"
    );

    // Move what is left on the queue (the SecretJob) to one a pool serves: it runs there.
    browser.goto(&format!("{base}/search?state=pending&queue=parked"));
    assert_eq!(browser.wait_for("#count"), "1 job matches");
    browser.type_into("form input[name='to']", "default");
    browser.click("button.verb-move");
    assert!(browser
        .wait_for("#preview")
        .contains("(to queue default) 1 job"));
    browser.click("button.confirm");
    action_done(browser, app);
    assert!(browser.wait_for("#outcome").starts_with("1 moved"));
    wait_count(
        client,
        "SELECT count(*) FROM drover.jobs WHERE queue IN ('parked', 'default') AND payload LIKE '%SecretJob%'",
        0,
        Duration::from_secs(30),
    )
    .await;

    // A queue's page: its counts and charts over a day; the overview's over a week.
    browser.goto(&format!("{base}/queue?queue=default&range=day"));
    browser.wait_for("#charts");
    assert_eq!(
        browser.count("#charts svg.chart"),
        3,
        "{}",
        browser.source()
    );
    assert!(
        browser.source().contains("Throughput")
            && browser.source().contains("last day, per 15 minutes")
    );
    browser.screenshot(&shots.join("queue.png"));
    browser.goto(&format!("{base}?range=week"));
    browser.wait_for("#charts");
    assert_eq!(browser.count("#charts svg.chart"), 3);

    // Pause and resume a queue from the overview.
    browser.goto(base);
    browser.click("tr[data-queue='default'] button.pause-queue");
    assert!(browser.wait_for("#flash").contains("is paused"));
    assert_eq!(
        count(
            client,
            "SELECT count(*) FROM drover.paused_queues WHERE queue = 'default'"
        )
        .await,
        1
    );
    browser.click("tr[data-queue='default'] button.resume-queue");
    assert!(browser.wait_for("#flash").contains("is resumed"));

    // The audit trail: every action of this test, by whom and on what.
    browser.goto(&format!("{base}/actions"));
    let audit = browser.wait_for("table.audit");
    for (verb, times) in [
        ("forget", 2),
        ("schedule-run-now", 1),
        ("schedule-pause", 1),
        ("schedule-resume", 1),
        ("retry", 1),
        ("delete", 1),
        ("move", 1),
        ("pause", 1),
        ("resume", 1),
    ] {
        assert_eq!(
            browser.count(&format!("tr.audit-row[data-verb='{verb}']")),
            times,
            "{verb}: {audit}"
        );
    }
    assert!(
        audit.contains("Pending jobs with queue “parked”, class “App\\Jobs\\OkJob”")
            && audit.contains("30 deleted")
            && audit.contains("queue default paused"),
        "{audit}"
    );
    assert!(audit.contains("nobody signed in (local)"), "{audit}");
    browser.screenshot(&shots.join("audit.png"));

    // A batch with a failed job: its page lists it, and Retry its failed jobs runs it again; a
    // batch still waiting is cancelled from its page; a chain's next steps show on its first job.
    app.artisan(&[
        "app:eval",
        r#"
        $b = Illuminate\Support\Facades\Bus::batch([new App\Jobs\BatchedJob('flaky_batched', null, false, true)])->allowFailures()->name('flaky import')->dispatch();
        $w = Illuminate\Support\Facades\Bus::batch([new App\Jobs\BatchedJob('batched_parked')])->name('parked import')->onQueue('parked')->dispatch();
        Illuminate\Support\Facades\Bus::chain([new App\Jobs\OkJob('chain_1'), new App\Jobs\OkJob('chain_2'), new App\Jobs\SlowJob('chain_3')])->onQueue('parked')->dispatch();
        file_put_contents(storage_path('batches'), $b->id . ' ' . $w->id);
    "#,
    ]);
    let ids = std::fs::read_to_string(app.storage_dir().join("batches")).unwrap();
    let (flaky, parked) = ids.split_once(' ').unwrap();
    wait_count(
        client,
        "SELECT count(*) FROM public.journal WHERE label = 'flaky_batched' AND event = 'handle'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        browser.goto(&format!("{base}/batch/{flaky}"));
        if browser.count("button.retry-batch") == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{}", browser.source());
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(browser.wait_for("#batch-counts").contains("1 failed"));
    browser.screenshot(&shots.join("batch.png"));
    browser.click("button.retry-batch");
    assert!(browser.wait_for("#flash").contains("1 failed job(s)"));
    wait_count(
        client,
        "SELECT count(*) FROM public.journal WHERE label = 'flaky_batched' AND event = 'handle'",
        2,
        Duration::from_secs(30),
    )
    .await;
    browser.goto(&format!("{base}/batch/{parked}"));
    browser.click("button.cancel-batch");
    assert!(browser.wait_for("#batch-state").starts_with("cancelled"));
    browser.goto(&format!(
        "{base}/search?state=pending&queue=parked&text=chain_1"
    ));
    browser.click("tr.result a");
    let chain = browser.wait_for("#chain");
    assert_eq!(chain, "then App\\Jobs\\OkJob → App\\Jobs\\SlowJob");

    // Retry every failed job of a class, then forget them: through the failer's own path.
    app.artisan(&["app:eval", "App\\Jobs\\FailingJob::dispatch('doomed');"]);
    let doomed = "SELECT count(*) FROM public.failed_jobs WHERE payload LIKE '%doomed%'";
    wait_count(client, doomed, 1, Duration::from_secs(30)).await;
    for (verb, runs, left) in [("retry", 4, 1), ("forget", 4, 0)] {
        browser.goto(&format!("{base}/search?state=failed&class=FailingJob"));
        assert_eq!(browser.wait_for("#count"), "1 job matches");
        browser.click(&format!("a.verb-{verb} button"));
        browser.click("button.confirm");
        action_done(browser, app);
        wait_count(
            client,
            "SELECT count(*) FROM public.journal WHERE label = 'doomed' AND event = 'handle'",
            runs,
            Duration::from_secs(30),
        )
        .await;
        wait_count(client, doomed, left, Duration::from_secs(30)).await;
    }

    // Release a held group from the search: the job waiting behind its failed head runs.
    app.artisan(&[
        "app:eval",
        "dispatch(new App\\Jobs\\GroupJob('stuck', 'stuck:0', 'fail_once')); dispatch(new App\\Jobs\\GroupJob('stuck', 'stuck:1'));",
    ]);
    wait_count(
        client,
        "SELECT count(*) FROM drover.groups WHERE name = 'stuck' AND head IS NULL",
        1,
        Duration::from_secs(30),
    )
    .await;
    browser.goto(&format!("{base}/search?state=held&group=stuck"));
    assert_eq!(browser.wait_for("#count"), "1 job matches");
    browser.click("a.verb-release button");
    browser.click("button.confirm");
    action_done(browser, app);
    assert!(browser.wait_for("#outcome").starts_with("1 let go on"));
    wait_count(
        client,
        "SELECT count(*) FROM public.journal WHERE label = 'stuck:1' AND event = 'group_end'",
        1,
        Duration::from_secs(30),
    )
    .await;

    // Restart the master from the overview: it replaces its workers one by one.
    browser.goto(base);
    browser.click("h3.master button.restart-master");
    assert!(browser
        .wait_for("#flash")
        .contains("was asked to restart its workers one by one"));
    wait_count(
        client,
        "SELECT count(*) FROM drover.nodes WHERE reload_done >= 1",
        1,
        Duration::from_secs(60),
    )
    .await;

    // A pool's size from the overview: the master scales it at once and says so.
    browser.goto(base);
    browser.type_into("form.pool-size input[name='processes']", "1");
    browser.click("button.set-pool-size");
    assert!(browser
        .wait_for("#flash")
        .contains("was set to 1 processes"));
    wait_count(
        client,
        "SELECT count(*) FROM drover.pool_sizes WHERE outcome = 'scaled to 1'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        browser.goto(base);
        if browser.text("div.pool-size").unwrap_or_default() == "set to 1: scaled to 1"
            && browser.source().contains("1 / 1")
        {
            break;
        }
        assert!(Instant::now() < deadline, "{}", browser.source());
        std::thread::sleep(Duration::from_millis(500));
    }
    browser.screenshot(&shots.join("overview-acting.png"));
    // The same fleet in a terminal.
    let top = app.artisan(&["drover:top", "--once"]);
    for part in [
        "MASTERS",
        "pool default [",
        "1/1 serving",
        "QUEUES",
        "  default ",
    ] {
        assert!(
            top.contains(part),
            "{part} not in drover:top's frame:\n{top}"
        );
    }

    // An action asked of a state it does not apply to is refused, naming why.
    let (status, body) = get_answered(
        port_of(base),
        "/drover/actions/confirm?state=running&verb=delete",
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("delete applies to pending, delayed jobs, not running ones"));
}

/// Waits on a bulk action's page (it reloads itself every 2 s while the action runs) until the
/// action is done, up to a minute.
fn action_done(browser: &Browser, app: &LaravelApp) {
    browser.wait_for("#state");
    let deadline = Instant::now() + Duration::from_secs(60);
    while browser.text("#state").as_deref() != Some("done") {
        assert!(
            Instant::now() < deadline,
            "the action never finished:\n{}\n{}",
            browser.source(),
            app.log("drover.log")
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn port_of(base: &str) -> u16 {
    base.rsplit(':')
        .next()
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("a port in the base URL")
}

/// A session of the production server (viewDrover open): its cookies and its CSRF token, as a
/// browser would send them with a form.
fn allowed_session(port: u16) -> (String, String) {
    let (cookies, xsrf, answer) = support::serve::session_and_page(port, "/drover/search");
    assert!(
        answer.contains("read-only"),
        "the page says it is read-only"
    );
    assert!(
        !answer.contains("verb-delete") && !answer.contains("pause-queue"),
        "no buttons"
    );
    (cookies, xsrf)
}

/// In production, viewDrover open: with no operateDrover gate every action is refused (403) even
/// with a valid session and CSRF token, and the pages show no buttons; a gate that allows is
/// obeyed.
fn production_refuses_actions_without_the_operate_gate(
    app: &mut LaravelApp,
    port: u16,
    (cookies, xsrf): &(String, String),
) {
    for (path, body) in [
        ("/drover/queues/pause", "queue=default"),
        ("/drover/actions", "state=pending&verb=delete&queue=default"),
        ("/drover/failed/1/forget", ""),
        ("/drover/schedule/pause", "task=x"),
        ("/drover/job/1/stop", "mode=kill&outcome=fail"),
        ("/drover/masters/1/restart", ""),
        ("/drover/masters/1/pools", "pool=default&processes=1"),
        (
            "/drover/batch/00000000-0000-0000-0000-000000000000/cancel",
            "",
        ),
        ("/drover/queues/resume", "queue=default"),
    ] {
        let (status, answer) = http(
            port,
            &format!(
                "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies}\r\nX-XSRF-TOKEN: {xsrf}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        );
        assert_eq!(status, 403, "{path}: {answer}");
    }
    let (status, _) = get_answered(port, "/drover/actions/confirm?state=pending&verb=delete");
    assert_eq!(status, 403);
    // The same session without its token: refused before the gate is asked (CSRF).
    let (status, answer) = http(
        port,
        &format!(
            "POST /drover/queues/pause HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 13\r\nConnection: close\r\n\r\nqueue=default"
        ),
    );
    assert_eq!(status, 419, "{answer}");
    // A gate that allows is obeyed.
    app.env
        .push(("DROVER_TEST_OPERATE_GATE".into(), "open".into()));
    let (_operable, port) = serve(app, "production", true);
    let (status, body) = get_answered(port, "/drover/actions/confirm?state=pending&verb=delete");
    assert_eq!(
        status,
        200,
        "{}",
        body.chars().take(2000).collect::<String>()
    );
    assert!(body.contains("button") && body.contains("confirm"));
    app.env.pop();
}
