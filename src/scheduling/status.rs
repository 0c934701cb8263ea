//! The schedule as `drover status`, `drover:status`, `/metrics` and the dashboard show it: each
//! task this master runs, with its next due time and what the history says of it — its latest
//! run, the age of its latest success, the failures since. The scheduler publishes its tasks
//! each time it reads the schedule ([`Published`]); the history is read at each answer.

use std::sync::Arc;
use std::time::SystemTime;

use drover_broker::{BrokerError, TaskResults};
use drover_scheduler::{due, Task};
use tokio::sync::watch;

use super::store::ScheduleStore;
use crate::status_document as doc;

/// The tasks as last read (empty: no schedule here).
pub type Published = watch::Receiver<Arc<Vec<Arc<Task>>>>;

/// What status needs of the scheduler: its tasks and the history.
#[derive(Clone)]
pub struct ScheduleView {
    pub tasks: Published,
    pub store: Arc<dyn ScheduleStore>,
}

impl ScheduleView {
    /// The schedule's tasks with their history at `now`; `None` when there is no schedule.
    pub async fn status(
        &self,
        now: jiff::Timestamp,
    ) -> Option<Result<Vec<doc::ScheduledTask>, BrokerError>> {
        let tasks = self.tasks.borrow().clone();
        if tasks.is_empty() {
            return None;
        }
        let keys: Vec<&str> = tasks.iter().map(|t| t.key.as_str()).collect();
        Some(self.store.results(&keys).await.map(|results| {
            tasks
                .iter()
                .map(|t| task_status(t, results.iter().find(|r| r.task == t.key), now))
                .collect()
        }))
    }
}

impl ScheduleView {
    /// Laravel's own scheduler on each host where it ran in the last [`super::beside::LOOK_BACK`]
    /// (`schedulers_beside`); `None` when there is no schedule here.
    pub async fn beside(&self) -> Option<Result<Vec<doc::SchedulerBeside>, BrokerError>> {
        if self.tasks.borrow().is_empty() {
            return None;
        }
        Some(
            self.store
                .laravel_runs(super::beside::LOOK_BACK)
                .await
                .map(|runs| {
                    runs.into_iter()
                        .map(|r| doc::SchedulerBeside {
                            host: r.host,
                            task: r.summary,
                            at: rfc3339(r.due_at),
                            status: r.status,
                        })
                        .collect()
                }),
        )
    }
}

/// One task as status shows it at `now`, from the history's `results` for it.
pub fn task_status(
    task: &Task,
    results: Option<&TaskResults>,
    now: jiff::Timestamp,
) -> doc::ScheduledTask {
    let next = due::next_due_shown(task, now);
    doc::ScheduledTask {
        key: task.key.clone(),
        summary: task.summary.clone(),
        expression: task.expression.as_str().to_string(),
        timezone: task.timezone_name.clone(),
        repeat_seconds: task.repeat_seconds,
        one_server: task.one_server,
        next_due: next.map(|t| t.to_string()),
        next_due_in_secs: next.map(|t| seconds_between(now, t)),
        latest: results
            .and_then(|r| r.latest.as_ref())
            .map(|l| doc::LatestRun {
                status: l.status.clone(),
                due_at: rfc3339(l.due_at),
                ended_at: l.ended_at.map(rfc3339),
                reason: l.reason.clone(),
                host: l.host.clone(),
            }),
        last_success_age_secs: results
            .and_then(|r| r.last_success)
            .and_then(|at| jiff::Timestamp::try_from(at).ok())
            .map(|at| seconds_between(at, now).max(0.0)),
        failed_in_a_row: results.map_or(0, |r| r.failed_in_a_row),
    }
}

fn seconds_between(from: jiff::Timestamp, to: jiff::Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

fn rfc3339(at: SystemTime) -> String {
    jiff::Timestamp::try_from(at)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_broker::LatestRun;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    /// A task as the export gives it.
    fn task(key: &str, expression: &str) -> Task {
        let json = format!(
            r#"{{"drover_schedule":1,"tasks":[{{"key":"{key}","index":0,"summary":"{key}","expression":"{expression}","timezone":"UTC"}}]}}"#
        );
        drover_scheduler::TaskList::from_export(&json)
            .unwrap()
            .tasks
            .remove(0)
    }

    #[test]
    fn a_task_shows_its_next_due_time_its_latest_run_and_how_long_since_it_succeeded() {
        let task = task("report", "0 * * * *");
        let now = ts("2026-12-06T10:20:00Z");
        let results = TaskResults {
            task: task.key.clone(),
            latest: Some(LatestRun {
                status: "failed".into(),
                due_at: SystemTime::from(ts("2026-12-06T10:00:00Z")),
                ended_at: Some(SystemTime::from(ts("2026-12-06T10:00:03Z"))),
                reason: Some("exit 1".into()),
                host: "h1".into(),
            }),
            last_success: Some(SystemTime::from(ts("2026-12-06T08:00:00Z"))),
            last_ok: Some(SystemTime::from(ts("2026-12-06T08:00:00Z"))),
            failed_in_a_row: 2,
        };
        let shown = task_status(&task, Some(&results), now);
        assert_eq!(shown.next_due.as_deref(), Some("2026-12-06T11:00:00Z"));
        assert_eq!(shown.next_due_in_secs, Some(2400.0));
        let latest = shown.latest.unwrap();
        assert_eq!(latest.status, "failed");
        assert_eq!(latest.due_at, "2026-12-06T10:00:00Z");
        assert_eq!(latest.ended_at.as_deref(), Some("2026-12-06T10:00:03Z"));
        assert_eq!(shown.last_success_age_secs, Some(8400.0));
        assert_eq!(shown.failed_in_a_row, 2);
    }

    #[test]
    fn a_task_never_run_shows_no_latest_run_and_no_success() {
        let task = task("new", "*/5 * * * *");
        let shown = task_status(&task, None, ts("2026-12-06T10:21:00Z"));
        assert_eq!(shown.next_due.as_deref(), Some("2026-12-06T10:25:00Z"));
        assert!(shown.latest.is_none());
        assert!(shown.last_success_age_secs.is_none());
        assert_eq!(shown.failed_in_a_row, 0);
    }
}
