//! Durable workflows end to end (issue 60, docs/workflows.md), on both Laravels: graphs of
//! ordinary Laravel jobs dispatched with `Drover::workflow(...)` and run by `php artisan drover`
//! unchanged. A diamond that fans out a hundred steps and fans in reading their results; a
//! failure under each policy, then a retry from the console and one with Laravel's `queue:retry`
//! that let the rest finish; a step
//! waiting 2 s and one waiting for a signal while the pool's workers all run other jobs; a master
//! SIGKILLed and the database restarted mid-workflow. The fixture's steps journal their start
//! (`handle`, or `processing`/`effect`) and their end (`end`) in `journal`, with the database's
//! clock: the assertions compare a step's start with its dependencies' ends there.

use std::time::{Duration, Instant};

use tokio_postgres::Client;

mod support;

use support::postgres::pg_ctl;
use support::serve::{post_form, serve, session};
use support::{
    count, free_port, reconnect, start_master, stop_master, Cluster, Laravel, LaravelApp,
};

/// The fixture app on `db` with `env` added, and its master once `processes` workers are ready.
async fn app_with_master(
    db: &Cluster,
    laravel: Laravel,
    processes: usize,
    env: &[(&str, &str)],
) -> (LaravelApp, support::Spawned) {
    let mut app = LaravelApp::new_with(db, laravel, env);
    app.env
        .push(("DROVER_PROCESSES".into(), processes.to_string()));
    let master = start_master(&app, processes).await;
    (app, master)
}

fn eval(app: &LaravelApp, php: &str) -> String {
    app.artisan(&["app:eval", php])
}

/// `php artisan drover:status --json`: the master's answer.
fn status(app: &LaravelApp) -> serde_json::Value {
    let out = app.command(&["drover:status", "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("drover:status --json ({e}): {}", support::said(&out)))
}

/// The id of workflow `name` once it is in `state`; panics after `timeout` with its nodes and
/// the master's log.
async fn wait_workflow(
    client: &Client,
    app: &LaravelApp,
    name: &str,
    state: &str,
    timeout: Duration,
) -> i64 {
    let deadline = Instant::now() + timeout;
    loop {
        let row = client
            .query_opt(
                "SELECT id, state FROM drover.workflows WHERE name = $1 ORDER BY id DESC LIMIT 1",
                &[&name],
            )
            .await
            .unwrap();
        if let Some(row) = &row {
            if row.get::<_, String>(1) == state {
                return row.get(0);
            }
        }
        if Instant::now() > deadline {
            let wf = row.map(|r| r.get::<_, i64>(0)).unwrap_or(0);
            panic!(
                "workflow {name} is not {state} after {timeout:?}: {:?}\n{}",
                nodes(client, wf).await,
                app.log("drover.log")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Workflow `wf`'s nodes, by name: `name state`, with the cause of a cancel or skip.
async fn nodes(client: &Client, wf: i64) -> Vec<String> {
    client
        .query(
            "SELECT name || ' ' || state || coalesce(' (' || cause || ')', '') \
             FROM drover.workflow_nodes WHERE wf = $1 ORDER BY name",
            &[&wf],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The journal's records of `event` by the jobs labelled like `like`: (labels, records).
async fn journaled(client: &Client, like: &str, event: &str) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT count(DISTINCT label), count(*) FROM journal WHERE label LIKE $1 AND event = $2",
            &[&like, &event],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Whether every `first_event` of the jobs labelled like `first` was journaled before every
/// `then_event` of those labelled like `then` (false if either has none).
async fn before(
    client: &Client,
    (first, first_event): (&str, &str),
    (then, then_event): (&str, &str),
) -> bool {
    client
        .query_one(
            "SELECT coalesce((SELECT max(at) FROM journal WHERE label LIKE $1 AND event = $2)
                           < (SELECT min(at) FROM journal WHERE label LIKE $3 AND event = $4), false)",
            &[&first, &first_event, &then, &then_event],
        )
        .await
        .unwrap()
        .get(0)
}

/// The result step `node` (its first member) of workflow `wf` recorded, decoded.
async fn result(client: &Client, wf: i64, node: &str) -> serde_json::Value {
    let text: Option<String> = client
        .query_one(
            "SELECT result FROM drover.workflow_steps WHERE wf = $1 AND node = $2 ORDER BY member LIMIT 1",
            &[&wf, &node],
        )
        .await
        .unwrap()
        .get(0);
    serde_json::from_str(text.as_deref().unwrap_or("null")).unwrap()
}

/// Steps of workflow `wf` in each state, `state=n` by state.
async fn step_states(client: &Client, wf: i64) -> String {
    client
        .query_one(
            "SELECT coalesce(string_agg(state || '=' || n, ' ' ORDER BY state), '') \
             FROM (SELECT state, count(*) AS n FROM drover.workflow_steps WHERE wf = $1 GROUP BY state) s",
            &[&wf],
        )
        .await
        .unwrap()
        .get(0)
}

/// Scenario 1: fetch, then a hundred `work` steps (one node), then `report`, which reads their
/// hundred results. Each step ran once, every work step after fetch ended, the report after every
/// work step ended, with their sum; fetch's progress is kept.
async fn a_diamond_fans_out_a_hundred_steps_once_each_and_its_fan_in_reads_all_their_results(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let (app, master) = app_with_master(&db, laravel, 4, &[]).await;
    let client = db.client().await;
    eval(
        &app,
        r#"$work = array_map(fn ($i) => new App\Jobs\WorkflowStepJob("diamond work $i", $i), range(1, 100));
           Drover\Drover::workflow('diamond')
               ->add('fetch', new App\Jobs\WorkflowStepJob('diamond fetch', ['rows' => 100], halfway: true))
               ->addMany('work', $work, after: 'fetch')
               ->add('report', new App\Jobs\WorkflowFanInJob('diamond report', 'work'), after: 'work')
               ->dispatch();"#,
    );
    let wf = wait_workflow(
        &client,
        &app,
        "diamond",
        "completed",
        Duration::from_secs(60),
    )
    .await;

    assert_eq!(
        journaled(&client, "diamond %", "handle").await,
        (102, 102),
        "each of the 102 steps ran once"
    );
    assert_eq!(journaled(&client, "diamond %", "end").await, (102, 102));
    assert!(
        before(
            &client,
            ("diamond fetch", "end"),
            ("diamond work %", "handle")
        )
        .await,
        "a work step started before fetch ended"
    );
    assert!(
        before(
            &client,
            ("diamond work %", "end"),
            ("diamond report", "handle")
        )
        .await,
        "the report started before every work step ended"
    );
    let report = result(&client, wf, "report").await;
    assert_eq!(report["sum"], 5050, "{report}");
    assert_eq!(
        report["results"],
        serde_json::json!((1..=100).collect::<Vec<_>>()),
        "the fan-in reads every result, in member order"
    );
    assert_eq!(result(&client, wf, "fetch").await["rows"], 100);

    let progress = client
        .query_one(
            "SELECT p.percent, p.note FROM drover.job_progress p \
             JOIN drover.workflow_steps s ON s.id = p.job_id WHERE s.wf = $1 AND s.node = 'fetch'",
            &[&wf],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            progress.get::<_, i16>(0),
            progress.get::<_, Option<String>>(1)
        ),
        (50, Some("half".into())),
        "fetch's progress is kept"
    );

    assert_eq!(
        nodes(&client, wf).await,
        ["fetch completed", "report completed", "work completed"]
    );
    assert_eq!(step_states(&client, wf).await, "completed=102");
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.jobs").await,
        0,
        "a completed workflow leaves no job behind"
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        0
    );

    stop_master(&app, master).await;
    db.stop().await;
}

/// Retries failed step `step` of workflow `wf` from the console served at `port`, as an operator
/// (the local environment, where no operateDrover gate is defined) with a browser's session.
fn retry_from_the_console(port: u16, wf: i64, step: i64) {
    let session = session(port, &format!("/drover/workflows/{wf}"));
    let path = format!("/drover/workflows/{wf}/steps/{step}/retry");
    let (status, head, body) = post_form(port, &path, "", &session);
    assert!(
        status == 302 && head.contains(&format!("/drover/workflows/{wf}")),
        "POST {path}: {status}\n{head}\n{}",
        body.chars().take(3000).collect::<String>()
    );
}

/// Scenario 2: `boom` fails (cancel, the default): its dependants are cancelled, transitively,
/// and never run; `bad` fails under `continue`: its dependant runs. The workflow failed (a
/// failure under `continue` fails it too). With the door open, both failed steps retried from
/// the console run again, the cancelled dependants run after them, and the workflow completes.
async fn a_failure_cancels_its_dependants_or_lets_them_go_on_and_a_retry_from_the_console_lets_the_rest_finish(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let (app, master) = app_with_master(&db, laravel, 2, &[("SESSION_DRIVER", "file")]).await;
    let client = db.client().await;
    eval(
        &app,
        r#"Drover\Drover::workflow('policies')
               ->add('boom', new App\Jobs\DoorJob('policies boom'))
               ->add('after-boom', new App\Jobs\WorkflowStepJob('policies after-boom'), after: 'boom')
               ->add('after-that', new App\Jobs\WorkflowStepJob('policies after-that'), after: 'after-boom')
               ->add('bad', new App\Jobs\DoorJob('policies bad'), onFailure: 'continue')
               ->add('after-bad', new App\Jobs\WorkflowStepJob('policies after-bad'), after: 'bad')
               ->dispatch();"#,
    );
    let wf = wait_workflow(&client, &app, "policies", "failed", Duration::from_secs(30)).await;
    assert_eq!(
        nodes(&client, wf).await,
        [
            "after-bad completed",
            "after-boom cancelled (boom)",
            "after-that cancelled (boom)",
            "bad failed",
            "boom failed",
        ]
    );
    for (label, runs) in [
        ("policies boom", 1),
        ("policies bad", 1),
        ("policies after-bad", 1),
        ("policies after-boom", 0),
        ("policies after-that", 0),
    ] {
        assert_eq!(
            journaled(&client, label, "handle").await.1,
            runs,
            "{label} ran {runs} times"
        );
    }
    assert!(
        before(
            &client,
            ("policies bad", "failed_hook"),
            ("policies after-bad", "handle")
        )
        .await,
        "after-bad started before bad failed"
    );
    // Laravel's failer logged both before the worker reported the failure. (`public.`: the role
    // `drover`'s search_path finds drover.failed_jobs first.)
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        2,
        "both failures are in Laravel's failed_jobs"
    );
    std::fs::write(app.storage_dir().join("door-open"), "").unwrap();
    let failed: Vec<i64> = client
        .query(
            "SELECT id FROM drover.workflow_steps WHERE wf = $1 AND state = 'failed' ORDER BY node",
            &[&wf],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(failed.len(), 2);
    // `boom` from the console; `bad` with Laravel's own `queue:retry` of its failed_jobs record,
    // which pushes its payload back raw: the driver retries it in its workflow.
    let (_console, port) = serve(&app, "local", false);
    retry_from_the_console(port, wf, failed[1]);
    let uuid: String = client
        .query_one(
            "SELECT uuid FROM public.failed_jobs WHERE payload LIKE '%policies bad%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    app.artisan(&["queue:retry", &uuid]);
    wait_workflow(
        &client,
        &app,
        "policies",
        "completed",
        Duration::from_secs(30),
    )
    .await;
    for (label, runs) in [
        ("policies boom", 2),
        ("policies bad", 2),
        ("policies after-bad", 1),
        ("policies after-boom", 1),
        ("policies after-that", 1),
    ] {
        assert_eq!(
            journaled(&client, label, "handle").await.1,
            runs,
            "{label} ran {runs} times"
        );
    }
    assert!(
        before(
            &client,
            ("policies boom", "handle"),
            ("policies after-boom", "handle")
        )
        .await
            && before(
                &client,
                ("policies after-boom", "end"),
                ("policies after-that", "handle")
            )
            .await,
        "a cancelled dependant ran before the retried step it depends on ended"
    );
    assert_eq!(
        nodes(&client, wf).await,
        [
            "after-bad completed",
            "after-boom completed",
            "after-that completed",
            "bad completed",
            "boom completed",
        ]
    );
    assert_eq!(step_states(&client, wf).await, "completed=5");
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.failed_jobs").await,
        0,
        "the retried steps left drover.failed_jobs"
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        0,
        "the console's retry forgot Laravel's failed_jobs record, as queue:retry does"
    );

    stop_master(&app, master).await;
    db.stop().await;
}

/// Scenario 3: after `begin`, `timer` waits 2 s and `approval` waits for the signal `approved`,
/// while eight 0.7 s jobs keep both of the pool's workers busy. While they wait the workflow has
/// no leased job and both workers run the other jobs; `timer` starts 2 s or more after `begin`
/// ended; `approval` does not run on idle workers until the signal, then reads its data.
async fn steps_waiting_for_a_time_or_a_signal_hold_no_worker_while_the_pool_runs_other_jobs(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let (app, master) = app_with_master(&db, laravel, 2, &[]).await;
    let client = db.client().await;
    eval(
        &app,
        r#"Drover\Drover::workflow('waits')
               ->add('begin', new App\Jobs\WorkflowStepJob('waits begin'))
               ->add('timer', new App\Jobs\WorkflowStepJob('waits timer'), after: 'begin', wait: 2)
               ->add('approval', new App\Jobs\WorkflowSignalJob('waits approval', 'approved'), after: 'begin', signal: 'approved')
               ->add('finish', new App\Jobs\WorkflowStepJob('waits finish'), after: ['timer', 'approval'])
               ->dispatch();
           foreach (range(1, 8) as $i) { App\Jobs\NapJob::dispatch("waits busy $i", 700); }"#,
    );
    let wf = wait_workflow(&client, &app, "waits", "running", Duration::from_secs(10)).await;

    // Sampled until the timer is due: whether the timer still waits, and the workflow's leased
    // jobs, read by one statement (a lease taken at the due time is not in its snapshot).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut waiting_samples = 0;
    loop {
        let row = client
            .query_one(
                "SELECT n.due_at IS NOT NULL, coalesce(clock_timestamp() < n.due_at, false),
                        (SELECT count(*) FROM drover.jobs WHERE wf = $1 AND lease_token IS NOT NULL)
                 FROM drover.workflow_nodes n WHERE n.wf = $1 AND n.name = 'timer'",
                &[&wf],
            )
            .await
            .unwrap();
        let (released, waiting, leased): (bool, bool, i64) = (row.get(0), row.get(1), row.get(2));
        if waiting {
            waiting_samples += 1;
            assert_eq!(leased, 0, "a waiting step holds a lease");
            if waiting_samples == 1 {
                // Asked while the timer waits (conclusive only if it still waited once the
                // answer came: a loaded machine may take its 2 s to start artisan).
                let status = status(&app);
                let still: bool = client
                    .query_one(
                        "SELECT clock_timestamp() < due_at FROM drover.workflow_nodes \
                         WHERE wf = $1 AND name = 'timer'",
                        &[&wf],
                    )
                    .await
                    .unwrap()
                    .get(0);
                assert!(
                    !still || status["workflows"]["nodes_waiting_for_time"] == 1,
                    "drover:status counts the timer as waiting: {status:#}"
                );
            }
        } else if released {
            break;
        }
        assert!(Instant::now() < deadline, "the timer was never released");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        waiting_samples >= 5,
        "{waiting_samples} samples while the timer waited"
    );

    // The timer and the other jobs ran; the approval waits, on idle workers, for its signal.
    let deadline = Instant::now() + Duration::from_secs(20);
    while journaled(&client, "waits %", "end").await.0 < 10 {
        assert!(
            Instant::now() < deadline,
            "the timer and the busy jobs did not end: {:?}",
            nodes(&client, wf).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        journaled(&client, "waits approval", "handle").await.1,
        0,
        "the approval ran without its signal"
    );
    assert!(nodes(&client, wf)
        .await
        .contains(&"approval waiting".to_string()));
    let jobs: i64 = client
        .query_one("SELECT count(*) FROM drover.jobs WHERE wf = $1", &[&wf])
        .await
        .unwrap()
        .get(0);
    assert_eq!(jobs, 0, "a step waiting for a signal has no job");
    let status = status(&app);
    assert_eq!(
        (
            &status["workflows"]["nodes_waiting_for_signal"],
            &status["workflows"]["nodes_waiting_for_time"]
        ),
        (&serde_json::json!(1), &serde_json::json!(0)),
        "drover:status counts the approval as waiting for its signal: {status:#}"
    );
    let took = eval(
        &app,
        r#"App\Support\Journal::record('waits signal', 'sent', 0);
           return Drover\Drover::signal('waits', 'approved', ['by' => 'ana']);"#,
    );
    assert_eq!(took.trim(), "1", "one workflow took the signal");
    wait_workflow(&client, &app, "waits", "completed", Duration::from_secs(20)).await;

    assert!(
        client
            .query_one(
                "SELECT (SELECT min(at) FROM journal WHERE label = 'waits timer' AND event = 'handle')
                      - (SELECT max(at) FROM journal WHERE label = 'waits begin' AND event = 'end')
                      >= interval '2 seconds'",
                &[],
            )
            .await
            .unwrap()
            .get::<_, bool>(0),
        "the timer started less than 2 s after begin ended"
    );
    // Every worker of the pool ran other jobs while the timer waited.
    let busy_workers = count(
        &client,
        "SELECT count(DISTINCT pid) FROM journal WHERE label LIKE 'waits busy %' AND event = 'handle'
           AND at > (SELECT max(at) FROM journal WHERE label = 'waits begin' AND event = 'end')
           AND at < (SELECT min(at) FROM journal WHERE label = 'waits timer' AND event = 'handle')",
    )
    .await;
    assert_eq!(
        busy_workers, 2,
        "both workers ran other jobs while the timer waited"
    );
    assert!(
        before(
            &client,
            ("waits signal", "sent"),
            ("waits approval", "handle")
        )
        .await,
        "the approval started before its signal"
    );
    assert_eq!(
        result(&client, wf, "approval").await,
        serde_json::json!({"by": "ana"})
    );
    assert!(
        before(&client, ("waits timer", "end"), ("waits finish", "handle")).await
            && before(
                &client,
                ("waits approval", "end"),
                ("waits finish", "handle")
            )
            .await,
        "finish started before both waits ended"
    );
    assert_eq!(journaled(&client, "waits %", "handle").await, (12, 12));
    assert_eq!(step_states(&client, wf).await, "completed=4");

    stop_master(&app, master).await;
    db.stop().await;
}

/// Scenario 4: sixty steps that write to the application's database and complete inside their
/// own transaction (ExactlyOnceEffectJob), in layers seed → a (20) → b (20) and c (18) → sink.
/// Mid-workflow the master is SIGKILLed (its workers die with it) and started again, then
/// PostgreSQL is restarted. Every step's effect exists exactly once, and no step (any attempt)
/// started before every attempt of its dependencies ended. The journal goes to its own
/// connection (autocommitted), so a rolled-back attempt's start and end are kept.
async fn a_master_sigkilled_and_the_database_restarted_mid_workflow_lose_no_step_run_none_twice_and_none_early(
    laravel: Laravel,
) {
    let port = free_port();
    let db = Cluster::start_with(|c| c.tcp_port = Some(port)).await;
    let port = port.to_string();
    let (app, master) = app_with_master(
        &db,
        laravel,
        2,
        &[
            ("DB_HOST", "127.0.0.1"),
            ("DB_PORT", &port),
            ("FIXTURE_RECORDS_HOST", "127.0.0.1"),
            ("FIXTURE_RECORDS_PORT", &port),
            ("DROVER_LEASE", "3"),
        ],
    )
    .await;
    let mut client = db.client().await;
    eval(
        &app,
        r#"$layer = fn (string $node, int $n) => array_map(fn ($i) => new App\Jobs\ExactlyOnceEffectJob("faults $node $i", 100), range(1, $n));
           Drover\Drover::workflow('faults')
               ->add('seed', new App\Jobs\ExactlyOnceEffectJob('faults seed 1', 100))
               ->addMany('a', $layer('a', 20), after: 'seed')
               ->addMany('b', $layer('b', 20), after: 'a')
               ->addMany('c', $layer('c', 18), after: 'a')
               ->add('sink', new App\Jobs\ExactlyOnceEffectJob('faults sink 1', 100), after: ['b', 'c'])
               ->dispatch();"#,
    );
    let effects = "SELECT count(*) FROM effects WHERE label LIKE 'faults %'";
    let running =
        "SELECT count(*) FROM drover.workflows WHERE name = 'faults' AND state = 'running'";

    // The master SIGKILLed once 8 steps wrote their effect, and started again.
    wait_at_least(&client, effects, 8).await;
    let mut master = master;
    master.kill().unwrap();
    master.wait().unwrap();
    let at_kill = (count(&client, effects).await, count(&client, running).await);
    let master = start_master(&app, 2).await;

    // PostgreSQL restarted once 35 did.
    wait_at_least(&client, effects, 35).await;
    let at_restart = (count(&client, effects).await, count(&client, running).await);
    drop(client);
    let data_dir = db.pg.as_ref().unwrap().data_dir().to_path_buf();
    pg_ctl(&data_dir, &["restart", "-m", "fast", "-l", "/dev/null"]);
    client = reconnect(&db).await;
    let wf = wait_workflow(
        &client,
        &app,
        "faults",
        "completed",
        Duration::from_secs(90),
    )
    .await;

    // Attempts that began and were cut off by a fault (their effect rolled back).
    let cut = count(
        &client,
        "SELECT count(*) - count(DISTINCT label) FROM journal WHERE label LIKE 'faults %' AND event = 'effect'",
    )
    .await;
    eprintln!(
        "{laravel:?}: effects (and whether the workflow ran) as the master was killed: {at_kill:?}, \
         as the database restarted: {at_restart:?}; attempts cut off: {cut}"
    );
    assert!(
        at_kill.0 < 60 && at_kill.1 == 1 && at_restart.0 < 60 && at_restart.1 == 1,
        "each fault found the workflow running: {at_kill:?} {at_restart:?}"
    );
    assert!(
        cut > 0,
        "the faults cut off no running step (else this test proves nothing)"
    );
    let twice: Vec<String> = client
        .query(
            "SELECT label || ' x' || count(*) FROM effects WHERE label LIKE 'faults %' \
             GROUP BY label HAVING count(*) <> 1 ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        twice.is_empty(),
        "effects written more than once: {twice:?}"
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(DISTINCT label) FROM effects WHERE label LIKE 'faults %'"
        )
        .await,
        60,
        "every step's effect exists"
    );
    // Every attempt of a step started after every attempt of each of its dependencies ended.
    let early: Vec<String> = client
        .query(
            "WITH deps(node, dep) AS (VALUES ('a', 'seed'), ('b', 'a'), ('c', 'a'), ('sink', 'b'), ('sink', 'c')),
                  starts AS (SELECT label, split_part(label, ' ', 2) AS node, min(at) AS at FROM journal
                             WHERE label LIKE 'faults %' AND event IN ('processing', 'effect') GROUP BY label),
                  ends AS (SELECT split_part(label, ' ', 2) AS node, max(at) AS at FROM journal WHERE label LIKE 'faults %' AND event = 'end' GROUP BY 1)
             SELECT s.label || ' started before ' || d.dep || ' ended'
             FROM starts s JOIN deps d ON d.node = s.node LEFT JOIN ends e ON e.node = d.dep
             WHERE e.at IS NULL OR s.at <= e.at ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(early.is_empty(), "{early:?}");
    assert_eq!(
        journaled(&client, "faults %", "end").await.0,
        60,
        "every step ended"
    );
    assert_eq!(step_states(&client, wf).await, "completed=60");
    assert_eq!(
        count(&client, "SELECT count(*) FROM public.failed_jobs").await,
        0
    );

    stop_master(&app, master).await;
    // The server pg_ctl started is not the one the cluster's handle stops.
    pg_ctl(&data_dir, &["stop", "-m", "fast"]);
    db.stop().await;
}

/// Waits (60 s at most) until `sql` (one bigint) reaches `n`.
async fn wait_at_least(client: &Client, sql: &str, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(client, sql).await < n {
        assert!(Instant::now() < deadline, "{sql} stayed under {n} for 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

on_every_laravel!(
    a_diamond_fans_out_a_hundred_steps_once_each_and_its_fan_in_reads_all_their_results,
    a_failure_cancels_its_dependants_or_lets_them_go_on_and_a_retry_from_the_console_lets_the_rest_finish,
    steps_waiting_for_a_time_or_a_signal_hold_no_worker_while_the_pool_runs_other_jobs,
    a_master_sigkilled_and_the_database_restarted_mid_workflow_lose_no_step_run_none_twice_and_none_early,
);
