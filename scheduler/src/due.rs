//! When a task is due: Laravel's rule, as pure functions of instants (the clock is the caller's).
//!
//! Under cron, `schedule:run` starts at second 0 of every minute and runs each event whose
//! expression matches that minute's wall-clock time in the event's time zone; an event with a
//! sub-minute repetition (`everyTenSeconds()`) is then run again every so many seconds until the
//! minute ends. So a task is due at second 0 of each real (UTC) minute whose wall-clock time in
//! its zone matches, and, if it repeats, at every multiple of its repetition within that minute.
//! Across a daylight-saving change this is what cron gives: a wall-clock time that does not exist
//! that day is not due, one that happens twice is due twice.
//!
//! [`Ticker`] hands out each due time once as the clock moves on, and sorts what it finds too
//! late (the master was stopped, or the host slept) into missed due times rather than running
//! them all at once.

use std::borrow::Borrow;

use jiff::{SignedDuration, Timestamp};

use crate::task::Task;

/// How late a due time may still start: one cron period. A due time found later than this (the
/// master stalled, the host slept) is missed, as cron would have missed it.
pub const START_GRACE: SignedDuration = SignedDuration::from_secs(60);

/// The instant at second 0 of the minute holding `at`.
pub fn minute_of(at: Timestamp) -> Timestamp {
    let s = at.as_second().div_euclid(60) * 60;
    Timestamp::from_second(s).unwrap_or(at)
}

/// The due times of `task` in the minute starting at `minute` (second 0 of a UTC minute), in
/// order: none, second 0, or every `repeat_seconds` from second 0.
pub fn due_in_minute(task: &Task, minute: Timestamp) -> Vec<Timestamp> {
    let civil = minute.to_zoned(task.timezone.clone()).datetime();
    if !task.expression.matches_minute(civil) {
        return Vec::new();
    }
    let step = task.repeat_seconds.unwrap_or(60).max(1) as i64;
    (0..60)
        .step_by(step as usize)
        .filter_map(|s| minute.checked_add(SignedDuration::from_secs(s)).ok())
        .collect()
}

/// Due times in `(after, upto]`, in order: at most `cap` of them, and how many more there were.
#[derive(Debug, PartialEq, Eq)]
pub struct DueTimes {
    pub times: Vec<Timestamp>,
    pub more: u64,
}

/// The due times of `task` after `after` up to and including `upto`.
pub fn due_between(task: &Task, after: Timestamp, upto: Timestamp, cap: usize) -> DueTimes {
    let mut out = DueTimes {
        times: Vec::new(),
        more: 0,
    };
    if upto <= after {
        return out;
    }
    let mut minute = minute_of(after);
    let last = minute_of(upto);
    while minute <= last {
        for t in due_in_minute(task, minute) {
            if t > after && t <= upto {
                if out.times.len() < cap {
                    out.times.push(t);
                } else {
                    out.more += 1;
                }
            }
        }
        match minute.checked_add(SignedDuration::from_secs(60)) {
            Ok(next) => minute = next,
            Err(_) => break,
        }
    }
    out
}

/// The first due time of `task` strictly after `after`, looking at most `horizon_minutes` ahead.
pub fn next_due(task: &Task, after: Timestamp, horizon_minutes: u32) -> Option<Timestamp> {
    let mut minute = minute_of(after);
    for _ in 0..=horizon_minutes {
        if let Some(t) = due_in_minute(task, minute).into_iter().find(|t| *t > after) {
            return Some(t);
        }
        minute = minute.checked_add(SignedDuration::from_secs(60)).ok()?;
    }
    None
}

/// The next due time of `task` after `after` for people (status, the dashboard): by the
/// ticker's own rules through the next day, and beyond by croner's search of the expression in
/// the task's zone (a weekly or yearly task), which does not walk the minutes one by one.
pub fn next_due_shown(task: &Task, after: Timestamp) -> Option<Timestamp> {
    const DAY_MINUTES: u32 = 24 * 60;
    next_due(task, after, DAY_MINUTES).or_else(|| {
        task.expression
            .next_after(&after.to_zoned(task.timezone.clone()))
            .map(|z| z.timestamp())
    })
}

/// The due time a task of `droverCatchUp()` runs on return after the whole fleet was down: its
/// latest due time after `last_due` (the last on record) up to and including `start`, if any.
/// By croner's backward search (a weekly task's may be days back); a sub-minute task's is the
/// latest matching minute's second 0.
pub fn catch_up_due(task: &Task, last_due: Timestamp, start: Timestamp) -> Option<Timestamp> {
    let latest = task
        .expression
        .latest_at_or_before(&start.to_zoned(task.timezone.clone()))?
        .timestamp();
    (latest > last_due).then_some(latest)
}

/// One due time handed out: which task (its position in the list) and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    pub task: usize,
    pub at: Timestamp,
}

/// Due times found too late to start, per task: how many, and the first [`MISSED_LISTED`] of
/// them (the ones a history records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missed {
    pub task: usize,
    pub count: u64,
    pub times: Vec<Timestamp>,
}

/// At most this many missed due times of one task are listed (the rest are counted).
pub const MISSED_LISTED: usize = 100;

/// What the clock's move found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Advance {
    /// To start now, in due order.
    pub due: Vec<Due>,
    /// Too late to start (older than [`START_GRACE`]).
    pub missed: Vec<Missed>,
}

/// The scheduler's clock hand: every due time up to it has been handed out. A master starts it
/// at its start: nothing before that is due (catching up after the whole fleet was down is the
/// history's business, [`missed_while_down`]).
#[derive(Debug, Clone, Copy)]
pub struct Ticker {
    hand: Timestamp,
}

/// At most this many due times of one task are listed in one advance; the rest are counted.
const ADVANCE_CAP: usize = 10_000;

impl Ticker {
    pub fn new(start: Timestamp) -> Ticker {
        Ticker { hand: start }
    }

    /// Where the hand is.
    pub fn hand(&self) -> Timestamp {
        self.hand
    }

    /// Moves the hand to `now`, handing out the due times passed: those within [`START_GRACE`]
    /// of `now` to start, older ones as missed. A clock that went back moves nothing (the due
    /// times it passes again were handed out already).
    pub fn advance<T: Borrow<Task>>(&mut self, tasks: &[T], now: Timestamp) -> Advance {
        let mut advance = Advance::default();
        if now <= self.hand {
            return advance;
        }
        let late = now.checked_sub(START_GRACE).unwrap_or(now);
        for (i, task) in tasks.iter().enumerate() {
            let found = due_between(task.borrow(), self.hand, now, ADVANCE_CAP);
            let mut missed = Missed {
                task: i,
                count: found.more,
                times: Vec::new(),
            };
            for at in found.times {
                if at < late {
                    // Beyond the cap too (`found.more`): all older than the grace, since the cap
                    // is more than a grace's worth of due times (one a second is 60).
                    missed.count += 1;
                    if missed.times.len() < MISSED_LISTED {
                        missed.times.push(at);
                    }
                } else {
                    advance.due.push(Due { task: i, at });
                }
            }
            if missed.count > 0 {
                advance.missed.push(missed);
            }
        }
        advance.due.sort_by_key(|d| (d.at, d.task));
        self.hand = now;
        advance
    }

    /// When the next due time of any task falls, looking `horizon_minutes` ahead of the hand; the
    /// caller wakes then, or at the horizon to look again.
    pub fn next_wake<T: Borrow<Task>>(
        &self,
        tasks: &[T],
        horizon_minutes: u32,
    ) -> Option<Timestamp> {
        tasks
            .iter()
            .filter_map(|t| next_due(t.borrow(), self.hand, horizon_minutes))
            .min()
    }
}

/// Due times of `task` missed while no master ran it: after the last one the history holds
/// (`last_due`) up to and including `start` (a scheduler's start: its ticker hands out the due
/// times after it), at most `cap` listed. The caller records them once every master had
/// [`START_GRACE`] to start them, leaving those that have a row.
pub fn missed_while_down(
    task: &Task,
    last_due: Timestamp,
    start: Timestamp,
    cap: usize,
) -> DueTimes {
    due_between(task, last_due, start, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_task_that_catches_up_runs_its_latest_due_time_missed_and_none_if_it_ran_since() {
        let daily = Task::for_test("daily", "0 3 * * *", "Europe/Paris", None);
        // Down from the 4th to the 6th at noon: the latest missed is 03:00 Paris on the 6th.
        assert_eq!(
            catch_up_due(
                &daily,
                ts("2026-12-04T02:00:00Z"),
                ts("2026-12-06T12:00:00Z")
            ),
            Some(ts("2026-12-06T02:00:00Z"))
        );
        // It ran at that due time already: nothing to catch up.
        assert_eq!(
            catch_up_due(
                &daily,
                ts("2026-12-06T02:00:00Z"),
                ts("2026-12-06T12:00:00Z")
            ),
            None
        );
    }

    #[test]
    fn the_next_due_time_shown_is_found_beyond_a_day_for_a_yearly_task() {
        let yearly = Task::for_test("yearly", "0 0 1 1 *", "Europe/Paris", None);
        assert_eq!(
            next_due_shown(&yearly, ts("2026-12-06T10:05:00Z")),
            // Midnight of 1 January in Paris.
            Some(ts("2026-12-31T23:00:00Z"))
        );
        let often = Task::for_test("ten", "* * * * *", "UTC", Some(10));
        assert_eq!(
            next_due_shown(&often, ts("2026-12-06T10:05:10Z")),
            Some(ts("2026-12-06T10:05:20Z"))
        );
    }

    #[test]
    fn a_task_is_due_at_second_0_of_each_matching_minute() {
        let t = Task::for_test("five", "*/5 * * * *", "UTC", None);
        assert_eq!(
            due_in_minute(&t, ts("2026-12-06T10:05:00Z")),
            [ts("2026-12-06T10:05:00Z")]
        );
        assert!(due_in_minute(&t, ts("2026-12-06T10:06:00Z")).is_empty());
        let d = due_between(
            &t,
            ts("2026-12-06T10:00:00Z"),
            ts("2026-12-06T10:20:00Z"),
            100,
        );
        assert_eq!(
            d.times,
            [
                ts("2026-12-06T10:05:00Z"),
                ts("2026-12-06T10:10:00Z"),
                ts("2026-12-06T10:15:00Z"),
                ts("2026-12-06T10:20:00Z")
            ]
        );
    }

    #[test]
    fn a_sub_minute_task_is_due_every_few_seconds_through_each_matching_minute() {
        let t = Task::for_test("ten", "* * * * *", "UTC", Some(10));
        let minute = due_in_minute(&t, ts("2026-12-06T10:00:00Z"));
        assert_eq!(minute.len(), 6);
        assert_eq!(minute[5], ts("2026-12-06T10:00:50Z"));
        // Hourly with a repetition: only in the matching minute, as Laravel's repeat loop.
        let h = Task::for_test("hourly-ten", "0 * * * *", "UTC", Some(30));
        let d = due_between(
            &h,
            ts("2026-12-06T10:00:00Z"),
            ts("2026-12-06T11:00:40Z"),
            100,
        );
        assert_eq!(
            d.times,
            [
                ts("2026-12-06T10:00:30Z"),
                ts("2026-12-06T11:00:00Z"),
                ts("2026-12-06T11:00:30Z")
            ]
        );
    }

    #[test]
    fn a_task_is_due_in_its_own_time_zone() {
        // 09:00 in Paris is 08:00 UTC in winter.
        let t = Task::for_test("paris", "0 9 * * *", "Europe/Paris", None);
        assert_eq!(
            next_due(&t, ts("2026-12-06T00:00:00Z"), 1440),
            Some(ts("2026-12-06T08:00:00Z"))
        );
        // India is 5:30 ahead: a whole minute still.
        let k = Task::for_test("kolkata", "0 9 * * *", "Asia/Kolkata", None);
        assert_eq!(
            next_due(&k, ts("2026-12-06T00:00:00Z"), 1440),
            Some(ts("2026-12-06T03:30:00Z"))
        );
    }

    #[test]
    fn across_daylight_saving_a_skipped_time_is_not_due_and_a_repeated_one_is_due_twice() {
        // Europe/Paris, 2027-03-28: 02:00 → 03:00 (UTC 01:00). 02:30 does not exist that day.
        let t = Task::for_test("two-thirty", "30 2 * * *", "Europe/Paris", None);
        let d = due_between(
            &t,
            ts("2027-03-27T12:00:00Z"),
            ts("2027-03-29T12:00:00Z"),
            100,
        );
        assert_eq!(d.times, [ts("2027-03-29T00:30:00Z")]);
        // 2027-10-31: 03:00 → 02:00 (UTC 01:00). 02:30 happens twice: at 00:30 and 01:30 UTC.
        let d = due_between(
            &t,
            ts("2027-10-30T12:00:00Z"),
            ts("2027-10-31T12:00:00Z"),
            100,
        );
        assert_eq!(
            d.times,
            [ts("2027-10-31T00:30:00Z"), ts("2027-10-31T01:30:00Z")]
        );
    }

    #[test]
    fn the_ticker_hands_out_each_due_time_once_and_nothing_before_its_start() {
        let tasks = [
            Task::for_test("minute", "* * * * *", "UTC", None),
            Task::for_test("ten", "* * * * *", "UTC", Some(10)),
        ];
        let mut ticker = Ticker::new(ts("2026-12-06T10:00:05Z"));
        assert_eq!(
            ticker.next_wake(&tasks, 60),
            Some(ts("2026-12-06T10:00:10Z"))
        );
        let a = ticker.advance(&tasks, ts("2026-12-06T10:00:10.002Z"));
        assert_eq!(
            a.due,
            [Due {
                task: 1,
                at: ts("2026-12-06T10:00:10Z")
            }]
        );
        // Again at the same time, or with the clock gone back: nothing.
        assert!(ticker
            .advance(&tasks, ts("2026-12-06T10:00:10.002Z"))
            .due
            .is_empty());
        assert!(ticker
            .advance(&tasks, ts("2026-12-06T10:00:09Z"))
            .due
            .is_empty());
        assert_eq!(ticker.hand(), ts("2026-12-06T10:00:10.002Z"));
        let a = ticker.advance(&tasks, ts("2026-12-06T10:01:00Z"));
        let at: Vec<_> = a.due.iter().map(|d| (d.task, d.at)).collect();
        assert_eq!(
            at,
            [
                (1, ts("2026-12-06T10:00:20Z")),
                (1, ts("2026-12-06T10:00:30Z")),
                (1, ts("2026-12-06T10:00:40Z")),
                (1, ts("2026-12-06T10:00:50Z")),
                (0, ts("2026-12-06T10:01:00Z")),
                (1, ts("2026-12-06T10:01:00Z")),
            ]
        );
        assert!(a.missed.is_empty());
    }

    #[test]
    fn due_times_found_later_than_a_cron_period_are_missed_not_run() {
        let tasks = [Task::for_test("minute", "* * * * *", "UTC", None)];
        let mut ticker = Ticker::new(ts("2026-12-06T10:00:30Z"));
        // The host slept ten minutes: 10:01 … 10:09 are missed, 10:10 (within the grace) runs.
        let a = ticker.advance(&tasks, ts("2026-12-06T10:10:20Z"));
        assert_eq!(
            a.due,
            [Due {
                task: 0,
                at: ts("2026-12-06T10:10:00Z")
            }]
        );
        assert_eq!(a.missed.len(), 1);
        let m = &a.missed[0];
        assert_eq!((m.task, m.count, m.times.len()), (0, 9, 9));
        assert_eq!(m.times.first(), Some(&ts("2026-12-06T10:01:00Z")));
        assert_eq!(m.times.last(), Some(&ts("2026-12-06T10:09:00Z")));
    }

    #[test]
    fn due_times_missed_while_every_master_was_down_are_counted_from_the_history() {
        let t = Task::for_test("five", "*/5 * * * *", "UTC", None);
        // Last run 10:00; a scheduler starts at 10:31: 10:05 … 10:30 were missed (10:35 is its
        // ticker's).
        let m = missed_while_down(
            &t,
            ts("2026-12-06T10:00:00Z"),
            ts("2026-12-06T10:31:00Z"),
            100,
        );
        assert_eq!(m.times.len(), 6);
        assert_eq!(m.times[0], ts("2026-12-06T10:05:00Z"));
        assert_eq!(m.times[5], ts("2026-12-06T10:30:00Z"));
        let capped = missed_while_down(
            &t,
            ts("2026-12-06T10:00:00Z"),
            ts("2026-12-06T10:31:00Z"),
            2,
        );
        assert_eq!((capped.times.len(), capped.more), (2, 4));
        // The ticker started there hands out none of them.
        let mut ticker = Ticker::new(ts("2026-12-06T10:31:00Z"));
        let a = ticker.advance(std::slice::from_ref(&t), ts("2026-12-06T10:35:00Z"));
        assert_eq!(
            a.due,
            [Due {
                task: 0,
                at: ts("2026-12-06T10:35:00Z")
            }]
        );
    }
}
