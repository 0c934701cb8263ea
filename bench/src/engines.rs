//! The engines, each started with N workers on the same app, jobs and database: drover with its
//! workers forked from a zygote (the Laravel default) and with workers started by exec, the two
//! `queue:work` peers, and Laravel Horizon (on Laravel 12); and what a drover master's log says
//! it claimed ([`ClaimTally`]).

use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::bail;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::stack::Stack;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Engine {
    /// `php artisan drover`: the drover master and its `drover:work` workers, forked from a
    /// zygote (`spawn: fork`).
    #[serde(rename = "drover")]
    Drover,
    /// The same with each worker started by exec (`spawn: exec`), booting Laravel itself.
    #[serde(rename = "drover (exec)")]
    DroverExec,
    /// N × `php artisan queue:work database`.
    #[serde(rename = "queue:work database")]
    Database,
    /// N × `php artisan queue:work redis` (Horizon's driver).
    #[serde(rename = "queue:work redis")]
    Redis,
    /// `php artisan horizon`: Horizon's master, one supervisor (`balance=simple`) and its N
    /// `horizon:work` processes, on the same redis-server ([`crate::horizon`]). Laravel 12 only.
    #[serde(rename = "horizon")]
    Horizon,
    /// drover (forked workers) with the opt-in asynchronous commit of a dispatch
    /// (`lose_dispatches_on_database_crash`, docs/deploy.md): shape 1 only, beside
    /// [`Engine::RedisAof`], the Redis setting that risks the same kind of loss.
    #[serde(rename = "drover (lose_dispatches_on_database_crash)")]
    DroverAsyncCommit,
    /// `queue:work redis` with Redis's append-only file on, fsynced every second
    /// (`appendonly yes`, `appendfsync everysec`; the other Redis engines run without
    /// persistence): shape 1 only.
    #[serde(rename = "queue:work redis (AOF everysec)")]
    RedisAof,
}

impl Engine {
    pub const ALL: [Engine; 7] = [
        Engine::Drover,
        Engine::DroverExec,
        Engine::Database,
        Engine::Redis,
        Engine::Horizon,
        Engine::DroverAsyncCommit,
        Engine::RedisAof,
    ];

    /// The engines that trade durability of a dispatch for its speed, each named for it: run in
    /// shape 1 only, beside each other, never counted as drover or as the peers in the targets.
    pub const DURABILITY_TRADES: [Engine; 2] = [Engine::DroverAsyncCommit, Engine::RedisAof];

    /// The engines that run on the bench's app of this Laravel (Horizon is installed on 12
    /// only), without the durability trades.
    pub fn on(laravel: u8) -> Vec<Engine> {
        Engine::ALL
            .into_iter()
            .filter(|e| *e != Engine::Horizon || laravel == 12)
            .filter(|e| !Engine::DURABILITY_TRADES.contains(e))
            .collect()
    }

    /// A drover master runs it.
    pub fn is_drover(self) -> bool {
        matches!(
            self,
            Engine::Drover | Engine::DroverExec | Engine::DroverAsyncCommit
        )
    }

    /// It has processes of its own beside the workers (drover's master, Horizon's master and
    /// supervisor); queue:work has none.
    pub fn has_orchestrator(self) -> bool {
        self.is_drover() || self == Engine::Horizon
    }

    /// The engines of a shape: [`Engine::on`] (shape 1 adds the durability trades), or the
    /// ones `keys` (`--engines`) name when any are given.
    pub fn chosen(laravel: u8, keys: &[String], seed: bool) -> Vec<Engine> {
        Engine::ALL
            .into_iter()
            .filter(|e| *e != Engine::Horizon || laravel == 12)
            .filter(|e| {
                if keys.is_empty() {
                    Engine::on(laravel).contains(e) || seed
                } else {
                    keys.iter().any(|k| k == e.key())
                }
            })
            .collect()
    }

    /// The environment this engine's application processes run with, producers included: a
    /// Horizon application has Horizon's provider registered (`bench/horizon/providers.php`), so
    /// its dispatches go through Horizon's connector, which records each pushed job.
    pub fn app_env(self) -> Vec<(&'static str, String)> {
        match self {
            Engine::Horizon => vec![("BENCH_HORIZON", "1".to_string())],
            // The fixture's config/queue.php reads it into the drover connection.
            Engine::DroverAsyncCommit => {
                vec![("DROVER_LOSE_DISPATCHES_ON_CRASH", "1".to_string())]
            }
            _ => Vec::new(),
        }
    }

    /// A short name, for `--engines` and plot labels.
    pub fn key(self) -> &'static str {
        match self {
            Engine::Drover => "drover",
            Engine::DroverExec => "drover-exec",
            Engine::Database => "db",
            Engine::Redis => "redis",
            Engine::Horizon => "horizon",
            Engine::DroverAsyncCommit => "drover-async",
            Engine::RedisAof => "redis-aof",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Engine::Drover => "drover",
            Engine::DroverExec => "drover (exec)",
            Engine::Database => "queue:work database",
            Engine::Redis => "queue:work redis",
            Engine::Horizon => "horizon",
            Engine::DroverAsyncCommit => "drover (lose_dispatches_on_database_crash)",
            Engine::RedisAof => "queue:work redis (AOF everysec)",
        }
    }

    /// The Laravel queue connection producers dispatch to.
    pub fn connection(self) -> &'static str {
        match self {
            Engine::Drover | Engine::DroverExec | Engine::DroverAsyncCommit => "drover",
            Engine::Database => "database",
            Engine::Redis | Engine::Horizon | Engine::RedisAof => "redis",
        }
    }

    /// Jobs still queued (or held) in this engine's store.
    pub async fn backlog(self, stack: &Stack) -> anyhow::Result<i64> {
        match self {
            Engine::Drover | Engine::DroverExec | Engine::DroverAsyncCommit => {
                stack.scalar_i64("SELECT count(*) FROM drover.jobs").await
            }
            Engine::Database => stack.scalar_i64("SELECT count(*) FROM public.jobs").await,
            Engine::Redis | Engine::Horizon | Engine::RedisAof => {
                let out = stack.artisan(&["app:eval", "return Queue::connection('redis')->size('default') + Illuminate\\Support\\Facades\\Redis::connection()->zcard('queues:default:reserved') + Illuminate\\Support\\Facades\\Redis::connection()->zcard('queues:default:delayed');"])?;
                Ok(out.trim().parse().unwrap_or(-1))
            }
        }
    }
}

/// How workers are run for a shape.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSettings {
    pub workers: usize,
    /// drover's prefetch per worker.
    pub prefetch: usize,
    /// queue:work's --sleep (seconds to wait after an empty poll).
    pub sleep: u32,
    /// drover: jobs after which a worker is replaced (0: never).
    pub max_jobs: usize,
}

impl WorkerSettings {
    pub fn new(workers: usize, prefetch: usize, sleep: u32) -> WorkerSettings {
        WorkerSettings {
            workers,
            prefetch,
            sleep,
            max_jobs: 0,
        }
    }
}

/// Waits up to 10 s for `pids` to exit, then SIGKILLs those left and says so: a process of one
/// engine's run must not run on into the next.
async fn reap_left_behind(pids: &[i32]) {
    let alive = |pid: &i32| std::path::Path::new(&format!("/proc/{pid}")).exists() && !zombie(*pid);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(alive) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Vec<i32> = pids.iter().copied().filter(alive).collect();
    if !left.is_empty() {
        eprintln!(
            "bench:   {} process(es) of the engine still ran 10 s after its master exited; killed: {left:?}",
            left.len()
        );
        for pid in left {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// A process that exited and waits for its parent to collect it.
fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// A running engine.
pub struct Running {
    pub engine: Engine,
    /// The drover master (none for queue:work: there is no orchestrator).
    pub master: Option<Child>,
    /// queue:work processes, restarted when they exit (minimal supervision).
    pub workers: Vec<Child>,
    settings: WorkerSettings,
}

impl Running {
    pub async fn start(
        engine: Engine,
        stack: &Stack,
        settings: WorkerSettings,
    ) -> anyhow::Result<Running> {
        let mut running = Running {
            engine,
            master: None,
            workers: Vec::new(),
            settings,
        };
        // Redis's append-only file for that engine's runs only (every start sets it).
        stack.redis_persistence(engine == Engine::RedisAof)?;
        match engine {
            Engine::Drover | Engine::DroverExec | Engine::DroverAsyncCommit => {
                let spawn = if engine == Engine::DroverExec {
                    "exec"
                } else {
                    "fork"
                };
                let env = [
                    ("DROVER_PROCESSES", settings.workers.to_string()),
                    ("DROVER_PREFETCH_JOBS", settings.prefetch.to_string()),
                    ("DROVER_SPAWN", spawn.to_string()),
                    ("DROVER_MAX_JOBS", settings.max_jobs.to_string()),
                    // The master logs each worker's time from spawn request to hello at debug.
                    ("DROVER_LOG", "info,drover::master=debug".to_string()),
                ];
                running.master = Some(stack.spawn_logged(&env, &["drover"], "drover.log")?);
                running.wait_drover_ready(stack).await?;
            }
            Engine::Horizon => {
                let mut env = engine.app_env();
                env.extend([
                    ("BENCH_HORIZON_PROCESSES", settings.workers.to_string()),
                    ("BENCH_HORIZON_SLEEP", settings.sleep.to_string()),
                ]);
                let child = stack.spawn_logged(&env, &["horizon"], "horizon.log")?;
                let master = child.id() as i32;
                running.master = Some(child);
                let deadline = Instant::now() + Duration::from_secs(60);
                while crate::horizon::tree(master).workers < settings.workers {
                    if Instant::now() > deadline {
                        bail!(
                            "Horizon did not start {} workers in 60s (see horizon.log in the bench's scratch directory)",
                            settings.workers
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                // As for queue:work: no readiness signal, so each worker gets its boot time.
                tokio::time::sleep(Duration::from_millis(500 + 50 * settings.workers as u64)).await;
            }
            Engine::Database | Engine::Redis | Engine::RedisAof => {
                for i in 0..settings.workers {
                    running.workers.push(running.spawn_queue_work(stack, i)?);
                }
                // queue:work has no readiness signal: give each worker its boot time.
                tokio::time::sleep(Duration::from_millis(500 + 50 * settings.workers as u64)).await;
            }
        }
        Ok(running)
    }

    fn spawn_queue_work(&self, stack: &Stack, i: usize) -> anyhow::Result<Child> {
        let sleep = format!("--sleep={}", self.settings.sleep);
        let log = stack.log(&format!("queue-work-{i}.log"));
        Ok(stack
            .command(&[
                "queue:work",
                self.engine.connection(),
                "--queue=default",
                "--tries=1",
                &sleep,
                "--timeout=0",
            ])
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?)
    }

    /// Restarts queue:work processes that exited, as supervisord would.
    pub fn supervise(&mut self, stack: &Stack) -> anyhow::Result<()> {
        for i in 0..self.workers.len() {
            if self.workers[i].try_wait()?.is_some() {
                self.workers[i] = self.spawn_queue_work(stack, i)?;
            }
        }
        Ok(())
    }

    async fn wait_drover_ready(&self, stack: &Stack) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = std::process::Command::new(stack.drover())
                .args(["status", "--json", "--state-dir"])
                .arg(stack.state_dir())
                .output()?;
            if out.status.success() {
                let s: serde_json::Value = serde_json::from_slice(&out.stdout)?;
                // Workers that said hello and are not on their way out.
                let ready = s["pools"][0]["serving"].as_u64().map(|n| n as usize);
                if ready == Some(self.settings.workers) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "drover did not get {} workers ready in 60s",
                    self.settings.workers
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A function giving (orchestrator pids, every pid of the engine) at the moment it is called:
    /// the drover master and its children, or the queue:work processes this harness started.
    pub fn pid_source(&self) -> impl Fn() -> (Vec<i32>, Vec<i32>) + Send + 'static {
        let master = self.master.as_ref().map(|m| m.id() as i32);
        let horizon = self.engine == Engine::Horizon;
        move || match master {
            Some(m) if horizon => {
                let tree = crate::horizon::tree(m);
                (tree.orchestrator, tree.all)
            }
            Some(m) => {
                let mut all = vec![m];
                all.extend(
                    crate::sampler::children(m)
                        .into_iter()
                        .filter(|p| crate::sampler::comm(*p).as_deref() != Some("postgres")),
                );
                (vec![m], all)
            }
            None => {
                let me = std::process::id() as i32;
                let workers = crate::sampler::children(me)
                    .into_iter()
                    .filter(|p| {
                        std::fs::read(format!("/proc/{p}/cmdline"))
                            .map(|c| String::from_utf8_lossy(&c).contains("queue:work"))
                            .unwrap_or(false)
                    })
                    .collect();
                (Vec::new(), workers)
            }
        }
    }

    /// [`Running::stop`], then a drover master's claim tally from its log (none for the peers).
    pub async fn stop_counted(self, stack: &Stack) -> anyhow::Result<Option<ClaimTally>> {
        let drover = self.engine.is_drover();
        self.stop().await?;
        if !drover {
            return Ok(None);
        }
        let log = std::fs::read_to_string(stack.log_path("drover.log"))?;
        Ok(ClaimTally::from_log(&log))
    }

    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(master) = &mut self.master {
            // Horizon's master can exit before its workers do (seen: four `horizon:work`
            // processes left behind under init, polling the next run's Redis queue at
            // `--sleep=0`). Its whole tree, taken before the signal, must be gone.
            let tree = match self.engine {
                Engine::Horizon => crate::horizon::tree(master.id() as i32).all,
                _ => Vec::new(),
            };
            let _ = kill(Pid::from_raw(master.id() as i32), Signal::SIGTERM);
            master.wait()?;
            reap_left_behind(&tree).await;
        }
        for w in &self.workers {
            let _ = kill(Pid::from_raw(w.id() as i32), Signal::SIGTERM);
        }
        for w in &mut self.workers {
            w.wait()?;
        }
        Ok(())
    }
}

/// A drover master's count of its claims and settles, from its `master stopped` line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClaimTally {
    /// Jobs leased.
    pub claimed: u64,
    /// Jobs completed.
    pub done: u64,
    /// Prefetched jobs handed back without starting (each a claim and a release for nothing).
    pub returned_unstarted: u64,
    /// Acks written by the claim they rode with.
    pub acks_ridden: u64,
}

impl ClaimTally {
    /// The counts of a `master stopped` log line (`name=value` fields), if the log has one.
    pub fn from_log(log: &str) -> Option<ClaimTally> {
        let line = log.lines().rev().find(|l| l.contains("master stopped"))?;
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
                .unwrap_or(0)
        };
        Some(ClaimTally {
            claimed: field("claimed"),
            done: field("done"),
            returned_unstarted: field("returned_unstarted"),
            acks_ridden: field("acks_ridden"),
        })
    }
}
