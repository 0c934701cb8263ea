//! A Laravel team adopting drover, as the README tells them to: `composer require drover/laravel`
//! (offline, from a repository at a clean clone of this one), `php artisan drover:install`,
//! `php artisan migrate`, then `php artisan drover` — on a fresh Laravel 12 application from the
//! reference tree, against a real PostgreSQL without drover's schema.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::*;

/// Runs a command; panics with its output unless it succeeds.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A clean clone of this repository's HEAD on branch main, tagged as the package's version (what
/// Packagist would see). Uncommitted changes are not in it: in CI, the checkout is clean.
fn clean_clone(dir: &Path) -> PathBuf {
    let clone = dir.join("drover");
    run(Command::new("git")
        .args(["clone", "--quiet", "--no-hardlinks"])
        .arg(root())
        .arg(&clone));
    run(Command::new("git")
        .arg("-C")
        .arg(&clone)
        .args(["checkout", "--quiet", "-B", "main"]));
    run(Command::new("git")
        .arg("-C")
        .arg(&clone)
        // -f: the repository may have tagged this release on an earlier commit already; composer
        // reads the version from a tag on the commit it installs.
        .args(["tag", "-f", &format!("v{}", env!("CARGO_PKG_VERSION"))]));
    clone
}

/// A fresh Laravel 12 application from the reference tree (its skeleton, vendor/ and .env).
fn fresh_laravel12_app(dir: &Path) -> PathBuf {
    let app = dir.join("app");
    run(Command::new("bash")
        .arg(laravel12_reference().join("install.sh"))
        .arg("--no-apt")
        .arg(&app));
    app
}

/// `php artisan ARGS` in `app`, pointed at `db`.
fn artisan(app: &Path, db: &Cluster, args: &[&str]) -> Command {
    let mut cmd = Command::new("php");
    cmd.arg(app.join("artisan")).args(args).current_dir(app);
    let socket_dir = db.pg.as_ref().unwrap().data_dir().display().to_string();
    cmd.env_remove("DATABASE_URL")
        .env("DB_CONNECTION", "pgsql")
        .env("DB_HOST", socket_dir)
        .env("DB_PORT", "5432")
        .env("DB_DATABASE", "drover")
        .env("DB_USERNAME", "drover")
        .env("DB_PASSWORD", "")
        .env("QUEUE_CONNECTION", "drover")
        .env("LOG_CHANNEL", "stderr")
        .env("DROVER_BINARY", env!("CARGO_BIN_EXE_drover"));
    cmd
}

/// What a user adds to config/queue.php (drover:install prints it): the `drover` connection.
fn add_drover_connection(app: &Path) {
    let path = app.join("config/queue.php");
    let config = std::fs::read_to_string(&path).unwrap();
    let config = config.replacen(
        "'connections' => [",
        "'connections' => [\n        'drover' => ['driver' => 'drover', 'connection' => 'pgsql', 'queue' => 'default', 'after_commit' => false],",
        1,
    );
    std::fs::write(path, config).unwrap();
}

fn ran(app: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(app.join("storage/logs/jobs-ran.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(" ran on ").next().unwrap_or(l).to_string())
        .collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn a_laravel_12_team_composer_requires_drover_from_a_clean_clone_installs_migrates_and_runs_jobs(
) {
    let db = Cluster::start_empty().await;
    let client = db.client().await;
    let dir = shared_tempdir();
    let clone = clean_clone(dir.path());
    let app = fresh_laravel12_app(dir.path());

    // composer require, offline: the repository is the clean clone (a VCS repository, as a team
    // without Packagist would point at a Git server). The package's discovery registers it.
    run(Command::new("composer")
        .args(["config", "repositories.drover"])
        .arg(format!(
            r#"{{"type": "vcs", "url": "{}"}}"#,
            clone.display()
        ))
        .current_dir(&app));
    let required = Command::new("composer")
        .args(["require", "--no-interaction", "--no-ansi", "drover/laravel"])
        .current_dir(&app)
        .output()
        .unwrap();
    let said = text(&required);
    assert!(required.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "Installing drover/laravel (v{})",
            env!("CARGO_PKG_VERSION")
        )) && said.contains("drover/laravel")
            && said.contains("DONE"),
        "{said}"
    );
    assert!(
        !app.join("vendor/drover/laravel").is_symlink(),
        "installed, not linked"
    );

    // drover:install publishes the config and the migration and checks the binary.
    let installed = run(&mut artisan(&app, &db, &["drover:install", "--no-ansi"]));
    assert!(
        installed.contains("config/drover.php: published"),
        "{installed}"
    );
    assert!(
        installed.contains("create_drover_schema.php: published"),
        "{installed}"
    );
    assert!(installed.contains("matches"), "{installed}");
    assert!(
        installed.contains("drover's schema is not in this database yet"),
        "{installed}"
    );
    assert!(app.join("config/drover.php").is_file());
    let published: Vec<_> = std::fs::read_dir(app.join("database/migrations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with("_create_drover_schema.php"))
        .collect();
    assert_eq!(published.len(), 1, "{published:?}");
    add_drover_connection(&app);

    // A dispatch before the schema exists says what to run.
    let early = artisan(&app, &db, &["ref:dispatch", "drover", "--n=1"])
        .output()
        .unwrap();
    assert!(!early.status.success());
    assert!(
        text(&early).contains("drover.jobs does not exist")
            && text(&early).contains("php artisan migrate"),
        "{}",
        text(&early)
    );

    // php artisan migrate creates drover's schema, at the binary's version, before any master ran.
    run(&mut artisan(
        &app,
        &db,
        &["migrate", "--force", "--no-ansi"],
    ));
    // drover:install again: the binary runs on the schema the database now has.
    let again = run(&mut artisan(&app, &db, &["drover:install", "--no-ansi"]));
    assert!(
        again.contains(&format!(
            "this binary (schema {}) runs on it",
            drover_broker::migrate::latest()
        )),
        "{again}"
    );
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM drover.schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let binary = run(Command::new(env!("CARGO_BIN_EXE_drover")).args(["version", "--json"]));
    let binary: serde_json::Value = serde_json::from_str(&binary).unwrap();
    assert_eq!(
        versions.last().copied(),
        binary["schema"].as_i64().map(|v| v as i32)
    );
    assert_eq!(versions.len() as i64, binary["schema"].as_i64().unwrap());

    // Jobs, a chain and a batch dispatched before the master starts; then it runs them.
    run(&mut artisan(
        &app,
        &db,
        &["ref:dispatch", "drover", "--n=3"],
    ));
    let status = artisan(&app, &db, &["drover:status"]).output().unwrap();
    assert_eq!(
        status.status.code(),
        Some(2),
        "no master yet: {}",
        text(&status)
    );
    let log = std::fs::File::create(dir.path().join("master.log")).unwrap();
    let mut master = Spawned(
        artisan(&app, &db, &["drover"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let want = vec![
        "batch-1", "batch-2", "chain-1", "chain-2", "chain-3", "single-1", "single-2", "single-3",
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got: Vec<String> = ran(&app)
            .into_iter()
            .filter(|l| !l.starts_with("batch "))
            .collect();
        if got == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "jobs ran: {got:?}\n{}",
            std::fs::read_to_string(dir.path().join("master.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(app.join("storage/logs/jobs-ran.log")).unwrap();
    assert!(log.contains("then-callback"), "the batch finished: {log}");
    assert!(
        log.lines()
            .filter(|l| l.contains(" ran on "))
            .all(|l| l.contains("ran on drover")),
        "{log}"
    );
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs",
        0,
        Duration::from_secs(10),
    )
    .await;

    let status = artisan(&app, &db, &["drover:status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(0), "serving: {}", text(&status));
    // queue:work on the drover connection would be a second master on the same state directory:
    // refused at once, saying why.
    let started = Instant::now();
    let work = artisan(&app, &db, &["queue:work", "drover"])
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    assert_eq!(work.status.code(), Some(1), "{}", text(&work));
    assert!(
        text(&work).contains("another drover master is already running with state directory"),
        "{}",
        text(&work)
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    run(&mut artisan(&app, &db, &["drover:terminate"]));
    let status = master.wait().unwrap();
    assert!(
        status.success(),
        "{status}: {}",
        std::fs::read_to_string(dir.path().join("master.log")).unwrap_or_default()
    );
    db.stop().await;
}

/// The reads the package shares with the binary (`broker/queries/shared/`, read by
/// `Drover\Schema\BrokerQuery`): every one is in the dist, and the package installed from it
/// finds each in its own directory.
fn shared_reads_ship_and_are_found(dist: &Path, app: &Path) {
    let mut shipped: Vec<String> = std::fs::read_dir(root().join("broker/queries/shared"))
        .unwrap()
        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    shipped.sort();
    for name in &shipped {
        let needed = Path::new("broker/queries/shared").join(name);
        assert!(
            dist.join(&needed).exists(),
            "the dist lacks {}",
            needed.display()
        );
    }
    let found = run(Command::new("php")
        .arg("-r")
        .arg(
            r#"require 'vendor/autoload.php';
               foreach (Drover\Schema\BrokerQuery::names() as $n) { Drover\Schema\BrokerQuery::named($n); echo "$n.sql\n"; }"#,
        )
        .current_dir(app));
    assert_eq!(found.lines().collect::<Vec<_>>(), shipped);
}

/// What Packagist serves is GitHub's zipball of a tag, which honours `.gitattributes`
/// export-ignore: that archive, unpacked, must be a working package (its schema migrations and
/// the reads it shares with the binary included) and hold nothing else of the repository.
#[tokio::test]
async fn the_composer_dist_of_a_clean_clone_is_a_working_package_and_nothing_more() {
    let db = Cluster::start_empty().await;
    let dir = shared_tempdir();
    let clone = clean_clone(dir.path());
    let dist = dir.path().join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    let archive = Command::new("git")
        .arg("-C")
        .arg(&clone)
        .args(["archive", "--format=tar", "HEAD"])
        .output()
        .unwrap();
    assert!(archive.status.success());
    let mut untar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&dist)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(untar.stdin.as_mut().unwrap(), &archive.stdout).unwrap();
    assert!(untar.wait().unwrap().success());
    for needed in [
        "composer.json",
        "php-client/src/DroverServiceProvider.php",
        "php-client/config/drover.php",
        "php-client/database/migrations",
        "broker/migrations/0001_jobs.sql",
        "broker/roles/grants.sql",
    ] {
        assert!(dist.join(needed).exists(), "the dist lacks {needed}");
    }
    for left_out in [
        "src",
        "supervisor",
        "bench",
        "tests",
        "Cargo.toml",
        "broker/src",
        "broker/queries/claim.sql",
        "php-client/tests",
    ] {
        assert!(!dist.join(left_out).exists(), "the dist holds {left_out}");
    }

    let app = fresh_laravel12_app(dir.path());
    run(Command::new("composer")
        .args(["config", "repositories.drover"])
        .arg(format!(
            r#"{{"type": "path", "url": "{}", "options": {{"symlink": false, "versions": {{"drover/laravel": "{}"}}}}}}"#,
            dist.display(),
            env!("CARGO_PKG_VERSION")
        ))
        .current_dir(&app));
    run(Command::new("composer")
        .args(["require", "--no-interaction", "--no-ansi", "drover/laravel"])
        .env("COMPOSER_DISABLE_NETWORK", "1")
        .current_dir(&app));
    shared_reads_ship_and_are_found(&dist, &app);
    let installed = run(&mut artisan(&app, &db, &["drover:install", "--no-ansi"]));
    assert!(installed.contains("matches"), "{installed}");
    run(&mut artisan(
        &app,
        &db,
        &["migrate", "--force", "--no-ansi"],
    ));
    let tables = db
        .client()
        .await
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'drover'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert!(tables >= 3, "drover's tables: {tables}");
    db.stop().await;
}
