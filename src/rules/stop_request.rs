//! Stopping a running job on an operator's request (the console's Stop, `drover:stop-job`;
//! `drover.stop_requests`): what the request says, and how the job is settled once the master has
//! killed the worker running it. Pure, unit-tested; the master's part is `master::stops`.
//!
//! | mode, outcome | Laravel job | plain job |
//! |---|---|---|
//! | graceful, fail | the next worker fails it through the application (`failed()`, Laravel's failer) | failed into `drover.failed_jobs` |
//! | graceful, release | the next worker releases it to run again, the attempt counted | put back on its queue, charged |
//! | kill, fail | failed into `drover.failed_jobs`: no code of the job runs again | the same |
//! | kill, release | put back on its queue, charged: Laravel's tries apply at its next pickup | the same |
//!
//! A worker cannot be interrupted inside a job's own code and keep running: either way the
//! worker is killed, as on a timeout. "Graceful" is about the job: its own failure path (the
//! `failed()` method, `JobFailed` listeners, the failer) runs, as it does after a timeout; "kill"
//! is for a job whose failure path would hang too.

use std::time::Duration;

use drover_broker::{Lease, Settle, StopRequest};

use crate::rules::held_job::HeldJob;

/// The note the next worker reads in `fail` (`LeasedJob::failure`): `stopped:fail:<who>` or
/// `stopped:release:<who>` (php-client's LaravelWorker::handleStopped).
pub const REASON_PREFIX: &str = "stopped:";

/// How the worker is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The job's own failure path runs in the next worker.
    Graceful,
    /// No code of the job runs again.
    Kill,
}

/// How the job is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Fail,
    Release,
}

/// A request as the master carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    pub mode: Mode,
    pub outcome: Outcome,
    /// Who asked, as the console named them.
    pub by: String,
}

impl Stop {
    /// The request read from the table (whose checks allow only these words).
    pub fn of(request: &StopRequest) -> Result<Stop, String> {
        let mode = match request.mode.as_str() {
            "graceful" => Mode::Graceful,
            "kill" => Mode::Kill,
            other => return Err(format!("mode {other:?} is neither graceful nor kill")),
        };
        let outcome = match request.outcome.as_str() {
            "fail" => Outcome::Fail,
            "release" => Outcome::Release,
            other => return Err(format!("outcome {other:?} is neither fail nor release")),
        };
        Ok(Stop {
            mode,
            outcome,
            by: request.by.clone(),
        })
    }

    /// How the started job of a worker killed for this request is settled (the table above).
    pub fn settle(&self, lease: Lease, held: &HeldJob) -> Settle {
        let by = self.by.replace(['\n', '\r'], " ");
        match (self.mode, self.outcome, held.hints.laravel) {
            (Mode::Graceful, outcome, true) => Settle::FailLater {
                lease,
                reason: format!(
                    "{REASON_PREFIX}{}:{by}",
                    if outcome == Outcome::Fail {
                        "fail"
                    } else {
                        "release"
                    }
                ),
            },
            (_, Outcome::Fail, _) => Settle::Fail {
                lease,
                error: format!(
                    "drover: stopped by {by} while it ran ({}); its worker was killed",
                    if self.mode == Mode::Kill {
                        "kill: no code of the job ran again"
                    } else {
                        "graceful"
                    }
                ),
            },
            (_, Outcome::Release, _) => Settle::Release {
                lease,
                delay: Duration::ZERO,
                charged: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::rules::job_policy::JobHints;

    const LEASE: Lease = Lease { id: 7, token: 3 };

    fn held(payload: &str) -> HeldJob {
        HeldJob {
            started: true,
            ..HeldJob::claimed(
                3,
                2,
                None,
                JobHints::from_payload(payload),
                "default".into(),
                Instant::now(),
            )
        }
    }

    fn stop(mode: &str, outcome: &str) -> Stop {
        Stop::of(&StopRequest {
            job: 7,
            token: 3,
            mode: mode.into(),
            outcome: outcome.into(),
            by: "#4 ops@example.com".into(),
        })
        .unwrap()
    }

    const LARAVEL: &str = r#"{"job":"Illuminate\\Queue\\CallQueuedHandler@call","maxTries":3}"#;
    const PLAIN: &str = r#"{"seq":1}"#;

    #[test]
    fn a_graceful_stop_of_a_laravel_job_hands_it_to_the_next_worker_for_its_own_failure_path() {
        assert_eq!(
            stop("graceful", "fail").settle(LEASE, &held(LARAVEL)),
            Settle::FailLater {
                lease: LEASE,
                reason: "stopped:fail:#4 ops@example.com".into()
            }
        );
        assert_eq!(
            stop("graceful", "release").settle(LEASE, &held(LARAVEL)),
            Settle::FailLater {
                lease: LEASE,
                reason: "stopped:release:#4 ops@example.com".into()
            }
        );
    }

    #[test]
    fn a_kill_runs_no_code_of_the_job_again() {
        match stop("kill", "fail").settle(LEASE, &held(LARAVEL)) {
            Settle::Fail { lease, error } => {
                assert_eq!(lease, LEASE);
                assert!(error.contains("stopped by #4 ops@example.com"), "{error}");
                assert!(error.contains("no code of the job ran again"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            stop("kill", "release").settle(LEASE, &held(LARAVEL)),
            Settle::Release {
                lease: LEASE,
                delay: Duration::ZERO,
                charged: true
            }
        );
    }

    #[test]
    fn a_plain_job_has_no_failure_path_of_its_own_so_graceful_settles_as_kill_does() {
        assert!(matches!(
            stop("graceful", "fail").settle(LEASE, &held(PLAIN)),
            Settle::Fail { .. }
        ));
        assert!(matches!(
            stop("graceful", "release").settle(LEASE, &held(PLAIN)),
            Settle::Release { charged: true, .. }
        ));
    }

    #[test]
    fn a_request_the_table_could_not_hold_is_refused_naming_the_word() {
        let bad = StopRequest {
            job: 1,
            token: 1,
            mode: "gently".into(),
            outcome: "fail".into(),
            by: "x".into(),
        };
        assert_eq!(
            Stop::of(&bad).unwrap_err(),
            "mode \"gently\" is neither graceful nor kill"
        );
        let who = Stop {
            by: "a\nb".into(),
            ..stop("graceful", "fail")
        };
        assert!(
            matches!(who.settle(LEASE, &held(LARAVEL)), Settle::FailLater { reason, .. } if reason == "stopped:fail:a b")
        );
    }
}
