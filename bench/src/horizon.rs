//! Laravel Horizon as a bench engine: Horizon 5.29.1 patched for Laravel 12.67
//! (`../shared/reference/horizon`, or `$DROVER_HORIZON_REFERENCE`), installed offline into the
//! bench's own copy of the Laravel 12 fixture app (`target/bench-laravel12-app`, so the tests' app
//! never has it), with one supervisor configured by `bench/horizon/horizon.php`.
//!
//! Horizon's provider is left out of package discovery and registered only when `BENCH_HORIZON`
//! is set (`bench/horizon/providers.php`): once registered it replaces the redis queue connector,
//! and `queue:work redis` is measured as an application without Horizon runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// The process tree `php artisan horizon` makes: the master supervisor, one `horizon:supervisor`
/// per supervisor, and its `horizon:work` processes.
pub struct Tree {
    /// The master and the supervisors: Horizon's orchestrator.
    pub orchestrator: Vec<i32>,
    /// Every process of the tree, the workers included.
    pub all: Vec<i32>,
    /// The `horizon:work` processes.
    pub workers: usize,
}

/// The tree under Horizon's master `master`, as it is now.
pub fn tree(master: i32) -> Tree {
    let mut tree = Tree {
        orchestrator: vec![master],
        all: vec![master],
        workers: 0,
    };
    let mut next = vec![master];
    while let Some(pid) = next.pop() {
        for child in crate::sampler::children(pid) {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).into_owned())
                .unwrap_or_default();
            if cmdline.contains("horizon:supervisor") {
                tree.orchestrator.push(child);
            } else if cmdline.contains("horizon:work") {
                tree.workers += 1;
            }
            tree.all.push(child);
            next.push(child);
        }
    }
    tree
}

/// Makes sure Horizon is installed in `app` (a build of tests/laravel12-app) and that the bench's
/// configuration and providers are in place. Idempotent: the install runs once per app build.
pub fn prepare(root: &Path, app: &Path) -> anyhow::Result<()> {
    if !app.join("vendor/laravel/horizon").exists() {
        let reference = std::env::var_os("DROVER_HORIZON_REFERENCE")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("../shared/reference/horizon"));
        let install = reference.join("install.sh");
        if !install.exists() {
            bail!(
                "Horizon's offline installer is not at {} (set DROVER_HORIZON_REFERENCE; `--laravel 8` runs without Horizon, which needs Laravel 12 here)",
                install.display()
            );
        }
        run(
            Command::new("bash").arg(&install).arg(app),
            "installing Horizon",
        )?;
        run(
            Command::new("composer")
                .args([
                    "config",
                    "--no-interaction",
                    "extra.laravel.dont-discover",
                    "--json",
                    r#"["laravel/horizon"]"#,
                ])
                .current_dir(app)
                .env("COMPOSER_ALLOW_SUPERUSER", "1"),
            "leaving Horizon out of package discovery",
        )?;
    }
    let bootstrap = app.join("bootstrap");
    std::fs::copy(
        root.join("tests/laravel12-app/bootstrap/providers.php"),
        bootstrap.join("providers.fixture.php"),
    )
    .context("copying the fixture's providers")?;
    std::fs::copy(
        root.join("bench/horizon/providers.php"),
        bootstrap.join("providers.php"),
    )
    .context("writing the bench app's providers")?;
    std::fs::copy(
        root.join("bench/horizon/horizon.php"),
        app.join("config/horizon.php"),
    )
    .context("writing config/horizon.php")?;
    Ok(())
}

fn run(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = cmd.output().with_context(|| what.to_string())?;
    if !out.status.success() {
        bail!(
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
