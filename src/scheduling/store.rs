//! The scheduler's narrow view of the database: the calls it makes on `drover.schedule_runs`,
//! and nothing of how. [`drover_broker::Broker`] is the store in production.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use drover_broker::{
    BrokerError, LaravelSchedulerRun, LostRun, RunEnd, RunScope, ScheduleClaim, TaskResults,
};

/// A store call in flight.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, BrokerError>> + Send + 'a>>;

/// The schedule's runs (`drover_broker::schedule_runs`).
pub trait ScheduleStore: Send + Sync + 'static {
    /// Claims a due time: this master's run, a paused task's skip, or another's.
    fn claim<'a>(
        &'a self,
        task: &'a str,
        summary: &'a str,
        due_at: SystemTime,
        scope: RunScope,
    ) -> Call<'a, ScheduleClaim>;
    /// Takes the oldest run asked for now of one of `tasks`: its id, task and due time.
    fn take_requested<'a>(
        &'a self,
        tasks: &'a [&'a str],
    ) -> Call<'a, Option<(i64, String, SystemTime)>>;
    fn started(&self, id: i64, pid: i32, at: SystemTime) -> Call<'_, ()>;
    fn finish<'a>(&'a self, id: i64, end: &'a RunEnd) -> Call<'a, bool>;
    fn missed<'a>(
        &'a self,
        task: &'a str,
        summary: &'a str,
        scope: RunScope,
        due: &'a [SystemTime],
        reason: &'a str,
    ) -> Call<'a, u64>;
    fn lost(&self) -> Call<'_, Vec<LostRun>>;
    fn last_dues<'a>(
        &'a self,
        tasks: &'a [&'a str],
    ) -> Call<'a, Vec<(String, RunScope, SystemTime)>>;
    fn trim(&self, older_than: Duration, budget: Duration) -> Call<'_, u64>;
    /// What the history says of each task (status, metrics).
    fn results<'a>(&'a self, tasks: &'a [&'a str]) -> Call<'a, Vec<TaskResults>>;
    /// Runs asked for now that no master took within `within`, recorded as missed.
    fn expire_requests(&self, within: Duration) -> Call<'_, Vec<(String, SystemTime)>>;
    /// The right to alert for `task` now (none within `cooldown`, fleet-wide).
    fn claim_alert<'a>(&'a self, task: &'a str, cooldown: Duration) -> Call<'a, bool>;
    /// The latest run on each host of Laravel's own scheduler within `within` (`beside`).
    fn laravel_runs(&self, within: Duration) -> Call<'_, Vec<LaravelSchedulerRun>>;
    /// How many hosts have a master now.
    fn hosts(&self) -> Call<'_, i64>;
}

impl ScheduleStore for drover_broker::Broker {
    fn claim<'a>(
        &'a self,
        task: &'a str,
        summary: &'a str,
        due_at: SystemTime,
        scope: RunScope,
    ) -> Call<'a, ScheduleClaim> {
        Box::pin(self.claim_schedule_run(task, summary, due_at, scope))
    }
    fn take_requested<'a>(
        &'a self,
        tasks: &'a [&'a str],
    ) -> Call<'a, Option<(i64, String, SystemTime)>> {
        Box::pin(self.take_requested_schedule_run(tasks))
    }
    fn started(&self, id: i64, pid: i32, at: SystemTime) -> Call<'_, ()> {
        Box::pin(self.schedule_run_started(id, pid, at))
    }
    fn finish<'a>(&'a self, id: i64, end: &'a RunEnd) -> Call<'a, bool> {
        Box::pin(self.finish_schedule_run(id, end))
    }
    fn missed<'a>(
        &'a self,
        task: &'a str,
        summary: &'a str,
        scope: RunScope,
        due: &'a [SystemTime],
        reason: &'a str,
    ) -> Call<'a, u64> {
        Box::pin(self.record_missed_runs(task, summary, scope, due, reason))
    }
    fn lost(&self) -> Call<'_, Vec<LostRun>> {
        Box::pin(self.mark_lost_schedule_runs())
    }
    fn last_dues<'a>(
        &'a self,
        tasks: &'a [&'a str],
    ) -> Call<'a, Vec<(String, RunScope, SystemTime)>> {
        Box::pin(self.last_schedule_dues(tasks))
    }
    fn trim(&self, older_than: Duration, budget: Duration) -> Call<'_, u64> {
        Box::pin(self.trim_schedule_runs(older_than, budget))
    }
    fn results<'a>(&'a self, tasks: &'a [&'a str]) -> Call<'a, Vec<TaskResults>> {
        Box::pin(self.schedule_results(tasks))
    }
    fn expire_requests(&self, within: Duration) -> Call<'_, Vec<(String, SystemTime)>> {
        Box::pin(self.expire_schedule_requests(within))
    }
    fn claim_alert<'a>(&'a self, task: &'a str, cooldown: Duration) -> Call<'a, bool> {
        Box::pin(self.claim_schedule_alert(task, cooldown))
    }
    fn laravel_runs(&self, within: Duration) -> Call<'_, Vec<LaravelSchedulerRun>> {
        Box::pin(self.laravel_scheduler_runs(within))
    }
    fn hosts(&self) -> Call<'_, i64> {
        Box::pin(self.schedule_hosts())
    }
}
