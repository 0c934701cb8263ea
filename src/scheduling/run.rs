//! One due time of one task: claimed in the database, run by the application's run command
//! (`php artisan drover:schedule-run --task=KEY --index=N`), and its end recorded.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drover_broker::{RunEnd, RunScope, RunStatus, ScheduleClaim};
use drover_scheduler::outcome::{self, OutcomeKind};
use drover_scheduler::Task;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use super::forking::{self, Forks};
use super::store::ScheduleStore;

/// How a run's process is started: the application's run command, its environment (the
/// workers': the embedded database's DSN) and directory; it runs as the master's user.
#[derive(Debug, Clone)]
pub struct RunCommand {
    pub command: Vec<String>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: Option<PathBuf>,
}

/// Of a run's stdout and stderr, the master keeps this much from the end (the outcome line is
/// the last of stdout).
const KEPT_OUTPUT: usize = 64 * 1024;

/// Where runs are forked from: the master's zygotes and the pool to ask (the schedule's
/// `fork_from`).
#[derive(Clone)]
pub struct ForkFrom {
    pub forks: Arc<dyn Forks>,
    pub pool: String,
}

/// When a run is for: a due time of the task's schedule, or the moment an operator asked for it
/// ("run now"). Only a due time is handed to the run (`DROVER_SCHEDULE_DUE`), for Laravel's own
/// `onOneServer()` mutex: a cron `schedule:run` still running beside the masters takes the same
/// one for the same minute (docs/schedule.md, "Beside cron").
#[derive(Debug, Clone, Copy)]
pub enum RunTime {
    Due(jiff::Timestamp),
    AskedAt(jiff::Timestamp),
}

impl RunTime {
    /// The time the run is for (logs, how late it started).
    fn at(self) -> jiff::Timestamp {
        match self {
            RunTime::Due(t) | RunTime::AskedAt(t) => t,
        }
    }

    /// The due time, in Unix seconds, when it is one.
    fn due_secs(self) -> Option<i64> {
        match self {
            RunTime::Due(t) => Some(t.as_second()),
            RunTime::AskedAt(_) => None,
        }
    }
}

/// Claims `due` of `task` and, if this master has it, runs it to its end: forked from the pool's
/// zygote when `fork` names one that runs one-offs, else by the run command. `stopping` turns
/// true when the master stops: a run still out `grace` later is killed (its process group) and
/// recorded as failed.
pub async fn run_due(
    store: Arc<dyn ScheduleStore>,
    command: Arc<RunCommand>,
    fork: Option<ForkFrom>,
    task: Arc<Task>,
    due: jiff::Timestamp,
    stopping: watch::Receiver<bool>,
    grace: Duration,
) -> bool {
    let Some(id) = claim(&*store, &task, due, &stopping).await else {
        return false;
    };
    run_claimed(
        store,
        command,
        fork,
        task,
        id,
        RunTime::Due(due),
        stopping,
        grace,
    )
    .await
}

/// Runs the claimed run `id` of `task` (for `when`: a due time, or "run now") to its end, and
/// records it; true if it failed.
#[allow(clippy::too_many_arguments)]
pub async fn run_claimed(
    store: Arc<dyn ScheduleStore>,
    command: Arc<RunCommand>,
    fork: Option<ForkFrom>,
    task: Arc<Task>,
    id: i64,
    when: RunTime,
    stopping: watch::Receiver<bool>,
    grace: Duration,
) -> bool {
    let due = when.at();
    let started_at = SystemTime::now();
    let forked = match fork {
        // A time window worked out when the schedule was defined: the zygote's is stale.
        Some(_) if task.needs_boot => {
            Err("its between() window is worked out when the schedule is defined".into())
        }
        Some(from) => {
            forked(
                &*store, id, &from, &task, when, started_at, &stopping, grace,
            )
            .await
        }
        None => Err("no pool forks the runs".into()),
    };
    let ended = match forked {
        Ok(ended) => ended,
        Err(why) => {
            tracing::debug!(task = %task.summary, "scheduled task started by its run command: {why}");
            let child = match spawn(&command, &task, when) {
                Ok(child) => child,
                Err(end) => {
                    tracing::error!(task = %task.summary, due = %due, "scheduled task failed: {}", end.reason.as_deref().unwrap_or(""));
                    record(&*store, id, &task, &end).await;
                    return true;
                }
            };
            let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
            mark_started(&*store, id, &task, due, pid, started_at, "exec").await;
            wait(child, pid, stopping, grace).await
        }
    };
    let end = run_end(ended, grace);
    match end.status {
        RunStatus::Failed => {
            tracing::warn!(task = %task.summary, due = %due, exit_code = ?end.exit_code, "scheduled task failed: {}", end.reason.as_deref().unwrap_or(""))
        }
        RunStatus::Skipped => {
            tracing::info!(task = %task.summary, due = %due, "scheduled task skipped: {}", end.reason.as_deref().unwrap_or(""))
        }
        _ => {
            tracing::info!(task = %task.summary, due = %due, status = ?end.status, ms = end.ended_at.duration_since(started_at).unwrap_or_default().as_millis() as u64, "scheduled task ended")
        }
    }
    record(&*store, id, &task, &end).await;
    end.status == RunStatus::Failed
}

/// Runs the due time forked from the pool's zygote: how it ended, or why nothing of the
/// application ran (no zygote ready that runs one-offs, a fork that died before it reached the
/// master) — the run command runs it then.
#[allow(clippy::too_many_arguments)]
async fn forked(
    store: &dyn ScheduleStore,
    id: i64,
    from: &ForkFrom,
    task: &Task,
    when: RunTime,
    started_at: SystemTime,
    stopping: &watch::Receiver<bool>,
    grace: Duration,
) -> Result<Ended, String> {
    let due = when.at();
    let one_off = from.forks.one_off(
        &from.pool,
        forking::schedule_request(&task.key, task.index, when.due_secs()),
    )?;
    let control = one_off.control();
    let Some(pid) = control.pid_known().await else {
        // No process: the one-off's end says why (the zygote could not fork, or was given up).
        let why = one_off.ended().await.why_none;
        return Err(format!(
            "its zygote did not fork it: {}",
            why.as_deref().unwrap_or("no reason given")
        ));
    };
    let pid = i32::try_from(pid).unwrap_or(0);
    mark_started(store, id, task, due, pid, started_at, "fork").await;
    let mut stopping = stopping.clone();
    let stopped_at = async {
        while !*stopping.borrow() {
            if stopping.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        tokio::time::sleep(grace).await;
    };
    let ended = one_off.ended();
    tokio::pin!(ended);
    let (end, killed) = tokio::select! {
        end = &mut ended => (end, false),
        () = stopped_at => {
            control.kill();
            (ended.await, true)
        }
    };
    if !end.attached && !killed {
        // Its process ended before the master told it to go: nothing of the task ran.
        return Err(format!(
            "its fork {} before it reached the master",
            end.status
                .map(drover_supervisor::describe_exit)
                .unwrap_or_else(|| "ended".into())
        ));
    }
    Ok(Ended {
        stdout: String::from_utf8_lossy(&end.said).into_owned(),
        stderr: String::new(),
        status: end.status,
        killed,
    })
}

/// Records that the run started (process `pid`, by `how`: fork or exec), saying how late.
async fn mark_started(
    store: &dyn ScheduleStore,
    id: i64,
    task: &Task,
    due: jiff::Timestamp,
    pid: i32,
    started_at: SystemTime,
    how: &'static str,
) {
    let late_ms = started_at
        .duration_since(SystemTime::from(due))
        .unwrap_or_default()
        .as_millis() as u64;
    tracing::info!(task = %task.summary, due = %due, pid, late_ms, how, "scheduled task started");
    if let Err(e) = store.started(id, pid, started_at).await {
        tracing::warn!(task = %task.summary, "recording a scheduled run's start: {e}");
    }
}

/// While the database is unreachable, the claim of a due time is tried again this often.
const CLAIM_RETRY: Duration = Duration::from_secs(1);

/// Until when the claim of `due` is tried again while the database is unreachable: the task's
/// next due time, and at most a minute (one cron period, the ticker's `START_GRACE`) —
/// the due time then runs late, as a cron line started late would, instead of not at all
/// through a database restart or failover; a due time the next one overtakes is not run.
pub fn claim_retry_until(task: &Task, due: jiff::Timestamp) -> jiff::Timestamp {
    let grace = due
        .checked_add(drover_scheduler::due::START_GRACE)
        .unwrap_or(due);
    drover_scheduler::due::next_due(task, due, 2).map_or(grace, |next| next.min(grace))
}

/// Claims `due` of `task`: the run's id, or `None` when it is another's or the claim failed
/// (said in the log: a due time runs only once claimed). A claim that cannot reach the
/// database is tried again until [`claim_retry_until`], unless the master stops.
async fn claim(
    store: &dyn ScheduleStore,
    task: &Task,
    due: jiff::Timestamp,
    stopping: &watch::Receiver<bool>,
) -> Option<i64> {
    let scope = if task.one_server {
        RunScope::OneServer
    } else {
        RunScope::ThisHost
    };
    let until = claim_retry_until(task, due);
    let mut said = false;
    let claimed = loop {
        match store
            .claim(&task.key, &task.summary, SystemTime::from(due), scope)
            .await
        {
            Err(e)
                if e.is_connection_lost()
                    && !*stopping.borrow()
                    && jiff::Timestamp::now() + CLAIM_RETRY < until =>
            {
                if !said {
                    said = true;
                    tracing::warn!(task = %task.summary, due = %due, until = %until, "scheduled task: its due time cannot be claimed, the database is unreachable ({e}); trying again every second until {until}");
                }
                tokio::time::sleep(CLAIM_RETRY).await;
            }
            other => break other,
        }
    };
    match claimed {
        Ok(ScheduleClaim::Run(id)) => Some(id),
        Ok(ScheduleClaim::Paused) => {
            tracing::info!(task = %task.summary, due = %due, "scheduled task skipped: it is paused");
            None
        }
        Ok(ScheduleClaim::Taken) => {
            tracing::debug!(task = %task.summary, due = %due, "scheduled task: this due time is another master's");
            None
        }
        Err(e) => {
            tracing::error!(task = %task.summary, due = %due, "scheduled task not run: its due time could not be claimed ({e}); a due time runs only once claimed, so that no two masters run it{}", if said { " (the database was unreachable until its next due time)" } else { "" });
            None
        }
    }
}

/// Starts the run's process, in a process group of its own (a command's shell and its children
/// are killed with it); the end to record when it cannot start. A due time goes in the
/// environment (`DROVER_SCHEDULE_DUE`), not as an option: a package of the previous release
/// refuses an option it does not know, and ignores a variable.
fn spawn(
    command: &RunCommand,
    task: &Task,
    when: RunTime,
) -> Result<tokio::process::Child, RunEnd> {
    let mut cmd = tokio::process::Command::new(&command.command[0]);
    cmd.args(&command.command[1..])
        .arg(format!("--task={}", task.key))
        .arg(format!("--index={}", task.index))
        // The master's database URL (its own role's credentials, docs/postgres-roles.md) is not
        // the application's, as for the workers (supervisor's child.rs).
        .env_remove("DATABASE_URL")
        .env_remove("DROVER_DATABASE_URL")
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(due) = when.due_secs() {
        cmd.env("DROVER_SCHEDULE_DUE", due.to_string());
    }
    if let Some(cwd) = &command.cwd {
        cmd.current_dir(cwd);
    }
    cmd.spawn().map_err(|e| RunEnd {
        status: RunStatus::Failed,
        reason: Some(format!(
            "its command {} could not be started: {e}",
            command.command.join(" ")
        )),
        exit_code: None,
        output_tail: None,
        ended_at: SystemTime::now(),
    })
}

/// How a run's process ended.
struct Ended {
    stdout: String,
    stderr: String,
    status: Option<std::process::ExitStatus>,
    /// Killed at the master's stop.
    killed: bool,
}

/// Waits for the process, reading its output; once `stopping` turns true, `grace` later it is
/// killed with its process group.
async fn wait(
    mut child: tokio::process::Child,
    pid: i32,
    mut stopping: watch::Receiver<bool>,
    grace: Duration,
) -> Ended {
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let reading = async { tokio::join!(read_tail(stdout), read_tail(stderr)) };
    let waiting = async {
        let stopped_at = async {
            while !*stopping.borrow() {
                if stopping.changed().await.is_err() {
                    // The scheduler is gone without a stop: wait for the run.
                    std::future::pending::<()>().await;
                }
            }
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            status = child.wait() => (status.ok(), false),
            () = stopped_at => {
                if pid > 0 {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                (child.wait().await.ok(), true)
            }
        }
    };
    let ((stdout, stderr), (status, killed)) = tokio::join!(reading, waiting);
    Ended {
        stdout,
        stderr,
        status,
        killed,
    }
}

/// The history's end of a run from how its process ended.
fn run_end(ended: Ended, grace: Duration) -> RunEnd {
    use std::os::unix::process::ExitStatusExt;
    let exit = ended.status.and_then(|s| s.code());
    let signal = ended.status.and_then(|s| s.signal()).map(|n| {
        nix::sys::signal::Signal::try_from(n)
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(|_| format!("signal {n}"))
    });
    let mut said = outcome::from_process(&ended.stdout, &ended.stderr, exit, signal.as_deref());
    if ended.killed {
        said.kind = OutcomeKind::Failed;
        said.reason = Some(format!(
            "killed: the master stopped and the run was still out {grace:?} later"
        ));
    }
    RunEnd {
        status: match said.kind {
            OutcomeKind::Succeeded => RunStatus::Succeeded,
            OutcomeKind::Failed => RunStatus::Failed,
            OutcomeKind::Skipped => RunStatus::Skipped,
            OutcomeKind::Started => RunStatus::Started,
        },
        reason: said.reason,
        exit_code: said.exit_code,
        output_tail: said.output_tail,
        ended_at: SystemTime::now(),
    }
}

/// Records a run's end; a database away is retried a few times (the run happened: its row
/// should say how it ended).
async fn record(store: &dyn ScheduleStore, id: i64, task: &Task, end: &RunEnd) {
    for attempt in 1..=5u32 {
        match store.finish(id, end).await {
            Ok(true) => return,
            Ok(false) => {
                tracing::warn!(task = %task.summary, "a scheduled run ended after it was marked lost (its master's row went while it ran); the row keeps `lost`");
                return;
            }
            Err(e) if attempt < 5 => {
                tracing::warn!(task = %task.summary, "recording a scheduled run's end (try {attempt} of 5): {e}");
                tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
            }
            Err(e) => {
                tracing::error!(task = %task.summary, "a scheduled run's end was not recorded: {e}; its row stays `running` until its master's row goes, then `lost`");
            }
        }
    }
}

/// Reads a pipe to its end, keeping the last [`KEPT_OUTPUT`] bytes.
async fn read_tail<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * KEPT_OUTPUT {
                    kept.drain(..kept.len() - KEPT_OUTPUT);
                }
            }
        }
    }
    if kept.len() > KEPT_OUTPUT {
        kept.drain(..kept.len() - KEPT_OUTPUT);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(expression: &str, repeat: Option<u32>) -> Task {
        let repeat = repeat.map_or(String::new(), |r| format!(r#","repeat_seconds":{r}"#));
        let json = format!(
            r#"{{"drover_schedule":1,"tasks":[{{"key":"t","index":0,"summary":"t","expression":"{expression}","timezone":"UTC"{repeat}}}]}}"#
        );
        drover_scheduler::TaskList::from_export(&json)
            .unwrap()
            .tasks
            .remove(0)
    }

    #[test]
    fn a_claim_the_database_cannot_take_is_tried_until_the_next_due_time_at_most_a_minute() {
        let due: jiff::Timestamp = "2026-12-07T12:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        assert_eq!(
            claim_retry_until(&task("* * * * *", None), due),
            at("2026-12-07T12:01:00Z"),
            "every minute: until the next one"
        );
        assert_eq!(
            claim_retry_until(&task("0 * * * *", None), due),
            at("2026-12-07T12:01:00Z"),
            "hourly: a minute, as cron's period"
        );
        assert_eq!(
            claim_retry_until(&task("* * * * *", Some(10)), due),
            at("2026-12-07T12:00:10Z"),
            "every ten seconds: until the next"
        );
    }
}
