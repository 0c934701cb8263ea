//! The scheduler's one error type.

/// What went wrong reading an application's schedule. Each names the task and the fix; one bad
/// task never stops the others (see [`crate::task::TaskList`]).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    /// The export (`php artisan drover:schedule-export`) is not the document drover reads.
    #[error("the schedule export is not valid JSON of the expected shape: {0}. Fix: run `php artisan drover:schedule-export` and check that it prints one JSON document (the package and the binary must be of the same release)")]
    Export(String),
    /// A task's cron expression cannot be parsed.
    #[error("scheduled task `{task}`: its cron expression `{expression}` is not valid ({reason}). Fix: correct the expression in the schedule (routes/console.php or the console kernel)")]
    Expression {
        task: String,
        expression: String,
        reason: String,
    },
    /// A task's time zone is not in the system's tz database.
    #[error("scheduled task `{task}`: its time zone `{timezone}` is unknown ({reason}). Fix: use a name of the tz database (e.g. Europe/Paris) in ->timezone() or app.timezone, and check that tzdata is installed")]
    TimeZone {
        task: String,
        timezone: String,
        reason: String,
    },
    /// A sub-minute repetition that does not divide a minute.
    #[error("scheduled task `{task}`: it repeats every {seconds} s, which does not divide a minute. Fix: use one of Laravel's sub-minute frequencies (everySecond … everyThirtySeconds)")]
    RepeatSeconds { task: String, seconds: u64 },
}
