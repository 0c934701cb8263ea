//! docs/guide.md, step by step, on three hosts: each step does what the guide's table says, on
//! each host (`h1`, `h2`, `h3` in turn) or once for the fleet, and says so on stdout as it goes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::app::{deploy_on, HostDeploy, Repo};
use crate::producer::Producer;
use crate::world::{now, Database, Host, Redis};

/// What a run does: the journey's numbers.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// The test command's form: one minute boundary with cron and drover both, short waits, a
    /// 10 s outage, no previous release.
    pub short: bool,
    /// Jobs dispatched a second.
    pub rate: f64,
    /// Serving time before step 1, in Horizon's era.
    pub horizon_era: Duration,
    /// Serving time after each step that changes what serves.
    pub service: Duration,
    /// The database outage.
    pub outage: Duration,
    /// How long a deploy may take to reach every worker before it is said not to.
    pub deploy_wait: Duration,
    /// Deploys while Horizon runs restart it too (`horizon:terminate` in the script); false: the
    /// script as the guide's step 5b said before, `queue:restart` alone.
    pub restart_horizon: bool,
}

/// The previous release's binary, for step 8.
#[derive(Debug, Clone)]
pub struct Previous {
    pub version: String,
    pub binary: PathBuf,
    /// Whether it runs Laravel's schedule (drover's scheduler came after 0.2.0): a fleet on one
    /// that does not runs cron's `schedule:run` line.
    pub runs_schedule: bool,
}

/// One deploy: the script on each host in turn.
#[derive(Debug, Clone)]
pub struct Deploy {
    pub version: String,
    /// The guide's step it belongs to.
    pub step: String,
    pub hosts: Vec<HostDeploy>,
    /// Horizon's restart was in the script (Horizon ran).
    pub restart_horizon: bool,
    /// When every worker of every host (drover's and Horizon's) ran the release, seen by polling;
    /// or, if that never came (`complete` false), when the wait gave up.
    pub completed: f64,
    pub complete: bool,
    /// Per host: when its master's workers all ran the release (None: no master), and when its
    /// Horizon's did (None: no Horizon).
    pub drover_done: BTreeMap<String, Option<f64>>,
    pub horizon_done: BTreeMap<String, Option<f64>>,
    /// Per host: the reloads its master logged during the deploy.
    pub reloads: BTreeMap<String, usize>,
}

impl Deploy {
    pub fn started(&self) -> f64 {
        self.hosts.first().map_or(self.completed, |h| h.started)
    }

    /// The end of the last host's script: its last line, `queue:restart`.
    pub fn last_restart(&self) -> f64 {
        self.hosts.last().map_or(self.completed, |h| h.ended)
    }
}

/// A check the run makes as it goes (the job and schedule checks are made at the end).
#[derive(Debug, Clone)]
pub struct Check {
    pub what: String,
    pub ok: bool,
    pub detail: String,
}

/// One host's `systemctl restart` in step 8.
#[derive(Debug, Clone)]
pub struct Restart {
    pub host: String,
    /// "previous" (onto the previous release's binary) or "upgrade".
    pub kind: String,
    pub from: String,
    pub to: String,
    /// SIGTERM to the old master's exit, and to the new one serving; its exit code.
    pub drained_s: f64,
    pub serving_s: f64,
    pub exit: i32,
    /// `php artisan drover:status` right after.
    pub status_exit: i32,
}

/// The database outage, per host.
#[derive(Debug, Clone, Default)]
pub struct Outage {
    pub stopped: f64,
    pub started: f64,
    /// Seconds from the stop to `drover:status` exiting 5 naming the database (None: never).
    pub degraded_after: BTreeMap<String, Option<f64>>,
    /// `drover:status` polls during the outage, after the first 5, that were not 5.
    pub not_degraded_polls: BTreeMap<String, usize>,
    /// The last thing `drover:status` said during it, per host.
    pub said: BTreeMap<String, String>,
    /// Seconds from the database's return to `drover:status` exiting 0 (None: never).
    pub serving_after: BTreeMap<String, Option<f64>>,
    /// Dispatches that failed during it.
    pub failed_dispatches: usize,
}

pub struct Journey {
    pub sizes: Sizes,
    pub binary: PathBuf,
    pub previous: Option<Previous>,
    pub script: PathBuf,
    pub db: Database,
    pub redis: Redis,
    pub repo: Repo,
    pub hosts: Vec<Host>,
    pub producer: Option<Producer>,
    pub t0: f64,
    /// What happened, when (Unix seconds), in order.
    pub events: Vec<(f64, String)>,
    pub deploys: Vec<Deploy>,
    /// Every release directory and the version it holds.
    pub releases: BTreeMap<PathBuf, String>,
    pub checks: Vec<Check>,
    pub restarts: Vec<Restart>,
    pub outage: Option<Outage>,
    /// Minutes (Unix minute numbers) in which cron and masters both ran the schedule.
    pub overlap_minutes: Vec<i64>,
    /// The first and last minute whose due time the schedule's check covers.
    pub schedule_from: f64,
    pub schedule_to: f64,
    /// Workers per host (the team's Horizon processes in production, imported).
    pub workers: usize,
}

/// The site's `.env` on every host at the start (Forge's "Environment" tab): the application on
/// Horizon, its cache in redis.
pub fn site_env(db: &Database, redis: &Redis, host: &Host) -> Vec<(String, String)> {
    [
        ("APP_NAME", "journey".to_string()),
        ("APP_ENV", "production".into()),
        (
            "APP_KEY",
            "base64:9wLMy0Lq0Qe6nW2wvp2vAz2yv0oQw3b+gHbd4Xl8iZs=".into(),
        ),
        ("APP_DEBUG", "false".into()),
        ("LOG_CHANNEL", "single".into()),
        ("LOG_LEVEL", "error".into()),
        ("DB_CONNECTION", "pgsql".into()),
        ("DB_HOST", db.host.clone()),
        ("DB_PORT", db.port.to_string()),
        ("DB_DATABASE", "drover".into()),
        ("DB_USERNAME", "drover".into()),
        ("REDIS_HOST", "127.0.0.1".into()),
        ("REDIS_PORT", redis.port.to_string()),
        ("CACHE_STORE", "redis".into()),
        ("QUEUE_CONNECTION", "redis".into()),
        ("DROVER_BINARY", host.bin().display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl Journey {
    pub fn event(&mut self, what: impl Into<String>) {
        let what = what.into();
        let at = now();
        println!("journey [{:7.1} s] {what}", at - self.t0);
        self.events.push((at, what));
    }

    pub fn check(&mut self, what: impl Into<String>, ok: bool, detail: impl Into<String>) {
        let (what, detail) = (what.into(), detail.into());
        println!(
            "journey           {} {what}{}",
            if ok { "ok:  " } else { "FAIL:" },
            if detail.is_empty() {
                String::new()
            } else {
                format!(" — {detail}")
            }
        );
        self.checks.push(Check { what, ok, detail });
    }

    fn host_names(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.name.clone()).collect()
    }

    fn host(&mut self, name: &str) -> &mut Host {
        self.hosts
            .iter_mut()
            .find(|h| h.name == name)
            .expect("a host of the journey")
    }

    /// Waits `d`, the fleet serving (the producer goes on).
    async fn serve(&mut self, d: Duration, why: &str) {
        if !d.is_zero() {
            self.event(format!("serving for {:.0} s ({why})", d.as_secs_f64()));
            tokio::time::sleep(d).await;
        }
    }

    /// Sleeps until `seconds` past the next minute's start.
    async fn until_next_minute(&mut self, seconds: f64) -> f64 {
        let t = now();
        let boundary = (t / 60.0).floor() * 60.0 + 60.0;
        self.event(format!(
            "waiting for the next minute's due time, {:.0} s away",
            boundary - t
        ));
        tokio::time::sleep(Duration::from_secs_f64(boundary + seconds - t)).await;
        boundary
    }

    /// The whole walk.
    pub async fn walk(&mut self) -> anyhow::Result<()> {
        self.horizon_era().await?;
        self.step1_install().await?;
        self.step2_configure().await?;
        self.step3_service();
        self.event("step 4 (try it): on a staging or local machine, not on the fleet's hosts");
        self.step5a_start_drover_stop_cron().await?;
        self.step5b_deploy_script();
        self.step5c_switch_producers().await?;
        self.step5d_drain_redis().await?;
        self.step5e_stop_horizon().await?;
        for n in 1..=2 {
            self.step6_deploy(n).await?;
        }
        self.step8_upgrade().await?;
        self.step7_outage().await?;
        self.step11_roll_back().await?;
        self.finish().await?;
        Ok(())
    }

    /// Before the guide: each host's site deployed by the team's deploy script, Horizon under
    /// supervisord on each, cron's `schedule:run` line on h1, the producer dispatching to redis.
    async fn horizon_era(&mut self) -> anyhow::Result<()> {
        self.event("before the guide: the application on Horizon (redis) and cron, three hosts");
        for i in 0..self.hosts.len() {
            let env = site_env(&self.db, &self.redis, &self.hosts[i]);
            let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            std::fs::write(self.hosts[i].env_file(), text)?;
        }
        self.deploy("the first deploy", true).await?;
        for i in 0..self.hosts.len() {
            self.hosts[i].start_horizon();
            let name = self.hosts[i].name.clone();
            self.event(format!("{name}: Horizon started by supervisord"));
        }
        self.host("h1").install_cron();
        self.event(
            "h1: crontab `* * * * * cd /home/forge/site/current && php artisan schedule:run`",
        );
        // Horizon's workers up on every host: the first release is in place.
        let v1 = self.deploys[0].version.clone();
        let (_, horizon, at, missing) = self.wait_release(&v1, Duration::from_secs(60)).await;
        if !missing.is_empty() {
            bail!(
                "Horizon's workers did not start on every host: {}",
                missing.join("; ")
            );
        }
        self.deploys[0].completed = at;
        self.deploys[0].complete = true;
        self.deploys[0].horizon_done = horizon;
        let hosts: Vec<&Host> = self.hosts.iter().collect();
        self.producer = Some(Producer::start(&hosts, self.sizes.rate));
        let rate = self.sizes.rate;
        self.event(format!(
            "the producer dispatches {rate} jobs/s (QUEUE_CONNECTION, from each host's current in turn)"
        ));
        // The schedule's check covers every due time from the next minute on.
        self.schedule_from = (now() / 60.0).floor() * 60.0 + 60.0;
        let d = self.sizes.horizon_era;
        self.serve(d, "Horizon's era").await;
        Ok(())
    }

    /// Step 1: `php artisan drover:install` in the application, committed; `php artisan migrate`
    /// runs in the deploy of step 2 (Forge's script migrates). (The binary: each host's
    /// bin/drover; the package: in vendor/ from the build.)
    async fn step1_install(&mut self) -> anyhow::Result<()> {
        self.event("step 1: on each host the binary (bin/drover); composer require drover/laravel is in vendor/ (the fixture's build)");
        let said = self.repo.artisan_ok(&["drover:install"]).await?;
        let published = said.contains("config/drover.php: published")
            && said.contains("create_drover_schema.php: published");
        self.check(
            "step 1: drover:install publishes config/drover.php and the migration",
            published,
            first_lines(&said, 3),
        );
        if !published {
            bail!("drover:install did not publish what step 1 says:\n{said}");
        }
        let queue = std::fs::read_to_string(self.repo.dir.join("config/queue.php"))?;
        self.check(
            "step 1: config/queue.php has the drover connection",
            queue.contains("'driver' => 'drover'"),
            "",
        );
        self.repo
            .commit("drover:install (config/drover.php, the migration)")
            .await?;
        self.event(
            "step 1: php artisan drover:install, committed; php artisan migrate in the deploy of step 2",
        );
        Ok(())
    }

    /// Step 2: `drover:import-horizon --dry-run`, read, then `drover:import-horizon --force`
    /// (config/drover.php from config/horizon.php); deployed, nothing runs it yet.
    async fn step2_configure(&mut self) -> anyhow::Result<()> {
        let dry = self
            .repo
            .artisan_ok(&["drover:import-horizon", "--dry-run"])
            .await?;
        let named = dry.matches("\n//   - ").count();
        self.event(format!(
            "step 2: php artisan drover:import-horizon --dry-run: {named} settings named as not carried over or rewritten"
        ));
        let said = self
            .repo
            .artisan_ok(&["drover:import-horizon", "--force"])
            .await?;
        let config = std::fs::read_to_string(self.repo.dir.join("config/drover.php"))?;
        self.check(
            "step 2: drover:import-horizon --force writes config/drover.php from config/horizon.php",
            said.contains("wrote") && config.contains("'supervisor-1'"),
            first_lines(&said, 1),
        );
        self.repo.next_version()?;
        self.repo
            .commit("config/drover.php imported from config/horizon.php")
            .await?;
        self.event("step 2: deployed (with step 1's migration); nothing runs it yet");
        self.deploy("steps 1 and 2", true).await?;
        Ok(())
    }

    fn step3_service(&mut self) {
        for name in self.host_names() {
            self.event(format!(
                "step 3: {name}: /etc/drover/myapp.env, systemctl enable drover@myapp (not --now)"
            ));
        }
    }

    /// Step 5a, host by host: the master started and cron's line removed in one step. The hosts
    /// without cron first, so that a minute's due time comes with both running (h1's cron and the
    /// masters of h2 and h3): the guide's "while both run".
    async fn step5a_start_drover_stop_cron(&mut self) -> anyhow::Result<()> {
        let mut order: Vec<String> = self
            .hosts
            .iter()
            .filter(|h| h.cron.is_none())
            .map(|h| h.name.clone())
            .collect();
        order.extend(
            self.hosts
                .iter()
                .filter(|h| h.cron.is_some())
                .map(|h| h.name.clone()),
        );
        let workers = self.workers;
        for (i, name) in order.iter().enumerate() {
            if i == order.len() - 1 {
                // A minute's due time with cron and the masters both, then the last host.
                let boundary = self.until_next_minute(4.0).await;
                self.overlap_minutes.push((boundary / 60.0).round() as i64);
                let extra = self.sizes.service.saturating_sub(Duration::from_secs(4));
                self.serve(extra, "cron on h1 and the masters on h2, h3")
                    .await;
            }
            let host = self.host(name);
            host.start_master()?;
            let had_cron = host.cron.take();
            if let Some(cron) = &had_cron {
                cron.remove();
            }
            self.event(format!(
                "step 5a: {name}: systemctl start drover@myapp{}",
                if had_cron.is_some() {
                    " and its schedule:run line removed from the crontab, in one step"
                } else {
                    " (no cron line here)"
                }
            ));
            let host = self.host(name);
            host.wait_serving(workers, Duration::from_secs(90)).await?;
            let name = name.clone();
            self.event(format!("step 5a: {name}: serving"));
        }
        Ok(())
    }

    fn step5b_deploy_script(&mut self) {
        let script = std::fs::read_to_string(&self.script).unwrap_or_default();
        let last = script
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .unwrap_or("")
            .trim()
            .to_string();
        self.event(format!(
            "step 5b: the deploy script's last line: `{last}` (Horizon's own restart before it while Horizon runs)"
        ));
    }

    async fn step5c_switch_producers(&mut self) -> anyhow::Result<()> {
        for h in &self.hosts {
            h.set_env("QUEUE_CONNECTION", "drover")?;
        }
        self.event("step 5c: QUEUE_CONNECTION=drover in each host's .env, and a deploy");
        self.repo.next_version()?;
        self.repo.commit("producers on drover").await?;
        self.deploy("step 5c", self.sizes.restart_horizon).await?;
        Ok(())
    }

    /// Waits until `php artisan queue:monitor CONNECTION:default` on h1 shows 0: the time it took.
    async fn drain(&mut self, queue: &str, timeout: Duration) -> anyhow::Result<f64> {
        let t = Instant::now();
        let deadline = t + timeout;
        loop {
            let (_, said) = self.hosts[0]
                .artisan_output(&["queue:monitor", queue])
                .await?;
            if let Some(size) = monitor_size(&said) {
                if size == 0 {
                    return Ok(t.elapsed().as_secs_f64());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "php artisan queue:monitor {queue} did not show 0 within {timeout:?}:\n{said}"
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn step5d_drain_redis(&mut self) -> anyhow::Result<()> {
        let took = self
            .drain("redis:default", Duration::from_secs(120))
            .await?;
        self.event(format!(
            "step 5d: php artisan queue:monitor redis:default shows 0 ({took:.1} s)"
        ));
        Ok(())
    }

    async fn step5e_stop_horizon(&mut self) -> anyhow::Result<()> {
        for name in self.host_names() {
            let host = self.host(&name);
            host.artisan_ok(&["horizon:terminate"]).await?;
            if let Some(p) = &host.horizon {
                p.remove();
            }
            self.event(format!(
                "step 5e: {name}: php artisan horizon:terminate, and its program removed from supervisord"
            ));
        }
        for name in self.host_names() {
            let host = self.host(&name);
            if let Some(mut p) = host.horizon.take() {
                p.wait_gone(Duration::from_secs(90))
                    .await
                    .with_context(|| format!("{name}: Horizon did not stop"))?;
            }
        }
        self.event("step 5e: Horizon has stopped on every host");
        let d = self.sizes.service;
        self.serve(d, "drover alone").await;
        Ok(())
    }

    async fn step6_deploy(&mut self, n: usize) -> anyhow::Result<()> {
        self.repo.next_version()?;
        self.repo.commit(&format!("deploy {n}")).await?;
        self.event(format!("step 6: deploy {n} with Forge's script"));
        self.deploy(&format!("step 6, deploy {n}"), false).await?;
        let d = self.sizes.service;
        self.serve(d, "after the deploy").await;
        Ok(())
    }

    /// `systemctl restart drover@myapp` on `name` with the binary now at bin/drover: SIGTERM, the
    /// drain, the master again; then `php artisan drover:status`.
    async fn restart(
        &mut self,
        name: &str,
        kind: &str,
        from: String,
        to: String,
    ) -> anyhow::Result<()> {
        let workers = self.workers;
        let host = self.host(name);
        let t = now();
        let exit = host.stop_master(Duration::from_secs(60)).await?;
        let drained = now();
        host.start_master()?;
        let serving = host.wait_serving(workers, Duration::from_secs(90)).await?;
        let (status_exit, _) = host.artisan_output(&["drover:status"]).await?;
        self.restarts.push(Restart {
            host: name.to_string(),
            kind: kind.to_string(),
            from: from.clone(),
            to: to.clone(),
            drained_s: drained - t,
            serving_s: serving - t,
            exit,
            status_exit,
        });
        self.event(format!(
            "step 8: {name}: systemctl restart drover@myapp ({from} -> {to}): drained in {:.1} s (exit {exit}), serving {:.1} s after the SIGTERM; drover:status exits {status_exit}",
            drained - t,
            serving - t
        ));
        self.check(
            format!("step 8: {name}: {kind}: the master exits 0 on SIGTERM and drover:status exits 0 after"),
            exit == 0 && status_exit == 0,
            format!("exit {exit}, drover:status {status_exit}"),
        );
        Ok(())
    }

    async fn step8_upgrade(&mut self) -> anyhow::Result<()> {
        let new = version_of(&self.binary);
        match self.previous.clone() {
            Some(prev) => {
                self.event(format!(
                    "step 8: each host first onto the previous release, drover {} (RELEASES), host by host",
                    prev.version
                ));
                if !prev.runs_schedule {
                    self.host("h1").install_cron();
                    self.event(format!(
                        "step 8: drover {} runs no schedule (its scheduler came later): a fleet on it runs cron's line, back in h1's crontab",
                        prev.version
                    ));
                }
                for name in self.host_names() {
                    self.host(&name).install_binary(&prev.binary)?;
                    self.restart(
                        &name,
                        "onto the previous release",
                        new.clone(),
                        prev.version.clone(),
                    )
                    .await?;
                }
                let d = self.sizes.service;
                self.serve(d, "every host on the previous release").await;
                self.event("step 8: the upgrade, host by host: apt install, systemctl restart, drover:status");
                for name in self.host_names() {
                    let binary = self.binary.clone();
                    self.host(&name).install_binary(&binary)?;
                    self.restart(&name, "upgrade", prev.version.clone(), new.clone())
                        .await?;
                    // Its master runs the schedule now: the host's cron line goes, as in step 5a.
                    if let Some(cron) = self.host(&name).cron.take() {
                        cron.remove();
                        self.event(format!(
                            "step 8: {name}: its schedule:run line removed with the upgrade (step 5a)"
                        ));
                    }
                }
            }
            None => {
                self.event("step 8: no previous release's binary (the short form): systemctl restart onto the same binary, host by host");
                for name in self.host_names() {
                    self.restart(&name, "restart", new.clone(), new.clone())
                        .await?;
                }
            }
        }
        let d = self.sizes.service;
        self.serve(d, "after the upgrade").await;
        Ok(())
    }

    /// Step 7's third row: the database goes away (`pg_ctl stop -m fast`) for the outage, and
    /// comes back. `php artisan drover:status` on each host, every half second.
    async fn step7_outage(&mut self) -> anyhow::Result<()> {
        let names = self.host_names();
        for name in &names {
            let (code, said) = self.host(name).artisan_output(&["drover:status"]).await?;
            self.check(
                format!("step 7: {name}: drover:status exits 0 before the outage"),
                code == 0,
                format!("exit {code}: {}", first_lines(&said, 1)),
            );
        }
        let failed_before = self.failed_dispatches();
        let mut o = Outage::default();
        self.event(format!(
            "step 7: the database goes away for {:.0} s (pg_ctl stop -m fast)",
            self.sizes.outage.as_secs_f64()
        ));
        self.db.stop_for_outage().await?;
        o.stopped = now();
        let until = Instant::now() + self.sizes.outage;
        while Instant::now() < until {
            for name in &names {
                let (code, said) = self.host(name).artisan_output(&["drover:status"]).await?;
                let degraded = code == 5 && said.contains("database unreachable");
                let first = o.degraded_after.entry(name.clone()).or_insert(None);
                if first.is_none() {
                    if degraded {
                        *first = Some(now() - o.stopped);
                    }
                } else if !degraded {
                    *o.not_degraded_polls.entry(name.clone()).or_default() += 1;
                }
                o.said.insert(
                    name.clone(),
                    format!("exit {code}: {}", said_line(&said, "database unreachable")),
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.db.start_again().await?;
        o.started = now();
        self.event(format!(
            "step 7: the database is back ({:.1} s after the stop)",
            o.started - o.stopped
        ));
        let deadline = Instant::now() + Duration::from_secs(120);
        while names.iter().any(|n| !o.serving_after.contains_key(n)) && Instant::now() < deadline {
            for name in &names {
                if o.serving_after.contains_key(name) {
                    continue;
                }
                let (code, _) = self.host(name).artisan_output(&["drover:status"]).await?;
                if code == 0 {
                    o.serving_after
                        .insert(name.clone(), Some(now() - o.started));
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        for name in &names {
            o.serving_after.entry(name.clone()).or_insert(None);
            let d = o.degraded_after.get(name).copied().flatten();
            let polls = o.not_degraded_polls.get(name).copied().unwrap_or(0);
            self.check(
                format!("step 7: {name}: drover:status exits 5 naming \"database unreachable\" during the outage"),
                d.is_some() && polls == 0,
                format!(
                    "after {}; then {polls} polls that said otherwise; last: {}",
                    d.map_or("never".into(), |d| format!("{d:.1} s")),
                    o.said.get(name).cloned().unwrap_or_default()
                ),
            );
            let s = o.serving_after[name];
            self.check(
                format!("step 7: {name}: drover:status exits 0 after the outage"),
                s.is_some(),
                s.map_or("not within 120 s".into(), |s| {
                    format!("{s:.1} s after the database's return")
                }),
            );
        }
        o.failed_dispatches = self.failed_dispatches() - failed_before;
        self.outage = Some(o);
        let d = self.sizes.service;
        self.serve(d, "after the outage").await;
        Ok(())
    }

    fn failed_dispatches(&self) -> usize {
        self.producer
            .as_ref()
            .map_or(0, |p| p.all().iter().filter(|d| !d.ok).count())
    }

    async fn step11_roll_back(&mut self) -> anyhow::Result<()> {
        for name in self.host_names() {
            let host = self.host(&name);
            host.start_horizon();
            host.set_env("DROVER_SCHEDULE", "false")?;
            self.event(format!(
                "step 11a: {name}: Horizon started (supervisord); DROVER_SCHEDULE=false in .env"
            ));
        }
        self.host("h1").install_cron();
        self.event("step 11a: h1: the schedule:run line back in the crontab");
        for h in &self.hosts {
            h.set_env("QUEUE_CONNECTION", "redis")?;
        }
        self.repo.next_version()?;
        self.repo.commit("back to Horizon").await?;
        self.event("step 11b: QUEUE_CONNECTION=redis in each host's .env, and a deploy (Horizon's restart in the script again)");
        self.deploy("step 11b", self.sizes.restart_horizon).await?;
        let took = self
            .drain("drover:default", Duration::from_secs(120))
            .await?;
        self.event(format!(
            "step 11c: php artisan queue:monitor drover:default shows 0 ({took:.1} s)"
        ));
        for name in self.host_names() {
            let exit = self
                .host(&name)
                .stop_master(Duration::from_secs(60))
                .await?;
            self.event(format!(
                "step 11d: {name}: systemctl disable --now drover@myapp (the master exited {exit})"
            ));
            self.check(
                format!("step 11d: {name}: the master exits 0"),
                exit == 0,
                format!("exit {exit}"),
            );
        }
        let d = if self.sizes.short {
            Duration::ZERO
        } else {
            // A minute's due time on cron alone again (checked: 10 s before the end).
            let t = now();
            Duration::from_secs_f64((t / 60.0).floor() * 60.0 + 72.0 - t)
        };
        self.serve(d, "Horizon and cron alone again").await;
        Ok(())
    }

    /// The end: the producer stopped, redis drained, cron's line removed, Horizon stopped.
    async fn finish(&mut self) -> anyhow::Result<()> {
        if let Some(p) = &self.producer {
            p.stop().await;
        }
        self.event("the producer stops");
        let took = self
            .drain("redis:default", Duration::from_secs(120))
            .await?;
        self.event(format!("redis drained ({took:.1} s)"));
        // The last due time checked: one whose runs have had 10 s to start before cron goes.
        self.schedule_to = ((now() - 10.0) / 60.0).floor() * 60.0;
        if let Some(cron) = self.host("h1").cron.take() {
            cron.remove();
            let deadline = Instant::now() + Duration::from_secs(60);
            while !cron.idle() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        for name in self.host_names() {
            let host = self.host(&name);
            host.artisan_ok(&["horizon:terminate"]).await?;
            if let Some(mut p) = host.horizon.take() {
                p.wait_gone(Duration::from_secs(90)).await?;
            }
        }
        self.event("cron's line removed and Horizon stopped: the end");
        // "It is said" (docs/schedule.md, "Beside cron"): a master names the host whose cron still
        // runs the schedule (it reads what Laravel's scheduler recorded once a minute).
        let said: Vec<String> = self
            .hosts
            .iter()
            .filter(|h| {
                std::fs::read_to_string(h.log_path("master.log"))
                    .unwrap_or_default()
                    .contains("Laravel's own scheduler still runs beside drover on host h1")
            })
            .map(|h| h.name.clone())
            .collect();
        // Read once a minute: the short form's overlaps are too brief to be sure of it.
        if !self.sizes.short {
            self.check(
                "a master's log named h1's cron while both ran the schedule",
                !said.is_empty(),
                format!("said by {said:?}"),
            );
        }
        Ok(())
    }

    /// A deploy: the repository's head, with Forge's script, on each host in turn; then waits until
    /// every worker runs it. `restart_horizon`: the script restarts Horizon too (Horizon runs).
    pub async fn deploy(&mut self, step: &str, restart_horizon: bool) -> anyhow::Result<()> {
        let version = self.repo.version_name();
        let before: BTreeMap<String, usize> = self
            .hosts
            .iter()
            .map(|h| (h.name.clone(), reloads_logged(h)))
            .collect();
        let mut runs = Vec::new();
        for i in 0..self.hosts.len() {
            let run = deploy_on(&self.hosts[i], &self.repo, &self.script, restart_horizon).await?;
            self.releases.insert(run.release.clone(), version.clone());
            let name = self.hosts[i].name.clone();
            self.event(format!(
                "{step}: {name}: Forge's deploy script, release {} ({version}), {:.1} s{}",
                run.release
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy(),
                run.ended - run.started,
                if restart_horizon {
                    ", with horizon:terminate"
                } else {
                    ""
                }
            ));
            runs.push(run);
        }
        let mut deploy = Deploy {
            version: version.clone(),
            step: step.to_string(),
            hosts: runs,
            restart_horizon,
            completed: now(),
            complete: false,
            drover_done: BTreeMap::new(),
            horizon_done: BTreeMap::new(),
            reloads: BTreeMap::new(),
        };
        // (Before Horizon first starts nothing runs: done at once; its start completes it.)
        let wait = self.sizes.deploy_wait;
        let (drover, horizon, at, missing) = self.wait_release(&version, wait).await;
        deploy.completed = at;
        deploy.complete = missing.is_empty();
        deploy.drover_done = drover;
        deploy.horizon_done = horizon;
        if !missing.is_empty() {
            self.check(
                format!("{step}: every worker runs {version} within {:.0} s of the last host's queue:restart", wait.as_secs_f64()),
                false,
                format!("still on another release: {}", missing.join("; ")),
            );
        } else if self
            .hosts
            .iter()
            .any(|h| h.master.is_some() || h.horizon.is_some())
        {
            self.event(format!(
                "{step}: every worker runs {version}, {:.1} s after the last host's queue:restart",
                at - deploy.last_restart()
            ));
        }
        deploy.reloads = self
            .hosts
            .iter()
            .map(|h| (h.name.clone(), reloads_logged(h) - before[&h.name]))
            .collect();
        self.deploys.push(deploy);
        Ok(())
    }

    /// Waits until every worker of every host — its master's and its Horizon's — runs in a release
    /// of `version`: per host, when its master's did and when its Horizon's did, and when all did;
    /// after `timeout`, what still runs another release (empty when all did).
    #[allow(clippy::type_complexity)]
    async fn wait_release(
        &mut self,
        version: &str,
        timeout: Duration,
    ) -> (
        BTreeMap<String, Option<f64>>,
        BTreeMap<String, Option<f64>>,
        f64,
        Vec<String>,
    ) {
        let deadline = Instant::now() + timeout;
        let mut drover: BTreeMap<String, Option<f64>> = BTreeMap::new();
        let mut horizon: BTreeMap<String, Option<f64>> = BTreeMap::new();
        let workers = self.workers;
        loop {
            let mut all = true;
            let mut seen = Vec::new();
            for h in &self.hosts {
                let by_kind = h.worker_releases();
                for (kind, runs, done, expected) in [
                    ("drover", h.master.is_some(), &mut drover, workers),
                    ("horizon", h.horizon.is_some(), &mut horizon, workers),
                ] {
                    if !runs {
                        done.insert(h.name.clone(), None);
                        continue;
                    }
                    let procs = by_kind.get(kind).cloned().unwrap_or_default();
                    let on = procs
                        .iter()
                        .filter(|(_, dir)| {
                            self.releases.get(dir).map(String::as_str) == Some(version)
                        })
                        .count();
                    let ok = procs.len() >= expected && on == procs.len();
                    if ok {
                        done.entry(h.name.clone()).or_insert(Some(now()));
                    } else {
                        done.remove(&h.name);
                        all = false;
                        seen.push(format!(
                            "{} {kind}: {}",
                            h.name,
                            procs
                                .iter()
                                .map(|(p, d)| format!(
                                    "{p} in {}",
                                    self.releases
                                        .get(d)
                                        .cloned()
                                        .unwrap_or_else(|| d.display().to_string())
                                ))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                }
            }
            if all {
                return (drover, horizon, now(), Vec::new());
            }
            if Instant::now() > deadline {
                return (drover, horizon, now(), seen);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops whatever still runs (a run that failed part way).
    pub async fn abandon(&mut self) {
        if let Some(p) = &self.producer {
            p.stop().await;
        }
        for h in &mut self.hosts {
            if let Some(c) = h.cron.take() {
                c.remove();
            }
            if let Some(p) = h.horizon.take() {
                p.kill();
            }
            if h.master.is_some() {
                let _ = h.stop_master(Duration::from_secs(30)).await;
            }
        }
    }
}

/// `drover version`'s version ("0.2.0").
pub fn version_of(binary: &Path) -> String {
    std::process::Command::new(binary)
        .args(["version", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .and_then(|v| v["version"].as_str().map(str::to_string))
        .unwrap_or_else(|| binary.display().to_string())
}

/// The reloads a host's master log has said so far (every master it ran).
fn reloads_logged(h: &Host) -> usize {
    std::fs::read_to_string(h.log_path("master.log"))
        .unwrap_or_default()
        .matches("reloading: re-reading the configuration")
        .count()
}

/// The size `queue:monitor` shows for its one queue (`[redis] default ..... [N] OK`).
pub fn monitor_size(said: &str) -> Option<u64> {
    said.lines()
        .find(|l| l.trim_start().starts_with('[') && l.contains("] default"))
        .and_then(|l| {
            let open = l.rfind("[")?;
            let close = l[open..].find(']')? + open;
            l[open + 1..close].trim().parse().ok()
        })
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(n)
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The first line of `text` containing `needle`, else its first line.
fn said_line(text: &str, needle: &str) -> String {
    text.lines()
        .find(|l| l.contains(needle))
        .or_else(|| text.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn queue_monitor_says_a_queue_size() {
        let said = "\n  Queue name ........... Size / Status  \n  [redis] default ............ [12] OK  \n  Pending jobs ..... 0\n";
        assert_eq!(super::monitor_size(said), Some(12));
        assert_eq!(super::monitor_size("nothing"), None);
    }
}
