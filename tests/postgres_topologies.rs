//! The PostgreSQL that production teams run, with the real parts: PgBouncer (Debian's) in
//! session and transaction mode, and a primary with a synchronous streaming standby that is
//! promoted when the primary dies. Jobs record their start and end in `public.runs`; each scenario
//! asserts over those records that nothing was lost, nothing completed twice and no two
//! executions of one job overlapped (docs/postgres-topologies.md says what each topology needs).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::postgres::{connect, PgBouncer, PoolMode, Replicated};
use support::runs::*;
use support::*;

/// Waits until each of `ids` has finished, stops the master and asserts over the records that
/// each finished exactly once, no two executions of one job overlapped and no settle was
/// dropped; returns the master's log.
async fn drain_and_check(runs: &tokio_postgres::Client, ids: &[i64], drover: Drover) -> String {
    wait_count(
        runs,
        &format!(
            "SELECT least(count(DISTINCT job_id), {}) FROM runs WHERE event = 'finish'",
            ids.len()
        ),
        ids.len() as i64,
        Duration::from_secs(90),
    )
    .await;
    let log = drover.stop().await;
    let execs = executions(runs).await;
    assert_each_finished_once(&execs, ids);
    assert_no_overlap(&execs, &BTreeMap::new());
    assert!(
        !log.contains("so it is dropped"),
        "a settle was dropped:\n{log}"
    );
    log
}

/// A setting as a pooled server connection has it, asked through the pooler.
async fn setting_through(url: &str, name: &str) -> String {
    let client = connect(url).await;
    let rows = client.simple_query(&format!("SHOW {name}")).await.unwrap();
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn behind_pgbouncer_in_transaction_mode_the_master_is_refused_by_name_and_leaks_no_setting() {
    let db = Cluster::start().await;
    let socket_dir = db.pg.as_ref().unwrap().data_dir().display().to_string();
    let pooler = PgBouncer::start(&socket_dir, PoolMode::Transaction);
    let before: Vec<String> = pooled_settings(&pooler.url()).await;

    let mut drover = Drover::start(Some(&pooler.url()), Some(db.dsn()), &["--workers", "1"]);
    let status = drover.wait_exit(Duration::from_secs(30)).await;
    let log = drover.log_text();
    // 78: only an operator can change it, so the units do not start it again (RestartPreventExitStatus).
    assert_eq!(status.code(), Some(78), "{log}");
    let named = format!("PostgreSQL at 127.0.0.1:{}/drover is reached through a connection pooler in transaction (or statement) mode", pooler.port);
    for needle in [
        named.as_str(),
        "pool_mode = session",
        "docs/postgres-topologies.md",
    ] {
        assert!(log.contains(needle), "{needle:?} not in:\n{log}");
    }
    // Nothing of the master's session (its timeouts, its planner settings) stayed behind on the
    // pool's server connections for the application's clients to inherit.
    assert_eq!(pooled_settings(&pooler.url()).await, before);
    db.stop().await;
}

/// The settings the master sets on its own sessions, as the pool's server connections have them.
async fn pooled_settings(url: &str) -> Vec<String> {
    let mut values = Vec::new();
    for name in [
        "statement_timeout",
        "idle_in_transaction_session_timeout",
        "enable_seqscan",
        "enable_sort",
    ] {
        values.push(setting_through(url, name).await);
    }
    values
}

#[tokio::test]
async fn drover_migrate_and_four_concurrent_producers_work_through_a_transaction_pooler() {
    let db = Cluster::start_empty().await;
    let socket_dir = db.pg.as_ref().unwrap().data_dir().display().to_string();
    let pooler = PgBouncer::start(&socket_dir, PoolMode::Transaction);
    // Twice: the second finds the pool's server connections used by the first.
    let (ok, said) = try_drover_migrate(&pooler.url());
    let all = format!("{} migration(s) applied", drover_broker::migrate::latest());
    assert!(ok && said.contains(&all), "{said}");
    let (ok, said) = try_drover_migrate(&pooler.url());
    assert!(ok && said.contains("0 migration(s) applied"), "{said}");
    let direct = db.client().await;
    create_runs_table(&direct).await;

    // Four producers at once, each through the pooler: single inserts, multi-row inserts and
    // grouped enqueues (drover.enqueue), 5 rounds each.
    let dsn = pooler.dsn();
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let dsn = dsn.clone();
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for round in 0..5 {
                    let first = (p * 5 + round) * 100;
                    let options = match round % 3 {
                        0 => vec![format!("--first-seq={first}")],
                        1 => vec![format!("--first-seq={first}"), "--batch=10".into()],
                        _ => vec![format!("--first-seq={first}"), "--groups=3".into()],
                    };
                    let options: Vec<&str> = options.iter().map(String::as_str).collect();
                    ids.extend(enqueue(&dsn, 20, &options));
                }
                ids
            })
        })
        .collect();
    let mut ids: Vec<i64> = producers
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 400, "every enqueue returned its own id");

    // The master itself connects directly, as docs/postgres-topologies.md says.
    let drover = db.drover(&["--workers", "2"]);
    wait_count(
        &direct,
        "SELECT count(*) FROM runs WHERE event = 'finish'",
        400,
        Duration::from_secs(60),
    )
    .await;
    drover.stop().await;
    assert_exactly_once(&direct, &ids).await;
    db.stop().await;
}

#[tokio::test]
async fn behind_pgbouncer_in_session_mode_master_restarts_and_a_pool_reconnect_lose_nothing() {
    const JOBS: usize = 600;
    let db = Cluster::start().await;
    let socket_dir = db.pg.as_ref().unwrap().data_dir().display().to_string();
    let pooler = PgBouncer::start(&socket_dir, PoolMode::Session);
    let ids = enqueue(&pooler.dsn(), JOBS, &["--ms=5", "--batch=100"]);
    let client = db.client().await;
    let args = ["--workers", "3", "--lease", "4s"];
    let drover = Drover::start(Some(&pooler.url()), Some(db.dsn()), &args);
    wait_finished_at_least(&client, 100).await;
    // A deploy's restart, twice: the new master's statements must not meet the old one's.
    drover.stop().await;
    let drover = Drover::start(Some(&pooler.url()), Some(db.dsn()), &args);
    wait_finished_at_least(&client, 250).await;
    drover.stop().await;
    let drover = Drover::start(Some(&pooler.url()), Some(db.dsn()), &args);
    wait_finished_at_least(&client, 350).await;
    // The pooler closes its server connections as their clients let them go.
    pooler.admin("RECONNECT drover");
    drain_and_check(&client, &ids, drover).await;
    db.stop().await;
}

#[tokio::test]
async fn a_standby_given_as_the_only_url_is_named_as_one() {
    let pair = Replicated::start().await;
    let standby = pair.standby.display().to_string();
    let named = format!(
        "PostgreSQL at unix socket {standby}:5432/drover is a read-only standby (in recovery); point the URL at the primary, or list both hosts with target_session_attrs=read-write"
    );
    let mut drover = Drover::start(Some(&pair.standby_url()), None, &["--workers", "1"]);
    let status = drover.wait_exit(Duration::from_secs(30)).await;
    let log = drover.log_text();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains(&named), "{named:?} not in:\n{log}");
    let (ok, said) = try_drover_migrate(&pair.standby_url());
    assert!(!ok && said.contains(&named), "{said}");
    // With read-write asked for explicitly, the same words.
    let (ok, said) = try_drover_migrate(&format!(
        "{} target_session_attrs=read-write",
        pair.standby_url()
    ));
    assert!(!ok && said.contains(&named), "{said}");
}

/// Sets `default_transaction_read_only` for the whole server (every session's next transaction).
async fn read_only(admin: &tokio_postgres::Client, on: bool) {
    let value = if on { "on" } else { "off" };
    for sql in [
        "SET default_transaction_read_only = off".to_string(),
        format!("ALTER SYSTEM SET default_transaction_read_only = {value}"),
        "SELECT pg_reload_conf()".to_string(),
    ] {
        admin.batch_execute(&sql).await.unwrap();
    }
}

#[tokio::test]
async fn a_server_that_turns_read_only_mid_run_keeps_every_settle_until_it_takes_writes_again() {
    const JOBS: usize = 600;
    let db = Cluster::start().await;
    let records = Cluster::start().await;
    let ids = enqueue(db.dsn(), JOBS, &["--ms=5", "--batch=100"]);
    let drover = Drover::start(
        Some(db.url()),
        Some(records.dsn()),
        &["--workers", "3", "--lease", "6s"],
    );
    let runs = records.client().await;
    wait_finished_at_least(&runs, 150).await;
    let admin = db.client().await;
    // Every statement of the master now fails with 25006 (read_only_sql_transaction), and each
    // reconnect finds a session that cannot write.
    read_only(&admin, true).await;
    drover.wait_log("keeping", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    read_only(&admin, false).await;
    let log = drain_and_check(&runs, &ids, drover).await;
    assert!(
        log.contains("(SQLSTATE 25006)"),
        "no statement was refused as read-only:\n{log}"
    );
    assert!(log.contains("settling again after"), "{log}");
    assert_eq!(count(&admin, "SELECT count(*) FROM drover.jobs").await, 0);
    records.stop().await;
    db.stop().await;
}

/// The primary dies (`-m immediate`) mid-run and the standby is promoted; the master's URL
/// lists both hosts, the primary first, with `extra` (`target_session_attrs=…` or nothing).
///
/// The jobs record their start and end in another PostgreSQL that stays up: a record written to
/// the failing primary could be committed there and on the standby while its client is told the
/// connection broke (a commit in doubt), and the job, failing on that error, would run again
/// for a reason of the handler's, not drover's.
async fn failover_mid_run(extra: &str) {
    const JOBS: usize = 400;
    let pair = Replicated::start().await;
    let records = Cluster::start().await;
    let ids = enqueue(&pair.both_dsn(), JOBS, &["--ms=10", "--batch=100"]);
    let url = pair.both_url(extra);
    let drover = Drover::start(
        Some(&url),
        Some(records.dsn()),
        &["--workers", "4", "--lease", "5s"],
    );
    let runs = records.client().await;
    wait_finished_at_least(&runs, 100).await;

    let promoted = pair.fail_over();
    let client = connect(&pair.standby_url()).await;
    // Serving again: the master settles on the new primary.
    let left = "SELECT count(*) FROM drover.jobs";
    let at_promotion = count(&client, left).await;
    loop {
        if count(&client, left).await < at_promotion {
            break;
        }
        // About a tenth of a second on an idle host; the bound is a loaded one's, still half the
        // longest wait between connection attempts (10 s).
        assert!(
            promoted.elapsed() < Duration::from_secs(5),
            "the master settled nothing within 5 s of the promotion:\n{}",
            drover.log_text()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let resumed = promoted.elapsed();
    let log = drain_and_check(&runs, &ids, drover).await;
    eprintln!("serving again {resumed:?} after the promotion ({extra:?})");
    let standby = pair.standby.display().to_string();
    assert!(
        log.contains(&format!("at unix socket {standby}:5432/drover")),
        "no log line names the new primary:\n{log}"
    );
    assert_eq!(count(&client, "SELECT count(*) FROM drover.jobs").await, 0);
    // A deploy's `drover migrate` with the same URL passes over the dead host.
    let (ok, printed) = try_drover_migrate(&url);
    assert!(
        ok && printed.contains("0 migration(s) applied"),
        "{printed}"
    );
    records.stop().await;
}

#[tokio::test]
async fn the_primary_dies_mid_run_and_the_standby_is_promoted_with_a_plain_two_host_url() {
    failover_mid_run("").await;
}

#[tokio::test]
async fn the_primary_dies_mid_run_and_the_standby_is_promoted_with_target_session_attrs() {
    failover_mid_run("target_session_attrs=read-write").await;
}

/// The application's own connection through PgBouncer in transaction mode, four processes
/// dispatching at once: single dispatches, one inside `DB::transaction`, and `Queue::bulk`. The
/// master connects directly (drover.database names a direct connection in production).
async fn four_processes_dispatch_through_a_transaction_pooler_and_every_job_runs_once(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let socket_dir = db.pg.as_ref().unwrap().data_dir().display().to_string();
    let pooler = PgBouncer::start(&socket_dir, PoolMode::Transaction);
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "2".into()));
    let direct = app.env.clone();
    app.env.retain(|(k, _)| k != "DB_HOST" && k != "DB_PORT");
    app.env.push(("DB_HOST".into(), "127.0.0.1".into()));
    app.env.push(("DB_PORT".into(), pooler.port.to_string()));
    // Laravel's own statements are prepared natively by default (Laravel 8's connector prepares
    // `set names`), which a transaction pooler loses under concurrency: an application on one
    // emulates prepared statements, as teams configure it. drover's own writes prepare nothing.
    app.env
        .push(("FIXTURE_EMULATE_PREPARES".into(), "1".into()));
    let producers: Vec<_> = (0..4)
        .map(|p| {
            app.command(&[
                "app:eval",
                &format!(
                    r#"foreach (range(1, 20) as $i) {{ App\Jobs\OkJob::dispatch("p{p}-$i"); }}
                    Illuminate\Support\Facades\DB::transaction(fn () => App\Jobs\OkJob::dispatch("p{p}-tx"));
                    Illuminate\Support\Facades\Queue::connection('drover')->bulk(array_map(fn ($i) => new App\Jobs\OkJob("p{p}-bulk-$i"), range(1, 5)));"#
                ),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for producer in producers {
        succeeded(
            producer.wait_with_output().unwrap(),
            "a producer failed through the pooler",
        );
    }
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.jobs").await,
        104
    );

    app.env = direct;
    let master = start_master(&app, 2).await;
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(60),
    )
    .await;
    stop_master(&app, master).await;
    let mut ran = journal(&client, "handle").await;
    ran.sort();
    let mut want: Vec<String> = (0..4)
        .flat_map(|p| {
            (1..=20)
                .map(move |i| format!("p{p}-{i}"))
                .chain([format!("p{p}-tx")])
                .chain((1..=5).map(move |i| format!("p{p}-bulk-{i}")))
        })
        .collect();
    want.sort();
    assert_eq!(ran, want, "every dispatched job ran exactly once");
    db.stop().await;
}

/// The application and its master both name the pair as a team writes it (`DB_HOST=a,b`, the
/// application with libpq's `PGTARGETSESSIONATTRS=read-write`, the master given the same hosts by
/// `php artisan drover`). The primary dies while one process dispatches a job every 20 ms: each
/// dispatch that returned ran exactly once, none ran twice, and the application and the master go
/// on on the new primary. The jobs journal to a separate cluster, as `runs` is kept apart above.
async fn the_primary_fails_over_while_the_application_dispatches_and_each_dispatched_job_runs_once(
    laravel: Laravel,
) {
    const DISPATCHES: usize = 250;
    let pair = Replicated::start().await;
    let records = Cluster::start().await;
    let journal_db = records.client().await;
    journal_db
        .batch_execute(
            "CREATE TABLE public.journal (id bigserial PRIMARY KEY, label text NOT NULL, event text NOT NULL,
             attempt integer NOT NULL, connection text, pid integer NOT NULL,
             at timestamptz NOT NULL DEFAULT clock_timestamp())",
        )
        .await
        .unwrap();
    let hosts = format!("{},{}", pair.primary.display(), pair.standby.display());
    let records_host = records
        .pg
        .as_ref()
        .unwrap()
        .data_dir()
        .display()
        .to_string();
    let app = LaravelApp::on_host(
        &hosts,
        laravel,
        &[
            ("PGTARGETSESSIONATTRS", "read-write"),
            ("FIXTURE_RECORDS_HOST", &records_host),
            ("DROVER_PROCESSES", "2"),
        ],
    );
    let master = start_master(&app, 2).await;
    // A dispatch that throws is tried again under a new label: one whose commit was cut off may
    // still have been committed (and must then run once), which no client can tell.
    let producer = app
        .command(&[
            "app:eval",
            &format!(
                r#"foreach (range(1, {DISPATCHES}) as $i) {{
                    try {{ App\Jobs\OkJob::dispatch("d-$i"); echo "ok d-$i " . microtime(true) . "\n"; }}
                    catch (\Throwable $e) {{ echo "error d-$i " . microtime(true) . ' ' . str_replace("\n", ' ', $e->getMessage()) . "\n"; }}
                    usleep(20000);
                }}"#
            ),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The failover comes 40 dispatches in, counted as the producer makes them (run or waiting),
    // not by how fast the workers run them: on a loaded machine the workers lag the producer,
    // and waiting for 40 handled jobs let every dispatch return before the failover.
    let primary = connect(&pair.primary_url()).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let handled = count(
            &journal_db,
            "SELECT count(*) FROM journal WHERE event = 'handle'",
        )
        .await;
        let waiting = count(&primary, "SELECT count(*) FROM drover.jobs").await;
        if handled + waiting >= 40 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the producer dispatched {} jobs in 60 s",
            handled + waiting
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(primary);
    pair.fail_over();
    let out = succeeded(producer.wait_with_output().unwrap(), "the producer died");
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), DISPATCHES, "{printed}");
    let dispatched: Vec<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("ok "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("error "))
        .collect();
    let first_error = lines.iter().position(|l| l.starts_with("error "));
    let last_error = lines.iter().rposition(|l| l.starts_with("error "));
    let (Some(first_error), Some(last_error)) = (first_error, last_error) else {
        panic!("no dispatch met the failover: the test did not test it:\n{printed}");
    };
    assert!(
        first_error > 0 && DISPATCHES - last_error > 50,
        "the application dispatched before the failover and went on after it: {printed}"
    );
    let client = connect(&pair.standby_url()).await;
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(60),
    )
    .await;
    let log = stop_master(&app, master).await;
    let ran = journal(&journal_db, "handle").await;
    let mut times: BTreeMap<&str, usize> = BTreeMap::new();
    for label in &ran {
        *times.entry(label.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = times.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "jobs ran twice: {twice:?}\n{log}");
    let lost: Vec<&String> = dispatched
        .iter()
        .filter(|l| !times.contains_key(l.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "dispatched jobs never ran: {lost:?}\n{log}"
    );
    let standby = pair.standby.display().to_string();
    assert!(
        log.contains(&format!("at unix socket {standby}:5432/drover")),
        "no log line names the new primary:\n{log}"
    );
    assert!(
        !log.contains("so it is dropped"),
        "a settle was dropped:\n{log}"
    );
    // When a line was printed (PHP's microtime): the application could not dispatch from its
    // first failed dispatch to the next one that returned.
    let at = |line: &str| -> f64 { line.split(' ').nth(2).unwrap().parse().unwrap() };
    eprintln!(
        "{} of {DISPATCHES} dispatches returned; {} failed in {:.2} s without a writable primary (the first: {}); the master logged {} connections (at start and after the promotion); {} claim(s) lost their answer and had their jobs given back",
        dispatched.len(),
        errors.len(),
        at(lines[last_error + 1]) - at(lines[first_error]),
        errors[0],
        log.matches("connected to PostgreSQL at").count(),
        log.matches("but its answer was lost").count(),
    );
    records.stop().await;
}

on_every_laravel!(
    four_processes_dispatch_through_a_transaction_pooler_and_every_job_runs_once,
    the_primary_fails_over_while_the_application_dispatches_and_each_dispatched_job_runs_once,
);
