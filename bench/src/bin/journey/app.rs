//! The application the journey deploys, as a team's repository: the Laravel 12.67 fixture
//! (`drover_bench::laravel_fixture`, built by tests/laravel12-app/build, so drover/laravel is this
//! tree's `php-client/`) with Laravel Horizon installed by the bench's installer
//! (`bench/src/horizon.rs`), made into a git repository under the run's directory and committed to
//! as the guide's steps change it. Forge's deploy script (`bench/journey/forge-deploy.sh`) clones
//! it into each host's `releases/`.
//!
//! What the repository holds beside the fixture: `config/horizon.php` (the team's Horizon: one
//! supervisor on redis's `default` queue), `config/cache.php` (redis, shared by every host, as
//! `onOneServer()` and `queue:restart` need), `bootstrap/providers.php` (the fixture's providers
//! and Horizon's), and the journey's job, `bootstrap/JourneyJob.php`, which every release carries
//! with its own version (`JourneyJob::RELEASE`), loaded by `bootstrap/app.php`. The fixture's
//! `app/` and `vendor/` are committed as links to the build: Composer's autoloader resolves the
//! application's classes from the build whichever release loads it, so what differs between
//! releases is in `bootstrap/` and `config/`, the release's own files; `composer install` (no
//! network here) is what made `vendor/`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use tokio::process::Command;

use crate::world::{run, Host, APP_USER};

/// The journey's job: sleeps `ms` and appends its start and its end, each with its host, pid,
/// connection and the release's version, to a file of its worker process in the host's storage
/// (`storage/journey-runs/PID.log`, one write(2) a line). No database round trip: the records are
/// written whatever the database does.
fn job_php(version: &str) -> String {
    format!(
        r#"<?php
// The journey's job (bench/src/bin/journey.rs), as release {version} of the application carries it.

namespace Journey;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

class JourneyJob implements ShouldQueue
{{
    use Dispatchable, InteractsWithQueue, Queueable;

    /** The release of the code that runs the job. */
    public const RELEASE = '{version}';

    public $tries = 3;

    public $timeout = 60;

    /** @var resource|null */
    private static $out = null;

    public function __construct(public int $seq, public int $ms)
    {{
    }}

    public function handle(): void
    {{
        $this->record('S');
        usleep($this->ms * 1000);
        $this->record('E');
    }}

    private function record(string $event): void
    {{
        if (self::$out === null) {{
            $dir = storage_path('journey-runs');
            @mkdir($dir, 0755, true);
            $file = $dir . '/' . getmypid() . '.log';
            self::$out = fopen($file, 'ab') ?: throw new \RuntimeException("cannot open $file");
        }}
        $line = sprintf("%s %d %d %d %s %s %s %.6f\n", $event, $this->seq, $this->attempts(), getmypid(),
            gethostname(), self::RELEASE, $this->job?->getConnectionName() ?? '-', microtime(true));
        if (fwrite(self::$out, $line) !== strlen($line)) {{
            throw new \RuntimeException('cannot append the journey record');
        }}
    }}
}}
"#
    )
}

/// The team's Horizon: one supervisor on redis's `default` queue, two processes per host in
/// production, three tries; the rest Horizon 5.29's defaults.
const HORIZON_PHP: &str = r#"<?php

// The application's Horizon (bench/src/bin/journey.rs): one supervisor, Horizon 5.29's defaults
// otherwise.
return [
    'domain' => null,
    'path' => 'horizon',
    'use' => 'default',
    'prefix' => 'journey_horizon:',
    'middleware' => ['web'],
    'waits' => ['redis:default' => 60],
    'trim' => [
        'recent' => 60,
        'pending' => 60,
        'completed' => 60,
        'recent_failed' => 10080,
        'failed' => 10080,
        'monitored' => 10080,
    ],
    'silenced' => [],
    'metrics' => ['trim_snapshots' => ['job' => 24, 'queue' => 24]],
    'fast_termination' => false,
    'memory_limit' => 64,
    'defaults' => [
        'supervisor-1' => [
            'connection' => 'redis',
            'queue' => ['default'],
            'balance' => 'simple',
            'processes' => 1,
            'tries' => 3,
            'timeout' => 60,
            'memory' => 128,
            'maxTime' => 0,
            'maxJobs' => 0,
            'nice' => 0,
        ],
    ],
    'environments' => [
        'production' => [
            'supervisor-1' => ['processes' => 2],
        ],
        'local' => [
            'supervisor-1' => ['processes' => 1],
        ],
    ],
];
"#;

/// The application's cache: redis by default, shared by every host — what `onOneServer()` needs
/// (Laravel: "all servers must be communicating with the same central cache server") and what
/// carries `queue:restart`'s signal to every host's workers.
const CACHE_PHP: &str = r#"<?php

// The application's cache (bench/src/bin/journey.rs): the fixture's stores and redis, the default,
// which every host shares.
return [
    'default' => env('CACHE_STORE', 'redis'),
    'stores' => [
        'array' => ['driver' => 'array', 'serialize' => false],
        'file' => ['driver' => 'file', 'path' => storage_path('framework/cache/data')],
        'database' => ['driver' => 'database', 'table' => 'cache', 'connection' => null, 'lock_connection' => null],
        'redis' => ['driver' => 'redis', 'connection' => 'default', 'lock_connection' => 'default'],
    ],
    'prefix' => 'journey',
];
"#;

/// The providers: the fixture's, and Horizon's (left out of package discovery by the bench's
/// installer, registered here as `php artisan horizon:install` registers it).
const PROVIDERS_PHP: &str = r#"<?php

// The fixture's providers and Horizon's.
return array_merge(require __DIR__ . '/providers.fixture.php', [
    Laravel\Horizon\HorizonServiceProvider::class,
]);
"#;

pub struct Repo {
    pub dir: PathBuf,
    /// The application's version now (`v1`, `v2`, ...).
    pub version: u32,
    /// The developer's environment for artisan in the checkout.
    env: Vec<(String, String)>,
}

impl Repo {
    /// The repository at v1: the application on Horizon (drover/laravel is in vendor/: the
    /// guide's step 1 `composer require` is the fixture build's).
    pub async fn create(
        root: &Path,
        build: &Path,
        dir: PathBuf,
        env: Vec<(String, String)>,
    ) -> anyhow::Result<Repo> {
        let copy = |from: &Path, to: &str| -> anyhow::Result<()> {
            let to = dir.join(to);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::copy(from, &to)
                .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
            Ok(())
        };
        std::fs::create_dir_all(&dir)?;
        for f in [
            "artisan",
            "composer.json",
            "composer.lock",
            "public/index.php",
        ] {
            copy(&build.join(f), f)?;
        }
        copy(
            &root.join("tests/laravel12-app/bootstrap/providers.php"),
            "bootstrap/providers.fixture.php",
        )?;
        let app = std::fs::read_to_string(root.join("tests/laravel12-app/bootstrap/app.php"))?;
        let app = app.replacen(
            "<?php\n",
            "<?php\n\n// The journey's job, this release's (bench/src/bin/journey.rs).\nrequire_once __DIR__ . '/JourneyJob.php';\n",
            1,
        );
        let write = |to: &str, text: &str| -> anyhow::Result<()> {
            let to = dir.join(to);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&to, text).with_context(|| format!("writing {}", to.display()))
        };
        write("bootstrap/app.php", &app)?;
        write("bootstrap/providers.php", PROVIDERS_PHP)?;
        write("bootstrap/cache/.gitignore", "*\n!.gitignore\n")?;
        write("config/horizon.php", HORIZON_PHP)?;
        write("config/cache.php", CACHE_PHP)?;
        write("resources/views/welcome.blade.php", "<p>journey</p>\n")?;
        write(".gitignore", ".env\n/storage\n")?;
        for entry in std::fs::read_dir(build.join("config"))? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // The build links some to the tests' fixture: copied, never linked (an artisan command
            // that writes config/ must not write the tests' files).
            if !["drover.php", "cache.php", "horizon.php"].contains(&name.as_str()) {
                copy(&entry.path(), &format!("config/{name}"))?;
            }
        }
        for entry in std::fs::read_dir(build.join("database/migrations"))? {
            let entry = entry?;
            copy(
                &entry.path(),
                &format!(
                    "database/migrations/{}",
                    entry.file_name().to_string_lossy()
                ),
            )?;
        }
        for link in ["app", "vendor"] {
            std::os::unix::fs::symlink(build.join(link), dir.join(link))?;
        }
        for d in [
            "storage/framework/cache/data",
            "storage/framework/views",
            "storage/logs",
        ] {
            std::fs::create_dir_all(dir.join(d))?;
        }
        let mut repo = Repo {
            dir,
            version: 0,
            env,
        };
        repo.write_env()?;
        crate::world::give_to_app_user(&repo.dir)?;
        repo.git(&["init", "-q", "-b", "main"]).await?;
        repo.next_version()?;
        repo.commit("the application on Horizon and cron").await?;
        Ok(repo)
    }

    fn write_env(&self) -> anyhow::Result<()> {
        let text: String = self.env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(self.dir.join(".env"), text)?;
        Ok(())
    }

    /// The next version's code: the job as that release carries it.
    pub fn next_version(&mut self) -> anyhow::Result<String> {
        self.version += 1;
        let v = format!("v{}", self.version);
        std::fs::write(self.dir.join("bootstrap/JourneyJob.php"), job_php(&v))?;
        Ok(v)
    }

    pub fn version_name(&self) -> String {
        format!("v{}", self.version)
    }

    /// `program` run by the developer — the application's user, who owns the checkout.
    fn developer(&self, program: &str) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            &format!("--reuid={APP_USER}"),
            &format!("--regid={APP_USER}"),
            "--init-groups",
            "--",
            program,
        ])
        .current_dir(&self.dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &self.dir)
        .stdin(std::process::Stdio::null());
        cmd
    }

    pub async fn git(&self, args: &[&str]) -> anyhow::Result<String> {
        run(
            self.developer("git")
                .args([
                    "-c",
                    "user.name=journey",
                    "-c",
                    "user.email=journey@localhost",
                ])
                .args(args),
            &format!("git {}", args.join(" ")),
        )
        .await
    }

    /// Commits everything (the message prefixed with the version).
    pub async fn commit(&self, message: &str) -> anyhow::Result<()> {
        self.git(&["add", "-A"]).await?;
        self.git(&[
            "commit",
            "-q",
            "-m",
            &format!("{}: {message}", self.version_name()),
        ])
        .await?;
        Ok(())
    }

    /// `php artisan ARGS` in the developer's checkout: (exit code, what it printed).
    pub async fn artisan(&self, args: &[&str]) -> anyhow::Result<(i32, String)> {
        let out = self
            .developer("php")
            .arg("artisan")
            .args(args)
            .output()
            .await
            .with_context(|| format!("php artisan {}", args.join(" ")))?;
        Ok((out.status.code().unwrap_or(-1), crate::world::said(&out)))
    }

    pub async fn artisan_ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let (code, text) = self.artisan(args).await?;
        if code != 0 {
            bail!(
                "php artisan {} (in the checkout) exited {code}:\n{text}",
                args.join(" ")
            );
        }
        Ok(text)
    }
}

/// One host's run of the deploy script (its output is appended to the host's logs/deploy.log).
#[derive(Debug, Clone)]
pub struct HostDeploy {
    /// Its start and its end (its last line, `queue:restart`).
    pub started: f64,
    pub ended: f64,
    /// The release directory `current` points to after it.
    pub release: PathBuf,
}

/// Forge's deploy script on `host` (bench/journey/forge-deploy.sh, or `script`), cloning `repo`;
/// `restart_horizon` adds Horizon's own restart (Forge's Horizon integration).
pub async fn deploy_on(
    host: &Host,
    repo: &Repo,
    script: &Path,
    restart_horizon: bool,
) -> anyhow::Result<HostDeploy> {
    let started = crate::world::now();
    let script_path = script.display().to_string();
    let mut cmd = host.command(&host.site(), "bash", &[&script_path]);
    cmd.env("FORGE_SITE_PATH", host.site())
        .env("FORGE_REPOSITORY", &repo.dir)
        .env("FORGE_SITE_BRANCH", "main")
        .env("FORGE_PHP", "php")
        .env(
            "DEPLOY_RESTART_HORIZON",
            if restart_horizon { "1" } else { "" },
        );
    let output = run(&mut cmd, &format!("{}: {}", host.name, script.display())).await?;
    let ended = crate::world::now();
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(host.log_path("deploy.log"))?
        .write_all(
            format!(
                "==== journey: {} at {started:.3}\n{output}",
                script.display()
            )
            .as_bytes(),
        )?;
    let release = std::fs::canonicalize(host.current())
        .with_context(|| format!("{}: the deploy left no current", host.name))?;
    Ok(HostDeploy {
        started,
        ended,
        release,
    })
}
