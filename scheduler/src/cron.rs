//! A Laravel cron expression and whether a wall-clock minute matches it.
//!
//! Laravel decides due-ness by matching the current minute's wall-clock time, in the task's time
//! zone, against the expression (`Event::isDue` through dragonmantank/cron-expression's
//! `isDue`). The expression has five fields (minute, hour, day of month, month, day of week), a
//! restricted day of month and day of week match when either does (as Vixie cron), and the
//! nicknames `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` and `@hourly`
//! stand for their expressions. The parsing and matching are `croner`'s: this module only maps
//! the nicknames croner lacks and fixes the parser's options to Laravel's.

use std::sync::Arc;

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::civil::DateTime;

/// A parsed expression; a clone shares the parsed form (croner's takes some 5 KiB: tasks of
/// one expression share one, [`crate::task::TaskList`]).
#[derive(Clone, Debug)]
pub struct Expression {
    /// The text as the application wrote it (for messages and the history).
    text: String,
    /// croner's matcher of the five fields.
    cron: Arc<Cron>,
}

impl Expression {
    /// Parses `text` as Laravel would accept it; the error is the parser's reason.
    pub fn parse(text: &str) -> Result<Expression, String> {
        let trimmed = text.trim();
        let expanded = match trimmed.to_ascii_lowercase().as_str() {
            // dragonmantank's nickname that croner does not know.
            "@midnight" => "0 0 * * *".to_string(),
            _ => trimmed.to_string(),
        };
        if !expanded.starts_with('@') && expanded.split_whitespace().count() != 5 {
            return Err(format!(
                "{} fields where Laravel's cron expressions have 5 (minute hour day-of-month month day-of-week)",
                expanded.split_whitespace().count()
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(&expanded)
            .map_err(|e| e.to_string())?;
        Ok(Expression {
            text: trimmed.to_string(),
            cron: Arc::new(cron),
        })
    }

    /// Whether the minute of `at` (a wall-clock time; its seconds are ignored) matches.
    pub fn matches_minute(&self, at: DateTime) -> bool {
        let minute = at
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .unwrap_or(at);
        self.cron.is_time_matching(&minute).unwrap_or(false)
    }

    /// The first matching minute strictly after `at`, in `at`'s zone, however far (croner's
    /// search: a yearly task's is months away); `None` if there is none.
    pub fn next_after(&self, at: &jiff::Zoned) -> Option<jiff::Zoned> {
        self.cron.find_next_occurrence(at, false).ok()
    }

    /// The last matching minute at or before `at` (its second 0), in `at`'s zone; `None` if
    /// there is none.
    pub fn latest_at_or_before(&self, at: &jiff::Zoned) -> Option<jiff::Zoned> {
        self.cron.find_previous_occurrence(at, true).ok()
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `other` is this very parsed form (not only the same text).
    pub fn shares_parse_with(&self, other: &Expression) -> bool {
        Arc::ptr_eq(&self.cron, &other.cron)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn at(y: i16, mo: i8, d: i8, h: i8, mi: i8) -> DateTime {
        date(y, mo, d).at(h, mi, 0, 0)
    }

    #[test]
    fn every_minute_matches_every_minute_and_ignores_seconds() {
        let e = Expression::parse("* * * * *").unwrap();
        assert!(e.matches_minute(at(2026, 12, 6, 10, 0)));
        assert!(e.matches_minute(date(2026, 12, 6).at(10, 0, 42, 5)));
    }

    #[test]
    fn laravels_frequencies_match_where_laravel_runs_them() {
        // everyFiveMinutes, hourlyAt(17), dailyAt('13:00'), weeklyOn(1, '8:00'), monthlyOn(4, '15:00')
        let five = Expression::parse("*/5 * * * *").unwrap();
        assert!(five.matches_minute(at(2026, 12, 6, 10, 25)));
        assert!(!five.matches_minute(at(2026, 12, 6, 10, 26)));
        let hourly_at = Expression::parse("17 * * * *").unwrap();
        assert!(hourly_at.matches_minute(at(2026, 12, 6, 3, 17)));
        assert!(!hourly_at.matches_minute(at(2026, 12, 6, 3, 18)));
        let daily = Expression::parse("0 13 * * *").unwrap();
        assert!(daily.matches_minute(at(2026, 12, 6, 13, 0)));
        assert!(!daily.matches_minute(at(2026, 12, 6, 12, 0)));
        // 2026-12-07 is a Monday.
        let weekly = Expression::parse("0 8 * * 1").unwrap();
        assert!(weekly.matches_minute(at(2026, 12, 7, 8, 0)));
        assert!(!weekly.matches_minute(at(2026, 12, 6, 8, 0)));
        let monthly = Expression::parse("0 15 4 * *").unwrap();
        assert!(monthly.matches_minute(at(2026, 12, 4, 15, 0)));
        assert!(!monthly.matches_minute(at(2026, 12, 5, 15, 0)));
    }

    #[test]
    fn day_of_month_and_day_of_week_match_when_either_does_as_cron() {
        // The 1st, or any Friday (2026-12-04 is a Friday, 2026-12-01 a Tuesday).
        let e = Expression::parse("0 0 1 * 5").unwrap();
        assert!(e.matches_minute(at(2026, 12, 1, 0, 0)));
        assert!(e.matches_minute(at(2026, 12, 4, 0, 0)));
        assert!(!e.matches_minute(at(2026, 12, 2, 0, 0)));
    }

    #[test]
    fn sunday_is_0_and_7_and_names_are_accepted() {
        // 2026-12-06 is a Sunday.
        for text in ["0 9 * * 0", "0 9 * * 7", "0 9 * * SUN", "0 9 * DEC sun"] {
            let e = Expression::parse(text).unwrap();
            assert!(e.matches_minute(at(2026, 12, 6, 9, 0)), "{text}");
            assert!(!e.matches_minute(at(2026, 12, 7, 9, 0)), "{text}");
        }
    }

    #[test]
    fn nicknames_are_their_expressions() {
        for (nick, yes, no) in [
            ("@hourly", at(2026, 12, 6, 5, 0), at(2026, 12, 6, 5, 1)),
            ("@daily", at(2026, 12, 6, 0, 0), at(2026, 12, 6, 1, 0)),
            ("@midnight", at(2026, 12, 6, 0, 0), at(2026, 12, 6, 0, 1)),
            ("@weekly", at(2026, 12, 6, 0, 0), at(2026, 12, 7, 0, 0)),
            ("@monthly", at(2026, 12, 1, 0, 0), at(2026, 12, 2, 0, 0)),
            ("@yearly", at(2027, 1, 1, 0, 0), at(2026, 12, 1, 0, 0)),
            ("@annually", at(2027, 1, 1, 0, 0), at(2026, 12, 1, 0, 0)),
        ] {
            let e = Expression::parse(nick).unwrap();
            assert!(e.matches_minute(yes), "{nick} at {yes}");
            assert!(!e.matches_minute(no), "{nick} at {no}");
        }
    }

    #[test]
    fn a_bad_expression_is_refused_with_a_reason() {
        for text in [
            "",
            "* * * *",
            "* * * * * *",
            "61 * * * *",
            "* 25 * * *",
            "nonsense",
        ] {
            let err = Expression::parse(text).expect_err(text);
            assert!(!err.is_empty(), "{text}");
        }
    }
}
