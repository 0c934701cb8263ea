//! The application's schedule, run by the master: no cron line, no `schedule:work` (issue 39,
//! docs/schedule.md).
//!
//! At start the scheduler reads the schedule (`php artisan drover:schedule-export`, as the
//! workers' user), records the due times the fleet missed while no master ran it, and then
//! sleeps until the next due time of any task. At each, it claims the due time in
//! `drover.schedule_runs` — once across every master for a task of `onOneServer()`, once per host
//! for the others — and the master whose claim holds starts `php artisan drover:schedule-run`,
//! which runs the event as `schedule:run` would, and records its end. When a due time falls is
//! `drover_scheduler`'s business (pure rules); this module only wires the clock, the database and
//! the processes.
//!
//! The parts: [`store`] (the database calls), [`run`] (one due time, claimed, run, recorded),
//! [`forking`] (a run forked from a pool's zygote instead of started), [`beside`] (Laravel's own
//! scheduler still running beside the masters, and the tasks that run on every host).

pub mod alerts;
pub mod beside;
pub mod forking;
pub mod run;
pub mod status;
pub mod store;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drover_broker::RunScope;
use drover_scheduler::{due, Task, TaskList, Ticker};
use tokio::sync::watch;

use crate::config::ScheduleSpec;
use run::RunCommand;
use store::ScheduleStore;

/// How far ahead the scheduler looks for the next due time before it wakes up to look again.
const LOOK_AHEAD_MINUTES: u32 = 60;
/// How often runs asked for now (the dashboard's "run now") are looked for.
const REQUESTS_EVERY: Duration = Duration::from_secs(2);
/// How long a run asked for now may wait for a master that runs its task before it is recorded
/// as missed.
const REQUEST_EXPIRY: Duration = Duration::from_secs(600);
/// How often runs of dead masters are looked for (and marked lost).
const LOST_CHECK: Duration = Duration::from_secs(30);
/// How often old runs are deleted.
const TRIM_EVERY: Duration = Duration::from_secs(3600);
/// How long the export may take (it boots the application once).
const EXPORT_LIMIT: Duration = Duration::from_secs(60);
/// Between two tries of an export that failed.
const EXPORT_RETRY: Duration = Duration::from_secs(30);

/// What the scheduler needs from the master's configuration.
pub struct Scheduling {
    /// The schedule's settings: `None` while the configuration has no schedule. A reload sends
    /// the new configuration's (the master's `Reloading::schedule`): the scheduler reads the
    /// schedule again from the new release.
    pub spec: watch::Receiver<Option<ScheduleSpec>>,
    /// How a run's process starts (its command comes from `spec`).
    pub run: RunCommand,
    /// The master's zygotes, which fork runs from the pool `spec` names (`fork_from`); `None`:
    /// every run is started by its command.
    pub forks: Option<Arc<dyn forking::Forks>>,
    /// Where the tasks are published each time the schedule is read, for status
    /// ([`status::ScheduleView`]).
    pub published: watch::Sender<Arc<Vec<Arc<Task>>>>,
    /// How long a run may go on once the master stops before it is killed.
    pub grace: Duration,
}

/// The running scheduler: [`SchedulerHandle::stop`] ends it.
pub struct SchedulerHandle {
    stopping: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl SchedulerHandle {
    /// Stops ticking, lets the runs out finish within the grace (then kills them), and returns
    /// once their ends are recorded.
    pub async fn stop(self, limit: Duration) {
        let _ = self.stopping.send(true);
        if tokio::time::timeout(limit, self.task).await.is_err() {
            tracing::warn!("the scheduler did not stop within {limit:?}");
        }
    }
}

/// Starts the scheduler.
pub fn spawn(scheduling: Scheduling, store: Arc<dyn ScheduleStore>) -> SchedulerHandle {
    let (stopping, stop_rx) = watch::channel(false);
    let task = tokio::spawn(serve(scheduling, store, stop_rx));
    SchedulerHandle { stopping, task }
}

/// The schedule as last read, and what to do about reading it.
struct Loaded {
    tasks: Vec<Arc<Task>>,
    /// The settings it was read with (the run command comes from them).
    spec: Option<ScheduleSpec>,
    /// When to try the export again after it failed.
    retry_at: Option<tokio::time::Instant>,
}

/// The scheduler's state, owned by its task.
struct Scheduler {
    scheduling: Scheduling,
    store: Arc<dyn ScheduleStore>,
    /// Turns true when the master stops.
    stop: watch::Receiver<bool>,
    /// Whether the master can still send a reload (its sender is dropped as it stops).
    reloads_open: bool,
    loaded: Loaded,
    /// When the scheduler started: the ticker hands out the due times after it.
    start: jiff::Timestamp,
    ticker: Ticker,
    /// When the due times missed before the start are recorded: once every master had its
    /// grace to start them (a live one may still be starting its latest).
    missed_check_at: Option<tokio::time::Instant>,
    /// The runs out; each says whether it failed.
    runs: tokio::task::JoinSet<bool>,
    /// The alert check running, if any (one at a time).
    alert_check: Option<tokio::task::JoinHandle<()>>,
    next_alert_check: tokio::time::Instant,
    next_lost_check: tokio::time::Instant,
    next_trim: tokio::time::Instant,
    next_requests_check: tokio::time::Instant,
    /// What was said of Laravel's own scheduler running beside the masters, and when to look.
    beside: beside::Beside,
    next_beside_check: tokio::time::Instant,
    /// The tasks without onOneServer() are named once the schedule is read (at start, at reloads).
    name_every_host: bool,
}

async fn serve(scheduling: Scheduling, store: Arc<dyn ScheduleStore>, stop: watch::Receiver<bool>) {
    let start = jiff::Timestamp::now();
    let now = tokio::time::Instant::now();
    let scheduler = Scheduler {
        scheduling,
        store,
        stop,
        reloads_open: true,
        loaded: Loaded {
            tasks: Vec::new(),
            spec: None,
            retry_at: None,
        },
        start,
        ticker: Ticker::new(start),
        missed_check_at: Some(now + due::START_GRACE.unsigned_abs()),
        runs: tokio::task::JoinSet::new(),
        next_lost_check: now,
        next_trim: now,
        next_requests_check: now,
        beside: beside::Beside::default(),
        // A minute in: the runs of a cron line the host had before drover are on record by then.
        next_beside_check: now + Duration::from_secs(60),
        name_every_host: true,
        alert_check: None,
        // A minute in: a master that just started has not run anything yet.
        next_alert_check: now + Duration::from_secs(60),
    };
    scheduler.serve().await;
}

impl Scheduler {
    async fn serve(mut self) {
        let mut reread = true;
        loop {
            let retry = self
                .loaded
                .retry_at
                .is_some_and(|at| tokio::time::Instant::now() >= at);
            if reread || retry {
                let spec = self.scheduling.spec.borrow_and_update().clone();
                load(&self.scheduling, spec, &mut self.loaded).await;
                self.name_every_host = self.name_every_host || reread;
            }
            if self.name_every_host && !self.loaded.tasks.is_empty() {
                self.name_every_host = false;
                beside::name_every_host_tasks(&*self.store, &self.loaded.tasks).await;
            }
            let found_late = self.hand_out();
            self.record_found_late(found_late).await;
            self.take_requests().await;
            while let Some(ended) = self.runs.try_join_next() {
                self.run_ended(ended);
            }
            self.upkeep().await;
            let sleep = self.sleep_time();
            reread = false;
            tokio::select! {
                () = tokio::time::sleep(sleep) => {}
                _ = self.stop.changed() => {}
                Some(ended) = self.runs.join_next(), if !self.runs.is_empty() => self.run_ended(ended),
                changed = self.scheduling.spec.changed(), if self.reloads_open => {
                    // A reload: read the schedule again (from the new release).
                    reread = changed.is_ok();
                    self.reloads_open = changed.is_ok();
                }
            }
            if *self.stop.borrow() {
                break;
            }
        }
        // Stopping: no new due time; the runs out finish within the grace, or are killed.
        while self.runs.join_next().await.is_some() {}
    }

    /// Moves the ticker to now: starts a run for each due time passed, and returns those found
    /// too late to start.
    fn hand_out(&mut self) -> Vec<drover_scheduler::Missed> {
        let advance = self
            .ticker
            .advance(&self.loaded.tasks, jiff::Timestamp::now());
        if let Some((command, fork)) = self.how_to_run().filter(|_| !advance.due.is_empty()) {
            for d in advance.due {
                self.runs.spawn(run::run_due(
                    self.store.clone(),
                    command.clone(),
                    fork.clone(),
                    self.loaded.tasks[d.task].clone(),
                    d.at,
                    self.stop.clone(),
                    self.scheduling.grace,
                ));
            }
        }
        advance.missed
    }

    /// How a run is started with the schedule's settings: its command, and the pool to fork it
    /// from. `None` while there is no schedule.
    fn how_to_run(&self) -> Option<(Arc<RunCommand>, Option<run::ForkFrom>)> {
        let spec = self.loaded.spec.as_ref()?;
        let command = Arc::new(RunCommand {
            command: spec.run_command.clone(),
            ..self.scheduling.run.clone()
        });
        let fork = match (&self.scheduling.forks, &spec.fork_from) {
            (Some(forks), Some(pool)) => Some(run::ForkFrom {
                forks: forks.clone(),
                pool: pool.clone(),
            }),
            _ => None,
        };
        Some((command, fork))
    }

    /// Runs asked for now (the dashboard's "run now", `drover:schedule-run-now`) of the tasks
    /// this master runs: each taken by the first master that looks, and run at once.
    async fn take_requests(&mut self) {
        let now = tokio::time::Instant::now();
        if self.loaded.tasks.is_empty() || now < self.next_requests_check {
            return;
        }
        self.next_requests_check = now + REQUESTS_EVERY;
        let Some((command, fork)) = self.how_to_run() else {
            return;
        };
        let keys: Vec<&str> = self.loaded.tasks.iter().map(|t| t.key.as_str()).collect();
        loop {
            let taken = match self.store.take_requested(&keys).await {
                Ok(Some(taken)) => taken,
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!("looking for scheduled runs asked for now: {e}");
                    return;
                }
            };
            let (id, key, asked_at) = taken;
            let Some(task) = self.loaded.tasks.iter().find(|t| t.key == key).cloned() else {
                // Taken for one of `keys`: only a schedule read again meanwhile can say no.
                let end = drover_broker::RunEnd {
                    status: drover_broker::RunStatus::Failed,
                    reason: Some(format!("{key} is not in this master's schedule any more")),
                    exit_code: None,
                    output_tail: None,
                    ended_at: SystemTime::now(),
                };
                if let Err(e) = self.store.finish(id, &end).await {
                    tracing::warn!("recording a run asked for now of a task gone: {e}");
                }
                continue;
            };
            let asked_at =
                jiff::Timestamp::try_from(asked_at).unwrap_or_else(|_| jiff::Timestamp::now());
            tracing::info!(task = %task.summary, "scheduled task asked for now: running it");
            self.runs.spawn(run::run_claimed(
                self.store.clone(),
                command.clone(),
                fork.clone(),
                task,
                id,
                run::RunTime::AskedAt(asked_at),
                self.stop.clone(),
                self.scheduling.grace,
            ));
        }
    }

    /// Records the due times found too late to start as missed.
    async fn record_found_late(&self, found_late: Vec<drover_scheduler::Missed>) {
        for m in found_late {
            let task = &self.loaded.tasks[m.task];
            tracing::warn!(task = %task.summary, count = m.count, listed = m.times.len(), "scheduled task: due times found too late to start (the master stalled or the host slept), recorded as missed");
            let times: Vec<SystemTime> = m.times.into_iter().map(SystemTime::from).collect();
            let reason = "found too late to start: the master stalled or its host slept";
            if let Err(e) = self
                .store
                .missed(&task.key, &task.summary, scope_of(task), &times, reason)
                .await
            {
                tracing::warn!("recording missed due times: {e}");
            }
        }
    }

    /// A run ended: one that failed has its task's alert checked now.
    fn run_ended(&mut self, ended: Result<bool, tokio::task::JoinError>) {
        if matches!(ended, Ok(true)) {
            self.next_alert_check = self.next_alert_check.min(tokio::time::Instant::now());
        }
    }

    /// The due times missed before the start (once), the runs of dead masters, alerts,
    /// retention.
    async fn upkeep(&mut self) {
        let now = tokio::time::Instant::now();
        if now >= self.next_beside_check && !self.loaded.tasks.is_empty() {
            self.next_beside_check = now + Duration::from_secs(60);
            self.beside.check(&*self.store).await;
        }
        if now >= self.next_alert_check
            && !self.loaded.tasks.is_empty()
            && self.alert_check.as_ref().is_none_or(|t| t.is_finished())
        {
            self.next_alert_check = now + LOST_CHECK;
            if let Some(spec) = &self.loaded.spec {
                let check = alerts::AlertCheck {
                    tasks: self.loaded.tasks.clone(),
                    rules: spec.alerts.clone(),
                    store: self.store.clone(),
                    cwd: self.scheduling.run.cwd.clone(),
                    env: self.scheduling.run.env.clone(),
                };
                self.alert_check = Some(tokio::spawn(check.run()));
            }
        }
        if self.missed_check_at.is_some_and(|at| now >= at) && self.loaded.spec.is_some() {
            self.missed_check_at = None;
            let catch_ups =
                record_missed_while_down(&*self.store, &self.loaded.tasks, self.start).await;
            if let Some((command, fork)) = self.how_to_run().filter(|_| !catch_ups.is_empty()) {
                for (task, due) in catch_ups {
                    tracing::info!(task = %task.summary, due = %due, "scheduled task: catching up its latest due time missed while no master ran (droverCatchUp)");
                    self.runs.spawn(run::run_due(
                        self.store.clone(),
                        command.clone(),
                        fork.clone(),
                        task,
                        due,
                        self.stop.clone(),
                        self.scheduling.grace,
                    ));
                }
            }
        }
        if !self.loaded.tasks.is_empty() && now >= self.next_lost_check {
            self.next_lost_check = now + LOST_CHECK;
            match self.store.lost().await {
                Ok(lost) => {
                    for l in lost {
                        tracing::warn!(task = %l.task, host = %l.host, "a scheduled run was lost: its master died while it ran");
                    }
                }
                Err(e) => tracing::debug!("looking for lost scheduled runs: {e}"),
            }
            match self.store.expire_requests(REQUEST_EXPIRY).await {
                Ok(expired) => {
                    for (task, _) in expired {
                        tracing::warn!(task = %task, "a run asked for now was not taken: no master that runs this task took it within {REQUEST_EXPIRY:?}; recorded as missed");
                    }
                }
                Err(e) => tracing::debug!("expiring scheduled runs asked for now: {e}"),
            }
        }
        if let Some(spec) = self.loaded.spec.as_ref().filter(|_| now >= self.next_trim) {
            self.next_trim = now + TRIM_EVERY;
            let retention = Duration::from_secs(spec.retention_days.saturating_mul(86_400));
            if let Err(e) = self.store.trim(retention, Duration::from_secs(2)).await {
                tracing::debug!("deleting old scheduled runs: {e}");
            }
        }
    }

    /// How long to sleep: to the next due time (or to look again), by the wall clock — a due
    /// time is a wall-clock instant, and the monotonic clock does not follow the wall clock's
    /// steps — or to the next retry or check.
    fn sleep_time(&self) -> Duration {
        let mut sleep = LOST_CHECK;
        if let Some(wake) = self
            .ticker
            .next_wake(&self.loaded.tasks, LOOK_AHEAD_MINUTES)
        {
            let until: Duration = wake
                .duration_since(jiff::Timestamp::now())
                .try_into()
                .unwrap_or(Duration::ZERO);
            sleep = sleep.min(until);
        }
        let now = tokio::time::Instant::now();
        let requests = (!self.loaded.tasks.is_empty()).then_some(self.next_requests_check);
        // (While a check runs, the next waits for it: it is looked at again when a run ends or
        // at the next wake.)
        let alerts = (!self.loaded.tasks.is_empty()
            && self.alert_check.as_ref().is_none_or(|t| t.is_finished()))
        .then_some(self.next_alert_check);
        for at in [self.loaded.retry_at, self.missed_check_at, requests, alerts]
            .into_iter()
            .flatten()
        {
            sleep = sleep.min(at.saturating_duration_since(now));
        }
        sleep
    }
}

/// Reads the schedule with `spec` (none: no schedule here), keeping the tasks read last when the
/// export fails (tried again later).
async fn load(scheduling: &Scheduling, spec: Option<ScheduleSpec>, loaded: &mut Loaded) {
    let Some(spec) = spec else {
        if !loaded.tasks.is_empty() {
            tracing::info!(
                "the configuration has no schedule any more: the scheduler runs no task"
            );
        }
        loaded.tasks.clear();
        loaded.spec = None;
        loaded.retry_at = None;
        scheduling.published.send_replace(Arc::default());
        return;
    };
    match export(scheduling, &spec).await {
        Ok(tasks) => {
            loaded.retry_at = None;
            loaded.tasks = tasks.into_iter().map(Arc::new).collect();
            loaded.spec = Some(spec);
            scheduling
                .published
                .send_replace(Arc::new(loaded.tasks.clone()));
            if loaded.tasks.is_empty() {
                tracing::info!(
                    "the application's schedule has no task: the scheduler has nothing to run"
                );
            } else {
                tracing::info!(
                    tasks = loaded.tasks.len(),
                    "the scheduler runs the application's schedule"
                );
            }
        }
        Err(problem) => {
            tracing::error!("reading the application's schedule: {problem}; {} trying again in {EXPORT_RETRY:?}", if loaded.tasks.is_empty() { "no task runs until it is read;" } else { "the schedule read before goes on;" });
            loaded.retry_at = Some(tokio::time::Instant::now() + EXPORT_RETRY);
            if loaded.spec.is_none() {
                loaded.spec = Some(spec);
            }
        }
    }
}

fn scope_of(task: &Task) -> RunScope {
    if task.one_server {
        RunScope::OneServer
    } else {
        RunScope::ThisHost
    }
}

/// Reads the schedule once: its tasks (the problems of those left out are logged), or what
/// went wrong.
async fn export(scheduling: &Scheduling, spec: &ScheduleSpec) -> Result<Vec<Task>, String> {
    let text = crate::process::app_command::run_with_env(
        &spec.export_command,
        &scheduling.run.env,
        scheduling.run.cwd.as_deref(),
        EXPORT_LIMIT,
    )
    .await?;
    let list = TaskList::from_export(last_json(&text)).map_err(|e| e.to_string())?;
    for p in &list.problems {
        tracing::error!("{p}");
    }
    Ok(list.tasks)
}

/// The export's document: its last line that starts with `{` (a provider may print before it).
fn last_json(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or(text)
}

/// The due times missed while no master ran a task: after the last one on record, up to the
/// scheduler's start (`start`: the due times after it are the ticker's), recorded as missed —
/// those a master started meanwhile have a row, which is left. A task of `droverCatchUp()` has
/// its latest missed due time returned to be run (claimed: once) instead.
async fn record_missed_while_down(
    store: &dyn ScheduleStore,
    tasks: &[Arc<Task>],
    start: jiff::Timestamp,
) -> Vec<(Arc<Task>, jiff::Timestamp)> {
    let mut catch_ups = Vec::new();
    if tasks.is_empty() {
        return catch_ups;
    }
    let keys: Vec<&str> = tasks.iter().map(|t| t.key.as_str()).collect();
    let last = match store.last_dues(&keys).await {
        Ok(last) => last,
        Err(e) => {
            tracing::warn!("reading the schedule's last due times (the due times missed while no master ran are not recorded): {e}");
            return catch_ups;
        }
    };
    for task in tasks {
        let scope = scope_of(task);
        let Some((_, _, at)) = last.iter().find(|(k, s, _)| *k == task.key && *s == scope) else {
            continue;
        };
        let Ok(at) = jiff::Timestamp::try_from(*at) else {
            continue;
        };
        let missed = due::missed_while_down(task, at, start, due::MISSED_LISTED);
        let caught_up = task
            .catch_up
            .then(|| due::catch_up_due(task, at, start))
            .flatten();
        if let Some(due) = caught_up {
            catch_ups.push((task.clone(), due));
        }
        let times: Vec<SystemTime> = missed
            .times
            .iter()
            .copied()
            .filter(|t| Some(*t) != caught_up)
            .map(SystemTime::from)
            .collect();
        if times.is_empty() {
            continue;
        }
        match store
            .missed(
                &task.key,
                &task.summary,
                scope,
                &times,
                "no master ran the schedule then",
            )
            .await
        {
            Ok(0) => {}
            Ok(recorded) => {
                tracing::warn!(task = %task.summary, recorded, more = missed.more, since = %at, "scheduled task: due times missed while no master ran the schedule, recorded as missed (the first {} at most; `more` were not recorded)", due::MISSED_LISTED)
            }
            Err(e) => tracing::warn!("recording missed due times: {e}"),
        }
    }
    catch_ups
}
