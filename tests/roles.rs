//! Least-privilege database roles (docs/postgres-roles.md): the master serves with only
//! drover_master's rights and cannot touch the application's tables; the application enqueues
//! with only drover_producer's — plain, grouped and limited jobs — and the dashboard reads with
//! drover_reader's; a role without a master's rights is refused at start, naming each and the
//! fix, and a master that would have to migrate without the right says who should. Both ways a
//! team gets the roles are exercised: `drover migrate --create-roles`, and the SQL `drover migrate
//! --print-roles` gives a DBA.

mod support;

use std::process::Command;
use std::time::Duration;

use support::serve::{get_answered, serve};
use support::*;
use tokio_postgres::error::SqlState;

/// `url` (a libpq key=value string of the test cluster) as login role `role`.
fn as_role(url: &str, role: &str) -> String {
    assert!(url.contains("user=drover"), "{url}");
    url.replace("user=drover", &format!("user={role}"))
}

fn drover_migrate_with(url: &str, flag: &str) -> String {
    let out = run_ok(
        Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["migrate", "--database-url", url, flag])
            .env("DROVER_LOG", "warn"),
        "drover migrate",
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The SQLSTATE of `sql` run on `client`, which must fail.
async fn refused(client: &tokio_postgres::Client, sql: &str) -> SqlState {
    let err = client
        .batch_execute(sql)
        .await
        .expect_err(&format!("{sql} should be refused"));
    err.code()
        .cloned()
        .unwrap_or_else(|| panic!("{sql}: {err}"))
}

/// What an error page says went wrong (its SQLSTATE lines), not its kilobytes of styles.
fn why(page: &str) -> String {
    let found: Vec<&str> = page
        .match_indices("SQLSTATE")
        .map(|(at, _)| &page[at..page.len().min(at + 300)])
        .take(2)
        .collect();
    if found.is_empty() {
        page.chars().take(500).collect()
    } else {
        found.join("\n")
    }
}

/// A master from a configuration file, on `url`, its handler's workers writing as the
/// application (the cluster's owner) does.
fn master_on(db: &Cluster, url: &str, auto_migrate: bool) -> Drover {
    let config = serde_json::json!({
        "version": 1,
        "database_url": url,
        "auto_migrate": auto_migrate,
        "pools": [{
            "name": "default", "queues": ["default"], "processes": 2,
            "command": ["php", root().join("php-client/bin/drover-worker"),
                        root().join("tests/fixtures/handler.php")],
        }],
    });
    let path = db
        .dir
        .path()
        .join(format!("drover-{}.json", std::process::id()));
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    Drover::start_worker(
        None,
        Some(db.dsn()),
        &["--config", path.to_str().unwrap()],
        &[],
    )
}

/// `master` exits unsuccessfully at start, its log saying each of `said`.
async fn refused_at_start(mut master: Drover, said: &[&str]) {
    let status = master.wait_exit(Duration::from_secs(30)).await;
    let log = master.log_text();
    assert!(!status.success(), "{log}");
    for part in said {
        assert!(log.contains(part), "{part:?} not in:\n{log}");
    }
}

#[tokio::test]
async fn the_master_serves_with_only_its_role_and_cannot_touch_the_applications_tables() {
    let db = Cluster::start().await;
    let said = drover_migrate_with(db.url(), "--create-roles");
    assert!(
        said.contains("roles drover_master, drover_producer, drover_reader, drover_operator ready"),
        "{said}"
    );
    let owner = db.client().await;
    owner
        .batch_execute(
            "CREATE ROLE queue_master LOGIN IN ROLE drover_master;
             CREATE ROLE app_producer LOGIN IN ROLE drover_producer;
             CREATE TABLE public.users (id int PRIMARY KEY, email text);
             INSERT INTO public.users VALUES (1, 'a@example.com');",
        )
        .await
        .unwrap();

    // The application enqueues as a producer: plain jobs, grouped ones and limited ones (the last
    // two through the enqueue functions, which run with their owner's rights).
    let producer_dsn = db.dsn().replace("user=drover", "user=app_producer");
    let mut ids = enqueue(&producer_dsn, 6, &[]);
    ids.extend(enqueue(&producer_dsn, 4, &["--groups=2", "--first-seq=7"]));
    ids.extend(enqueue(
        &producer_dsn,
        4,
        &["--limit-key=k", "--limit-max=1", "--first-seq=11"],
    ));
    let master = master_on(&db, &as_role(db.url(), "queue_master"), true);
    wait_finished_at_least(&owner, ids.len() as i64).await;
    assert_exactly_once(&owner, &ids).await;
    let log = master.stop().await;
    assert!(!log.contains("permission denied"), "{log}");

    // A job completing inside its own transaction, and recording a step, on the application's
    // connection: a producer may call the functions (docs/exactly-once.md), which are fenced by
    // the lease, but not touch what they write.
    let app = drover_broker::connect::connect_once(&as_role(db.url(), "app_producer"))
        .await
        .unwrap();
    let fenced = app
        .execute("SELECT drover.complete_within(1, 42)", &[])
        .await
        .unwrap_err();
    assert_eq!(
        fenced.code().map(|c| c.code()),
        Some("DRL01"),
        "a job not held under that token: {fenced}"
    );
    let kept: String = app
        .query_one("SELECT drover.record_step('u-1', 'charge', 'ch_1')", &[])
        .await
        .unwrap()
        .get(0);
    let again: Option<String> = app
        .query_one("SELECT drover.step_result('u-1', 'charge')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!((kept.as_str(), again.as_deref()), ("ch_1", Some("ch_1")));
    // A workflow (docs/workflows.md): the application dispatches and signals it through the
    // functions; a result or progress needs the step's lease; cancel and retry are an operator's.
    app.batch_execute("BEGIN").await.unwrap();
    let wf: i64 = app
        .query_one(
            "SELECT drover.workflow_create('roles', true, '[{\"name\":\"a\"}]')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    app.execute(
        "SELECT drover.workflow_add_steps($1, '{a}', '{default}', '{p}', NULL, NULL)",
        &[&wf],
    )
    .await
    .unwrap();
    app.execute("SELECT drover.workflow_start($1)", &[&wf])
        .await
        .unwrap();
    app.batch_execute("ROLLBACK").await.unwrap();
    let took: i32 = app
        .query_one("SELECT drover.workflow_signal('nobody', 'go', NULL)", &[])
        .await
        .unwrap()
        .get(0);
    let unfenced: (bool, bool) = app
        .query_one(
            "SELECT drover.workflow_record_result(1, 42, '1'), drover.job_progress(1, 42, 50, 'half')",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!((took, unfenced), (0, (false, false)));
    for sql in [
        "SELECT * FROM drover.completions",
        "DELETE FROM drover.job_steps",
        "SELECT drover.workflow_cancel(1)",
        "SELECT * FROM drover.workflow_steps",
        "UPDATE drover.job_progress SET percent = 1",
    ] {
        let err = app.execute(sql, &[]).await.unwrap_err();
        assert_eq!(
            err.code().map(|c| c.code()),
            Some("42501"),
            "{sql}: {err:?}"
        );
    }

    let master_role = drover_broker::connect::connect_once(&as_role(db.url(), "queue_master"))
        .await
        .unwrap();
    for sql in [
        "SELECT * FROM public.users",
        "DELETE FROM public.runs",
        "DROP TABLE public.users",
        "CREATE TABLE public.mine (id int)",
        "CREATE TABLE drover.mine (id int)",
        "DROP TABLE drover.jobs",
        "DELETE FROM drover.schema_migrations",
    ] {
        assert_eq!(
            refused(&master_role, sql).await,
            SqlState::INSUFFICIENT_PRIVILEGE,
            "{sql}"
        );
    }
    // Compaction's one REINDEX: the master's, on a drained table of drover's only.
    let compacted: String = master_role
        .query_one("SELECT drover.reindex_drained('drover.jobs')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(compacted, "compacted");
    assert_eq!(
        refused(
            &master_role,
            "SELECT drover.reindex_drained('drover.nodes')"
        )
        .await,
        SqlState::INVALID_PARAMETER_VALUE
    );

    let producer = drover_broker::connect::connect_once(&as_role(db.url(), "app_producer"))
        .await
        .unwrap();
    for sql in [
        "SELECT * FROM public.users",
        "DELETE FROM drover.jobs",
        "UPDATE drover.jobs SET attempts = 0",
        "SELECT * FROM drover.failed_jobs",
        "SELECT * FROM drover.groups",
        "SELECT drover.reindex_drained('drover.jobs')",
        // Not the payloads of others' jobs, only what Laravel's size() counts.
        "SELECT payload FROM drover.jobs",
        "SELECT payload FROM drover.limit_waiting",
        // Not the columns the master's triggers trust (a limited job's slot, a group's head).
        "INSERT INTO drover.jobs (queue, payload, attempts) VALUES ('default', '{}', 0)",
        "INSERT INTO drover.jobs (id, queue, payload) VALUES (1, 'default', '{}')",
        // Not every held group at once.
        "SELECT drover.forget_held(NULL)",
    ] {
        assert_eq!(
            refused(&producer, sql).await,
            SqlState::INSUFFICIENT_PRIVILEGE,
            "{sql}"
        );
    }
    assert_eq!(
        refused(&producer, "SELECT drover.release_held(NULL)").await,
        SqlState::INVALID_PARAMETER_VALUE
    );
    let counted: i64 = producer
        .query_one(
            "SELECT (SELECT count(*) FROM drover.jobs WHERE queue = 'default' AND lease_token IS NULL)
                  + (SELECT count(*) FROM drover.group_jobs WHERE queue = 'default')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(counted, 0);

    // A reader (a dashboard that only looks) reads, and cannot enqueue: the enqueue functions run
    // with their owner's rights, so only the roles granted them may call them.
    owner
        .batch_execute("CREATE ROLE console LOGIN IN ROLE drover_reader")
        .await
        .unwrap();
    let reader = drover_broker::connect::connect_once(&as_role(db.url(), "console"))
        .await
        .unwrap();
    reader
        .batch_execute("SELECT payload FROM drover.jobs LIMIT 1")
        .await
        .unwrap();
    for sql in [
        "SELECT drover.enqueue('default', '{}', 0, NULL, false, NULL, NULL, 0::smallint, NULL)",
        "SELECT drover.release_held('x')",
        "DELETE FROM drover.jobs",
    ] {
        assert_eq!(
            refused(&reader, sql).await,
            SqlState::INSUFFICIENT_PRIVILEGE,
            "{sql}"
        );
    }
    // The functions that run with their owner's rights — the entry points that let a producer
    // enqueue grouped, limited and fair jobs without the tables behind them, the release of a
    // held group, compaction's REINDEX, a job's completion inside its own transaction and its
    // recorded steps (docs/exactly-once.md) — each with a search path nobody else can put
    // objects on:
    // a migration that replaces one must keep them so.
    let definers: Vec<(String, Vec<String>)> = owner
        .query(
            "SELECT proname::text, coalesce(proconfig, '{}') FROM pg_proc
              WHERE pronamespace = 'drover'::regnamespace AND prosecdef ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let names: Vec<&str> = definers.iter().map(|d| d.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "complete_within",
            "enqueue",
            "enqueue_fair",
            "enqueue_limited",
            "held_uuids",
            "job_progress",
            "record_step",
            "reindex_drained",
            "release_held",
            "step_result",
            "workflow_add_steps",
            "workflow_cancel",
            "workflow_create",
            "workflow_of",
            "workflow_record_result",
            "workflow_results",
            "workflow_retry_payload",
            "workflow_retry_step",
            "workflow_signal",
            "workflow_signal_data",
            "workflow_start",
            "workflow_steps_deleted"
        ]
    );
    for (name, config) in &definers {
        assert!(
            config
                .iter()
                .any(|c| c == "search_path=pg_catalog, pg_temp"),
            "{name}: {config:?}"
        );
    }
    db.stop().await;
}

#[tokio::test]
async fn a_role_without_a_masters_rights_is_refused_by_name_until_a_dba_runs_the_printed_sql() {
    let db = Cluster::start().await;
    let owner = db.client().await;
    owner
        .batch_execute("CREATE ROLE stranger LOGIN")
        .await
        .unwrap();
    let stranger = as_role(db.url(), "stranger");
    refused_at_start(
        master_on(&db, &stranger, true),
        &[
            "the master's database role \"stranger\" lacks",
            "USAGE on schema drover",
            "GRANT drover_master TO \"stranger\"",
            "drover migrate --print-roles",
        ],
    )
    .await;

    // What a DBA does with the printed SQL (it connects nowhere to print it).
    let sql = run_ok(
        Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["migrate", "--print-roles"])
            .env_remove("DROVER_DATABASE_URL")
            .env_remove("DATABASE_URL"),
        "drover migrate --print-roles",
    );
    owner
        .batch_execute(&String::from_utf8_lossy(&sql.stdout))
        .await
        .unwrap();
    owner
        .batch_execute("GRANT drover_master TO stranger")
        .await
        .unwrap();
    let ids = enqueue(db.dsn(), 3, &[]);
    let master = master_on(&db, &stranger, true);
    wait_finished_at_least(&owner, ids.len() as i64).await;
    assert_exactly_once(&owner, &ids).await;
    master.stop().await;
    db.stop().await;
}

#[tokio::test]
async fn a_master_that_would_have_to_migrate_without_the_right_names_who_should() {
    let db = Cluster::start_empty().await;
    drover_broker::connect::connect_once(db.url())
        .await
        .unwrap()
        .batch_execute("CREATE ROLE newcomer LOGIN")
        .await
        .unwrap();
    refused_at_start(
        master_on(&db, &as_role(db.url(), "newcomer"), true),
        &[
            "needs migration(s) 0001_jobs",
            "the master's database role may not apply them",
            "as the owner of schema drover",
            "drover migrate",
        ],
    )
    .await;
    db.stop().await;
}

/// The application as a least-privileged team runs it: its web and worker role a producer (and
/// the owner of its own tables' rows), the master its own role through `master_database`, the
/// dashboard a reader through `dashboard.database`.
async fn the_application_enqueues_as_a_producer_the_master_runs_as_its_own_and_the_dashboard_reads_as_a_reader(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    drover_migrate_with(db.url(), "--create-roles");
    let mut app = LaravelApp::new(&db, laravel); // migrated by the owner
    let owner = db.client().await;
    owner
        .batch_execute(
            "CREATE ROLE app_web LOGIN IN ROLE drover_producer;
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO app_web;
             GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO app_web;
             CREATE ROLE queue_master LOGIN IN ROLE drover_master;
             CREATE ROLE console LOGIN IN ROLE drover_reader;
             CREATE ROLE nobody LOGIN;",
        )
        .await
        .unwrap();
    for (key, value) in [
        ("DB_USERNAME", "app_web"),
        ("DROVER_MASTER_DB_CONNECTION", "master_role"),
        ("FIXTURE_MASTER_DB_USERNAME", "queue_master"),
        ("DROVER_DASHBOARD_DB_CONNECTION", "dashboard_role"),
        ("FIXTURE_DASHBOARD_DB_USERNAME", "console"),
        ("DROVER_PROCESSES", "2"),
        ("SESSION_DRIVER", "file"),
    ] {
        app.env.retain(|(k, _)| k != key);
        app.env.push((key.into(), value.into()));
    }
    let master = start_master(&app, 2).await;
    let size = app.artisan(&[
        "app:eval",
        r#"foreach (range(1, 3) as $i) { App\Jobs\NapJob::dispatch("plain $i"); }
           foreach (range(1, 2) as $i) { App\Jobs\GroupJob::dispatch("g", "g:$i"); }
           App\Jobs\LimitedJob::dispatch("k", "k:1", 1, 10);
           App\Jobs\FailingJob::dispatch("fails");
           echo "size=" . Illuminate\Support\Facades\Queue::connection("drover")->size("default");"#,
    ]);
    // Counted by the producer's own role: at most the seven just dispatched (some already ran).
    let n: i64 = size
        .rsplit("size=")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no size in: {size}"));
    assert!((0..=7).contains(&n), "{size}");
    wait_count(
        &owner,
        "SELECT count(*) FROM journal WHERE event IN ('end', 'group_end', 'limit_end')",
        6,
        Duration::from_secs(30),
    )
    .await;
    // The application forgets a failed job with its own role (its failer also asks drover which
    // failed jobs hold a group).
    wait_count(
        &owner,
        "SELECT count(*) FROM public.failed_jobs",
        1,
        Duration::from_secs(30),
    )
    .await;
    let uuid: String = owner
        .query_one("SELECT uuid::text FROM public.failed_jobs", &[])
        .await
        .unwrap()
        .get(0);
    app.artisan(&["queue:forget", &uuid]);
    assert_eq!(
        count(&owner, "SELECT count(*) FROM public.failed_jobs").await,
        0
    );

    // The master's connections are its own role's.
    let master_roles: Vec<String> = owner
        .query(
            "SELECT DISTINCT usename::text FROM pg_stat_activity
              WHERE query LIKE 'LISTEN drover%' OR application_name LIKE 'drover%'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(master_roles, ["queue_master"]);
    let master_role = drover_broker::connect::connect_once(&as_role(db.url(), "queue_master"))
        .await
        .unwrap();
    assert_eq!(
        refused(&master_role, "SELECT * FROM journal").await,
        SqlState::INSUFFICIENT_PRIVILEGE
    );

    // The dashboard reads through its own connection: with a reader it serves, with a role that
    // may read nothing of drover's it cannot.
    let (server, port) = serve(&app, "local", true);
    let (code, page) = get_answered(port, "/drover");
    assert_eq!(code, 200, "{}", why(&page));
    drop(server);
    app.env
        .retain(|(k, _)| k != "FIXTURE_DASHBOARD_DB_USERNAME");
    app.env
        .push(("FIXTURE_DASHBOARD_DB_USERNAME".into(), "nobody".into()));
    let (server, port) = serve(&app, "local", true);
    let (code, page) = get_answered(port, "/drover");
    assert_eq!(code, 500, "{}", why(&page));
    assert!(
        page.contains("permission denied for schema drover"),
        "{}",
        why(&page)
    );
    drop(server);

    stop_master(&app, master).await;
    db.stop().await;
}

on_every_laravel!(
    the_application_enqueues_as_a_producer_the_master_runs_as_its_own_and_the_dashboard_reads_as_a_reader,
);
