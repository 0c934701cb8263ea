//! The admitter: runs the passes that move jobs waiting on concurrency keys into `drover.jobs`
//! once their key has room (`drover_broker::admission`), when `NOTIFY drover_slots` says a key
//! may have some. One pass at a time; a note that arrives while one runs asks for one more after
//! it, for the running pass may have taken its notes before that one was written. A failed pass
//! leaves its notes in the database: the next note, and the reap tick's own pass, take them.
//! The admitted jobs' insert wakes the claims as an enqueue does.

use std::sync::Arc;

use drover_broker::BrokerError;
use tokio::sync::mpsc;

use crate::store::Claims;

use super::events::Internal;

/// Where the admitter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum State {
    /// No pass runs.
    #[default]
    Idle,
    /// A pass runs; `again`: a note came meanwhile, so another follows it.
    Running { again: bool },
}

/// What happened to the admitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Happened {
    /// A key may have room (`drover_slots`, or the LISTEN connection came back).
    Woken,
    /// The running pass ended, whatever its result.
    PassEnded,
}

/// The admitter's rule: the next state, and whether to start a pass now.
pub(super) fn next(state: State, happened: Happened) -> (State, bool) {
    match (state, happened) {
        (State::Idle, Happened::Woken) => (State::Running { again: false }, true),
        (State::Running { .. }, Happened::Woken) => (State::Running { again: true }, false),
        (State::Running { again: true }, Happened::PassEnded) => {
            (State::Running { again: false }, true)
        }
        (State::Running { again: false }, Happened::PassEnded)
        | (State::Idle, Happened::PassEnded) => (State::Idle, false),
    }
}

/// The admission side of the master.
pub(super) struct Admitter {
    /// The store's admission call.
    store: Arc<dyn Claims>,
    /// Where a pass's end goes (the loop's inbox).
    answers: mpsc::UnboundedSender<Internal>,
    /// Whether a pass runs, and whether another must follow it.
    state: State,
    /// Jobs admitted by this master's passes since start, for status.
    admitted: u64,
}

impl Admitter {
    pub(super) fn new(
        store: Arc<dyn Claims>,
        answers: mpsc::UnboundedSender<Internal>,
    ) -> Admitter {
        Admitter {
            store,
            answers,
            state: State::Idle,
            admitted: 0,
        }
    }

    /// A key may have room.
    pub(super) fn on_wake(&mut self) {
        self.step(Happened::Woken);
    }

    /// A pass ended with `result` (how many it admitted).
    pub(super) fn on_pass_ended(&mut self, result: Result<u64, BrokerError>) {
        match result {
            Ok(n) => self.admitted = self.admitted.saturating_add(n),
            Err(e) => tracing::warn!(
                database = %self.store.address(),
                "{e}; the jobs it would have admitted wait for the next pass"
            ),
        }
        self.step(Happened::PassEnded);
    }

    /// Jobs admitted by this master since start.
    pub(super) fn admitted(&self) -> u64 {
        self.admitted
    }

    fn step(&mut self, happened: Happened) {
        let (state, start) = next(self.state, happened);
        self.state = state;
        if start {
            let (store, answers) = (self.store.clone(), self.answers.clone());
            tokio::spawn(async move {
                let result = store.admit_waiting().await;
                let _ = answers.send(Internal::Admitted(result));
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_while_idle_starts_a_pass() {
        assert_eq!(
            next(State::Idle, Happened::Woken),
            (State::Running { again: false }, true)
        );
    }

    #[test]
    fn notes_while_a_pass_runs_ask_for_one_more_pass_after_it_not_one_each() {
        let (s, start) = next(State::Running { again: false }, Happened::Woken);
        assert_eq!((s, start), (State::Running { again: true }, false));
        let (s, start) = next(s, Happened::Woken);
        assert_eq!((s, start), (State::Running { again: true }, false));
        let (s, start) = next(s, Happened::PassEnded);
        assert_eq!((s, start), (State::Running { again: false }, true));
        assert_eq!(next(s, Happened::PassEnded), (State::Idle, false));
    }
}
