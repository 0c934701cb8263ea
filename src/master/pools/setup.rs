//! From the run configuration to pools of workers, at start and again on every reload.
//!
//! - [`WorkerContext`]: what every worker gets whatever its pool (the embedded database's DSN, the
//!   zygotes of fork mode). Workers run as the master's own user (`crate::privileges`).
//! - [`pool_config`]: one pool's supervisor settings from its [`PoolSpec`].
//! - [`Zygotes`]: the zygote line of each pool in fork mode, kept in step with the configuration.
//! - [`ConfigSource`]: where the configuration came from, and how to read it anew on a reload
//!   (SIGHUP, `drover restart`): run `reload_command` (`php artisan drover --export`), which prints
//!   the contract, or re-read the file.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_supervisor::circuit::CircuitConfig;
use drover_supervisor::{
    PoolConfig, Rendezvous, Spawn, WorkerCommand, WorkerEvent, ZygoteConfig, ZygoteLine,
};
use tokio::sync::mpsc;

use crate::config::{Member, PoolSpec, RunConfig, SpawnMode};
use crate::state_dir::read_contract;

/// What every worker gets, whatever its pool.
#[derive(Debug, Clone, Default)]
pub struct WorkerContext {
    /// The embedded cluster's PDO DSN, for workers of the embedded default.
    pub embedded_dsn: Option<String>,
    /// The zygote lines of pools in fork mode (none before the master's event loop exists).
    pub zygotes: Option<Zygotes>,
    /// Unit tests: every pool built with this context, at start or by a reload, places stand-in
    /// workers instead of spawning processes (`drover_supervisor::pool::StandIn`).
    #[cfg(test)]
    pub stand_ins: bool,
}

impl WorkerContext {
    /// Without the embedded DSN (known once the embedded cluster runs: [`Self::embedded_dsn`]) and
    /// the zygotes (known once the rendezvous is bound: [`Self::zygotes`]).
    pub fn new() -> Self {
        WorkerContext::default()
    }

    /// The workers of the embedded default connect with this DSN.
    pub fn embedded_dsn(mut self, dsn: Option<String>) -> Self {
        self.embedded_dsn = dsn;
        self
    }

    /// Pools in fork mode fork from these lines.
    pub fn zygotes(mut self, zygotes: Zygotes) -> Self {
        self.zygotes = Some(zygotes);
        self
    }
}

/// One pool's worker command, as every member of the pool starts it (`exec` mode) — and, with
/// the zygote's program and arguments, as its zygote starts (`fork` mode).
fn worker_command(
    run: &RunConfig,
    spec: &PoolSpec,
    ctx: &WorkerContext,
    command: &[String],
) -> WorkerCommand {
    let mut env: Vec<(OsString, OsString)> =
        spec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    if !spec.env.contains_key("DROVER_PREFETCH") {
        env.push(("DROVER_PREFETCH".into(), spec.prefetch.to_string().into()));
    }
    env.push(("DROVER_POOL".into(), spec.name.clone().into()));
    if let Some(dsn) = &ctx.embedded_dsn {
        env.push(("DROVER_PDO_DSN".into(), dsn.into()));
    }
    WorkerCommand {
        program: command[0].clone().into(),
        args: command[1..].iter().map(OsString::from).collect(),
        env,
        cwd: spec.cwd.clone().or_else(|| run.cwd.clone()),
        nice: (spec.nice != 0).then_some(spec.nice),
    }
}

/// The zygote settings of a pool in fork mode.
fn zygote_config(run: &RunConfig, spec: &PoolSpec, ctx: &WorkerContext) -> ZygoteConfig {
    let command = spec.zygote_command.as_deref().unwrap_or(&spec.command);
    let mut config = ZygoteConfig::new(worker_command(run, spec, ctx, command));
    config.boot_timeout = Duration::from_secs_f64(spec.boot_timeout);
    config.failures = run.restart_failures;
    config.max_frame_bytes = run.max_frame_bytes;
    config
}

/// The zygote line of each pool in fork mode, by the pool's name in the configuration (every
/// member of a balanced pool forks from its pool's line). Cloning shares it.
#[derive(Clone)]
pub struct Zygotes {
    /// Where forked workers connect, or why forking is not possible here.
    rendezvous: Result<Arc<Rendezvous>, String>,
    /// The master's worker event channel (zygotes report on it).
    events: mpsc::UnboundedSender<WorkerEvent>,
    lines: Arc<Mutex<BTreeMap<String, ZygoteLine>>>,
    /// Lines of pools a reload removed, shut down: their zygote's late reports still reach them
    /// (a worker forked after it was given up is killed), until a pool of the name comes back.
    retired: Arc<Mutex<BTreeMap<String, ZygoteLine>>>,
}

impl std::fmt::Debug for Zygotes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zygotes")
            .field("lines", &self.names())
            .finish_non_exhaustive()
    }
}

impl Zygotes {
    pub fn new(
        rendezvous: Result<Arc<Rendezvous>, String>,
        events: mpsc::UnboundedSender<WorkerEvent>,
    ) -> Zygotes {
        Zygotes {
            rendezvous,
            events,
            lines: Arc::default(),
            retired: Arc::default(),
        }
    }

    fn lines(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ZygoteLine>> {
        self.lines.lock().expect("not poisoned")
    }

    pub fn names(&self) -> Vec<String> {
        self.lines().keys().cloned().collect()
    }

    /// The line of the pool `name` (or of a removed pool of that name, for its zygote's reports).
    pub fn get(&self, name: &str) -> Option<ZygoteLine> {
        self.lines().get(name).cloned().or_else(|| {
            self.retired
                .lock()
                .expect("not poisoned")
                .get(name)
                .cloned()
        })
    }

    pub fn all(&self) -> Vec<ZygoteLine> {
        self.lines().values().cloned().collect()
    }

    /// Brings the lines in step with `run`: a line for each pool in fork mode (its zygote
    /// started), a reload's new code for each existing one (`reload`), exec for pools switched to
    /// it, and lines of pools gone from the configuration shut down. Returns the lines whose
    /// pools may fill places at once.
    pub fn sync(&self, run: &RunConfig, ctx: &WorkerContext, reload: bool) -> Vec<String> {
        let mut lines = self.lines();
        let mut fill = Vec::new();
        for spec in &run.pools {
            let config = (spec.spawn == SpawnMode::Fork).then(|| zygote_config(run, spec, ctx));
            let now = match lines.get(&spec.name) {
                Some(line) if reload => line.reload(config),
                Some(_) => false,
                None => {
                    if config.is_none() {
                        continue;
                    }
                    let line = ZygoteLine::new(
                        &spec.name,
                        config,
                        self.rendezvous.clone(),
                        self.events.clone(),
                    );
                    let now = line.start();
                    lines.insert(spec.name.clone(), line);
                    now
                }
            };
            if now {
                fill.push(spec.name.clone());
            }
        }
        let mut retired = self.retired.lock().expect("not poisoned");
        lines.retain(|name, line| {
            let kept = run.pools.iter().any(|p| &p.name == name);
            if !kept {
                line.shut_down();
                retired.insert(name.clone(), line.clone());
            }
            kept
        });
        retired.retain(|name, _| !lines.contains_key(name));
        fill
    }

    /// No more zygotes (the master shuts down).
    pub fn shut_down(&self) {
        for line in self.lines().values() {
            line.shut_down();
        }
    }
}

/// The supervisor settings of one member of a pool (the pool itself, or one queue's workers of a
/// balanced pool). Its workers get `DROVER_POOL` = the pool's name in the configuration. A pool
/// in fork mode forks from its line in `ctx.zygotes` ([`Zygotes::sync`] first).
pub fn pool_config(
    run: &RunConfig,
    spec: &PoolSpec,
    member: &Member,
    ctx: &WorkerContext,
) -> PoolConfig {
    let mut config = PoolConfig::new(worker_command(run, spec, ctx, &spec.command));
    config.spawn = match (spec.spawn, &ctx.zygotes) {
        (SpawnMode::Fork, Some(zygotes)) => zygotes
            .get(&spec.name)
            .map(Spawn::Fork)
            .unwrap_or(Spawn::Exec),
        _ => Spawn::Exec,
    };
    config.name = member.name.clone();
    config.processes = member.processes;
    config.max_frame_bytes = run.max_frame_bytes;
    config.boot_timeout = Duration::from_secs_f64(spec.boot_timeout);
    let pause = Duration::from_secs_f64(run.restart_pause);
    config.circuit = CircuitConfig {
        failures: run.restart_failures,
        open_for: pause,
        open_max: pause * 10,
    };
    config
}

/// One member of a pool as the master runs it, its workers not yet started: the one builder for
/// start-up and reload.
pub fn build_pool(
    run: &RunConfig,
    spec: &PoolSpec,
    member: &Member,
    ctx: &WorkerContext,
    events: mpsc::UnboundedSender<WorkerEvent>,
) -> Result<super::PoolRuntime, drover_supervisor::SupervisorError> {
    #[cfg_attr(not(test), allow(unused_mut))]
    let mut pool = drover_supervisor::Pool::new(pool_config(run, spec, member, ctx), events)?;
    #[cfg(test)]
    if ctx.stand_ins {
        pool.use_stand_ins();
    }
    Ok(
        super::PoolRuntime::new(pool, member.queues.clone(), spec.policy())
            .with_memory_limit(spec.memory),
    )
}

/// Every pool of the configuration (each member of a balanced one), in its order.
pub fn build_pools(
    run: &RunConfig,
    ctx: &WorkerContext,
    events: &mpsc::UnboundedSender<WorkerEvent>,
) -> Result<Vec<super::PoolRuntime>, drover_supervisor::SupervisorError> {
    let mut pools = Vec::new();
    for spec in &run.pools {
        for member in spec.members() {
            pools.push(build_pool(run, spec, &member, ctx, events.clone())?);
        }
    }
    Ok(pools)
}

/// Where the configuration came from.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    /// `--config FILE`; `None` when the master was configured by flags.
    pub path: Option<PathBuf>,
    /// Prints the configuration anew (the contract's `reload_command`).
    pub reload_command: Option<Vec<String>>,
    /// Where the reload command runs (the contract's `cwd`, as given: a `current` symlink is
    /// resolved when the command starts, so it is the new release's).
    pub cwd: Option<PathBuf>,
}

/// The most a reload command may take.
const RELOAD_COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

impl ConfigSource {
    /// The configuration as it is now: `None` when there is nothing to re-read (flags), else the
    /// validated new configuration or every problem with it. The reload command runs as the
    /// master's user, as the workers do; a file is read only as [`read_contract`] allows.
    pub async fn reread(&self) -> Result<Option<RunConfig>, String> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let text = match &self.reload_command {
            Some(command) => {
                crate::process::app_command::run(
                    command,
                    self.cwd.as_deref(),
                    RELOAD_COMMAND_TIMEOUT,
                )
                .await?
            }
            None => read_contract(path).map_err(|e| e.to_string())?,
        };
        let config = RunConfig::from_json(&text).map_err(|problems| {
            format!(
                "the new configuration is invalid:\n  - {}",
                problems.join("\n  - ")
            )
        })?;
        if self.reload_command.is_some() {
            // Keep the file in step with what runs, for the next start and for operators.
            if let Err(e) = write_contract(path, &text) {
                tracing::warn!(
                    "could not write the reloaded configuration to {}: {e}",
                    path.display()
                );
            }
        }
        Ok(Some(config))
    }
}

/// Writes the contract `text` over `path` as the reload read it: a new file (mode 0600: it may name
/// the database user) created beside it with `O_EXCL` under a temporary name — never through a link
/// planted there — then renamed over it.
fn write_contract(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("json.tmp");
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?
        .write_all(text.as_bytes())?;
    std::fs::rename(&tmp, path)
}
