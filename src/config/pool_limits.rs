//! The limits a pool's own options keep, written once. The master checks its configuration
//! against them (`validate.rs`), and the Laravel package checks config/drover.php against the
//! same table before `php artisan drover` starts a master or an importer writes a file
//! (`php-client/src/Config/MasterPoolOptions.php`, rendered from [`POOL_LIMITS`] by a test in
//! `php_pool_options`, which fails when the file drifts). Both say a problem in the same words
//! ([`problem`]; PHPUnit checks PHP's against cases this crate writes out). What spans several
//! options, how a pool's processes cover its queues ([`coverage_problem`]), is written in each
//! language and checked the same way. The bounds the table is written with live here too:
//! [`MAX_PROCESSES`], [`MAX_MEMORY_MIB`], and [`MAX_SECONDS`], which every duration setting of
//! the run configuration keeps as well (`validate.rs` reads it from here).

use super::Balance;
use crate::rules::assignments::MAX_PREFETCH;
use crate::rules::job_policy::MAX_JOB_TIMEOUT_SECS;

/// The longest duration any setting may have: a year. Durations become clocks' deadlines, and
/// a value beyond what a clock can hold must be refused by name rather than panic.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;
/// The most worker processes one pool may have.
pub const MAX_PROCESSES: usize = 4096;
/// The largest memory limit, MiB (1 TiB).
pub const MAX_MEMORY_MIB: u64 = 1 << 20;

/// What one option may be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// A whole number from `min` to `max`, or null (its default) when `null_ok`; `note` says
    /// what the number means, after the range.
    Whole {
        min: i64,
        max: i64,
        null_ok: bool,
        note: &'static str,
    },
    /// A number of seconds: finite, above 0 (from 0 when `zero_ok`), at most a year.
    Seconds { zero_ok: bool },
    /// One of these words; `note` says what each means.
    OneOf {
        words: &'static [&'static str],
        note: &'static str,
    },
}

const fn whole(min: i64, max: i64) -> Limit {
    Limit::Whole {
        min,
        max,
        null_ok: false,
        note: "",
    }
}

/// Every pool option the master reads, with its limit, in the order problems are reported.
pub const POOL_LIMITS: &[(&str, Limit)] = &[
    ("processes", whole(1, MAX_PROCESSES as i64)),
    ("prefetch", whole(1, MAX_PREFETCH as i64)),
    (
        "timeout",
        Limit::Whole {
            min: 0,
            max: MAX_JOB_TIMEOUT_SECS as i64,
            null_ok: false,
            note: " (seconds, a year at most; 0 = no limit)",
        },
    ),
    (
        "memory",
        Limit::Whole {
            min: 0,
            max: MAX_MEMORY_MIB as i64,
            null_ok: false,
            note: " (MiB; 0 = no limit)",
        },
    ),
    ("nice", whole(-20, 19)),
    ("boot_timeout", Limit::Seconds { zero_ok: false }),
    ("outage_grace", Limit::Seconds { zero_ok: true }),
    (
        "spawn",
        Limit::OneOf {
            words: &["fork", "exec"],
            note:
                " (fork: workers forked from a booted zygote; exec: each worker boots on its own)",
        },
    ),
    (
        "balance",
        Limit::OneOf {
            words: &["off", "simple", "auto"],
            note: "",
        },
    ),
    ("min_processes", whole(1, MAX_PROCESSES as i64)),
    (
        "max_processes",
        Limit::Whole {
            min: 1,
            max: MAX_PROCESSES as i64,
            null_ok: true,
            note: "",
        },
    ),
    ("balance_max_shift", whole(1, MAX_PROCESSES as i64)),
    ("balance_cooldown", Limit::Seconds { zero_ok: false }),
    (
        "autoscaling_strategy",
        Limit::OneOf {
            words: &["time", "size"],
            note: "",
        },
    ),
    ("scale_down_delay", Limit::Seconds { zero_ok: true }),
];

/// What is wrong with `value` for `option` under `limit`, or `None`. The words are the ones
/// PHP's `Pools` uses for the same table.
pub fn problem(option: &str, limit: Limit, value: &serde_json::Value) -> Option<String> {
    let shown = match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match limit {
        Limit::Whole {
            min,
            max,
            null_ok,
            note,
        } => {
            if value.is_null() && null_ok {
                return None;
            }
            if value.as_i64().is_some_and(|n| (min..=max).contains(&n)) {
                return None;
            }
            let or_null = if null_ok { ", or null" } else { "" };
            Some(format!(
                "{option} must be a whole number from {min} to {max}{or_null}{note}, got {shown}"
            ))
        }
        Limit::Seconds { zero_ok } => {
            let ok = value.as_f64().is_some_and(|secs| {
                let low_ok = if zero_ok { secs >= 0.0 } else { secs > 0.0 };
                // A positive one must stay positive as a Duration (1 ns): a timer of zero panics.
                secs.is_finite() && low_ok && secs <= MAX_SECONDS && (zero_ok || secs >= 1e-9)
            });
            if ok {
                return None;
            }
            let from = if zero_ok {
                "from 0"
            } else {
                "above 0 (1 ns at least)"
            };
            Some(format!(
                "{option} must be a number of seconds {from} and at most {MAX_SECONDS} (a year), got {shown}"
            ))
        }
        Limit::OneOf { words, note } => {
            if value.as_str().is_some_and(|v| words.contains(&v)) {
                return None;
            }
            let (last, rest) = words.split_last()?;
            let listed = if rest.is_empty() {
                last.to_string()
            } else {
                format!("{} or {last}", rest.join(", "))
            };
            Some(format!("{option} must be {listed}{note}, got {shown}"))
        }
    }
}

/// What is wrong with how a pool's processes cover its `queues`, or `None`, once each option is
/// within its own limit: a `simple` pool gives every queue one process at least, and an `auto`
/// pool's `max_processes` (its `processes` when unset) must hold `min_processes` for each queue.
/// The words are the ones PHP's `PoolLimits::coverageProblem` uses.
pub fn coverage_problem(
    balance: Balance,
    processes: usize,
    min_processes: usize,
    max_processes: usize,
    queues: usize,
) -> Option<String> {
    match balance {
        Balance::Off => None,
        Balance::Simple => (processes < queues).then(|| {
            format!(
                "balance simple splits processes between the queues; {processes} processes cannot serve {queues} queues (raise processes to at least {queues})"
            )
        }),
        Balance::Auto => (min_processes.saturating_mul(queues) > max_processes).then(|| {
            format!(
                "max_processes ({max_processes}) is below min_processes ({min_processes}) times the {queues} queues (raise max_processes or lower min_processes)"
            )
        }),
    }
}

/// The limit of `option` (tests).
#[cfg(test)]
fn limit(option: &str) -> Limit {
    POOL_LIMITS.iter().find(|(o, _)| *o == option).unwrap().1
}

/// Cases PHP's `Pools` must say in the same words (written to its fixture by `php_pool_options`):
/// each option, a value, and what this module says of it.
#[cfg(test)]
pub(crate) fn contract_cases() -> Vec<(&'static str, serde_json::Value, Option<String>)> {
    use serde_json::json;
    let cases = [
        ("processes", json!(0)),
        ("processes", json!(4)),
        ("processes", json!(5000)),
        ("prefetch", json!(257)),
        ("timeout", json!(-1)),
        ("timeout", json!(0)),
        ("memory", json!(128)),
        ("nice", json!(25)),
        ("boot_timeout", json!(0)),
        ("boot_timeout", json!(0.5)),
        ("outage_grace", json!(0)),
        ("outage_grace", json!(120)),
        ("outage_grace", json!(-1)),
        ("spawn", json!("thread")),
        ("spawn", json!("fork")),
        ("balance", json!("weighted")),
        ("max_processes", json!(null)),
        ("max_processes", json!(0)),
        ("balance_cooldown", json!(0)),
        ("scale_down_delay", json!(0)),
        ("scale_down_delay", json!(-2)),
        ("autoscaling_strategy", json!("speed")),
    ];
    cases
        .into_iter()
        .map(|(o, v)| {
            let p = problem(o, limit(o), &v);
            (o, v, p)
        })
        .collect()
}

/// Cases of [`coverage_problem`] PHP must say in the same words: balance, processes,
/// min_processes, max_processes, queues, and what this module says.
#[cfg(test)]
pub(crate) fn coverage_cases() -> Vec<(Balance, [usize; 4], Option<String>)> {
    let cases = [
        (Balance::Off, [1, 1, 1, 3]),
        (Balance::Simple, [2, 1, 2, 3]),
        (Balance::Simple, [3, 1, 3, 3]),
        (Balance::Auto, [1, 2, 5, 3]),
        (Balance::Auto, [1, 2, 6, 3]),
        (Balance::Auto, [4, 1, 4, 4]),
    ];
    cases
        .into_iter()
        .map(|(b, [p, min, max, q])| (b, [p, min, max, q], coverage_problem(b, p, min, max, q)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_limit_refuses_what_is_outside_it_by_name_and_passes_what_is_inside() {
        let said = contract_cases();
        let find = |o: &str, v: serde_json::Value| {
            said.iter()
                .find(|(oo, vv, _)| *oo == o && *vv == v)
                .unwrap()
                .2
                .clone()
        };
        assert_eq!(
            find("processes", json!(0)).unwrap(),
            "processes must be a whole number from 1 to 4096, got 0"
        );
        assert_eq!(find("processes", json!(4)), None);
        assert_eq!(
            find("max_processes", json!(0)).unwrap(),
            "max_processes must be a whole number from 1 to 4096, or null, got 0"
        );
        assert_eq!(find("max_processes", json!(null)), None);
        assert_eq!(
            find("spawn", json!("thread")).unwrap(),
            "spawn must be fork or exec (fork: workers forked from a booted zygote; exec: each worker boots on its own), got thread"
        );
        assert_eq!(
            find("balance", json!("weighted")).unwrap(),
            "balance must be off, simple or auto, got weighted"
        );
        assert_eq!(find("scale_down_delay", json!(0)), None);
        assert!(find("boot_timeout", json!(0))
            .unwrap()
            .starts_with("boot_timeout must be a number of seconds above 0"));
    }

    #[test]
    fn a_simple_pool_needs_a_process_per_queue_and_an_auto_pool_a_maximum_that_holds_each_minimum()
    {
        let said: Vec<Option<String>> = coverage_cases().into_iter().map(|c| c.2).collect();
        assert_eq!(
            said,
            [
                None,
                Some("balance simple splits processes between the queues; 2 processes cannot serve 3 queues (raise processes to at least 3)".into()),
                None,
                Some("max_processes (5) is below min_processes (2) times the 3 queues (raise max_processes or lower min_processes)".into()),
                None,
                None,
            ]
        );
        // A product past usize is refused, not wrapped.
        assert!(coverage_problem(Balance::Auto, 1, usize::MAX, 4096, 2).is_some());
    }

    #[test]
    fn the_words_of_each_choice_are_the_ones_the_configuration_reads() {
        for (option, limit) in POOL_LIMITS {
            let Limit::OneOf { words, .. } = limit else {
                continue;
            };
            for word in *words {
                let mut pool =
                    json!({"name": "p", "queues": ["q"], "processes": 1, "command": ["php"]});
                pool[*option] = json!(word);
                assert!(
                    serde_json::from_value::<crate::config::PoolSpec>(pool).is_ok(),
                    "{option}: {word}"
                );
            }
        }
    }
}
