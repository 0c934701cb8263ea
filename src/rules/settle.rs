//! Every rule that turns the end of a job's time with a worker into a [`Settle`], and what each
//! settle counts as. Pure: the master's loop checks a frame against the assignments, asks
//! [`settle`] what to write, and what it counts as ([`Counted::of`]) goes once, in the job
//! lifecycle's `Ended` event, to status and the metrics alike.
//!
//! | how it ended | Laravel job | plain job |
//! |---|---|---|
//! | `done` | ack | ack |
//! | `done` with `within` (completed in its own transaction) | its completion row forgotten (the job's row is gone) | the same |
//! | `release` | released, charged, after its delay | the same, or failed on its last attempt (`max_attempts`) |
//! | `return` (never started) | back uncharged, in its place | the same |
//! | `fail`, logged by the application | deleted (its `failed_jobs` row is the record) | — |
//! | `fail`, not logged | moved to `drover.failed_jobs` | the same |
//! | worker died, job started | taken back charged, how it died noted for Laravel's tries | taken back, or failed when out of attempts |
//! | timed out | given back to be failed by Laravel's timeout rules in the next worker | taken back, or failed when out of attempts |
//! | stopped by an operator | as the request says (`rules::stop_request`) | the same |
//! | worker gone, job not started | back uncharged, in its place | the same |
//! | payload out of range (before delivery) | failed by name | failed by name |
//! | claimed, no worker with room | back uncharged, in its place | the same |

use std::time::Duration;

use drover_broker::{Lease, Settle};

use crate::rules::held_job::HeldJob;
use crate::rules::job_policy::JobHints;

/// The longest delay a `release` may ask for: ten years. Beyond it the delay is clamped, so a
/// runaway value cannot make the settle statement fail (timestamp range).
pub const MAX_RELEASE_DELAY_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// Why a worker let go of its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// It exited or was killed (crash, OOM, bad input, shutdown); the text says how.
    Died(String),
    /// The master killed it because its running job outran its timeout.
    TimedOut,
    /// The master killed it because an operator asked to stop its running job
    /// (`rules::stop_request`).
    Stopped(crate::rules::stop_request::Stop),
}

/// How a job's time with its worker ended, as far as the master knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending<'a> {
    /// The worker said `done`.
    Done,
    /// The worker said `done` with `within`: the job's own transaction committed its completion.
    DoneWithin,
    /// The worker said `release`, with the delay it asked for.
    Released { delay_ms: u64 },
    /// The worker said `return`: it hands back a prefetched job it never started.
    Returned,
    /// The worker said `fail`; `logged` when the application recorded the failure itself.
    Failed { error: &'a str, logged: bool },
    /// The worker is gone while it held the job.
    Abandoned(&'a Cause),
}

/// What a settle counts as: the master's tally and the metrics' outcome follow this, not the
/// settle's variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Ran to completion.
    Completed,
    /// Its attempt ended and the job goes on: released, taken back from a dead worker, or handed
    /// on to be failed by the next worker's rules (which then counts the failure).
    Released,
    /// Never started: back uncharged. Not an attempt.
    ReturnedUnstarted,
    /// Failed for good.
    Failed,
}

impl Counted {
    pub fn of(settle: &Settle) -> Counted {
        match settle {
            Settle::Ack(_) | Settle::CompletedWithin(_) => Counted::Completed,
            Settle::Release { charged: false, .. } => Counted::ReturnedUnstarted,
            Settle::Release { charged: true, .. }
            | Settle::TakeBack { .. }
            | Settle::FailLater { .. } => Counted::Released,
            Settle::Fail { .. } | Settle::Failed(_) => Counted::Failed,
        }
    }
}

/// How to settle the job `held` (leased as `lease`) whose time with its worker ended so.
pub fn settle(lease: Lease, held: &HeldJob, ending: Ending) -> Settle {
    match ending {
        Ending::Done => Settle::Ack(lease),
        Ending::DoneWithin => Settle::CompletedWithin(lease),
        Ending::Released { delay_ms } => match held.max_attempts {
            // A plain job with a max_attempts column that releases on its last attempt fails; a
            // Laravel job's release is Laravel's to judge at its next pickup.
            Some(max) if held.attempts >= max && !held.hints.laravel => Settle::Fail {
                lease,
                error: format!(
                    "drover: released on its last attempt ({} of {max})",
                    held.attempts
                ),
            },
            _ => Settle::Release {
                lease,
                delay: Duration::from_millis(delay_ms.min(MAX_RELEASE_DELAY_MS)),
                charged: true,
            },
        },
        Ending::Returned => unstarted(lease),
        // Already in the application's failed_jobs: a second copy would only grow where
        // `queue:flush` never reaches.
        Ending::Failed { logged: true, .. } => Settle::Failed(lease),
        Ending::Failed {
            error,
            logged: false,
        } => Settle::Fail {
            lease,
            // PostgreSQL text cannot hold NUL (PHP's anonymous class names contain one).
            error: error.replace('\0', "\\0"),
        },
        Ending::Abandoned(cause) => abandon(lease, held, cause),
    }
}

/// Back uncharged, in its place: a job no worker started — one handed back, one a dead worker had
/// prefetched, or one a claim brought that no worker had room for.
pub fn unstarted(lease: Lease) -> Settle {
    Settle::Release {
        lease,
        delay: Duration::ZERO,
        charged: false,
    }
}

/// A job its worker let go of by dying or timing out.
///
/// - Never started (prefetched): back uncharged, in its place.
/// - Its worker died (crash, OOM, kill) or was fenced: taken back in its place with the attempt
///   charged. A plain job out of attempts (`max_attempts`) fails, naming how its worker died; a
///   Laravel job goes to the next worker, where Laravel's own rules fail it with
///   `MaxAttemptsExceededException` when no attempt is left (as after a crash under `queue:work`,
///   only without waiting for `retry_after`). Either way a job that kills its worker costs one
///   attempt per kill and ends failed: it cannot stall the pool.
/// - It outran its timeout: Laravel's timeout rules run in the next worker (`fail: "timeout"`); a
///   plain job is retried or failed by its `max_attempts`.
fn abandon(lease: Lease, held: &HeldJob, cause: &Cause) -> Settle {
    if !held.started {
        return unstarted(lease);
    }
    // How the worker died (None: it was killed for a timeout).
    let died = match cause {
        Cause::Stopped(stop) => return stop.settle(lease, held),
        Cause::Died(how) => Some(how),
        Cause::TimedOut => None,
    };
    if held.hints.laravel {
        return match died {
            // Laravel's worker applies its tries at the next pickup, through its failer, naming
            // how this attempt ended.
            Some(how) => Settle::TakeBack {
                lease,
                died: Some(how.clone()),
            },
            None => Settle::FailLater {
                lease,
                reason: "timeout".to_string(),
            },
        };
    }
    match held.max_attempts {
        Some(max) if held.attempts >= max => {
            let what = match died {
                Some(how) => format!("the worker running this job {how}"),
                None => "the job ran past its timeout and its worker was killed".to_string(),
            };
            Settle::Fail {
                lease,
                error: format!(
                    "drover: {what}; no attempts left ({} of {max})",
                    held.attempts
                ),
            }
        }
        _ => Settle::TakeBack { lease, died: None },
    }
}

/// A job that must not be handed to a worker, and why: its payload asks for something out of
/// range. It is failed at once, by name, instead of crashing anything.
pub fn refuse(lease: Lease, hints: &JobHints) -> Option<Settle> {
    let reason = hints.timeout.as_ref().err()?;
    Some(Settle::Fail {
        lease,
        error: format!("drover: refused: {reason}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const LEASE: Lease = Lease { id: 1, token: 1 };

    fn held(payload: &str, attempts: i32) -> HeldJob {
        HeldJob {
            started: true,
            ..HeldJob::claimed(
                1,
                attempts,
                None,
                JobHints::from_payload(payload),
                "default".into(),
                Instant::now(),
            )
        }
    }

    const LARAVEL: &str = r#"{"job":"J","maxTries":3}"#;
    const PLAIN: &str = r#"{"seq":1}"#;

    #[test]
    fn a_done_job_is_acked_and_counted_completed() {
        let s = settle(LEASE, &held(PLAIN, 1), Ending::Done);
        assert_eq!(s, Settle::Ack(LEASE));
        assert_eq!(Counted::of(&s), Counted::Completed);
    }

    #[test]
    fn a_release_is_charged_and_delayed_and_a_runaway_delay_is_clamped() {
        let s = settle(
            LEASE,
            &held(LARAVEL, 1),
            Ending::Released { delay_ms: 1500 },
        );
        assert_eq!(
            s,
            Settle::Release {
                lease: LEASE,
                delay: Duration::from_millis(1500),
                charged: true
            }
        );
        assert_eq!(Counted::of(&s), Counted::Released);
        match settle(
            LEASE,
            &held(LARAVEL, 1),
            Ending::Released { delay_ms: u64::MAX },
        ) {
            Settle::Release { delay, .. } => {
                assert_eq!(delay, Duration::from_millis(MAX_RELEASE_DELAY_MS))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_plain_job_released_on_its_last_attempt_fails_but_a_laravel_job_is_laravels_to_judge() {
        let mut plain = held(PLAIN, 3);
        plain.max_attempts = Some(3);
        let s = settle(LEASE, &plain, Ending::Released { delay_ms: 0 });
        match &s {
            Settle::Fail { error, .. } => {
                assert!(
                    error.contains("released on its last attempt (3 of 3)"),
                    "{error}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(Counted::of(&s), Counted::Failed);
        let mut laravel = held(LARAVEL, 3);
        laravel.max_attempts = Some(3);
        assert!(matches!(
            settle(LEASE, &laravel, Ending::Released { delay_ms: 0 }),
            Settle::Release { charged: true, .. }
        ));
    }

    #[test]
    fn a_returned_job_goes_back_uncharged_and_is_not_an_attempt() {
        let mut h = held(LARAVEL, 1);
        h.started = false;
        let s = settle(LEASE, &h, Ending::Returned);
        assert!(matches!(s, Settle::Release { charged: false, .. }));
        assert_eq!(Counted::of(&s), Counted::ReturnedUnstarted);
    }

    #[test]
    fn a_failure_the_application_logged_is_deleted_and_another_is_recorded_without_nul() {
        let h = held(LARAVEL, 1);
        let logged = settle(
            LEASE,
            &h,
            Ending::Failed {
                error: "x",
                logged: true,
            },
        );
        assert_eq!(logged, Settle::Failed(LEASE));
        assert_eq!(Counted::of(&logged), Counted::Failed);
        let recorded = settle(
            LEASE,
            &h,
            Ending::Failed {
                error: "class@anonymous\0/app/x.php",
                logged: false,
            },
        );
        assert_eq!(
            recorded,
            Settle::Fail {
                lease: LEASE,
                error: "class@anonymous\\0/app/x.php".into()
            }
        );
        assert_eq!(Counted::of(&recorded), Counted::Failed);
    }

    #[test]
    fn a_timed_out_laravel_job_goes_to_the_next_worker_for_laravels_timeout_rules() {
        for payload in [
            r#"{"job":"J","maxTries":3,"backoff":"2,7"}"#,
            r#"{"job":"J","failOnTimeout":true}"#,
        ] {
            let s = settle(
                LEASE,
                &held(payload, 1),
                Ending::Abandoned(&Cause::TimedOut),
            );
            match &s {
                Settle::FailLater { reason, .. } => assert_eq!(reason, "timeout"),
                other => panic!("{other:?}"),
            }
            // Not yet a failure: the next worker's `fail` is.
            assert_eq!(Counted::of(&s), Counted::Released);
        }
        // A plain job (not Laravel's) is simply retried, in its place.
        assert!(matches!(
            settle(LEASE, &held(PLAIN, 1), Ending::Abandoned(&Cause::TimedOut)),
            Settle::TakeBack { died: None, .. }
        ));
    }

    #[test]
    fn a_crashed_laravel_job_is_released_for_laravel_to_judge_and_unstarted_jobs_are_uncharged() {
        let payload = r#"{"job":"J","maxTries":1}"#;
        let died = Cause::Died("was killed".into());
        match settle(LEASE, &held(payload, 1), Ending::Abandoned(&died)) {
            Settle::TakeBack { died, .. } => assert_eq!(died.as_deref(), Some("was killed")),
            other => panic!("{other:?}"),
        }
        let mut unstarted = held(payload, 1);
        unstarted.started = false;
        let s = settle(LEASE, &unstarted, Ending::Abandoned(&Cause::TimedOut));
        assert!(matches!(s, Settle::Release { charged: false, .. }));
        assert_eq!(Counted::of(&s), Counted::ReturnedUnstarted);
    }

    #[test]
    fn a_plain_job_that_keeps_killing_its_worker_fails_when_out_of_attempts() {
        let died = Cause::Died("was killed by SIGSEGV".into());
        let mut h = held(PLAIN, 2);
        h.max_attempts = Some(3);
        assert!(matches!(
            settle(LEASE, &h, Ending::Abandoned(&died)),
            Settle::TakeBack { died: None, .. }
        ));
        h.attempts = 3;
        match settle(LEASE, &h, Ending::Abandoned(&died)) {
            Settle::Fail { error, .. } => assert!(
                error.contains("was killed by SIGSEGV; no attempts left (3 of 3)"),
                "{error}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_out_of_range_timeout_is_refused_by_name_and_never_reaches_a_clock() {
        for payload in [
            r#"{"job":"J","timeout":9223372036854775807}"#,
            r#"{"job":"J","timeout":-1}"#,
            r#"{"job":"J","timeout":1.5}"#,
            r#"{"job":"J","timeout":"60"}"#,
            r#"{"job":"J","timeout":1e300}"#,
            r#"{"job":"J","timeout":1e400}"#,
        ] {
            let hints = JobHints::from_payload(payload);
            assert!(hints.laravel, "{payload}: still a Laravel job");
            match refuse(LEASE, &hints) {
                Some(Settle::Fail { error, .. }) => {
                    assert!(error.contains("out of range"), "{payload}: {error}")
                }
                other => panic!("{payload}: {other:?}"),
            }
        }
        let fine = JobHints::from_payload(r#"{"job":"J","timeout":31536000}"#);
        assert!(refuse(LEASE, &fine).is_none());
    }
}
