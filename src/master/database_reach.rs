//! Since when this master cannot reach its database, in one place for every task that calls it:
//! the loop (claims' and renewals' answers), the reap task (heartbeats) and the settle batcher
//! (settles) each tell it what their calls saw, and the status verdict asks it for the problem.
//! The rule is `rules::database_reach`; this part only keeps its state between calls, shared
//! (`Arc`) across the tasks of the master's one thread.

use std::sync::Mutex;
use std::time::Instant;

use drover_broker::BrokerError;

use crate::rules::database_reach::{self, DatabaseProblem, Reach, Seen};

/// The database's reach as the master's calls saw it.
#[derive(Debug, Default)]
pub(crate) struct DatabaseReach {
    /// The rule's state, and why the latest call failed for a lost connection.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// What the calls said so far (`rules::database_reach::next`).
    reach: Reach,
    /// The error of the latest call that failed for a lost connection, for the problem's
    /// sentence; kept after the outage ends only until the next one replaces it.
    last_error: String,
}

impl DatabaseReach {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while held leaves plain data: usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A call sent at `sent` ended with `result`.
    pub(crate) fn saw<T>(&self, result: &Result<T, BrokerError>, sent: Instant) {
        let seen = Seen::of(result);
        let mut state = self.state();
        if let (Seen::Lost, Err(e)) = (seen, result) {
            state.last_error = e.to_string();
        }
        let before = state.reach.unreachable_since;
        state.reach = database_reach::next(state.reach, seen, sent);
        if let (Some(since), None) = (before, state.reach.unreachable_since) {
            tracing::info!(
                "the database answers again after {:.1} s unreachable",
                since.elapsed().as_secs_f64()
            );
        }
    }

    /// The problem to report now, if the database is unreachable.
    pub(crate) fn problem(&self, now: Instant) -> Option<DatabaseProblem> {
        let state = self.state();
        database_reach::database_problem(state.reach.unreachable_since, &state.last_error, now)
    }

    /// Whether the database is reachable, as far as the calls know.
    pub(crate) fn reachable(&self) -> bool {
        self.state().reach.unreachable_since.is_none()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_lost_call_names_its_error_until_a_later_call_is_answered() {
        let reach = DatabaseReach::default();
        let t0 = Instant::now();
        assert!(reach.reachable());
        reach.saw(
            &Err::<(), _>(BrokerError::TimedOut {
                about: "sending a heartbeat",
            }),
            t0,
        );
        assert!(!reach.reachable());
        let problem = reach.problem(t0 + Duration::from_secs(3)).unwrap();
        assert_eq!(problem.unreachable_for, Duration::from_secs(3));
        assert!(
            problem.last_error.contains("sending a heartbeat"),
            "{problem:?}"
        );
        reach.saw(&Ok(()), t0 + Duration::from_secs(4));
        assert!(reach.reachable());
        assert_eq!(reach.problem(t0 + Duration::from_secs(5)), None);
    }
}
