//! From the run configuration to pools of workers, at start and again on every reload.
//!
//! - [`WorkerContext`]: what every worker gets whatever its pool (the user it runs as, the embedded
//!   database's DSN).
//! - [`pool_config`]: one pool's supervisor settings from its [`PoolSpec`].
//! - [`ConfigSource`]: where the configuration came from, and how to read it anew on a reload
//!   (SIGHUP, `drover restart`): run `reload_command` (`php artisan drover --export`), which prints
//!   the contract, or re-read the file.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use drover_supervisor::circuit::CircuitConfig;
use drover_supervisor::{PoolConfig, RunAs, WorkerCommand};

use crate::contract::{Member, PoolSpec, RunConfig};
use crate::MasterError;

/// What every worker gets, whatever its pool.
#[derive(Debug, Clone, Default)]
pub struct WorkerContext {
    /// The user workers run as (the master is root and `user` is set).
    pub run_as: Option<RunAs>,
    /// The embedded cluster's PDO DSN, for workers of the embedded default.
    pub embedded_dsn: Option<String>,
}

impl WorkerContext {
    /// Resolves `user`: workers run as it when the master is root. Without `user` a root master
    /// runs its workers as root, with a warning.
    /// Without the embedded DSN (known once the embedded cluster runs: [`Self::embedded_dsn`]).
    pub fn new(config: &RunConfig) -> Result<Self, MasterError> {
        let root = nix::unistd::geteuid().is_root();
        let run_as = match &config.user {
            Some(name) => {
                let user = RunAs::lookup(name).map_err(|problem| MasterError::Config {
                    source_name: "user".into(),
                    problems: vec![problem],
                })?;
                if root {
                    Some(user)
                } else if user.uid == nix::unistd::geteuid().as_raw() {
                    None
                } else {
                    return Err(MasterError::Config {
                        source_name: "user".into(),
                        problems: vec![format!(
                            "workers are to run as {name:?}, but the master is not root and cannot switch users; start it as root or as {name:?}"
                        )],
                    });
                }
            }
            None => {
                if root {
                    tracing::warn!("the master runs as root and no `user` is configured: workers run as root too; set user (drover.user in config/drover.php) to an unprivileged account such as www-data");
                }
                None
            }
        };
        Ok(WorkerContext {
            run_as,
            embedded_dsn: None,
        })
    }

    /// The workers of the embedded default connect with this DSN.
    pub fn embedded_dsn(mut self, dsn: Option<String>) -> Self {
        self.embedded_dsn = dsn;
        self
    }
}

/// The supervisor settings of one member of a pool (the pool itself, or one queue's workers of a
/// balanced pool). Its workers get `DROVER_POOL` = the pool's name in the configuration.
pub fn pool_config(
    run: &RunConfig,
    spec: &PoolSpec,
    member: &Member,
    ctx: &WorkerContext,
) -> PoolConfig {
    let mut env: Vec<(OsString, OsString)> =
        spec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    if !spec.env.contains_key("DROVER_PREFETCH") {
        env.push(("DROVER_PREFETCH".into(), spec.prefetch.to_string().into()));
    }
    env.push(("DROVER_POOL".into(), spec.name.clone().into()));
    if let Some(dsn) = &ctx.embedded_dsn {
        env.push(("DROVER_PDO_DSN".into(), dsn.into()));
    }
    let mut config = PoolConfig::new(WorkerCommand {
        program: spec.command[0].clone().into(),
        args: spec.command[1..].iter().map(OsString::from).collect(),
        env,
        cwd: spec.cwd.clone().or_else(|| run.cwd.clone()),
        nice: (spec.nice != 0).then_some(spec.nice),
        run_as: ctx.run_as.clone(),
    });
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
    /// validated new configuration or every problem with it. The reload command runs as `run_as`
    /// (the workers' user: it runs application code).
    pub async fn reread(&self, run_as: Option<&RunAs>) -> Result<Option<RunConfig>, String> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let text = match &self.reload_command {
            Some(command) => {
                run_app_command(command, self.cwd.as_deref(), run_as, RELOAD_COMMAND_TIMEOUT)
                    .await?
            }
            None => std::fs::read_to_string(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?,
        };
        let config = RunConfig::from_json(&text).map_err(|problems| {
            format!(
                "the new configuration is invalid:\n  - {}",
                problems.join("\n  - ")
            )
        })?;
        if self.reload_command.is_some() {
            // Keep the file in step with what runs, for the next start and for operators.
            let tmp = path.with_extension("json.tmp");
            let written = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, path));
            if let Err(e) = written {
                tracing::warn!(
                    "could not write the reloaded configuration to {}: {e}",
                    path.display()
                );
            }
        }
        Ok(Some(config))
    }
}

/// Runs a command of the application (the reload command, the long-wait command) in `cwd`, as
/// `run_as`, within `limit`, and returns what it printed; a failure says how, with its output.
pub async fn run_app_command(
    command: &[String],
    cwd: Option<&std::path::Path>,
    run_as: Option<&RunAs>,
    limit: Duration,
) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        if !cwd.is_dir() {
            return Err(format!(
                "the working directory {} of {} does not exist (the configuration's cwd: the application's path, e.g. a deploy tool's `current` symlink)",
                cwd.display(),
                command.join(" ")
            ));
        }
        cmd.current_dir(cwd);
    }
    if let Some(user) = run_as {
        cmd.uid(user.uid).gid(user.gid);
    }
    let shown = command.join(" ");
    let out = tokio::time::timeout(limit, cmd.output())
        .await
        .map_err(|_| format!("{shown} did not finish within {limit:?}"))?
        .map_err(|e| format!("running {shown}: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        return Err(format!(
            "{shown} failed ({}): {}",
            out.status,
            format!("{stderr}{stdout}").trim()
        ));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| format!("{shown} printed something that is not UTF-8"))
}
