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
pub struct JobHints {
    /// True when the payload is a Laravel job (it names a `job` handler).
    #[serde(skip)]
    pub laravel: bool,
    pub job: Option<String>,
    /// The job's own timeout, seconds (`$timeout`).
    pub timeout: Option<u64>,
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

/// A pool's default for jobs that do not say (`queue:work`'s `--timeout`). The other
/// `queue:work` options (tries, backoff, ...) are applied by the Laravel worker itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPolicy {
    /// How long a job may run before its worker is killed; zero = no limit. Default 60 s.
    pub timeout: Duration,
}

impl Default for PoolPolicy {
    fn default() -> Self {
        PoolPolicy {
            timeout: Duration::from_secs(60),
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

    /// How to settle a job its worker let go of.
    pub fn abandon(&self, lease: Lease, held: &HeldJob, cause: &Cause) -> Settle {
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
            // The worker's timeout rules (Laravel's alarm handler: max attempts, max exceptions,
            // failOnTimeout, JobTimedOut; otherwise a release with the job's backoff) run in the
            // next worker, which gets the job with `fail: "timeout"` instead of running it.
            Cause::TimedOut => Settle::FailLater {
                lease,
                reason: "timeout".to_string(),
            },
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
            started_at: None,
        }
    }

    const LEASE: Lease = Lease { id: 1, token: 1 };

    #[test]
    fn reads_the_laravel_payload_fields_it_needs() {
        let h = JobHints::from_payload(
            r#"{"uuid":"x","job":"Illuminate\\Queue\\CallQueuedHandler@call","maxTries":3,"timeout":5,"backoff":"1,5,10","data":{"command":"O:8:..."}}"#,
        );
        assert!(h.laravel);
        assert_eq!(h.timeout, Some(5));
        assert!(!JobHints::from_payload("not json").laravel);
        assert!(!JobHints::from_payload(r#"{"seq":1}"#).laravel);
    }

    #[test]
    fn a_timed_out_laravel_job_goes_to_the_next_worker_for_laravels_timeout_rules() {
        let policy = PoolPolicy::default();
        for payload in [
            r#"{"job":"J","maxTries":3,"backoff":"2,7"}"#,
            r#"{"job":"J","failOnTimeout":true}"#,
        ] {
            match policy.abandon(LEASE, &held(payload, 1), &Cause::TimedOut) {
                Settle::FailLater { reason, .. } => assert_eq!(reason, "timeout"),
                other => panic!("{other:?}"),
            }
        }
        // A plain job (not Laravel's) is simply retried.
        assert!(matches!(
            policy.abandon(LEASE, &held(r#"{"seq":1}"#, 1), &Cause::TimedOut),
            Settle::Release { charged: true, .. }
        ));
    }

    #[test]
    fn the_job_timeout_wins_over_the_pools_and_zero_means_none() {
        let policy = PoolPolicy {
            timeout: Duration::from_secs(60),
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
                timeout: Duration::ZERO
            }
            .timeout_for(&JobHints::default()),
            None
        );
    }

    #[test]
    fn a_crashed_laravel_job_is_released_for_laravel_to_judge_and_unstarted_jobs_are_uncharged() {
        let policy = PoolPolicy::default();
        let payload = r#"{"job":"J","maxTries":1}"#;
        assert!(matches!(
            policy.abandon(LEASE, &held(payload, 1), &Cause::Died("was killed".into())),
            Settle::Release { charged: true, .. }
        ));
        let mut unstarted = held(payload, 1);
        unstarted.started = false;
        assert!(matches!(
            policy.abandon(LEASE, &unstarted, &Cause::TimedOut),
            Settle::Release { charged: false, .. }
        ));
    }
}
