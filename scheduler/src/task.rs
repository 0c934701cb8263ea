//! A scheduled task as the application defines it, read from the export the PHP package prints
//! (`php artisan drover:schedule-export`, `php-client/src/Schedule/Export.php`).
//!
//! drover decides *when* a task is due from its cron expression, time zone and sub-minute
//! repetition; everything else Laravel decides at run time, in the child that runs it (filters,
//! environments, maintenance mode, overlapping, hooks, output). So only what the due time and the
//! claim need is read here.

use std::collections::HashMap;

use jiff::tz::TimeZone;
use serde::Deserialize;

use crate::cron::Expression;
use crate::error::ScheduleError;

/// The export's format version this binary reads.
pub const EXPORT_VERSION: u64 = 1;

/// One task.
#[derive(Clone, Debug)]
pub struct Task {
    /// Its name in the history and in claims, the same in every process and across deploys that
    /// keep the task: Laravel's mutex name of the event (the expression and command of a
    /// command, the description of a closure), with `#2`, `#3`… on events that share one.
    pub key: String,
    /// Its position in the application's schedule: how the child that runs it finds the event
    /// again (it checks the key, so a schedule changed by a deploy is never run by position).
    pub index: u32,
    /// What `schedule:list` shows for it: the command, or the closure's description.
    pub summary: String,
    /// When it is due, minute by minute.
    pub expression: Expression,
    /// The zone its expression is read in (`->timezone()`, else `app.timezone`).
    pub timezone: TimeZone,
    /// The zone's name, as the export gave it (for the history and messages).
    pub timezone_name: String,
    /// Sub-minute repetition (Laravel 10+: `everyTenSeconds()` …): due every so many seconds
    /// through each matching minute, from its second 0. `None`: once, at second 0.
    pub repeat_seconds: Option<u32>,
    /// `onOneServer()`: one run per due time across every master of the database; else one per
    /// host, as cron on each host would.
    pub one_server: bool,
    /// `withoutOverlapping()`: Laravel's mutex in the run skips a due time while a run is out;
    /// the history says so.
    pub without_overlapping: bool,
    /// How long, in minutes, that mutex holds at most (`withoutOverlapping($minutes)`).
    pub expires_minutes: u32,
    /// `runInBackground()`: the command runs detached, and its end is reported by
    /// `schedule:finish`.
    pub run_in_background: bool,
    /// `evenInMaintenanceMode()`.
    pub even_in_maintenance: bool,
    /// `droverCatchUp()` (the package's macro): after the whole fleet was down, its latest due
    /// time missed runs once on return instead of being recorded as missed.
    pub catch_up: bool,
    /// A filter holds the time the schedule was defined at (`between()`, `unlessBetween()`): a
    /// run forked from a zygote booted earlier would judge by the boot's window, so it is started
    /// by its command, which defines the schedule anew.
    pub needs_boot: bool,
}

/// The tasks of an export, and the problems of those that could not be read: a bad task is
/// reported by name and left out, the others are scheduled.
#[derive(Debug, Default)]
pub struct TaskList {
    pub tasks: Vec<Task>,
    pub problems: Vec<ScheduleError>,
}

#[derive(Deserialize)]
struct Export {
    drover_schedule: u64,
    tasks: Vec<RawTask>,
}

#[derive(Deserialize)]
struct RawTask {
    key: String,
    index: u32,
    #[serde(default)]
    summary: String,
    expression: String,
    timezone: String,
    #[serde(default)]
    repeat_seconds: Option<u64>,
    #[serde(default)]
    one_server: bool,
    #[serde(default)]
    without_overlapping: bool,
    #[serde(default = "default_expires")]
    expires_minutes: u32,
    #[serde(default)]
    run_in_background: bool,
    #[serde(default)]
    even_in_maintenance: bool,
    #[serde(default)]
    catch_up: bool,
    #[serde(default)]
    needs_boot: bool,
}

/// Laravel's `withoutOverlapping()` default: a day.
fn default_expires() -> u32 {
    1440
}

impl TaskList {
    /// Reads an export. Only a document that is not an export at all is an error; a task that
    /// cannot be scheduled is a problem of the list.
    pub fn from_export(json: &str) -> Result<TaskList, ScheduleError> {
        let export: Export =
            serde_json::from_str(json).map_err(|e| ScheduleError::Export(e.to_string()))?;
        if export.drover_schedule != EXPORT_VERSION {
            return Err(ScheduleError::Export(format!(
                "version {} where this binary reads {EXPORT_VERSION}",
                export.drover_schedule
            )));
        }
        let mut list = TaskList::default();
        // Tasks of one expression or zone share its parsed form: a schedule of fifty tasks
        // has a handful of each.
        let mut shared = Shared::default();
        for raw in export.tasks {
            match Task::from_raw(raw, &mut shared) {
                Ok(task) => list.tasks.push(task),
                Err(problem) => list.problems.push(problem),
            }
        }
        Ok(list)
    }
}

/// The expressions and zones read so far, by their text.
#[derive(Default)]
struct Shared {
    expressions: HashMap<String, Expression>,
    zones: HashMap<String, TimeZone>,
}

/// Where the system's tz database is (`TZDIR`, else Debian's).
fn zoneinfo_dir() -> std::path::PathBuf {
    std::env::var_os("TZDIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/usr/share/zoneinfo".into())
}

/// The zone `name`: UTC, else its TZif file read from the system's tz database (jiff's own
/// database lookup kept some 170 KiB for the master's life for one zone, measured; the file
/// alone, 20 KiB), else jiff's lookup, whose error names what is wrong.
pub fn zone(name: &str) -> Result<TimeZone, String> {
    if name == "UTC" || name == "Etc/UTC" {
        return Ok(TimeZone::UTC);
    }
    let plain = !name.is_empty()
        && !name.starts_with('/')
        && name
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if plain {
        if let Ok(data) = std::fs::read(zoneinfo_dir().join(name)) {
            if let Ok(tz) = TimeZone::tzif(name, &data) {
                return Ok(tz);
            }
        }
    }
    TimeZone::get(name).map_err(|e| e.to_string())
}

impl Task {
    fn from_raw(raw: RawTask, shared: &mut Shared) -> Result<Task, ScheduleError> {
        let expression = match shared.expressions.get(&raw.expression) {
            Some(e) => e.clone(),
            None => {
                let e = Expression::parse(&raw.expression).map_err(|reason| {
                    ScheduleError::Expression {
                        task: raw.key.clone(),
                        expression: raw.expression.clone(),
                        reason,
                    }
                })?;
                shared.expressions.insert(raw.expression.clone(), e.clone());
                e
            }
        };
        let timezone = match shared.zones.get(&raw.timezone) {
            Some(tz) => tz.clone(),
            None => {
                let tz = zone(&raw.timezone).map_err(|reason| ScheduleError::TimeZone {
                    task: raw.key.clone(),
                    timezone: raw.timezone.clone(),
                    reason,
                })?;
                shared.zones.insert(raw.timezone.clone(), tz.clone());
                tz
            }
        };
        let repeat_seconds = match raw.repeat_seconds {
            None => None,
            Some(s) if (1..60).contains(&s) && 60 % s == 0 => Some(s as u32),
            Some(seconds) => {
                return Err(ScheduleError::RepeatSeconds {
                    task: raw.key,
                    seconds,
                })
            }
        };
        Ok(Task {
            key: raw.key,
            index: raw.index,
            summary: raw.summary,
            expression,
            timezone,
            timezone_name: raw.timezone,
            repeat_seconds,
            one_server: raw.one_server,
            without_overlapping: raw.without_overlapping,
            expires_minutes: raw.expires_minutes,
            run_in_background: raw.run_in_background,
            even_in_maintenance: raw.even_in_maintenance,
            catch_up: raw.catch_up,
            needs_boot: raw.needs_boot,
        })
    }

    /// A task for tests: `expression` in `timezone`, repeated every `repeat` seconds.
    #[cfg(test)]
    pub(crate) fn for_test(
        key: &str,
        expression: &str,
        timezone: &str,
        repeat: Option<u32>,
    ) -> Task {
        Task {
            key: key.to_string(),
            index: 0,
            summary: key.to_string(),
            expression: Expression::parse(expression).expect("a valid expression"),
            timezone: zone(timezone).expect("a known zone"),
            timezone_name: timezone.to_string(),
            repeat_seconds: repeat,
            one_server: false,
            without_overlapping: false,
            expires_minutes: 1440,
            run_in_background: false,
            even_in_maintenance: false,
            catch_up: false,
            needs_boot: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_is_read_and_a_bad_task_is_named_and_left_out() {
        let json = r#"{"drover_schedule":1,"tasks":[
            {"key":"framework/schedule-a","index":0,"summary":"inspire","expression":"* * * * *","timezone":"UTC"},
            {"key":"framework/schedule-b","index":1,"expression":"99 * * * *","timezone":"UTC"},
            {"key":"framework/schedule-c","index":2,"expression":"* * * * *","timezone":"Mars/Olympus"},
            {"key":"framework/schedule-d","index":3,"expression":"* * * * *","timezone":"UTC","repeat_seconds":7},
            {"key":"framework/schedule-e","index":4,"expression":"0 * * * *","timezone":"Europe/Paris","repeat_seconds":10,"one_server":true,"without_overlapping":true,"expires_minutes":5}
        ]}"#;
        let list = TaskList::from_export(json).unwrap();
        let keys: Vec<_> = list.tasks.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["framework/schedule-a", "framework/schedule-e"]);
        let e = &list.tasks[1];
        assert_eq!(e.repeat_seconds, Some(10));
        assert!(e.one_server && e.without_overlapping);
        assert_eq!(e.expires_minutes, 5);
        assert_eq!(list.tasks[0].expires_minutes, 1440);
        assert_eq!(list.problems.len(), 3);
        let messages: Vec<String> = list.problems.iter().map(|p| p.to_string()).collect();
        assert!(messages[0].contains("framework/schedule-b") && messages[0].contains("99 * * * *"));
        assert!(messages[1].contains("Mars/Olympus"));
        assert!(messages[2].contains("every 7 s"));
    }

    #[test]
    fn tasks_of_one_expression_share_its_parse_and_zones_come_from_the_system_database() {
        let json = r#"{"drover_schedule":1,"tasks":[
            {"key":"a","index":0,"expression":"* * * * *","timezone":"Europe/Paris"},
            {"key":"b","index":1,"expression":"* * * * *","timezone":"Europe/Paris"},
            {"key":"c","index":2,"expression":"0 * * * *","timezone":"UTC"}
        ]}"#;
        let list = TaskList::from_export(json).unwrap();
        let [a, b, c] = &list.tasks[..] else {
            panic!("{list:?}")
        };
        assert!(a.expression.shares_parse_with(&b.expression));
        assert!(!a.expression.shares_parse_with(&c.expression));
        // Paris is an hour ahead of UTC in winter, two in summer: the TZif file was read.
        let winter: jiff::Timestamp = "2026-12-06T12:00:00Z".parse().unwrap();
        let summer: jiff::Timestamp = "2026-07-06T12:00:00Z".parse().unwrap();
        assert_eq!(winter.to_zoned(a.timezone.clone()).hour(), 13);
        assert_eq!(summer.to_zoned(a.timezone.clone()).hour(), 14);
        assert_eq!(winter.to_zoned(c.timezone.clone()).hour(), 12);
        for bad in ["../../etc/passwd", "/etc/localtime", "Europe//Paris", ""] {
            assert!(zone(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_document_that_is_not_an_export_is_an_error() {
        assert!(matches!(
            TaskList::from_export("Laravel Framework 12"),
            Err(ScheduleError::Export(_))
        ));
        assert!(matches!(
            TaskList::from_export(r#"{"drover_schedule":2,"tasks":[]}"#),
            Err(ScheduleError::Export(m)) if m.contains("version 2")
        ));
    }
}
