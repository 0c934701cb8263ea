//! The per-minute book: each finished job's outcome, run time, CPU and peak memory, and each
//! started job's wait, added up per minute (by the database's clock), queue and job class, and
//! turned into `drover.metrics` rows. A minute's row is rewritten whole while it changes, and
//! kept until written, so a database outage delays rows but loses none (up to
//! [`MAX_OPEN_MINUTES`] of them).

use std::collections::BTreeMap;
use std::time::Duration;

use drover_broker::MinuteRow;

use super::histogram::Histogram;
use super::usage::JobUsage;

/// How a job's attempt ended, as the metrics count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `done`.
    Completed,
    /// `fail` (the application's failer, or drover's), or failed by the master.
    Failed,
    /// `release`, or taken back because its worker died or timed out.
    Released,
}

/// What the book is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// A worker started a job that had been available for `wait`.
    Started {
        queue: String,
        class: String,
        wait: Duration,
    },
    /// A job's attempt ended after running for `runtime`, having used `usage`.
    Finished {
        queue: String,
        class: String,
        outcome: Outcome,
        runtime: Duration,
        usage: Option<JobUsage>,
        /// The completed job, for the history (only when it is on, and only for `done`).
        completed: Option<Box<CompletedJob>>,
    },
}

/// What the history keeps of a completed job besides its metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedJob {
    pub id: i64,
    pub attempt: i32,
    pub payload: String,
    pub worker_pid: u32,
    pub wait: Option<Duration>,
    /// When the master saw it complete, by the database's clock.
    pub finished_at: std::time::SystemTime,
}

/// Minutes kept in memory while the database is away; older ones are dropped, with a warning.
pub const MAX_OPEN_MINUTES: i64 = 60;

/// One minute's totals for one queue and class.
#[derive(Debug, Default, Clone)]
struct Totals {
    completed: i64,
    failed: i64,
    released: i64,
    /// Microseconds.
    runtime: Histogram,
    /// Microseconds.
    wait: Histogram,
    /// Microseconds.
    cpu: Histogram,
    /// KiB.
    memory: Histogram,
    /// Changed since last written.
    dirty: bool,
}

/// (minute since the epoch, queue, job class).
type Key = (i64, String, String);

#[derive(Debug, Default)]
pub struct MinuteBook {
    minutes: BTreeMap<Key, Totals>,
    /// The earliest minute an observation may still go to: minutes before it were written and
    /// forgotten, and a row rebuilt from zero would overwrite their totals. The database's time
    /// as this host sees it can step back (an NTP step, a new offset at a heartbeat); such
    /// observations go to this minute instead.
    floor: i64,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl MinuteBook {
    /// Adds an observation to minute `minute` (minutes since the epoch, database clock).
    pub fn record(&mut self, minute: i64, observation: Observation) {
        match observation {
            Observation::Started { queue, class, wait } => {
                let totals = self.totals(minute, queue, class);
                totals.wait.record(micros(wait));
            }
            Observation::Finished {
                queue,
                class,
                outcome,
                runtime,
                usage,
                ..
            } => {
                let totals = self.totals(minute, queue, class);
                match outcome {
                    Outcome::Completed => totals.completed += 1,
                    Outcome::Failed => totals.failed += 1,
                    Outcome::Released => totals.released += 1,
                }
                totals.runtime.record(micros(runtime));
                if let Some(usage) = usage {
                    totals.cpu.record(micros(usage.cpu));
                    if let Some(kib) = usage.peak_kib {
                        totals.memory.record(kib);
                    }
                }
            }
        }
    }

    fn totals(&mut self, minute: i64, queue: String, class: String) -> &mut Totals {
        let minute = minute.max(self.floor);
        let totals = self.minutes.entry((minute, queue, class)).or_default();
        totals.dirty = true;
        totals
    }

    /// The rows changed since last taken, marked clean. Give them back with [`Self::unwritten`]
    /// if they could not be written.
    pub fn changed(&mut self) -> Vec<MinuteRow> {
        self.minutes
            .iter_mut()
            .filter(|(_, t)| t.dirty)
            .map(|((minute, queue, class), t)| {
                t.dirty = false;
                MinuteRow {
                    minute: *minute,
                    queue: queue.clone(),
                    class: class.clone(),
                    completed: t.completed,
                    failed: t.failed,
                    released: t.released,
                    runtime: t.runtime.to_json(1000.0).to_string(),
                    wait: t.wait.to_json(1000.0).to_string(),
                    cpu: t.cpu.to_json(1000.0).to_string(),
                    memory: t.memory.to_json(1.0).to_string(),
                }
            })
            .collect()
    }

    /// Rows that could not be written: changed again, so the next [`Self::changed`] has them.
    pub fn unwritten(&mut self, rows: &[MinuteRow]) {
        for row in rows {
            let key = (row.minute, row.queue.clone(), row.class.clone());
            if let Some(t) = self.minutes.get_mut(&key) {
                t.dirty = true;
            }
        }
    }

    /// Forgets written minutes before `minute` (they cannot change any more: jobs are placed
    /// in the minute they are observed), and any minute older than [`MAX_OPEN_MINUTES`] before
    /// it, written or not. Returns how many unwritten rows were dropped.
    pub fn forget_before(&mut self, minute: i64) -> usize {
        self.floor = self.floor.max(minute);
        let oldest_kept = minute.saturating_sub(MAX_OPEN_MINUTES);
        let mut dropped = 0;
        self.minutes.retain(|(m, _, _), t| {
            if *m < oldest_kept {
                dropped += usize::from(t.dirty);
                false
            } else {
                *m >= minute || t.dirty
            }
        });
        dropped
    }

    /// (minute, queue, class) rows held.
    pub fn len(&self) -> usize {
        self.minutes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.minutes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(class: &str, outcome: Outcome, ms: u64) -> Observation {
        Observation::Finished {
            queue: "default".into(),
            class: class.into(),
            outcome,
            runtime: Duration::from_millis(ms),
            usage: Some(JobUsage {
                cpu: Duration::from_millis(ms / 2),
                peak_kib: Some(20_000),
            }),
            completed: None,
        }
    }

    #[test]
    fn outcomes_are_counted_per_minute_and_class_and_rows_carry_their_distributions() {
        let mut book = MinuteBook::default();
        book.record(10, finished("A", Outcome::Completed, 100));
        book.record(10, finished("A", Outcome::Failed, 300));
        book.record(10, finished("B", Outcome::Released, 5));
        book.record(11, finished("A", Outcome::Completed, 100));
        book.record(
            10,
            Observation::Started {
                queue: "default".into(),
                class: "A".into(),
                wait: Duration::from_millis(40),
            },
        );
        let rows = book.changed();
        assert_eq!(rows.len(), 3);
        let a10 = &rows[0];
        assert_eq!((a10.minute, a10.class.as_str()), (10, "A"));
        assert_eq!((a10.completed, a10.failed, a10.released), (1, 1, 0));
        let runtime: serde_json::Value = serde_json::from_str(&a10.runtime).unwrap();
        assert_eq!(runtime["n"], 2);
        assert_eq!(runtime["max"], 300.0);
        let wait: serde_json::Value = serde_json::from_str(&a10.wait).unwrap();
        assert_eq!(wait["n"], 1);
        let memory: serde_json::Value = serde_json::from_str(&a10.memory).unwrap();
        assert_eq!(memory["max"], 20_000.0);
        assert!(book.changed().is_empty(), "taken rows are clean");
    }

    #[test]
    fn unwritten_rows_are_offered_again_and_only_written_closed_minutes_are_forgotten() {
        let mut book = MinuteBook::default();
        book.record(10, finished("A", Outcome::Completed, 1));
        book.record(11, finished("A", Outcome::Completed, 1));
        let rows = book.changed();
        book.unwritten(&rows[..1]);
        assert_eq!(book.forget_before(12), 0);
        assert_eq!(
            book.len(),
            1,
            "minute 10 waits to be written; 11 was written"
        );
        assert_eq!(book.changed()[0].minute, 10);
        // An outage longer than the book holds drops the oldest unwritten minutes.
        book.record(20, finished("A", Outcome::Completed, 1));
        assert_eq!(book.forget_before(21 + MAX_OPEN_MINUTES), 1);
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn an_observation_placed_before_a_forgotten_minute_goes_to_the_floor_not_a_fresh_row() {
        let mut book = MinuteBook::default();
        book.record(10, finished("A", Outcome::Completed, 1));
        book.changed();
        book.forget_before(11);
        // The clock stepped back into minute 10, which is written and forgotten.
        book.record(10, finished("A", Outcome::Completed, 1));
        let rows = book.changed();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].minute, rows[0].completed), (11, 1));
    }
}
