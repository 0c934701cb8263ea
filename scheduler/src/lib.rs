//! drover's scheduler: when the tasks of a Laravel application's schedule are due, as pure
//! rules of instants, so that the master runs the schedule without cron (issue 39,
//! docs/schedule.md). It knows no database and no process: the master asks it what is due,
//! claims each due time in PostgreSQL (`drover_broker::schedule_runs`) and starts the run.
//!
//! The parts:
//! - [`cron`]: a Laravel cron expression ([`Expression`]) and whether a wall-clock minute
//!   matches it (croner's parser and matcher, with Laravel's options).
//! - [`task`]: a scheduled task ([`Task`]) as the PHP package exports it, and the list of them
//!   with the problems of those that could not be read ([`TaskList`]).
//! - [`due`]: Laravel's rule of when a task is due (each matching minute, in the task's zone, and
//!   every few seconds through it for a sub-minute task), and the [`Ticker`] that hands out each
//!   due time once as the clock moves, sorting the ones found too late into missed ones.
//! - [`outcome`]: what a run's process said and how it ended, into the history's words.
//! - [`error`]: the crate's one error type, [`ScheduleError`].

pub mod cron;
pub mod due;
pub mod error;
pub mod outcome;
pub mod task;

pub use cron::Expression;
pub use due::{Advance, Due, Missed, Ticker};
pub use error::ScheduleError;
pub use outcome::{Outcome, OutcomeKind};
pub use task::{Task, TaskList};
