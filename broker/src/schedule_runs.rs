//! The schedule's runs in `drover.schedule_runs` (migration 12, docs/schedule.md): the claim of
//! a task's due time, its start and end, the due times missed, and the runs lost with their
//! master. On the side connection, as the history is: the job connection never waits for them.

use std::time::{Duration, SystemTime};

use crate::{Broker, BrokerError};

/// A run's scope: one across every master, or one per host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunScope {
    /// `onOneServer()`: one run of a due time across every master of the database.
    OneServer,
    /// Any other task: one run of a due time on each host.
    ThisHost,
}

/// How a run ended, as the history records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Succeeded,
    Failed,
    /// Laravel's rules said no at run time (filters, environment, maintenance, overlapping).
    Skipped,
    /// Handed to the background (`runInBackground()`).
    Started,
}

impl RunStatus {
    fn as_str(self) -> &'static str {
        match self {
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Skipped => "skipped",
            RunStatus::Started => "started",
        }
    }
}

/// A run's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    pub status: RunStatus,
    pub reason: Option<String>,
    pub exit_code: Option<i32>,
    pub output_tail: Option<String>,
    pub ended_at: SystemTime,
}

/// A run of Laravel's own scheduler on a host, as the package recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaravelSchedulerRun {
    /// The host it ran on.
    pub host: String,
    /// What `schedule:list` shows for the task.
    pub summary: String,
    /// The minute (or second) it ran for.
    pub due_at: SystemTime,
    /// How it ended: succeeded or failed.
    pub status: String,
}

/// What became of a claim of a due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// This master has it: the run's id.
    Run(i64),
    /// The task is paused: the due time is recorded as skipped.
    Paused,
    /// Another master (or this host's) has it.
    Taken,
}

impl Claim {
    /// The run's id, when this master has it.
    pub fn run(self) -> Option<i64> {
        match self {
            Claim::Run(id) => Some(id),
            _ => None,
        }
    }
}

/// A run found lost: its master died while it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostRun {
    pub task: String,
    pub due_at: SystemTime,
    pub host: String,
}

/// A task's latest run on record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestRun {
    /// `running`, `succeeded`, `failed`, `skipped`, `started`, `missed` or `lost` (a request not
    /// yet taken is not a run).
    pub status: String,
    pub due_at: SystemTime,
    pub ended_at: Option<SystemTime>,
    pub reason: Option<String>,
    pub host: String,
}

/// What the history says of one task, for status and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResults {
    pub task: String,
    pub latest: Option<LatestRun>,
    /// The due time of its latest success.
    pub last_success: Option<SystemTime>,
    /// The due time of its latest run that went by Laravel's rules: succeeded, skipped (its
    /// filters, an overlapping run, a pause) or handed to the background.
    pub last_ok: Option<SystemTime>,
    /// Runs that failed since that one (all on record when none), counted up to 1000.
    pub failed_in_a_row: i64,
}

/// Schedule history rows deleted per statement by [`Broker::trim_schedule_runs`].
pub const TRIM_SCHEDULE_BATCH: i64 = 10_000;

impl Broker {
    fn scope_text(&self, scope: RunScope) -> &str {
        match scope {
            RunScope::OneServer => "",
            RunScope::ThisHost => self.hostname(),
        }
    }

    /// Claims `due_at` of `task` for this master: [`Claim::Run`] with the run's id,
    /// [`Claim::Paused`] when the task is paused (the due time is recorded as skipped), or
    /// [`Claim::Taken`] when another master (for a one-server task) or this host (a second
    /// master here) has it.
    pub async fn claim_schedule_run(
        &self,
        task: &str,
        summary: &str,
        due_at: SystemTime,
        scope: RunScope,
    ) -> Result<Claim, BrokerError> {
        let node = self.node();
        let scope = self.scope_text(scope);
        let host = self.hostname();
        let rows = self
            .side_query(
                "claiming a scheduled task's due time",
                include_str!("../queries/schedule_claim.sql"),
                &[&task, &summary, &due_at, &scope, &node, &host],
            )
            .await?;
        Ok(match rows.first() {
            None => Claim::Taken,
            Some(r) if r.get::<_, &str>(1) == "running" => Claim::Run(r.get(0)),
            Some(_) => Claim::Paused,
        })
    }

    /// Takes the oldest run asked for now of one of `tasks` (the dashboard's "run now"): its id,
    /// task and due time, claimed by this master; `None` when there is none.
    pub async fn take_requested_schedule_run(
        &self,
        tasks: &[&str],
    ) -> Result<Option<(i64, String, SystemTime)>, BrokerError> {
        let node = self.node();
        let host = self.hostname();
        let rows = self
            .side_query(
                "taking a scheduled task's run asked for now",
                include_str!("../queries/schedule_take_requested.sql"),
                &[&node, &host, &tasks],
            )
            .await?;
        Ok(rows.first().map(|r| (r.get(0), r.get(1), r.get(2))))
    }

    /// Run `id`'s process started as `pid` at `at`.
    pub async fn schedule_run_started(
        &self,
        id: i64,
        pid: i32,
        at: SystemTime,
    ) -> Result<(), BrokerError> {
        self.side_execute(
            "recording a scheduled run's start",
            include_str!("../queries/schedule_started.sql"),
            &[&id, &pid, &at],
        )
        .await
        .map(|_| ())
    }

    /// Run `id` ended so; false when it was no longer out (found lost meanwhile).
    pub async fn finish_schedule_run(&self, id: i64, end: &RunEnd) -> Result<bool, BrokerError> {
        let status = end.status.as_str();
        self.side_execute(
            "recording a scheduled run's end",
            include_str!("../queries/schedule_finish.sql"),
            &[
                &id,
                &status,
                &end.reason,
                &end.exit_code,
                &end.output_tail,
                &end.ended_at,
            ],
        )
        .await
        .map(|n| n == 1)
    }

    /// Records due times of `task` no master started in time, `reason` saying why; those with a
    /// run on record are left. Returns how many were recorded.
    pub async fn record_missed_runs(
        &self,
        task: &str,
        summary: &str,
        scope: RunScope,
        due: &[SystemTime],
        reason: &str,
    ) -> Result<u64, BrokerError> {
        if due.is_empty() {
            return Ok(0);
        }
        let node = self.node();
        let scope = self.scope_text(scope);
        let host = self.hostname();
        self.side_execute(
            "recording missed due times of a scheduled task",
            include_str!("../queries/schedule_missed.sql"),
            &[&task, &summary, &due, &scope, &node, &host, &reason],
        )
        .await
    }

    /// Marks the runs of masters that are gone as lost, and returns them.
    pub async fn mark_lost_schedule_runs(&self) -> Result<Vec<LostRun>, BrokerError> {
        let rows = self
            .side_query(
                "marking the scheduled runs of dead masters lost",
                include_str!("../queries/schedule_lost.sql"),
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| LostRun {
                task: r.get(0),
                due_at: r.get(1),
                host: r.get(2),
            })
            .collect())
    }

    /// The latest run on each host of Laravel's own scheduler (a cron `schedule:run` or
    /// `schedule:work` still running beside the masters) recorded in the last `within`, newest
    /// host first: the package records them (docs/schedule.md, "Beside cron").
    pub async fn laravel_scheduler_runs(
        &self,
        within: Duration,
    ) -> Result<Vec<LaravelSchedulerRun>, BrokerError> {
        let rows = self
            .side_query(
                "reading the runs of Laravel's own scheduler",
                include_str!("../queries/schedule_laravel_runs.sql"),
                &[&within.as_secs_f64()],
            )
            .await?;
        let mut runs: Vec<LaravelSchedulerRun> = rows
            .iter()
            .map(|r| LaravelSchedulerRun {
                host: r.get(0),
                summary: r.get(1),
                due_at: r.get(2),
                status: r.get(3),
            })
            .collect();
        runs.sort_by_key(|r| std::cmp::Reverse(r.due_at));
        Ok(runs)
    }

    /// How many hosts have a master of this database now.
    pub async fn schedule_hosts(&self) -> Result<i64, BrokerError> {
        let rows = self
            .side_query(
                "counting the hosts with a master",
                include_str!("../queries/schedule_hosts.sql"),
                &[],
            )
            .await?;
        Ok(rows.first().map_or(0, |r| r.get(0)))
    }

    /// The last due time on record of each of `tasks` that runs in `scope` here, as
    /// `(task, scope, due)`: where a master starting now counts the due times missed from.
    pub async fn last_schedule_dues(
        &self,
        tasks: &[&str],
    ) -> Result<Vec<(String, RunScope, SystemTime)>, BrokerError> {
        let scopes = ["", self.hostname()];
        let rows = self
            .side_query(
                "reading the last due times of the scheduled tasks",
                include_str!("../queries/schedule_last_due.sql"),
                &[&tasks, &&scopes[..]],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let scope: String = r.get(1);
                (
                    r.get(0),
                    if scope.is_empty() {
                        RunScope::OneServer
                    } else {
                        RunScope::ThisHost
                    },
                    r.get(2),
                )
            })
            .collect())
    }

    /// What the history says of each of `tasks` in the scopes this master runs them in (the
    /// fleet's and this host's).
    pub async fn schedule_results(&self, tasks: &[&str]) -> Result<Vec<TaskResults>, BrokerError> {
        let scopes = ["", self.hostname()];
        let rows = self
            .side_query(
                "reading the scheduled tasks' latest runs",
                include_str!("../queries/schedule_results.sql"),
                &[&tasks, &&scopes[..]],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let status: Option<String> = r.get(1);
                TaskResults {
                    task: r.get(0),
                    latest: status.map(|status| LatestRun {
                        status,
                        due_at: r.get(2),
                        ended_at: r.get(3),
                        reason: r.get(4),
                        host: r.get(5),
                    }),
                    last_success: r.get(6),
                    last_ok: r.get(7),
                    failed_in_a_row: r.get(8),
                }
            })
            .collect())
    }

    /// The right to alert for `task` now: true unless it alerted within `cooldown`, by this
    /// master or another.
    pub async fn claim_schedule_alert(
        &self,
        task: &str,
        cooldown: Duration,
    ) -> Result<bool, BrokerError> {
        let rows = self
            .side_query(
                "taking a scheduled task's alert",
                include_str!("../queries/schedule_alert_notice.sql"),
                &[&task, &cooldown.as_secs_f64()],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Runs asked for now that no master took within `within`: recorded as missed. Returns each
    /// (task, when it was asked).
    pub async fn expire_schedule_requests(
        &self,
        within: Duration,
    ) -> Result<Vec<(String, SystemTime)>, BrokerError> {
        let secs = i64::try_from(within.as_secs()).unwrap_or(i64::MAX);
        let rows = self
            .side_query(
                "expiring scheduled runs asked for now that no master took",
                include_str!("../queries/schedule_expire_requests.sql"),
                &[&secs],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Deletes runs due more than `older_than` ago (never one still running), oldest first,
    /// [`TRIM_SCHEDULE_BATCH`] per statement, until fewer are left or `budget` has passed.
    pub async fn trim_schedule_runs(
        &self,
        older_than: Duration,
        budget: Duration,
    ) -> Result<u64, BrokerError> {
        self.side_trim(
            "deleting old scheduled runs",
            include_str!("../queries/trim_schedule_runs.sql"),
            &older_than.as_secs_f64(),
            TRIM_SCHEDULE_BATCH,
            budget,
        )
        .await
    }
}
