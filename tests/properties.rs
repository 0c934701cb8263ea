//! Property tests of what the master reads from outside: job payload hints (`JobHints`), the
//! policy that settles jobs (`PoolPolicy`), and the JSON run configuration (`RunConfig`). Random
//! input never panics them; a value out of range is refused with its name; a value in range is
//! accepted and becomes a duration every clock can hold. Bounded (256 cases a property) so it
//! fits the test command (bench/hostile_inputs.sh runs 100,000); no database, no processes.

use std::time::{Duration, Instant};

use drover::config::{
    RunConfig, MAX_FRAME_BYTES, MAX_MEMORY_MIB, MAX_PROCESSES, MAX_RETENTION_DAYS, MAX_SECONDS,
};
use drover::rules::assignments::{HeldJob, MAX_PREFETCH};
use drover::rules::job_policy::{JobHints, PoolPolicy, MAX_JOB_TIMEOUT_SECS};
use drover::rules::settle::{refuse, settle as settle_job, Cause, Ending};
use drover_broker::{Lease, Settle};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{json, Value};

/// 256 cases a property (or `DROVER_PROPTEST_CASES`: bench/hostile_inputs.sh runs 100,000),
/// and no regression files written into the source tree.
fn config() -> Config {
    let cases = std::env::var("DROVER_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Whether `text` names `key` as a word (so `timeout` is not found in `boot_timeout`).
fn names(text: &str, key: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(key).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(word)
            && !text[at + key.len()..].chars().next().is_some_and(word)
    })
}

/// A JSON value as raw text, as a file or a payload could hold it: any number (including ones
/// no f64 or u64 holds, like `1e400`), numbers as strings, null, booleans, arrays, objects.
fn raw_value() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        "0",
        "-0",
        "1",
        "-1",
        "0.0",
        "0.3",
        "0.29",
        "2.99",
        "3",
        "1.5",
        "1e-10",
        "1e-300",
        "5e-324",
        "0.0000000001",
        "1e300",
        "-1e300",
        "1e400",
        "-1e400",
        "1E2",
        "19",
        "20",
        "-20",
        "-21",
        "256",
        "257",
        "3650",
        "3651",
        "4096",
        "4097",
        "1048576",
        "1048577",
        "31536000",
        "31536000.5",
        "31536001",
        "67108864",
        "67108865",
        "4294967295",
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "\"NaN\"",
        "\"inf\"",
        "\"-Infinity\"",
        "\"60\"",
        "\"\"",
        "null",
        "true",
        "false",
        "[]",
        "[1]",
        "{}",
        "{\"secs\":1}",
    ])
    .prop_map(str::to_string);
    prop_oneof![
        4 => special,
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        2 => (-100i64..5000).prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_map(|f| Value::from(f).to_string()),
        1 => (-1.0f64..1.0).prop_map(|f| Value::from(f).to_string()),
        1 => (0.0f64..1e8).prop_map(|f| Value::from(f).to_string()),
    ]
}

// ---------------------------------------------------------------------------------------------
// Payload hints and the pool policy
// ---------------------------------------------------------------------------------------------

const LEASE: Lease = Lease { id: 7, token: 9 };

/// A payload: a JSON object with or without `job`, `timeout`, `maxTries` and other fields, in any
/// order (with the raw `job` and `timeout` it holds, to judge it by); or not JSON at all.
#[derive(Debug, Clone)]
struct Payload {
    text: String,
    /// `None` for a payload that is not a JSON object; else the raw `job` and `timeout`.
    fields: Option<(Option<String>, Option<String>)>,
}

fn payload() -> impl Strategy<Value = Payload> {
    let job = prop_oneof![
        3 => Just("\"Illuminate\\\\Queue\\\\CallQueuedHandler@call\"".to_string()),
        1 => raw_value(),
    ];
    let timeout = prop_oneof![
        1 => (0..=MAX_JOB_TIMEOUT_SECS + 2).prop_map(|n| n.to_string()),
        2 => raw_value(),
    ];
    let object = (
        prop::option::of(job),
        prop::option::of(timeout),
        prop::option::of(raw_value()),
        any::<bool>(),
    )
        .prop_flat_map(|(job, timeout, max_tries, more)| {
            let mut fields = vec![];
            for (name, raw) in [
                ("job", &job),
                ("timeout", &timeout),
                ("maxTries", &max_tries),
            ] {
                if let Some(raw) = raw {
                    fields.push(format!("{}:{raw}", json!(name)));
                }
            }
            if more {
                fields.push(r#""uuid":"0b5d""#.to_string());
                fields.push(r#""data":{"command":"O:8:...","timeout":-1}"#.to_string());
            }
            (Just((job, timeout)), Just(fields).prop_shuffle())
        })
        .prop_map(|(raw, fields)| Payload {
            text: format!("{{{}}}", fields.join(",")),
            fields: Some(raw),
        });
    prop_oneof![
        8 => object,
        1 => any::<String>().prop_map(|text| Payload { text, fields: None }),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| Payload {
            text: String::from_utf8_lossy(&b).into_owned(),
            fields: None,
        }),
    ]
}

/// What the hints of this payload must be: `(laravel, Ok(timeout) | Err(()))`; `None` when the
/// payload is random text (only judged for not panicking and consistency).
fn expected_hints(payload: &Payload) -> Option<(bool, Result<Option<u64>, ()>)> {
    let (job, timeout) = payload.fields.as_ref()?;
    let laravel = job
        .as_ref()
        .is_some_and(|raw| serde_json::from_str::<Value>(raw).is_ok_and(|v| v.is_string()));
    let timeout = match timeout
        .as_ref()
        .map(|raw| serde_json::from_str::<Value>(raw))
    {
        None | Some(Ok(Value::Null)) => Ok(None),
        Some(Ok(v)) => match v.as_u64() {
            Some(secs) if secs <= MAX_JOB_TIMEOUT_SECS => Ok(Some(secs)),
            _ => Err(()),
        },
        // No f64 holds it (`1e400`): out of range.
        Some(Err(_)) => Err(()),
    };
    Some((laravel, timeout))
}

fn pool_policy() -> impl Strategy<Value = PoolPolicy> {
    prop_oneof![
        Just(0u64),
        Just(60),
        Just(MAX_JOB_TIMEOUT_SECS),
        0..=MAX_JOB_TIMEOUT_SECS
    ]
    .prop_map(|secs| PoolPolicy {
        timeout: Duration::from_secs(secs),
        ..PoolPolicy::default()
    })
}

fn held_job(payload: Payload) -> impl Strategy<Value = HeldJob> {
    (
        any::<i32>(),
        prop::option::of(any::<i32>()),
        any::<bool>(),
        any::<i64>(),
    )
        .prop_map(move |(attempts, max_attempts, started, token)| HeldJob {
            started,
            ..HeldJob::claimed(
                token,
                attempts,
                max_attempts,
                JobHints::from_payload(&payload.text),
                "default".into(),
                Instant::now(),
            )
        })
}

proptest! {
    #![proptest_config(config())]

    /// Any payload gives hints without panicking: a `timeout` outside 0..=a year, or not a whole
    /// number, is refused naming `timeout`; one in range is taken as it is; the job is failed by
    /// `refuse` exactly when its timeout is refused.
    #[test]
    fn payload_timeouts_are_taken_in_range_and_refused_by_name_outside(
        payload in payload(),
    ) {
        let expected = expected_hints(&payload);
        let hints = JobHints::from_payload(&payload.text);
        let payload = &payload.text;
        if let Some((laravel, timeout)) = expected {
            prop_assert_eq!(hints.laravel, laravel, "{}", payload);
            match (&hints.timeout, timeout) {
                (Ok(got), Ok(want)) => prop_assert_eq!(*got, want, "{}", payload),
                (Err(_), Err(())) => {}
                (got, want) => prop_assert!(false, "{payload}: got {got:?}, expected {want:?}"),
            }
        }
        if let Err(reason) = &hints.timeout {
            prop_assert!(names(reason, "timeout"), "{payload}: {reason}");
            prop_assert!(reason.contains("out of range"), "{payload}: {reason}");
        }
        match refuse(LEASE, &hints) {
            None => prop_assert!(hints.timeout.is_ok(), "{}", payload),
            Some(Settle::Fail { lease, error }) => {
                prop_assert!(hints.timeout.is_err(), "{payload}: refused with {error}");
                prop_assert_eq!(lease, LEASE);
                prop_assert!(error.starts_with("drover: refused: "), "{}", error);
                prop_assert!(names(&error, "timeout"), "{}", error);
            }
            Some(other) => prop_assert!(false, "{payload}: refused as {other:?}"),
        }
    }

    /// The timeout a job runs under is its own when accepted, else the pool's; zero is none; and
    /// any of them becomes a deadline on the monotonic clock without overflow.
    #[test]
    fn every_timeout_becomes_a_deadline(payload in payload(), policy in pool_policy()) {
        let hints = JobHints::from_payload(&payload.text);
        let timeout = policy.timeout_for(&hints);
        let want = match hints.timeout {
            Ok(Some(secs)) => Duration::from_secs(secs),
            Ok(None) | Err(_) => policy.timeout,
        };
        prop_assert_eq!(timeout, (!want.is_zero()).then_some(want));
        if let Some(t) = timeout {
            prop_assert!(t <= Duration::from_secs(MAX_JOB_TIMEOUT_SECS));
            // What the assignments does when the job starts (src/rules/assignments.rs, `started`).
            prop_assert!(Instant::now().checked_add(t).is_some(), "{t:?} overflows the clock");
        }
    }

    /// A job its worker let go of is settled by Laravel's rules, whatever its attempts, limits
    /// and payload: never a panic, always its own lease.
    #[test]
    fn abandoned_jobs_are_settled_by_the_rules(
        held in payload().prop_flat_map(held_job),
        cause in prop_oneof![
            Just(Cause::TimedOut),
            any::<String>().prop_map(Cause::Died),
        ],
    ) {
        let settle = settle_job(LEASE, &held, Ending::Abandoned(&cause));
        prop_assert_eq!(settle.lease(), LEASE);
        match (&settle, held.started, held.hints.laravel, &cause) {
            (Settle::Release { charged: false, delay, .. }, false, _, _) => {
                prop_assert_eq!(*delay, Duration::ZERO)
            }
            (Settle::TakeBack { died: Some(how), .. }, true, true, Cause::Died(cause_how)) => {
                prop_assert_eq!(how, cause_how)
            }
            (Settle::FailLater { reason, .. }, true, true, Cause::TimedOut) => {
                prop_assert_eq!(reason.as_str(), "timeout")
            }
            (Settle::Fail { error, .. }, true, false, _) => {
                let max = held.max_attempts.expect("a plain job fails only by its max_attempts");
                prop_assert!(held.attempts >= max);
                prop_assert!(
                    error.contains(&format!("no attempts left ({} of {max})", held.attempts)),
                    "{}", error
                );
            }
            (Settle::TakeBack { died: None, .. }, true, false, _) => {
                prop_assert!(held.max_attempts.is_none_or(|max| held.attempts < max));
            }
            (settle, started, laravel, cause) => prop_assert!(
                false,
                "started {started}, laravel {laravel}, {cause:?}: settled as {settle:?}"
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The run configuration
// ---------------------------------------------------------------------------------------------

/// A valid file (the one of src/config/mod.rs's tests), as a JSON value.
fn base() -> Value {
    json!({
        "version": 1,
        "state_dir": "/tmp/x",
        "pools": [{
            "name": "default",
            "queues": ["high", "default"],
            "processes": 4,
            "command": ["php", "artisan", "drover:work"],
        }],
    })
}

/// What a setting holds and which values of it are in range.
#[derive(Debug, Clone, Copy)]
enum Range {
    /// Seconds (an f64): `above_zero` or from 0, at least `min`, at most [`MAX_SECONDS`]. A value
    /// above zero must also be a duration above zero once converted (every clock and timer
    /// takes it).
    Seconds { above_zero: bool, min: f64 },
    /// A whole number that serde reads into a type of range `ty`, valid in `valid`.
    Whole {
        ty: (i128, i128),
        valid: (i128, i128),
    },
    /// `null` or a whole number (`Option<usize>`).
    OptionalWhole {
        ty: (i128, i128),
        valid: (i128, i128),
    },
    /// The contract version: 1 only.
    Version,
}

const U32: (i128, i128) = (0, u32::MAX as i128);
const U64: (i128, i128) = (0, u64::MAX as i128);
const USIZE: (i128, i128) = (0, usize::MAX as i128);
const I32: (i128, i128) = (i32::MIN as i128, i32::MAX as i128);

/// Every number the contract holds: name, in a pool or not, range.
fn settings() -> Vec<(&'static str, bool, Range)> {
    let secs = |above_zero| Range::Seconds {
        above_zero,
        min: 0.0,
    };
    let whole = |ty, lo: i128, hi: i128| Range::Whole {
        ty,
        valid: (lo, hi),
    };
    vec![
        ("version", false, Range::Version),
        (
            "lease",
            false,
            Range::Seconds {
                above_zero: true,
                min: 3.0,
            },
        ),
        ("shutdown_grace", false, secs(true)),
        ("poll_interval", false, secs(true)),
        ("restart_pause", false, secs(true)),
        (
            "max_frame_bytes",
            false,
            whole(USIZE, 1, MAX_FRAME_BYTES as i128),
        ),
        ("restart_failures", false, whole(U32, 1, U32.1)),
        (
            "failed_retention_days",
            false,
            whole(U64, 0, MAX_RETENTION_DAYS as i128),
        ),
        (
            "metrics_trim",
            false,
            whole(U64, 0, MAX_RETENTION_DAYS as i128 * 1440),
        ),
        ("processes", true, whole(USIZE, 1, MAX_PROCESSES as i128)),
        ("prefetch", true, whole(U32, 1, MAX_PREFETCH as i128)),
        ("timeout", true, whole(U64, 0, MAX_JOB_TIMEOUT_SECS as i128)),
        ("memory", true, whole(U64, 0, MAX_MEMORY_MIB as i128)),
        ("nice", true, whole(I32, -20, 19)),
        ("boot_timeout", true, secs(true)),
        ("balance_cooldown", true, secs(true)),
        ("scale_down_delay", true, secs(false)),
        // Judged for every pool, as config/drover.php's are (src/config/pool_limits.rs).
        (
            "min_processes",
            true,
            whole(USIZE, 1, MAX_PROCESSES as i128),
        ),
        (
            "balance_max_shift",
            true,
            whole(USIZE, 1, MAX_PROCESSES as i128),
        ),
        (
            "max_processes",
            true,
            Range::OptionalWhole {
                ty: USIZE,
                valid: (1, MAX_PROCESSES as i128),
            },
        ),
    ]
}

/// How a raw value fares: `Ok(true)` in range, `Ok(false)` out of range (judged by the
/// validation), `Err(())` refused by the parser (wrong type, or beyond the type).
fn judge(range: Range, raw: &str) -> Result<bool, ()> {
    let value: Value = serde_json::from_str(raw).map_err(|_| ())?;
    let whole = |v: &Value, ty: (i128, i128)| -> Result<i128, ()> {
        let n = v
            .as_i64()
            .map(i128::from)
            .or(v.as_u64().map(i128::from))
            .ok_or(())?;
        if (ty.0..=ty.1).contains(&n) {
            Ok(n)
        } else {
            Err(())
        }
    };
    match range {
        Range::Version => Ok(value.as_u64() == Some(1)),
        Range::Seconds { above_zero, min } => {
            let secs = value.as_f64().ok_or(())?;
            let low = if above_zero { secs > 0.0 } else { secs >= 0.0 };
            Ok(secs.is_finite()
                && low
                && secs >= min
                && secs <= MAX_SECONDS
                && !(above_zero && Duration::from_secs_f64(secs).is_zero()))
        }
        Range::Whole { ty, valid } => whole(&value, ty).map(|n| (valid.0..=valid.1).contains(&n)),
        Range::OptionalWhole { ty, valid } => match value {
            Value::Null => Ok(true),
            v => whole(&v, ty).map(|n| (valid.0..=valid.1).contains(&n)),
        },
    }
}

/// The base with these settings written in as raw text (the pool's in its object).
fn contract(values: &[(&str, bool, String)]) -> String {
    let top: Vec<String> = values
        .iter()
        .filter(|(_, in_pool, _)| !in_pool)
        .map(|(k, _, raw)| format!("{}:{raw}", json!(k)))
        .collect();
    let pool: Vec<String> = values
        .iter()
        .filter(|(_, in_pool, _)| *in_pool)
        .map(|(k, _, raw)| format!("{}:{raw}", json!(k)))
        .collect();
    let mut base = base();
    for (k, in_pool, _) in values {
        let object = if *in_pool {
            &mut base["pools"][0]
        } else {
            &mut base
        };
        object.as_object_mut().unwrap().remove(*k);
    }
    let mut text = base.to_string();
    // `{"pools":[{` opens the pool; the settings go right after each opening brace.
    let pool_at = text.find("\"pools\":[{").unwrap() + "\"pools\":[{".len();
    if !pool.is_empty() {
        text.insert_str(pool_at, &format!("{},", pool.join(",")));
    }
    if !top.is_empty() {
        text.insert_str(1, &format!("{},", top.join(",")));
    }
    text
}

/// An accepted configuration's durations and limits are ones the master's clocks and timers
/// take: every duration converts, can be added to now, and those that must be above zero are.
fn check_accepted(c: &RunConfig) {
    let now = Instant::now();
    let lease = c.lease();
    for (name, d) in [
        ("lease", lease),
        ("shutdown_grace", c.shutdown_grace()),
        ("poll_interval", c.poll_interval()),
        ("restart_pause", Duration::from_secs_f64(c.restart_pause)),
    ] {
        assert!(!d.is_zero(), "{name} accepted as zero");
        assert!(now.checked_add(d).is_some(), "{name} {d:?} overflows");
    }
    // The master's timers (renewal, lease check, reaping) divide the lease: tokio's intervals
    // panic on zero.
    for part in [lease / 3, lease / 10, lease / 2] {
        assert!(!part.is_zero(), "lease {lease:?}");
    }
    // A pool's circuit stays open up to ten times the pause.
    let open_max = Duration::from_secs_f64(c.restart_pause)
        .checked_mul(10)
        .expect("open_max");
    assert!(now.checked_add(open_max).is_some());
    assert!(c.failed_retention_days.checked_mul(86_400).is_some());
    for pool in &c.pools {
        for (name, secs, above_zero) in [
            ("boot_timeout", pool.boot_timeout, true),
            ("balance_cooldown", pool.balance_cooldown, true),
            ("scale_down_delay", pool.scale_down_delay, false),
        ] {
            let d = Duration::try_from_secs_f64(secs).expect(name);
            assert!(!above_zero || !d.is_zero(), "{name} accepted as zero");
            assert!(now.checked_add(d).is_some(), "{name} {d:?} overflows");
        }
        if let Some(t) = pool.policy().timeout_for(&JobHints::default()) {
            assert!(now.checked_add(t).is_some(), "timeout {t:?} overflows");
        }
        let members = pool.members();
        assert!(!members.is_empty());
        assert!(members.iter().all(|m| m.processes <= MAX_PROCESSES));
    }
}

/// One setting's value: mostly in its own range, often anything at all.
fn value_for(range: Range) -> BoxedStrategy<String> {
    let own = match range {
        Range::Version => Just("1".to_string()).boxed(),
        Range::Seconds { min, .. } => prop_oneof![
            (min.max(1e-9)..=MAX_SECONDS).prop_map(|f| Value::from(f).to_string()),
            (1u64..=MAX_SECONDS as u64).prop_map(|n| n.to_string()),
        ]
        .boxed(),
        Range::Whole { valid, .. } | Range::OptionalWhole { valid, .. } => {
            let lo = valid.0.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
            let hi = valid.1.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
            (lo..=hi).prop_map(|n| n.to_string()).boxed()
        }
    };
    prop_oneof![4 => own, 1 => raw_value()].boxed()
}

/// A random value for a random subset of the settings (each present or left to its default).
fn settings_values() -> impl Strategy<Value = Vec<(&'static str, bool, Range, String)>> {
    let each: Vec<_> = settings()
        .into_iter()
        .map(|(name, in_pool, range)| {
            prop::option::weighted(0.5, value_for(range))
                .prop_map(move |raw| raw.map(|raw| (name, in_pool, range, raw)))
        })
        .collect();
    each.prop_map(|values| values.into_iter().flatten().collect())
}

proptest! {
    #![proptest_config(config())]

    /// One setting at a time over a valid file: accepted exactly when in range; otherwise the
    /// error names the setting.
    #[test]
    fn each_setting_is_accepted_in_range_and_refused_by_name_outside(
        (name, in_pool, range, raw) in prop::sample::select(settings())
            .prop_flat_map(|(name, in_pool, range)| {
                (Just(name), Just(in_pool), Just(range), raw_value())
            }),
    ) {
        let text = contract(&[(name, in_pool, raw.clone())]);
        let in_range = judge(range, &raw) == Ok(true);
        match RunConfig::from_json(&text) {
            Ok(c) => {
                prop_assert!(in_range, "{name} = {raw} accepted");
                check_accepted(&c);
            }
            Err(problems) => {
                let all = problems.join("\n");
                prop_assert!(!in_range, "{name} = {raw} refused: {all}");
                prop_assert!(names(&all, name), "{name} = {raw} not named in: {all}");
            }
        }
    }

    /// Many settings at once: accepted exactly when all are in range. Refused values are named:
    /// all of them when only the validation judges them, else at least the one the parser
    /// stopped at.
    #[test]
    fn all_settings_together_are_accepted_in_range_and_refused_by_name_outside(
        values in settings_values(),
    ) {
        let text = contract(
            &values
                .iter()
                .map(|(name, in_pool, _, raw)| (*name, *in_pool, raw.clone()))
                .collect::<Vec<_>>(),
        );
        let judged: Vec<(&str, Result<bool, ()>)> = values
            .iter()
            .map(|(name, _, range, raw)| (*name, judge(*range, raw)))
            .collect();
        let bad: Vec<&str> = judged
            .iter()
            .filter(|(_, j)| *j != Ok(true))
            .map(|(name, _)| *name)
            .collect();
        match RunConfig::from_json(&text) {
            Ok(c) => {
                prop_assert!(bad.is_empty(), "accepted with {bad:?} out of range: {text}");
                check_accepted(&c);
            }
            Err(problems) => {
                let all = problems.join("\n");
                prop_assert!(!bad.is_empty(), "refused: {all}\n{text}");
                let parser_stopped = judged.iter().any(|(_, j)| j.is_err())
                    || judged.iter().any(|(name, j)| *name == "version" && *j != Ok(true));
                if parser_stopped {
                    prop_assert!(
                        bad.iter().any(|name| names(&all, name)),
                        "none of {bad:?} named in: {all}\n{text}"
                    );
                } else {
                    for name in &bad {
                        prop_assert!(names(&all, name), "{name} not named in: {all}\n{text}");
                    }
                }
            }
        }
    }

    /// Balanced pools: any mix of processes, minimums, maximums and shifts is judged without
    /// panicking (no overflow), and the workers of an accepted pool stay within its bounds.
    #[test]
    fn balanced_pools_are_judged_without_overflow(
        balance in prop::sample::select(vec!["off", "simple", "auto"]),
        queues in 1usize..5,
        processes in prop_oneof![1u64..=20, Just(MAX_PROCESSES as u64), any::<u64>()],
        min_processes in prop_oneof![0u64..=8, Just(u64::MAX), Just(u64::MAX / 2 + 1), any::<u64>()],
        max_processes in prop::option::of(prop_oneof![0u64..=40, Just(u64::MAX), any::<u64>()]),
        balance_max_shift in prop_oneof![0u64..=4, Just(u64::MAX)],
    ) {
        let mut file = base();
        let pool = &mut file["pools"][0];
        pool["balance"] = json!(balance);
        pool["queues"] = json!((0..queues).map(|i| format!("q{i}")).collect::<Vec<_>>());
        pool["processes"] = json!(processes);
        pool["min_processes"] = json!(min_processes);
        pool["max_processes"] = json!(max_processes);
        pool["balance_max_shift"] = json!(balance_max_shift);
        let text = file.to_string();
        let max = max_processes.unwrap_or(processes);
        let within = |n: u64| (1..=MAX_PROCESSES as u64).contains(&n);
        let mut fine = within(processes)
            && within(min_processes)
            && within(balance_max_shift)
            && max_processes.is_none_or(within);
        match balance {
            "simple" => fine &= processes >= queues as u64,
            "auto" => fine &= (min_processes as u128) * (queues as u128) <= max as u128,
            _ => {}
        }
        match RunConfig::from_json(&text) {
            Ok(c) => {
                prop_assert!(fine, "accepted {text}");
                check_accepted(&c);
                let pool = &c.pools[0];
                let members = pool.members();
                let total: usize = members.iter().map(|m| m.processes).sum();
                prop_assert!(total <= MAX_PROCESSES, "{total} workers from {text}");
                prop_assert_eq!(members.len(), if balance == "off" { 1 } else { queues });
            }
            Err(problems) => prop_assert!(!fine, "refused {text}: {problems:?}"),
        }
    }
}
