//! The admitter: runs the passes that admit jobs dispatched under limits into `drover.jobs`
//! (`drover_broker::admission`) when `NOTIFY drover_limits` says a key may be able to admit,
//! when a key's wake-up time comes (a rate's next window, a delayed job at the head of a key's
//! line), and on the reap tick (a NOTIFY missed while the LISTEN connection was down). One pass
//! at a time; a note that arrives while one runs asks for one more after it, for the running
//! pass may have taken its notes before that one was written. A failed pass leaves its notes in
//! the database for the next. The admitted jobs' insert wakes the claims as an enqueue does.

use std::sync::Arc;
use std::time::Duration;

use drover_broker::{Admitted, BrokerError};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use crate::store::Claims;

use super::events::Internal;

/// Where the admitter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum State {
    /// No pass runs.
    #[default]
    Idle,
    /// A pass runs; `again`: a wake-up came meanwhile, so another follows it.
    Running { again: bool },
}

/// What happened to the admitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Happened {
    /// A key may be able to admit: a note's NOTIFY, the timer, the reap tick, a reconnect.
    Woken,
    /// The running pass ended; `next_wake`: when the earliest key must be looked at again, if
    /// the pass said (a failed pass says nothing).
    PassEnded { next_wake: Option<Duration> },
}

/// What the admitter does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Nothing now.
    Wait,
    /// Start a pass.
    Pass,
    /// Wake up after this long (replacing the wake-up set before).
    Timer(Duration),
}

/// The admitter's rule: the next state, and what to do.
pub(super) fn next(state: State, happened: Happened) -> (State, Action) {
    match (state, happened) {
        (State::Idle, Happened::Woken) => (State::Running { again: false }, Action::Pass),
        (State::Running { .. }, Happened::Woken) => (State::Running { again: true }, Action::Wait),
        // The pass that follows will say when, from fresher state.
        (State::Running { again: true }, Happened::PassEnded { .. }) => {
            (State::Running { again: false }, Action::Pass)
        }
        (_, Happened::PassEnded { next_wake }) => {
            (State::Idle, next_wake.map_or(Action::Wait, Action::Timer))
        }
    }
}

/// The admission side of the master.
pub(super) struct Admitter {
    /// The store's admission call.
    store: Arc<dyn Claims>,
    /// Where a pass's end goes (the loop's inbox).
    answers: mpsc::UnboundedSender<Internal>,
    /// What wakes the admitter: the listener's `drover_limits`, and this part's own timer.
    wake: Arc<Notify>,
    /// Whether a pass runs, and whether another must follow it.
    state: State,
    /// The timer set by the last pass, aborted when another is set.
    timer: Option<JoinHandle<()>>,
    /// Jobs admitted by this master's passes since start, for status.
    admitted: u64,
}

impl Admitter {
    pub(super) fn new(
        store: Arc<dyn Claims>,
        answers: mpsc::UnboundedSender<Internal>,
        wake: Arc<Notify>,
    ) -> Admitter {
        Admitter {
            store,
            answers,
            wake,
            state: State::Idle,
            timer: None,
            admitted: 0,
        }
    }

    /// A key may be able to admit.
    pub(super) fn on_wake(&mut self) {
        self.step(Happened::Woken);
    }

    /// A pass ended with `result`.
    pub(super) fn on_pass_ended(&mut self, result: Result<Admitted, BrokerError>) {
        let next_wake = match result {
            Ok(a) => {
                self.admitted = self.admitted.saturating_add(a.jobs);
                a.next_wake
            }
            Err(e) => {
                tracing::warn!(
                    database = %self.store.address(),
                    "{e}; the jobs it would have admitted wait for the next pass"
                );
                None
            }
        };
        self.step(Happened::PassEnded { next_wake });
    }

    /// Jobs admitted by this master's passes since start.
    pub(super) fn admitted(&self) -> u64 {
        self.admitted
    }

    fn step(&mut self, happened: Happened) {
        let (state, action) = next(self.state, happened);
        self.state = state;
        match action {
            Action::Wait => {}
            Action::Pass => {
                let (store, answers) = (self.store.clone(), self.answers.clone());
                tokio::spawn(async move {
                    let result = store.admit_waiting().await;
                    let _ = answers.send(Internal::Admitted(result));
                });
            }
            Action::Timer(after) => {
                if let Some(t) = self.timer.take() {
                    t.abort();
                }
                let wake = self.wake.clone();
                self.timer = Some(tokio::spawn(async move {
                    // A wake-up further off than a day is looked at by the reap tick's pass
                    // long before (and a sleep that long is refused by no timer).
                    tokio::time::sleep(after.min(Duration::from_secs(86_400))).await;
                    wake.notify_one();
                }));
            }
        }
    }
}

impl Drop for Admitter {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_WAKE: Happened = Happened::PassEnded { next_wake: None };

    #[test]
    fn a_wake_up_while_idle_starts_a_pass() {
        assert_eq!(
            next(State::Idle, Happened::Woken),
            (State::Running { again: false }, Action::Pass)
        );
    }

    #[test]
    fn wake_ups_while_a_pass_runs_ask_for_one_more_pass_after_it_not_one_each() {
        let (s, a) = next(State::Running { again: false }, Happened::Woken);
        assert_eq!((s, a), (State::Running { again: true }, Action::Wait));
        let (s, a) = next(s, Happened::Woken);
        assert_eq!((s, a), (State::Running { again: true }, Action::Wait));
        let (s, a) = next(s, NO_WAKE);
        assert_eq!((s, a), (State::Running { again: false }, Action::Pass));
        assert_eq!(next(s, NO_WAKE), (State::Idle, Action::Wait));
    }

    #[test]
    fn a_pass_that_names_a_wake_up_sets_the_timer_unless_another_pass_follows() {
        let later = Happened::PassEnded {
            next_wake: Some(Duration::from_secs(3)),
        };
        assert_eq!(
            next(State::Running { again: false }, later),
            (State::Idle, Action::Timer(Duration::from_secs(3)))
        );
        assert_eq!(
            next(State::Running { again: true }, later),
            (State::Running { again: false }, Action::Pass)
        );
    }
}
