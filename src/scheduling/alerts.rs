//! Alerts for a scheduled task that needs attention — one that keeps failing, or one that has
//! not succeeded for several of its periods (the fleet was down, its runs hang past
//! `withoutOverlapping`, or are lost) — raised like the long-wait alert: logged, and handed to
//! the application's alert command (`php artisan drover:long-wait --task=...`, which fires
//! `Drover\Events\ScheduledTaskAlert` and sends the long-wait notifications), at most once per
//! cooldown per task across the fleet (`drover.schedule_alerts`).
//!
//! [`verdict`] is the rule, pure; [`AlertCheck`] runs it over the history.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use drover_scheduler::{due, Task};

use super::store::ScheduleStore;
use crate::config::ScheduleAlerts;

/// The most the alert command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a task needs attention.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Its last `failures` runs failed.
    Failing { failures: i64 },
    /// `periods` of its due times have passed since its latest run by Laravel's rules without
    /// another (`since`: that run's due time, this long ago).
    Overdue { periods: u32, since: Duration },
}

impl Verdict {
    /// In words, for the log.
    pub fn words(&self, summary: &str) -> String {
        match self {
            Verdict::Failing { failures } => {
                format!("the scheduled task {summary} failed {failures} time(s) in a row")
            }
            Verdict::Overdue { periods, since } => format!(
                "the scheduled task {summary} is overdue: {periods} of its due times passed without a run in {} s",
                since.as_secs()
            ),
        }
    }
}

/// Whether `task` needs attention at `now`, from the history: its failures in a row, and its
/// latest run by Laravel's rules (`last_ok`, a due time: succeeded, skipped — its filters, an
/// overlapping run, a pause — or handed to the background). Failing first: it says more.
pub fn verdict(
    task: &Task,
    failed_in_a_row: i64,
    last_ok: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
    rules: &ScheduleAlerts,
) -> Option<Verdict> {
    if rules.failures > 0 && failed_in_a_row >= i64::from(rules.failures) {
        return Some(Verdict::Failing {
            failures: failed_in_a_row,
        });
    }
    // Overdue counts due times after a run on record: a task never run yet is new, or failing
    // (above).
    let since = last_ok?;
    if rules.overdue_periods == 0 {
        return None;
    }
    let mut at = since;
    for _ in 0..rules.overdue_periods {
        // A due time ends its period once it is more than a minute old: its run had a minute
        // to start and succeed before it counts (a run that is still out is not overdue).
        at = due::next_due_shown(task, at)?;
        if at.checked_add(jiff::SignedDuration::from_secs(60)).ok()? > now {
            return None;
        }
    }
    Some(Verdict::Overdue {
        periods: rules.overdue_periods,
        since: now.duration_since(since).unsigned_abs(),
    })
}

/// One check of every task, run on a task of its own (the alert command boots the application).
pub struct AlertCheck {
    pub tasks: Vec<Arc<Task>>,
    pub rules: ScheduleAlerts,
    pub store: Arc<dyn ScheduleStore>,
    /// Where the alert command runs.
    pub cwd: Option<PathBuf>,
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

impl AlertCheck {
    pub async fn run(self) {
        let keys: Vec<&str> = self.tasks.iter().map(|t| t.key.as_str()).collect();
        let results = match self.store.results(&keys).await {
            Ok(results) => results,
            Err(e) => {
                tracing::debug!("scheduled task alerts: {e}");
                return;
            }
        };
        let now = jiff::Timestamp::now();
        for task in &self.tasks {
            let Some(r) = results.iter().find(|r| r.task == task.key) else {
                continue;
            };
            let last_success = r
                .last_success
                .and_then(|t| jiff::Timestamp::try_from(t).ok());
            let Some(verdict) = verdict(task, r.failed_in_a_row, last_success, now, &self.rules)
            else {
                continue;
            };
            self.alert(task, &verdict, last_success, now).await;
        }
    }

    async fn alert(
        &self,
        task: &Task,
        verdict: &Verdict,
        last_success: Option<jiff::Timestamp>,
        now: jiff::Timestamp,
    ) {
        let cooldown = Duration::from_secs(self.rules.cooldown_secs);
        match self.store.claim_alert(&task.key, cooldown).await {
            Ok(true) => {}
            // Alerted within the cooldown (by this master or another).
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(task = %task.summary, "scheduled task alert: {e}");
                return;
            }
        }
        tracing::warn!(task = %task.summary, "{}", verdict.words(&task.summary));
        let Some(command) = &self.rules.command else {
            return;
        };
        let mut full = command.clone();
        full.push(format!("--task={}", task.key));
        full.push(format!("--summary={}", task.summary));
        let failures = match verdict {
            Verdict::Failing { failures } => *failures,
            Verdict::Overdue { .. } => 0,
        };
        full.push(format!("--failures={failures}"));
        if let Some(since) = last_success {
            full.push(format!(
                "--seconds={}",
                now.duration_since(since).as_secs().max(0)
            ));
        }
        if let Err(e) = crate::process::app_command::run_with_env(
            &full,
            &self.env,
            self.cwd.as_deref(),
            COMMAND_TIMEOUT,
        )
        .await
        {
            tracing::error!(task = %task.summary, "the scheduled task alert was not sent: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    fn task(expression: &str) -> Task {
        let json = format!(
            r#"{{"drover_schedule":1,"tasks":[{{"key":"t","index":0,"summary":"t","expression":"{expression}","timezone":"UTC"}}]}}"#
        );
        drover_scheduler::TaskList::from_export(&json)
            .unwrap()
            .tasks
            .remove(0)
    }

    fn rules() -> ScheduleAlerts {
        ScheduleAlerts {
            failures: 3,
            overdue_periods: 3,
            cooldown_secs: 300,
            command: None,
        }
    }

    #[test]
    fn a_task_that_failed_its_threshold_of_times_in_a_row_is_failing() {
        let hourly = task("0 * * * *");
        let now = ts("2026-12-06T10:30:00Z");
        let success = Some(ts("2026-12-06T09:00:00Z"));
        assert_eq!(verdict(&hourly, 2, success, now, &rules()), None);
        assert_eq!(
            verdict(&hourly, 3, success, now, &rules()),
            Some(Verdict::Failing { failures: 3 })
        );
        assert_eq!(
            verdict(&hourly, 3, None, now, &rules()),
            Some(Verdict::Failing { failures: 3 }),
            "never ran by its rules, failing all the same"
        );
        let off = ScheduleAlerts {
            failures: 0,
            ..rules()
        };
        assert_eq!(verdict(&hourly, 50, success, now, &off), None);
    }

    #[test]
    fn a_task_is_overdue_once_its_periods_passed_since_its_latest_run_each_given_a_minute() {
        let hourly = task("0 * * * *");
        let success = Some(ts("2026-12-06T07:00:00Z"));
        // Due 08:00, 09:00, 10:00 since: the third is a minute old at 10:01.
        assert_eq!(
            verdict(&hourly, 0, success, ts("2026-12-06T10:00:30Z"), &rules()),
            None
        );
        assert_eq!(
            verdict(&hourly, 0, success, ts("2026-12-06T10:01:30Z"), &rules()),
            Some(Verdict::Overdue {
                periods: 3,
                since: Duration::from_secs(3 * 3600 + 90)
            })
        );
        // A yearly task is not overdue after a few hours, and one never run is not.
        let yearly = task("0 0 1 1 *");
        assert_eq!(
            verdict(&yearly, 0, success, ts("2026-12-06T10:01:30Z"), &rules()),
            None
        );
        assert_eq!(
            verdict(&hourly, 0, None, ts("2026-12-06T10:01:30Z"), &rules()),
            None
        );
    }
}
