//! Running a command of the application (the reload command, the long-wait command) from the
//! master: in the application's directory, as the master's (the workers') user, within a time
//! limit.

use std::time::Duration;

/// Runs a command of the application (the reload command, the long-wait command) in `cwd`,
/// within `limit`, and returns what it printed; a failure says how, with its output.
pub async fn run(
    command: &[String],
    cwd: Option<&std::path::Path>,
    limit: Duration,
) -> Result<String, String> {
    run_with_env(command, &[], cwd, limit).await
}

/// [`run`] with variables added to the environment (the workers' own, e.g. the embedded
/// database's DSN, for a command that boots the application as a worker does).
pub async fn run_with_env(
    command: &[String],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    cwd: Option<&std::path::Path>,
    limit: Duration,
) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        // The master's database URL (its own role's credentials, docs/postgres-roles.md) is not
        // the application's, as for the workers (supervisor's child.rs).
        .env_remove("DATABASE_URL")
        .env_remove("DROVER_DATABASE_URL")
        .envs(env.iter().map(|(k, v)| (k, v)))
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
