//! The Laravel applications of a rolling-upgrade run (`--laravel 8|12`), and how a host deploys
//! them.
//!
//! **The applications.** Each release's application is the test suite's fixture app *of that
//! release's tree*, built the way the tests build it: on Laravel 8.83 the tree's
//! `tests/laravel-app` (Debian's framework; its `bootstrap/autoload.php` loads the `php-client/` of
//! the tree it is in), on Laravel 12.67 the tree's `tests/laravel12-app/build` run into
//! `target/rolling-upgrade/laravel12-<release>` (the offline reference tree, with Composer
//! installing that tree's drover/laravel from a path repository). So the previous release's
//! application runs that release's package (`target/rolling-upgrade/vX.Y.Z/php-client`) and the
//! new one this tree's (`target/rolling-upgrade/head/php-client`), each on the same Laravel.
//!
//! **A host** is a deploy tool's layout (`SITE/releases/N-drover-X`, `SITE/current`), a shared
//! `storage/` (`APP_STORAGE`), a state directory and `bin/drover`, the binary the package runs
//! (`DROVER_BINARY`, as `/usr/bin/drover` of the Debian package). A release directory is made as
//! the tests' `Site::ship` makes one (tests/support/mod.rs): `artisan`, `bootstrap/` and
//! `config/drover.php` its own, the code (`app/`, `vendor/`, the other config files) shared by
//! symlink; `database/migrations` holds the fixture's migrations and drover's, as
//! `php artisan drover:install` publishes it. Its `bootstrap/app.php` first loads the bench's job,
//! `Bench\UpgradeJob` (below), so both releases run the very same job class; every
//! `RU_GROUP_EVERY`-th one carries an ordered group (`$messageGroup`, read on Laravel 8.83 and 12
//! alike, docs/ordered-groups.md), and config/drover.php gives the queue a fleet-wide budget.
//!
//! **A deploy** follows docs/deploy.md ("Deploy with symlinked releases") and docs/upgrading.md:
//! ship the release, `ln -sfn` it to `current`, `php current/artisan migrate --force`, then
//! `php current/artisan drover:restart` (what `systemctl reload drover@myapp` does by SIGHUP).
//! **A binary upgrade** replaces `bin/drover` (as apt replaces `/usr/bin/drover`), then restarts
//! the master (`systemctl restart`: SIGTERM, a drain, and `php current/artisan drover` again).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use super::{Release, Releases};

/// The bench's job: a real Laravel queued job, dispatched with `Bus::dispatchToQueue` on the
/// `drover` connection. Like the plain handler (tests/fixtures/handler.php) it records its start,
/// a beat every `beatMs` while it runs, and its finish in `public.runs`, keyed by drover's job id.
pub const JOB_PHP: &str = r#"<?php
// The rolling-upgrade bench's job (bench/src/bin/rolling_upgrade/laravel.rs).

namespace Bench;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;

class UpgradeJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tries;

    public $timeout = 60;

    public $messageGroup;

    public function __construct(public int $seq, public int $ms, public int $beatMs, int $tries, ?string $group = null)
    {
        $this->tries = $tries;
        $this->messageGroup = $group;
    }

    public function handle(): void
    {
        $id = (int) $this->job->getJobId();
        $attempt = $this->job->attempts();
        $record = fn (string $event) => DB::insert(
            'INSERT INTO public.runs (job_id, seq, attempt, pid, event) VALUES (?, ?, ?, ?, ?)',
            [$id, $this->seq, $attempt, getmypid(), $event]
        );
        $record('start');
        if ($this->beatMs > 0) {
            $end = microtime(true) + $this->ms / 1000;
            while (($left = $end - microtime(true)) > 0) {
                usleep((int) (min($left, $this->beatMs / 1000) * 1e6));
                $record('beat');
            }
        } else {
            usleep($this->ms * 1000);
        }
        $record('finish');
    }
}
"#;

/// The producer, run by `php current/artisan app:eval` in the producer's site: one
/// `Bench\UpgradeJob` per dispatch at `RU_RATE` per second until `RU_STOP` exists, every
/// `RU_GROUP_EVERY`-th in an ordered group as the plain producer chooses it; prints
/// "id seq ms dispatch_ms epoch" per job, as the plain producer does.
pub const PRODUCER_PHP: &str = r#"
[$rate, $stop, $longEvery, $tries] = [(float) getenv('RU_RATE'), getenv('RU_STOP'), (int) getenv('RU_LONG_EVERY'), (int) getenv('RU_TRIES')];
[$groupEvery, $groups] = [(int) getenv('RU_GROUP_EVERY'), (int) getenv('RU_GROUPS')];
mt_srand((int) getenv('RU_SEED'));
$start = microtime(true);
for ($n = 1; !file_exists($stop); $n++) {
    $long = $longEvery > 0 && $n % $longEvery === 0;
    $ms = $long ? 3000 : mt_rand(50, 500);
    $group = ($groupEvery > 0 && $n % $groupEvery === 0) ? 'g' . (intdiv($n, $groupEvery) % $groups) : null;
    $job = (new \Bench\UpgradeJob($n, $ms, $long ? 100 : 0, $tries, $group))->onConnection('drover')->onQueue('default');
    $t = microtime(true);
    $id = \Illuminate\Support\Facades\Bus::dispatchToQueue($job);
    $took = (microtime(true) - $t) * 1000;
    fwrite(STDOUT, sprintf("%d %d %d %.1f %.3f\n", $id, $n, $ms, $took, $t));
    fflush(STDOUT);
    $sleep = $start + $n / $rate - microtime(true);
    if ($sleep > 0) {
        usleep((int) ($sleep * 1e6));
    }
}
"#;

/// Each release's fixture application, on one Laravel.
pub struct Apps {
    pub laravel: u8,
    old: PathBuf,
    new: PathBuf,
    old_tree: PathBuf,
    new_tree: PathBuf,
    /// `php artisan --version` of each (checked to be the Laravel asked for).
    pub versions: Vec<String>,
}

impl Apps {
    /// The applications of both releases on `laravel` (8 or 12), built if need be.
    pub fn prepare(rel: &Releases, laravel: u8) -> anyhow::Result<Apps> {
        let mut apps = Apps {
            laravel,
            old: PathBuf::new(),
            new: PathBuf::new(),
            old_tree: rel.tree(Release::Old).to_path_buf(),
            new_tree: rel.tree(Release::New).to_path_buf(),
            versions: vec![],
        };
        for r in [Release::Old, Release::New] {
            let tree = rel.tree(r);
            let dir = match laravel {
                8 => tree.join("tests/laravel-app"),
                12 => {
                    let dir = rel.root.join(format!(
                        "target/rolling-upgrade/laravel12-{}",
                        r.label().replace('.', "")
                    ));
                    println!(
                        "$ bash {}/tests/laravel12-app/build {}",
                        tree.display(),
                        dir.display()
                    );
                    // The reference tree beside this repository (the tests' default), not beside
                    // the release's worktree under target/.
                    let reference = std::env::var_os("DROVER_LARAVEL12_REFERENCE")
                        .map(PathBuf::from)
                        .unwrap_or_else(|| rel.root.join("../shared/reference/laravel12"));
                    let out = Command::new("bash")
                        .arg(tree.join("tests/laravel12-app/build"))
                        .arg(&dir)
                        .env("DROVER_LARAVEL12_REFERENCE", &reference)
                        .output()
                        .context("building the Laravel 12 fixture")?;
                    if !out.status.success() {
                        bail!(
                            "building the Laravel 12 fixture of {}: {}{}",
                            tree.display(),
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        );
                    }
                    // Its drover/laravel is the tree's, and no other.
                    let linked = std::fs::canonicalize(dir.join("vendor/drover/laravel"))?;
                    if linked != std::fs::canonicalize(tree)? {
                        bail!(
                            "{}'s vendor/drover/laravel is {}, not {}",
                            dir.display(),
                            linked.display(),
                            tree.display()
                        );
                    }
                    dir
                }
                other => bail!("--laravel {other}: use 8, 12, both or none"),
            };
            let version = Command::new("php")
                .arg(dir.join("artisan"))
                .args(["--version", "--no-ansi"])
                .env("LOG_CHANNEL", "stderr")
                .output()?;
            let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
            let want = if laravel == 8 {
                "Laravel Framework 8.83"
            } else {
                "Laravel Framework 12."
            };
            if !version.contains(want) {
                bail!("{}: {version:?}, not {want}", dir.display());
            }
            apps.versions.push(version);
            match r {
                Release::Old => apps.old = dir,
                Release::New => apps.new = dir,
            }
        }
        Ok(apps)
    }

    /// The release's fixture application.
    pub fn source(&self, r: Release) -> &Path {
        match r {
            Release::Old => &self.old,
            Release::New => &self.new,
        }
    }

    /// The release's tree (its drover/laravel is the tree's `php-client/`).
    fn tree(&self, r: Release) -> &Path {
        match r {
            Release::Old => &self.old_tree,
            Release::New => &self.new_tree,
        }
    }

    /// "Laravel 8.83" / "Laravel 12.67" (from `artisan --version`).
    pub fn name(&self) -> String {
        self.versions
            .first()
            .and_then(|v| v.strip_prefix("Laravel Framework "))
            .map(|v| {
                format!(
                    "Laravel {}",
                    v.split('.').take(2).collect::<Vec<_>>().join(".")
                )
            })
            .unwrap_or_else(|| format!("Laravel {}", self.laravel))
    }
}

/// A release's pool, as its `config/drover.php` sets it.
pub struct Pool {
    pub processes: usize,
    pub prefetch: u32,
    pub lease: f64,
    pub tries: i32,
    pub spawn: String,
    /// `outage_grace`, written only when above 0.
    pub grace: f64,
    /// The queue's fleet-wide budget (`budgets`, `drover:default`), written when above 0.
    pub budget: u32,
}

/// A deploy tool's layout on one host.
pub struct Site {
    pub dir: PathBuf,
    shipped: usize,
}

impl Site {
    pub fn new(dir: PathBuf) -> anyhow::Result<Site> {
        std::fs::create_dir_all(dir.join("releases"))?;
        Ok(Site { dir, shipped: 0 })
    }

    /// `SITE/current`, the path the master and the deploy's commands are given.
    pub fn current(&self) -> PathBuf {
        self.dir.join("current")
    }

    /// Ships a new release of `package` (`releases/N-drover-prev` or `-head`, N counting up) with
    /// `pool`; returns its name.
    pub fn ship(&mut self, apps: &Apps, package: Release, pool: &Pool) -> anyhow::Result<String> {
        use std::os::unix::fs::symlink;
        self.shipped += 1;
        let name = format!(
            "{}-drover-{}{}",
            self.shipped,
            package.tag(),
            if pool.grace > 0.0 { "-grace" } else { "" }
        );
        let dir = self.dir.join("releases").join(&name);
        let source = apps.source(package);
        std::fs::create_dir_all(dir.join("bootstrap/cache"))?;
        std::fs::create_dir_all(dir.join("config"))?;
        std::fs::create_dir_all(dir.join("database/migrations"))?;
        std::fs::copy(source.join("artisan"), dir.join("artisan"))?;
        std::fs::copy(
            source.join("bootstrap/app.php"),
            dir.join("bootstrap/app-fixture.php"),
        )?;
        std::fs::write(dir.join("bootstrap/UpgradeJob.php"), JOB_PHP)?;
        std::fs::write(
            dir.join("bootstrap/app.php"),
            "<?php\n// The bench's job class, then the fixture's application.\nrequire_once __DIR__.'/UpgradeJob.php';\nreturn require __DIR__.'/app-fixture.php';\n",
        )?;
        if apps.laravel == 8 {
            // The fixture's autoloader: Debian's Laravel, the release tree's php-client/, App\.
            std::fs::write(
                dir.join("bootstrap/autoload.php"),
                format!(
                    "<?php\nrequire '{}';\n",
                    source.join("bootstrap/autoload.php").display()
                ),
            )?;
        } else {
            for f in ["bootstrap/providers.php", ".env", "composer.json"] {
                std::fs::copy(source.join(f), dir.join(f))?;
            }
            symlink(source.join("vendor"), dir.join("vendor"))?;
        }
        symlink(source.join("app"), dir.join("app"))?;
        for entry in std::fs::read_dir(source.join("database/migrations"))? {
            let entry = entry?;
            symlink(
                entry.path(),
                dir.join("database/migrations").join(entry.file_name()),
            )?;
        }
        // drover's migration, as `php artisan drover:install` published it from the package.
        for entry in std::fs::read_dir(apps.tree(package).join("php-client/database/migrations"))? {
            let entry = entry?;
            std::fs::copy(
                entry.path(),
                dir.join("database/migrations").join(entry.file_name()),
            )?;
        }
        for entry in std::fs::read_dir(source.join("config"))? {
            let entry = entry?;
            if entry.file_name() != "drover.php" {
                symlink(entry.path(), dir.join("config").join(entry.file_name()))?;
            }
        }
        let grace = if pool.grace > 0.0 {
            format!("    'outage_grace' => {},\n", pool.grace)
        } else {
            String::new()
        };
        let budget = if pool.budget > 0 {
            format!(
                "$config['budgets'] = ['drover:default' => {}];\n",
                pool.budget
            )
        } else {
            String::new()
        };
        std::fs::write(
            dir.join("config/drover.php"),
            format!(
                "<?php\n// The fixture's configuration, with this release's pool. No `fair` queue: an option\n// the previous binary does not know is used once every host runs the new release.\n$config = require '{}';\nunset($config['fair']);\n$config['lease'] = {};\n{budget}$config['defaults']['default'] = array_merge($config['defaults']['default'], [\n    'queue' => ['default'],\n    'processes' => {},\n    'prefetch' => {},\n    'tries' => {},\n    'spawn' => '{}',\n{grace}]);\nreturn $config;\n",
                source.join("config/drover.php").display(),
                pool.lease,
                pool.processes,
                pool.prefetch,
                pool.tries,
                pool.spawn,
            ),
        )?;
        Ok(name)
    }

    /// `ln -sfn releases/NAME current`, atomically (a new link renamed over the old one), as
    /// Envoyer and Deployer do.
    pub fn switch_to(&self, name: &str) -> anyhow::Result<()> {
        let tmp = self.dir.join("current.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(PathBuf::from("releases").join(name), &tmp)?;
        std::fs::rename(&tmp, self.current())?;
        Ok(())
    }
}

/// Points `link` at `target` atomically (a new link renamed over the old one): how the bench
/// replaces a host's `bin/drover`, as a package manager replaces `/usr/bin/drover`.
pub fn replace_link(link: &Path, target: &Path) -> anyhow::Result<()> {
    let tmp = link.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, link)?;
    Ok(())
}

/// Which release's package a worker runs: from its working directory, a release directory
/// (`N-drover-prev…` or `N-drover-head…`; the kernel resolves `current`).
pub fn release_of(cwd: &Path) -> Option<Release> {
    let name = cwd.file_name()?.to_string_lossy().into_owned();
    [Release::Old, Release::New]
        .into_iter()
        .find(|r| name.contains(&format!("-drover-{}", r.tag())))
}

/// A Laravel worker of a master (`php artisan drover:work`, forked or exec'd), not a reload's
/// `php artisan drover --export` (its zygote is told apart by [`is_zygote`]).
pub fn is_worker(cmdline: &str) -> bool {
    cmdline.contains("drover:work")
}

/// A pool's zygote, once it booted: its title ends with "(drover zygote)".
pub fn is_zygote(cmdline: &str) -> bool {
    cmdline.contains("(drover zygote)")
}

/// `php APP/artisan ARGS` with `env`: (success, stdout and stderr).
pub fn artisan(app: &Path, env: &[(String, String)], args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new("php");
    cmd.arg(app.join("artisan")).args(args).current_dir(app);
    scrub(&mut cmd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    match cmd.output() {
        Ok(out) => (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
            .trim()
            .to_string(),
        ),
        Err(e) => (false, e.to_string()),
    }
}

/// What a host's environment must not inherit from the bench's.
pub fn scrub(cmd: &mut Command) {
    for k in [
        "DATABASE_URL",
        "DROVER_DATABASE_URL",
        "DROVER_PROTOCOL",
        "DROVER_BINARY",
        "DROVER_STATE_DIR",
        "DB_CONNECTION",
        "APP_BASE_PATH",
    ] {
        cmd.env_remove(k);
    }
}

/// A host's environment (`/etc/drover/myapp.env` and the application's `.env`): the database,
/// the shared storage, its state directory and its binary.
pub fn host_env(db_host: &str, host_dir: &Path) -> Vec<(String, String)> {
    let p = |s: &str| host_dir.join(s).display().to_string();
    vec![
        ("DB_CONNECTION".into(), "pgsql".into()),
        ("DB_HOST".into(), db_host.into()),
        ("DB_PORT".into(), "5432".into()),
        ("DB_DATABASE".into(), "drover".into()),
        ("DB_USERNAME".into(), "drover".into()),
        ("QUEUE_CONNECTION".into(), "drover".into()),
        ("APP_STORAGE".into(), p("storage")),
        ("DROVER_BINARY".into(), p("bin/drover")),
        ("DROVER_STATE_DIR".into(), p("state")),
        ("DROVER_LOG".into(), "info".into()),
        ("LOG_CHANNEL".into(), "stderr".into()),
        ("LOG_LEVEL".into(), "error".into()),
    ]
}

/// A host's directories: the site, the shared storage (as deploy tools share `storage/`), the
/// state directory and `bin/` (the link to the binary is made by the caller).
pub fn make_host_dirs(host_dir: &Path) -> anyhow::Result<()> {
    for d in [
        "storage/framework/cache/data",
        "storage/framework/views",
        "storage/framework/sessions",
        "storage/logs",
        "state",
        "bin",
    ] {
        std::fs::create_dir_all(host_dir.join(d))?;
    }
    Ok(())
}
