//! Laravel's own scheduler beside the masters (docs/schedule.md, "Beside cron"): during a cutover
//! a cron `schedule:run` or a `schedule:work` may still run the schedule the masters run. An
//! `onOneServer()` task's due time still runs once — the package's runs take Laravel's own mutex,
//! as `schedule:run` does — but any other task runs once more per due time while it does. The
//! package records what Laravel's scheduler runs (scope `laravel:HOST`); the master says so in its
//! log, once per host an hour, naming what ran and the fix. And at start it names the tasks
//! without `onOneServer()`, which run on every host with a master, as under cron on every host.

use std::collections::BTreeMap;
use std::time::Duration;

use drover_broker::LaravelSchedulerRun;
use drover_scheduler::Task;

use super::store::ScheduleStore;

/// How far back the master looks for runs of Laravel's scheduler, and how often.
pub const LOOK_BACK: Duration = Duration::from_secs(10 * 60);

/// A host whose Laravel scheduler was named is named again after this long if it still runs.
const SAID_AGAIN_AFTER: Duration = Duration::from_secs(60 * 60);

/// What the master said, and when, of each host's Laravel scheduler.
#[derive(Debug, Default)]
pub struct Beside {
    /// The hosts named, with when.
    said: BTreeMap<String, tokio::time::Instant>,
}

impl Beside {
    /// Reads the runs of Laravel's scheduler in the last [`LOOK_BACK`] and names each host not
    /// named within [`SAID_AGAIN_AFTER`].
    pub async fn check(&mut self, store: &dyn ScheduleStore) {
        match store.laravel_runs(LOOK_BACK).await {
            Ok(runs) => {
                let now = tokio::time::Instant::now();
                for run in to_name(&runs, &self.said, now) {
                    tracing::warn!(host = %run.host, task = %run.summary, "{}", message(run));
                    self.said.insert(run.host.clone(), now);
                }
            }
            Err(e) => tracing::debug!("reading the runs of Laravel's own scheduler: {e}"),
        }
    }
}

/// The runs whose host is to be named now: not named yet, or not within [`SAID_AGAIN_AFTER`].
fn to_name<'a>(
    runs: &'a [LaravelSchedulerRun],
    said: &BTreeMap<String, tokio::time::Instant>,
    now: tokio::time::Instant,
) -> Vec<&'a LaravelSchedulerRun> {
    runs.iter()
        .filter(|run| {
            said.get(&run.host)
                .is_none_or(|at| now.saturating_duration_since(*at) >= SAID_AGAIN_AFTER)
        })
        .collect()
}

/// What the log says of a host's Laravel scheduler.
fn message(run: &LaravelSchedulerRun) -> String {
    format!(
        "Laravel's own scheduler still runs beside drover on host {} (a cron `schedule:run` or a `schedule:work`): it ran {} ({}); while it runs, a task without onOneServer() runs once more per due time (onOneServer() ones still run once: both take Laravel's mutex); remove its cron line or program there (docs/schedule.md, \"Beside cron\")",
        run.host, run.summary, run.status
    )
}

/// What the master says at start of the tasks without `onOneServer()`, with `hosts` hosts having
/// a master: each runs on every one of them, as under cron on each host. `None` when all are of
/// one server.
pub fn every_host(tasks: &[std::sync::Arc<Task>], hosts: i64) -> Option<String> {
    let each: Vec<&str> = tasks
        .iter()
        .filter(|t| !t.one_server)
        .map(|t| t.summary.as_str())
        .collect();
    if each.is_empty() {
        return None;
    }
    let times = match hosts {
        ..=1 => "on this host alone now".to_string(),
        n => format!("{n} times per due time now, once on each of the {n} hosts with a master"),
    };
    Some(format!(
        "{} scheduled task(s) without onOneServer() run on every host whose master runs the schedule, as under cron on each host — {times}: {}; add ->onOneServer() to those that must run once (docs/schedule.md)",
        each.len(),
        each.join(", ")
    ))
}

/// Names [`every_host`]'s tasks with the hosts counted now (at start and after each reload).
pub async fn name_every_host_tasks(store: &dyn ScheduleStore, tasks: &[std::sync::Arc<Task>]) {
    let hosts = match store.hosts().await {
        Ok(n) => n,
        Err(e) => {
            tracing::debug!("counting the hosts with a master: {e}");
            return;
        }
    };
    if let Some(line) = every_host(tasks, hosts) {
        if hosts > 1 {
            tracing::warn!("{line}");
        } else {
            tracing::info!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn run(host: &str) -> LaravelSchedulerRun {
        LaravelSchedulerRun {
            host: host.into(),
            summary: "artisan report:daily".into(),
            due_at: SystemTime::UNIX_EPOCH,
            status: "succeeded".into(),
        }
    }

    #[test]
    fn a_host_whose_laravel_scheduler_runs_is_named_once_an_hour() {
        let now = tokio::time::Instant::now();
        let runs = [run("web-1"), run("web-2")];
        let mut said = BTreeMap::new();
        assert_eq!(to_name(&runs, &said, now).len(), 2);
        said.insert("web-1".to_string(), now);
        let named: Vec<&str> = to_name(&runs, &said, now)
            .iter()
            .map(|r| r.host.as_str())
            .collect();
        assert_eq!(named, ["web-2"]);
        let later = now + SAID_AGAIN_AFTER;
        assert_eq!(to_name(&runs, &said, later).len(), 2);
        let line = message(&runs[0]);
        assert!(
            line.contains("host web-1")
                && line.contains("artisan report:daily")
                && line.contains("Beside cron"),
            "{line}"
        );
    }

    #[test]
    fn tasks_without_on_one_server_are_named_with_how_many_times_they_run() {
        let export = serde_json::json!({"drover_schedule": 1, "tasks": [
            {"key": "a", "index": 0, "summary": "artisan report:daily", "expression": "* * * * *", "timezone": "UTC", "one_server": false},
            {"key": "b", "index": 1, "summary": "closure", "expression": "* * * * *", "timezone": "UTC", "one_server": true},
        ]});
        let list = drover_scheduler::TaskList::from_export(&export.to_string()).unwrap();
        let tasks: Vec<std::sync::Arc<Task>> =
            list.tasks.into_iter().map(std::sync::Arc::new).collect();
        let line = every_host(&tasks, 3).unwrap();
        assert!(
            line.contains("1 scheduled task(s)")
                && line.contains("3 times per due time")
                && line.contains("artisan report:daily")
                && !line.contains("closure"),
            "{line}"
        );
        assert!(every_host(&tasks, 1).unwrap().contains("this host alone"));
        assert_eq!(every_host(&tasks[1..], 3), None);
    }
}
