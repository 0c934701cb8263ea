//! What happens to a job whose worker died or ran past its timeout: the master settles it at once,
//! by the rules of the queue it came from. Laravel payloads carry their own rules (`maxTries`,
//! `timeout`, `backoff`, `failOnTimeout`, `retryUntil`); the pool's settings fill the gaps, as
//! `queue:work`'s options do.

use std::time::Duration;

use drover_broker::{Lease, Settle};
use serde::Deserialize;

use crate::ledger::HeldJob;

/// The fields of a Laravel payload the master needs. Anything else in the payload is skipped
/// unparsed; a payload that is not a Laravel one yields the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobHints {
    /// True when the payload is a Laravel job (it names a `job` handler).
    #[serde(skip)]
    pub laravel: bool,
    pub job: Option<String>,
    pub max_tries: Option<u32>,
    /// Seconds.
    pub timeout: Option<u64>,
    /// Laravel's "1,5,10" (seconds per attempt, the last repeating).
    #[serde(deserialize_with = "backoff_string", default)]
    pub backoff: Option<String>,
    #[serde(default)]
    pub fail_on_timeout: bool,
    /// Unix time after which the job fails instead of retrying.
    pub retry_until: Option<i64>,
}

fn backoff_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(match v {
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

impl JobHints {
    pub fn from_payload(payload: &str) -> JobHints {
        match serde_json::from_str::<JobHints>(payload) {
            Ok(mut hints) => {
                hints.laravel = hints.job.is_some();
                hints
            }
            Err(_) => JobHints::default(),
        }
    }
}

/// A pool's defaults for jobs that do not say (`queue:work`'s `--tries`, `--timeout`, `--backoff`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPolicy {
    /// Attempts allowed; 0 = unlimited. Default 1, like `queue:work`.
    pub tries: u32,
    /// How long a job may run before its worker is killed; zero = no limit. Default 60 s.
    pub timeout: Duration,
    /// Seconds to wait before each retry, the last repeating. Default `[0]`.
    pub backoff: Vec<u64>,
}

impl Default for PoolPolicy {
    fn default() -> Self {
        PoolPolicy {
            tries: 1,
            timeout: Duration::from_secs(60),
            backoff: vec![0],
        }
    }
}

/// Why a worker let go of its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// It exited or was killed (crash, OOM, bad input, shutdown); the text says how.
    Died(String),
    /// The master killed it because its running job outran its timeout.
    TimedOut,
}

impl PoolPolicy {
    /// The timeout of a job: its own, else the pool's. `None` = unlimited.
    pub fn timeout_for(&self, hints: &JobHints) -> Option<Duration> {
        let t = match hints.timeout {
            Some(secs) => Duration::from_secs(secs),
            None => self.timeout,
        };
        (!t.is_zero()).then_some(t)
    }

    /// Laravel's backoff for the given attempt: the job's list, else the pool's, indexed by
    /// attempt − 1, the last value repeating.
    pub fn backoff_for(&self, hints: &JobHints, attempts: i32) -> Duration {
        let list: Vec<u64> = match &hints.backoff {
            Some(s) => s
                .split(',')
                .map(|v| v.trim().parse().unwrap_or(0))
                .collect(),
            None => self.backoff.clone(),
        };
        let index = (attempts.max(1) - 1) as usize;
        Duration::from_secs(list.get(index).or(list.last()).copied().unwrap_or(0))
    }

    /// How to settle a job its worker let go of. `now_unix` is the wall clock in seconds.
    pub fn abandon(&self, lease: Lease, held: &HeldJob, cause: &Cause, now_unix: i64) -> Settle {
        if !held.started {
            return Settle::Release {
                lease,
                delay: Duration::ZERO,
                charged: false,
            };
        }
        let what = match cause {
            Cause::Died(how) => format!("the worker running this job {how}"),
            Cause::TimedOut => "the job ran past its timeout and its worker was killed".to_string(),
        };
        // Plain jobs enqueued with a max_attempts column: the master decides alone.
        if let Some(max) = held.max_attempts {
            return if held.attempts >= max {
                Settle::Fail {
                    lease,
                    error: format!(
                        "drover: {what}; no attempts left ({} of {max})",
                        held.attempts
                    ),
                }
            } else {
                Settle::Release {
                    lease,
                    delay: Duration::ZERO,
                    charged: true,
                }
            };
        }
        let hints = &held.hints;
        if !hints.laravel {
            return Settle::Release {
                lease,
                delay: Duration::ZERO,
                charged: true,
            };
        }
        match cause {
            // As after a crash under queue:work: the next attempt runs, and Laravel's worker fails
            // it there with MaxAttemptsExceededException if it has no attempt left. Only sooner:
            // no waiting for retry_after.
            Cause::Died(_) => Settle::Release {
                lease,
                delay: Duration::ZERO,
                charged: true,
            },
            Cause::TimedOut => {
                let tries = hints.max_tries.unwrap_or(self.tries);
                let exhausted = match hints.retry_until {
                    Some(until) => now_unix >= until,
                    None => tries > 0 && held.attempts >= tries as i32,
                };
                if hints.fail_on_timeout {
                    Settle::FailLater {
                        lease,
                        reason: "timeout".to_string(),
                    }
                } else if exhausted {
                    Settle::FailLater {
                        lease,
                        reason: "max_attempts".to_string(),
                    }
                } else {
                    Settle::Release {
                        lease,
                        delay: self.backoff_for(hints, held.attempts),
                        charged: true,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn held(payload: &str, attempts: i32) -> HeldJob {
        HeldJob {
            token: 1,
            attempts,
            max_attempts: None,
            started: true,
            lease_until: Instant::now(),
            hints: JobHints::from_payload(payload),
            deadline: None,
        }
    }

    const LEASE: Lease = Lease { id: 1, token: 1 };

    #[test]
    fn reads_laravel_payload_fields() {
        let h = JobHints::from_payload(
            r#"{"uuid":"x","job":"Illuminate\\Queue\\CallQueuedHandler@call","maxTries":3,"timeout":5,"backoff":"1,5,10","failOnTimeout":true,"retryUntil":null,"data":{"command":"O:8:..."}}"#,
        );
        assert!(h.laravel);
        assert_eq!(
            (
                h.max_tries,
                h.timeout,
                h.backoff.as_deref(),
                h.fail_on_timeout
            ),
            (Some(3), Some(5), Some("1,5,10"), true)
        );
        assert!(!JobHints::from_payload("not json").laravel);
        assert!(!JobHints::from_payload(r#"{"seq":1}"#).laravel);
    }

    #[test]
    fn a_timed_out_job_is_released_with_its_backoff_until_its_tries_run_out() {
        let policy = PoolPolicy {
            tries: 1,
            ..PoolPolicy::default()
        };
        let payload = r#"{"job":"J","maxTries":3,"backoff":"2,7"}"#;
        let now = 0;
        match policy.abandon(LEASE, &held(payload, 1), &Cause::TimedOut, now) {
            Settle::Release {
                delay,
                charged: true,
                ..
            } => assert_eq!(delay, Duration::from_secs(2)),
            other => panic!("{other:?}"),
        }
        match policy.abandon(LEASE, &held(payload, 2), &Cause::TimedOut, now) {
            Settle::Release { delay, .. } => assert_eq!(delay, Duration::from_secs(7)),
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(policy.abandon(LEASE, &held(payload, 3), &Cause::TimedOut, now), Settle::FailLater { reason, .. } if reason == "max_attempts")
        );
    }

    #[test]
    fn fail_on_timeout_fails_at_once_and_the_pool_tries_apply_when_the_job_has_none() {
        let policy = PoolPolicy {
            tries: 2,
            backoff: vec![4],
            ..PoolPolicy::default()
        };
        let fot = r#"{"job":"J","maxTries":5,"failOnTimeout":true}"#;
        assert!(
            matches!(policy.abandon(LEASE, &held(fot, 1), &Cause::TimedOut, 0), Settle::FailLater { reason, .. } if reason == "timeout")
        );
        let plain = r#"{"job":"J"}"#;
        assert!(
            matches!(policy.abandon(LEASE, &held(plain, 1), &Cause::TimedOut, 0), Settle::Release { delay, .. } if delay == Duration::from_secs(4))
        );
        assert!(matches!(
            policy.abandon(LEASE, &held(plain, 2), &Cause::TimedOut, 0),
            Settle::FailLater { .. }
        ));
        let until = r#"{"job":"J","retryUntil":100}"#;
        assert!(matches!(
            policy.abandon(LEASE, &held(until, 9), &Cause::TimedOut, 50),
            Settle::Release { .. }
        ));
        assert!(matches!(
            policy.abandon(LEASE, &held(until, 1), &Cause::TimedOut, 100),
            Settle::FailLater { .. }
        ));
    }

    #[test]
    fn a_crashed_laravel_job_is_released_for_laravel_to_judge_and_unstarted_jobs_are_uncharged() {
        let policy = PoolPolicy::default();
        let payload = r#"{"job":"J","maxTries":1}"#;
        assert!(matches!(
            policy.abandon(
                LEASE,
                &held(payload, 1),
                &Cause::Died("was killed".into()),
                0
            ),
            Settle::Release { charged: true, .. }
        ));
        let mut unstarted = held(payload, 1);
        unstarted.started = false;
        assert!(matches!(
            policy.abandon(LEASE, &unstarted, &Cause::TimedOut, 0),
            Settle::Release { charged: false, .. }
        ));
    }
}
