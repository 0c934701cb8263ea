//! Whether a pool forks its workers from a zygote now, as one pure function:
//! [`next`]`(state, event, now, rules) -> (state, actions)`, unit-tested without processes.
//!
//! ```text
//!            Start                Ready
//!  Exec ─────────────▶ Booting ─────────▶ Ready ◀──────────┐
//!   ▲                    │  ▲               │ Gone          │ (restart)
//!   │ cannot boot:       │  └── Tick ── Waiting ◀───────────┘
//!   │ Gone / boot timeout│      (backoff)   │
//!   └────────────────────┘                  │ Gone `failures` times in a row,
//!   └───────────────────────────────────────┘ or `failures` forks failed in a row
//! ```
//!
//! A zygote that cannot boot makes the pool fall back to starting its workers by exec, with the
//! cause said once: its workers would boot the application themselves, and if that fails too the
//! workers' own circuit takes over. A zygote that dies after it was ready is restarted with the
//! workers' backoff (a restart that cannot boot counts as one more death); one that keeps dying
//! young — within `healthy_after` of being ready — like a worker that keeps dying before it is
//! healthy, stops being restarted: here by falling back to exec. The next reload tries forking
//! again (new code).

use std::time::{Duration, Instant};

use crate::backoff::Backoff;

/// Where a pool's zygote line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Workers are started by exec: the pool is configured so (`cause` none) or fell back.
    Exec { cause: Option<String> },
    /// A zygote was started and has not said it is ready. `deaths`: deaths in a row before it.
    Booting { since: Instant, deaths: u32 },
    /// Forking.
    Ready {
        since: Instant,
        deaths: u32,
        /// Fork requests it could not carry out, in a row.
        fork_failures: u32,
    },
    /// The zygote died after it was ready; another is started at `until`.
    Waiting { until: Instant, deaths: u32 },
    /// Shut down: nothing is started again.
    Closed,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Fork from now on (the pool starts, or a reload brings new code to fork from).
    Start,
    /// Start workers by exec from now on (a reload to `spawn: exec`).
    UseExec,
    /// The current zygote said it is ready.
    Ready,
    /// The current zygote is gone (exited, broke the protocol, or said it cannot serve): why.
    Gone { cause: String },
    /// The current zygote forked a worker.
    Forked,
    /// The current zygote could not fork a worker: why.
    ForkFailed { cause: String },
    /// Time passed (a boot timeout, a restart due).
    Tick,
    /// The pool shuts down.
    ShutDown,
}

/// What the line must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start a zygote (a current one is retired first).
    Spawn,
    /// Kill the current zygote.
    Kill,
    /// Let the current zygote go: it exits when its last worker does.
    Retire,
    /// Places waiting for a zygote may be filled now (forked, or started by exec).
    Fill,
    /// The pool starts its workers by exec from now on, because of this: say so.
    FallBack(String),
    /// Come back at this time with [`Event::Tick`].
    WakeAt(Instant),
}

/// The rules the line runs by (the pool's).
#[derive(Debug, Clone)]
pub struct Rules {
    /// A zygote that has not said it is ready this long after its start cannot boot.
    pub boot_timeout: Duration,
    /// Restart delays (and `healthy_after`: a zygote that lived that long resets its deaths).
    pub backoff: Backoff,
    /// Deaths (or failed forks) in a row after which the pool falls back to exec.
    pub failures: u32,
}

impl Default for Rules {
    /// A 60 s boot timeout (the workers' default), the workers' default backoff, 5 failures (the
    /// workers' restart circuit).
    fn default() -> Rules {
        Rules {
            boot_timeout: Duration::from_secs(60),
            backoff: Backoff::default(),
            failures: 5,
        }
    }
}

/// The next state and what to do, for `event` at `now`.
pub fn next(state: &State, event: Event, now: Instant, rules: &Rules) -> (State, Vec<Action>) {
    use Action::*;
    match (state, event) {
        (State::Closed, _) => (State::Closed, vec![]),
        (_, Event::ShutDown) => (State::Closed, vec![Retire]),
        (_, Event::Start) => (
            State::Booting {
                since: now,
                deaths: 0,
            },
            vec![Spawn],
        ),
        (_, Event::UseExec) => (State::Exec { cause: None }, vec![Retire, Fill]),
        (State::Booting { deaths, .. }, Event::Ready) => (
            State::Ready {
                since: now,
                deaths: *deaths,
                fork_failures: 0,
            },
            vec![Fill],
        ),
        // The generation's first zygote cannot boot: this code cannot be forked.
        (State::Booting { deaths: 0, .. }, Event::Gone { cause }) => {
            fall_back(format!("its zygote could not boot: {cause}"), vec![])
        }
        // A restart that does not boot (the database down for a moment, say) is one more young
        // death: backoff, and the fall-back only after `failures` in a row.
        (State::Booting { deaths, .. }, Event::Gone { cause }) => {
            let deaths = deaths.saturating_add(1);
            died(
                deaths,
                format!("its zygote died {deaths} times in a row without serving long; the last restart could not boot: {cause}"),
                now,
                rules,
            )
        }
        (State::Booting { since, .. }, Event::Tick) if now >= *since + rules.boot_timeout => {
            fall_back(
                format!(
                    "its zygote did not say it was ready within {:?} (boot_timeout)",
                    rules.boot_timeout
                ),
                vec![Kill],
            )
        }
        (State::Ready { since, deaths, .. }, Event::Gone { cause }) => {
            died_after_ready(*since, *deaths, cause, now, rules)
        }
        (
            State::Ready {
                since,
                deaths,
                fork_failures,
            },
            Event::ForkFailed { cause },
        ) => fork_failed(*since, *deaths, *fork_failures, cause, rules),
        (State::Ready { since, deaths, .. }, Event::Forked) => (
            State::Ready {
                since: *since,
                deaths: *deaths,
                fork_failures: 0,
            },
            vec![],
        ),
        (State::Waiting { until, deaths }, Event::Tick) if now >= *until => (
            State::Booting {
                since: now,
                deaths: *deaths,
            },
            vec![Spawn],
        ),
        // Anything else changes nothing: a late event of a zygote already given up, a tick with
        // nothing due.
        (state, _) => (state.clone(), vec![]),
    }
}

/// The pool starts its workers by exec from now on, because of `cause`: after `actions`, the
/// zygote is retired, the cause said and the waiting places filled.
fn fall_back(cause: String, mut actions: Vec<Action>) -> (State, Vec<Action>) {
    use Action::*;
    actions.extend([Retire, FallBack(cause.clone()), Fill]);
    (State::Exec { cause: Some(cause) }, actions)
}

/// The `deaths`-th young death in a row: restarted after the backoff, or past `failures` the
/// pool falls back, saying `why`.
fn died(deaths: u32, why: String, now: Instant, rules: &Rules) -> (State, Vec<Action>) {
    use Action::*;
    if deaths >= rules.failures {
        fall_back(why, vec![])
    } else {
        let until = now + rules.backoff.delay(deaths);
        (
            State::Waiting { until, deaths },
            vec![Retire, WakeAt(until)],
        )
    }
}

/// A zygote ready `since` then died (`cause`): one that lived `healthy_after` starts a new count
/// of deaths, one that did not adds to the `deaths` before it.
fn died_after_ready(
    since: Instant,
    deaths: u32,
    cause: String,
    now: Instant,
    rules: &Rules,
) -> (State, Vec<Action>) {
    let deaths = if now.saturating_duration_since(since) >= rules.backoff.healthy_after {
        1
    } else {
        deaths.saturating_add(1)
    };
    died(
        deaths,
        format!(
            "its zygote died {deaths} times in a row, each within {:?} of its start; the last time it {cause}",
            rules.backoff.healthy_after
        ),
        now,
        rules,
    )
}

/// A ready zygote could not fork a worker (`cause`): past `failures` in a row, the pool falls
/// back; before that it stays ready, counting.
fn fork_failed(
    since: Instant,
    deaths: u32,
    fork_failures: u32,
    cause: String,
    rules: &Rules,
) -> (State, Vec<Action>) {
    let fork_failures = fork_failures.saturating_add(1);
    if fork_failures >= rules.failures {
        fall_back(
            format!("its zygote could not fork {fork_failures} workers in a row; the last time: {cause}"),
            vec![Action::Kill],
        )
    } else {
        (
            State::Ready {
                since,
                deaths,
                fork_failures,
            },
            vec![],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Rules {
        Rules {
            boot_timeout: Duration::from_secs(60),
            backoff: Backoff::default(),
            failures: 3,
        }
    }

    fn gone() -> Event {
        Event::Gone {
            cause: "was killed by SIGKILL".into(),
        }
    }

    #[test]
    fn a_zygote_that_boots_is_ready_and_places_are_filled() {
        let t = Instant::now();
        let (s, a) = next(&State::Exec { cause: None }, Event::Start, t, &rules());
        assert_eq!(a, vec![Action::Spawn]);
        let (s, a) = next(&s, Event::Ready, t, &rules());
        assert!(matches!(s, State::Ready { deaths: 0, .. }));
        assert_eq!(a, vec![Action::Fill]);
    }

    #[test]
    fn a_zygote_that_cannot_boot_falls_back_to_exec_naming_the_cause() {
        let t = Instant::now();
        let booting = State::Booting {
            since: t,
            deaths: 0,
        };
        let (s, a) = next(
            &booting,
            Event::Gone {
                cause: "said: FFI is disabled".into(),
            },
            t,
            &rules(),
        );
        let cause = "its zygote could not boot: said: FFI is disabled".to_string();
        assert_eq!(
            s,
            State::Exec {
                cause: Some(cause.clone())
            }
        );
        assert_eq!(
            a,
            vec![Action::Retire, Action::FallBack(cause), Action::Fill]
        );
    }

    #[test]
    fn a_restarted_zygote_that_cannot_boot_is_tried_again_with_backoff_then_the_pool_falls_back() {
        let t = Instant::now();
        let r = rules();
        let (s, a) = next(
            &State::Booting {
                since: t,
                deaths: 1,
            },
            gone(),
            t,
            &r,
        );
        let until = t + Duration::from_millis(200);
        assert_eq!(s, State::Waiting { until, deaths: 2 });
        assert_eq!(a, vec![Action::Retire, Action::WakeAt(until)]);
        let (s, a) = next(
            &State::Booting {
                since: t,
                deaths: 2,
            },
            gone(),
            t,
            &r,
        );
        assert!(
            matches!(s, State::Exec { cause: Some(ref c) } if c.contains("died 3 times in a row") && c.contains("could not boot"))
        );
        assert!(a.contains(&Action::Fill));
    }

    #[test]
    fn a_zygote_silent_past_the_boot_timeout_is_killed_and_the_pool_falls_back() {
        let t = Instant::now();
        let booting = State::Booting {
            since: t,
            deaths: 0,
        };
        let (s, a) = next(&booting, Event::Tick, t + Duration::from_secs(59), &rules());
        assert_eq!((s, a), (booting.clone(), vec![]));
        let (s, a) = next(&booting, Event::Tick, t + Duration::from_secs(60), &rules());
        assert!(matches!(s, State::Exec { cause: Some(ref c) } if c.contains("boot_timeout")));
        assert_eq!(a[0], Action::Kill);
        assert!(a.contains(&Action::Fill));
    }

    #[test]
    fn a_zygote_that_dies_after_it_was_ready_is_restarted_with_backoff_and_its_workers_kept() {
        let t = Instant::now();
        let ready = State::Ready {
            since: t,
            deaths: 0,
            fork_failures: 0,
        };
        let (s, a) = next(&ready, gone(), t + Duration::from_secs(1), &rules());
        let until = t + Duration::from_secs(1) + Duration::from_millis(100);
        assert_eq!(s, State::Waiting { until, deaths: 1 });
        assert_eq!(a, vec![Action::Retire, Action::WakeAt(until)]);
        let (s2, a) = next(&s, Event::Tick, until - Duration::from_millis(1), &rules());
        assert_eq!((s2, a), (s.clone(), vec![]));
        let (s, a) = next(&s, Event::Tick, until, &rules());
        assert_eq!(
            s,
            State::Booting {
                since: until,
                deaths: 1
            }
        );
        assert_eq!(a, vec![Action::Spawn]);
    }

    #[test]
    fn a_zygote_that_keeps_dying_young_makes_the_pool_fall_back_and_one_that_lived_resets_the_count(
    ) {
        let t = Instant::now();
        let r = rules();
        // Two young deaths, then one after living healthy_after: the count starts again.
        let ready = |deaths| State::Ready {
            since: t,
            deaths,
            fork_failures: 0,
        };
        let (s, _) = next(&ready(1), gone(), t + Duration::from_secs(1), &r);
        assert!(matches!(s, State::Waiting { deaths: 2, .. }));
        let (s, _) = next(&ready(2), gone(), t + Duration::from_secs(11), &r);
        assert!(matches!(s, State::Waiting { deaths: 1, .. }));
        // The third young death in a row.
        let (s, a) = next(&ready(2), gone(), t + Duration::from_secs(1), &r);
        assert!(
            matches!(s, State::Exec { cause: Some(ref c) } if c.contains("died 3 times in a row") && c.contains("SIGKILL"))
        );
        assert!(a.contains(&Action::Fill));
    }

    #[test]
    fn failed_forks_in_a_row_make_the_pool_fall_back_and_a_fork_resets_them() {
        let t = Instant::now();
        let r = rules();
        let failed = || Event::ForkFailed {
            cause: "fork failed: Resource temporarily unavailable".into(),
        };
        let mut s = State::Ready {
            since: t,
            deaths: 0,
            fork_failures: 0,
        };
        s = next(&s, failed(), t, &r).0;
        s = next(&s, failed(), t, &r).0;
        s = next(&s, Event::Forked, t, &r).0;
        assert!(matches!(
            s,
            State::Ready {
                fork_failures: 0,
                ..
            }
        ));
        for _ in 0..2 {
            s = next(&s, failed(), t, &r).0;
        }
        let (s, a) = next(&s, failed(), t, &r);
        assert!(
            matches!(s, State::Exec { cause: Some(ref c) } if c.contains("could not fork 3 workers"))
        );
        assert_eq!(a[0], Action::Kill);
    }

    #[test]
    fn a_reload_starts_forking_again_after_a_fall_back_and_shut_down_is_final() {
        let t = Instant::now();
        let fell = State::Exec {
            cause: Some("x".into()),
        };
        let (s, a) = next(&fell, Event::Start, t, &rules());
        assert!(matches!(s, State::Booting { deaths: 0, .. }));
        assert_eq!(a, vec![Action::Spawn]);
        let (s, a) = next(&s, Event::UseExec, t, &rules());
        assert_eq!(s, State::Exec { cause: None });
        assert_eq!(a, vec![Action::Retire, Action::Fill]);
        let (s, a) = next(&s, Event::ShutDown, t, &rules());
        assert_eq!((s.clone(), a), (State::Closed, vec![Action::Retire]));
        assert_eq!(next(&s, Event::Start, t, &rules()), (State::Closed, vec![]));
    }

    #[test]
    fn late_events_of_a_given_up_zygote_change_nothing() {
        let t = Instant::now();
        let waiting = State::Waiting {
            until: t + Duration::from_secs(1),
            deaths: 1,
        };
        for e in [gone(), Event::Ready, Event::Forked] {
            assert_eq!(next(&waiting, e, t, &rules()), (waiting.clone(), vec![]));
        }
        let exec = State::Exec { cause: None };
        assert_eq!(next(&exec, gone(), t, &rules()), (exec.clone(), vec![]));
    }
}
