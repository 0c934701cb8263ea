//! drover's schema against the binary: a newer one is refused by name, an older one is migrated
//! at start, or refused (naming the migrations and the command) when auto-migration is off; and
//! against the package: `php artisan migrate` brings it up to the package's after an upgrade.

mod support;

use std::process::Command;
use std::time::Duration;

use support::*;

fn migrate(url: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["migrate", "--database-url", url])
        .output()
        .unwrap()
}

/// A master on `url` with one no-op worker pool, from a configuration file.
fn master(db: &Cluster, auto_migrate: bool) -> Drover {
    let config = serde_json::json!({
        "version": 1,
        "database_url": db.url(),
        "auto_migrate": auto_migrate,
        "pools": [{
            "name": "default", "queues": ["default"], "processes": 1,
            "command": ["php", root().join("php-client/bin/drover-worker"),
                        root().join("tests/fixtures/handler.php")],
        }],
    });
    let path = db.dir.path().join("drover.json");
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    Drover::start_worker(
        None,
        Some(db.dsn()),
        &["--config", path.to_str().unwrap()],
        &[],
    )
}

#[tokio::test]
async fn a_schema_migrated_by_a_newer_drover_is_refused_by_the_master_and_by_migrate() {
    let db = Cluster::start().await;
    db.client()
        .await
        .execute(
            "INSERT INTO drover.schema_migrations (version, name) VALUES (99, 'from_the_future')",
            &[],
        )
        .await
        .unwrap();
    let mut drover = master(&db, true);
    let status = drover.wait_exit(Duration::from_secs(20)).await;
    let log = drover.log_text();
    // Exit 78 (EX_CONFIG): the units do not restart on it (RestartPreventExitStatus=78), since
    // starting again would be refused the same way; the last line names the fix.
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(
        log.contains("drover's schema in this database is at version 99, newer than this drover"),
        "{log}"
    );
    let last = log.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.contains("Upgrade this binary (and drover/laravel) to the version that did"),
        "the last line names the fix: {last:?}\n{log}"
    );
    assert!(
        log.contains("exit 78") && log.contains("not restarted"),
        "{log}"
    );
    let out = migrate(db.url());
    assert_eq!(out.status.code(), Some(78));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("at version 99, newer than this drover"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    db.stop().await;
}

/// What drover 0.2.0 (schema 10) counts at start: the newer migrations whose recorded oldest
/// reader does not let it run (its broker/src/migrate.rs, refuse_newer).
async fn refusing_0_2_0(db: &Cluster) -> i64 {
    db.client()
        .await
        .query_one(
            "SELECT count(*) FROM drover.schema_migrations
             WHERE version > 10 AND (oldest_reader IS NULL OR oldest_reader > 10)",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Migration 0013 said `oldest reader: 12` until issue 57, and a database that applied it then
/// recorded 12: drover 0.2.0 was refused on it. `drover migrate` and a starting master correct the
/// recorded value to what the file says now (10); with auto_migrate off the master says so and
/// serves.
#[tokio::test]
async fn a_stricter_oldest_reader_recorded_before_its_header_was_corrected_is_corrected_by_migrate_and_a_starting_master(
) {
    let db = Cluster::start().await;
    let strict = "UPDATE drover.schema_migrations SET oldest_reader = 12 WHERE version = 13";
    let client = db.client().await;
    client.execute(strict, &[]).await.unwrap();
    assert_eq!(refusing_0_2_0(&db).await, 1);
    let out = migrate(db.url());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("corrected the oldest reader recorded in drover.schema_migrations (0013 records 12 where this drover says 10)"),
        "{said}"
    );
    assert_eq!(refusing_0_2_0(&db).await, 0);

    for auto_migrate in [false, true] {
        client.execute(strict, &[]).await.unwrap();
        let drover = master(&db, auto_migrate);
        drover
            .wait_status("a worker serving", Duration::from_secs(30), |s| {
                s["pools"][0]["serving"] == 1
            })
            .await;
        let log = drover.stop().await;
        if auto_migrate {
            assert!(log.contains("corrected the oldest reader"), "{log}");
            assert_eq!(refusing_0_2_0(&db).await, 0);
        } else {
            assert!(
                log.contains("a master of the previous release is refused on this database until it is corrected (auto_migrate is off)")
                    && log.contains("`drover migrate`"),
                "{log}"
            );
            assert_eq!(refusing_0_2_0(&db).await, 1);
        }
    }
    db.stop().await;
}

#[tokio::test]
async fn a_schema_one_expand_only_step_newer_is_run_on_by_the_master_and_by_migrate_as_in_a_rolling_upgrade(
) {
    let db = Cluster::start().await;
    let next = drover_broker::migrate::latest() + 1;
    // What the next release's expand-only migration records: this schema may run on it.
    db.client()
        .await
        .execute(
            &format!(
                "INSERT INTO drover.schema_migrations (version, name, oldest_reader) VALUES ({next}, 'next_release', {})",
                next - 1
            ),
            &[],
        )
        .await
        .unwrap();
    let out = migrate(db.url());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for auto_migrate in [true, false] {
        let drover = master(&db, auto_migrate);
        drover
            .wait_status("a worker serving", Duration::from_secs(30), |s| {
                s["pools"][0]["serving"] == 1
            })
            .await;
        let log = drover.stop().await;
        assert!(
            log.contains(&format!("at version {next}, newer than this drover"))
                && log.contains("may run on it"),
            "{log}"
        );
    }
    db.stop().await;
}

#[tokio::test]
async fn with_auto_migrate_off_a_missing_schema_is_refused_naming_the_migrations_and_the_command() {
    let db = Cluster::start_empty().await;
    let mut drover = master(&db, false);
    let status = drover.wait_exit(Duration::from_secs(20)).await;
    let log = drover.log_text();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains(
            "migration(s) 0001_jobs, 0002_failure, 0003_indexes, 0004_metrics, 0005_groups, 0006_pin_plans, 0007_paused_queues, 0008_pause_confirmations, 0009_outage_grace, 0010_queue_budgets, 0011_limits, 0012_schedule, 0013_roles, 0014_console, 0015_exactly_once, 0016_workflows not applied"
        ) && log.contains("php artisan migrate")
            && log.contains("drover migrate"),
        "{log}"
    );
    // Nothing was created behind the operator's back.
    let exists: bool = db
        .client()
        .await
        .query_one("SELECT to_regnamespace('drover') IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        !exists,
        "the master created the schema with auto_migrate off"
    );

    // Migrated by hand, the same configuration starts and serves.
    let out = migrate(db.url());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drover = master(&db, false);
    drover
        .wait_status("serving", Duration::from_secs(20), |s| {
            s["health"] == "serving"
        })
        .await;
    drover.stop().await;
    db.stop().await;
}

/// A package upgrade's `php artisan migrate` applies the drover migrations it brings, though
/// Laravel has nothing left to run (the published migration ran once): here the schema is put
/// back one step, as the previous package left it. On Laravel 8.83 and 12.67.
async fn php_artisan_migrate_applies_the_drover_migrations_a_package_upgrade_brings(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let app = LaravelApp::new(&db, laravel);
    client
        .batch_execute(include_str!(
            "../broker/tests/fixtures/undo_migration_0011.sql"
        ))
        .await
        .unwrap();
    let out = app.artisan(&["migrate", "--force", "--no-ansi"]);
    assert!(out.contains("drover: applied 0011_limits"), "{out}");
    let newest: i32 = client
        .query_one("SELECT max(version) FROM drover.schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(newest, drover_broker::migrate::latest());
    // Up to date, a second run applies nothing and says nothing of drover.
    let again = app.artisan(&["migrate", "--force", "--no-ansi"]);
    assert!(!again.contains("drover: applied"), "{again}");
    db.stop().await;
}

/// What the unit's `ExecStart` gets when a start is refused for what only an operator can change:
/// `php artisan drover` exits 78 (EX_CONFIG, which the units do not restart on) — for a
/// config/drover.php it refuses, and through the binary it execs for a schema that needs a newer
/// drover — naming the fix. On Laravel 8.83 and 12.67.
async fn php_artisan_drover_refused_for_what_only_an_operator_changes_exits_78(laravel: Laravel) {
    let db = Cluster::start().await;
    let app = LaravelApp::new(&db, laravel);
    let said = |out: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let out = app
        .command(&["drover", "--no-ansi"])
        .env("DROVER_SPAWN", "thread")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", said(&out));
    assert!(said(&out).contains("spawn"), "{}", said(&out));

    db.client()
        .await
        .execute(
            "INSERT INTO drover.schema_migrations (version, name) VALUES (99, 'from_the_future')",
            &[],
        )
        .await
        .unwrap();
    let out = app.command(&["drover", "--no-ansi"]).output().unwrap();
    let text = said(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.trim_end().lines().last().is_some_and(
            |l| l.contains("Upgrade this binary (and drover/laravel) to the version that did")
        ),
        "{text}"
    );
    db.stop().await;
}

on_every_laravel!(
    php_artisan_migrate_applies_the_drover_migrations_a_package_upgrade_brings,
    php_artisan_drover_refused_for_what_only_an_operator_changes_exits_78,
);
