//! A job's own rules, read from its payload ([`JobHints`]: Laravel's `timeout`, its class), and the
//! pool's default that fills the gaps ([`PoolPolicy`]: `queue:work`'s `--timeout`). Laravel's
//! other rules (`maxTries`, `backoff`, `failOnTimeout`, `retryUntil`) are applied by its worker;
//! how a job is settled is [`crate::rules::settle`]'s.

use std::time::Duration;

use serde::Deserialize;

/// The longest timeout a job may ask for: a year. Beyond it the job is refused by name (a
/// deadline that far cannot be held by a clock, and no job means it).
pub const MAX_JOB_TIMEOUT_SECS: u64 = 365 * 24 * 3600;

/// The fields of a Laravel payload the master needs. Anything else in the payload is skipped
/// unparsed; a payload that is not a Laravel one yields the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobHints {
    /// True when the payload is a Laravel job (it names a `job` handler).
    pub laravel: bool,
    /// The job's own timeout (`$timeout`): `Ok(None)` when it sets none, `Err` with the reason
    /// when the value is one drover refuses (negative, not a whole number, beyond a year).
    pub timeout: Result<Option<u64>, String>,
    /// The job's class for metrics: the payload's `displayName` (Laravel's, or a plain
    /// producer's), at most [`MAX_CLASS_CHARS`] characters with control characters replaced;
    /// empty when the payload names none.
    pub class: String,
}

/// The longest job class name kept in metrics.
pub const MAX_CLASS_CHARS: usize = 200;

/// A payload's `displayName`, fit for a metrics label and a `text` column.
fn class_name(display_name: Option<&serde_json::Value>) -> String {
    let Some(serde_json::Value::String(name)) = display_name else {
        return String::new();
    };
    name.chars()
        .take(MAX_CLASS_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

impl Default for JobHints {
    /// A payload that is not a Laravel one: no rules of its own.
    fn default() -> Self {
        JobHints {
            laravel: false,
            timeout: Ok(None),
            class: String::new(),
        }
    }
}

/// What is read of the payload, leniently: wrong types are judged below, not by the parser.
#[derive(Deserialize)]
struct RawHints {
    job: Option<serde_json::Value>,
    timeout: Option<serde_json::Value>,
    #[serde(rename = "displayName")]
    display_name: Option<serde_json::Value>,
}

/// One field of a payload serde_json cannot read whole, read alone (the others skipped unread).
#[derive(Deserialize)]
struct JobField {
    job: Option<serde_json::Value>,
}
#[derive(Deserialize)]
struct TimeoutField {
    timeout: Option<serde_json::Value>,
}
/// Only whether a timeout is there: skipping reads no number, so `1e400` passes.
#[derive(Deserialize)]
struct TimeoutPresent {
    timeout: Option<serde::de::IgnoredAny>,
}

impl JobHints {
    pub fn from_payload(payload: &str) -> JobHints {
        let Ok(raw) = serde_json::from_str::<RawHints>(payload) else {
            return Self::from_unreadable(payload);
        };
        JobHints {
            laravel: matches!(raw.job, Some(serde_json::Value::String(_))),
            timeout: Self::judge_timeout(raw.timeout),
            class: class_name(raw.display_name.as_ref()),
        }
    }

    /// A payload that is not JSON, or holds a number no f64 can (`"timeout": 1e400`): its
    /// fields are read one at a time, so such a timeout is refused by name rather than the
    /// payload taken for a plain job's.
    fn from_unreadable(payload: &str) -> JobHints {
        let timeout = match serde_json::from_str::<TimeoutField>(payload) {
            Ok(field) => Self::judge_timeout(field.timeout),
            Err(_) => match serde_json::from_str::<TimeoutPresent>(payload) {
                Ok(TimeoutPresent { timeout: Some(_) }) => {
                    Err(Self::out_of_range("a number beyond any clock"))
                }
                _ => Ok(None),
            },
        };
        JobHints {
            laravel: serde_json::from_str::<JobField>(payload)
                .is_ok_and(|field| matches!(field.job, Some(serde_json::Value::String(_)))),
            timeout,
            class: String::new(),
        }
    }

    fn judge_timeout(timeout: Option<serde_json::Value>) -> Result<Option<u64>, String> {
        match timeout {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(value) => match value.as_u64() {
                Some(secs) if secs <= MAX_JOB_TIMEOUT_SECS => Ok(Some(secs)),
                _ => Err(Self::out_of_range(&value.to_string())),
            },
        }
    }

    fn out_of_range(value: &str) -> String {
        format!(
            "its timeout ({value}) is out of range: a whole number of seconds from 0 to {MAX_JOB_TIMEOUT_SECS} (a year) is expected; give the job a smaller $timeout"
        )
    }
}

/// A pool's default for jobs that do not say (`queue:work`'s `--timeout`). The other
/// `queue:work` options (tries, backoff, ...) are applied by the Laravel worker itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPolicy {
    /// How long a job may run before its worker is killed; zero = no limit. Default 60 s.
    pub timeout: Duration,
    /// How long past the end of a lease its master could not renew a started job may go on
    /// (`rules::lease_deadlines`). Default zero.
    pub outage_grace: Duration,
}

impl Default for PoolPolicy {
    fn default() -> Self {
        PoolPolicy {
            timeout: Duration::from_secs(60),
            outage_grace: Duration::ZERO,
        }
    }
}

impl PoolPolicy {
    /// The timeout of a job: its own, else the pool's. `None` = unlimited.
    pub fn timeout_for(&self, hints: &JobHints) -> Option<Duration> {
        let t = match hints.timeout {
            Ok(Some(secs)) => Duration::from_secs(secs),
            // A refused timeout never reaches a worker (see `refuse`); the pool's applies.
            Ok(None) | Err(_) => self.timeout,
        };
        (!t.is_zero()).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_class_is_the_payloads_display_name_cut_and_printable() {
        let h = JobHints::from_payload(r#"{"job":"x","displayName":"App\\Jobs\\Send\u0000Mail"}"#);
        assert_eq!(h.class, "App\\Jobs\\Send?Mail");
        let long = format!(r#"{{"displayName":"{}"}}"#, "x".repeat(500));
        assert_eq!(JobHints::from_payload(&long).class.len(), MAX_CLASS_CHARS);
        assert_eq!(JobHints::from_payload(r#"{"displayName":5}"#).class, "");
        assert_eq!(JobHints::from_payload("not json").class, "");
    }

    #[test]
    fn reads_the_laravel_payload_fields_it_needs() {
        let h = JobHints::from_payload(
            r#"{"uuid":"x","job":"Illuminate\\Queue\\CallQueuedHandler@call","maxTries":3,"timeout":5,"backoff":"1,5,10","data":{"command":"O:8:..."}}"#,
        );
        assert!(h.laravel);
        assert_eq!(h.timeout, Ok(Some(5)));
        assert!(!JobHints::from_payload("not json").laravel);
        assert!(!JobHints::from_payload(r#"{"seq":1}"#).laravel);
    }

    #[test]
    fn the_job_timeout_wins_over_the_pools_and_zero_means_none() {
        let policy = PoolPolicy {
            timeout: Duration::from_secs(60),
            ..PoolPolicy::default()
        };
        assert_eq!(
            policy.timeout_for(&JobHints::from_payload(r#"{"job":"J","timeout":5}"#)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            policy.timeout_for(&JobHints::from_payload(r#"{"job":"J"}"#)),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            policy.timeout_for(&JobHints::from_payload(r#"{"job":"J","timeout":0}"#)),
            None
        );
        assert_eq!(
            PoolPolicy {
                timeout: Duration::ZERO,
                ..PoolPolicy::default()
            }
            .timeout_for(&JobHints::default()),
            None
        );
    }

    #[test]
    fn an_out_of_range_timeout_leaves_the_pools_in_force() {
        for payload in [
            r#"{"job":"J","timeout":-1}"#,
            r#"{"job":"J","timeout":1e400}"#,
        ] {
            let hints = JobHints::from_payload(payload);
            assert!(hints.timeout.is_err(), "{payload}");
            assert_eq!(
                PoolPolicy::default().timeout_for(&hints),
                Some(Duration::from_secs(60))
            );
        }
    }

    /// Payloads nested 10,000 deep, in each field the master reads and beside them, are read
    /// without overflowing the stack: serde_json's depth limit refuses them and the payload
    /// counts as one without rules of its own.
    #[test]
    fn a_payload_nested_ten_thousand_deep_is_read_without_a_crash() {
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        for payload in [
            format!(r#"{{"job":"x","timeout":{deep}}}"#),
            format!(r#"{{"job":{deep},"displayName":"A"}}"#),
            format!(r#"{{"job":"x","displayName":{deep}}}"#),
            format!(r#"{{"job":"x","data":{deep},"timeout":5}}"#),
            deep.clone(),
            "{\"a\":".repeat(10_000),
        ] {
            let hints = JobHints::from_payload(&payload);
            assert!(hints.class.is_empty() || hints.class == "A", "{hints:?}");
        }
    }
}
