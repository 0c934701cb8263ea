//! One worker's state as the master sees it, and the one rule for moving it: a pure
//! `next(state, transition) -> state`, unit-tested without processes. Whether a worker may get
//! jobs is derived from it ([`WorkerState::accepts_jobs`]), never set by hand.
//!
//! ```text
//!            hello             pause
//! starting ─────────▶ serving ◀──────▶ paused
//!                        │   continue    │
//!     retire (stop, reload, scale down, memory, shutdown) from any live state
//!                        ▼               ▼
//!                     retiring (finishes its job, exits)
//!  fence (lease lost or expiring, protocol broken) ─▶ fenced   (killed)
//!  time out (its job outran its timeout)            ─▶ timed out (killed)
//!  stop (an operator stopped its running job)        ─▶ stopped   (killed)
//! ```
//!
//! `continue` only undoes a pause: a retiring, fenced or timed-out worker never takes jobs again.

/// Where one worker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Spawned, no hello yet.
    Starting,
    /// Takes jobs.
    Serving,
    /// Paused by an operator: holds nothing new, runs only what it started.
    Paused,
    /// Told to stop: finishes its running job, returns the rest, exits.
    Retiring,
    /// Its lease is lost or about to end, or it broke the protocol: being killed.
    Fenced,
    /// Its job outran its timeout: being killed, the job settled by the timeout rules.
    TimedOut,
    /// An operator stopped its running job: being killed, the job settled as they asked
    /// (`rules::stop_request`).
    Stopped,
}

/// What can happen to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Its hello.
    Hello,
    Pause,
    Continue,
    Retire,
    Fence,
    TimeOut,
    /// An operator asked to stop its running job.
    Stop,
}

impl WorkerState {
    /// The one place that says whether a worker may be given jobs.
    pub fn accepts_jobs(self) -> bool {
        self == WorkerState::Serving
    }

    /// The master is killing it (its exit is not a crash of the worker's own making).
    pub fn killed_by_master(self) -> bool {
        matches!(
            self,
            WorkerState::Fenced | WorkerState::TimedOut | WorkerState::Stopped
        )
    }
}

/// The state after `transition`.
pub fn next(state: WorkerState, transition: Transition) -> WorkerState {
    use Transition as T;
    use WorkerState as S;
    match (state, transition) {
        (S::Starting, T::Hello) => S::Serving,
        (S::Serving, T::Pause) => S::Paused,
        (S::Paused, T::Continue) => S::Serving,
        (S::Starting | S::Serving | S::Paused, T::Retire) => S::Retiring,
        // A kill for a timeout says more than a fence: the job is settled by its timeout rules.
        (S::TimedOut, T::Fence) => S::TimedOut,
        // A stop says more than a fence or a timeout: the job is settled as the operator asked.
        (S::Stopped, T::Fence | T::TimeOut) => S::Stopped,
        // A worker already being killed (its lease lost, or timed out) is not stopped: its job
        // is settled by that kill's rule.
        (S::Fenced | S::TimedOut, T::Stop) => state,
        (_, T::Fence) => S::Fenced,
        (_, T::TimeOut) => S::TimedOut,
        (_, T::Stop) => S::Stopped,
        // Anything else changes nothing: a pause of a retiring worker, a continue of a fenced
        // one, a second hello (the assignments refuses it before it gets here).
        (state, _) => state,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Transition as T;
    use WorkerState as S;

    const ALL: [S; 7] = [
        S::Starting,
        S::Serving,
        S::Paused,
        S::Retiring,
        S::Fenced,
        S::TimedOut,
        S::Stopped,
    ];

    #[test]
    fn only_a_serving_worker_takes_jobs() {
        for s in ALL {
            assert_eq!(s.accepts_jobs(), s == S::Serving, "{s:?}");
        }
    }

    #[test]
    fn continue_only_undoes_a_pause() {
        assert_eq!(next(S::Paused, T::Continue), S::Serving);
        for s in [S::Retiring, S::Fenced, S::TimedOut, S::Starting, S::Serving] {
            assert_eq!(next(s, T::Continue), s, "{s:?}");
            assert!(!next(s, T::Continue).accepts_jobs() || s == S::Serving);
        }
    }

    #[test]
    fn nothing_leaves_retiring_fenced_timed_out_or_stopped_for_serving() {
        for s in [S::Retiring, S::Fenced, S::TimedOut, S::Stopped] {
            for t in [T::Hello, T::Pause, T::Continue, T::Retire] {
                assert!(!next(s, t).accepts_jobs(), "{s:?} {t:?}");
            }
        }
    }

    #[test]
    fn kills_win_over_everything_and_a_timeout_over_a_fence() {
        for s in ALL {
            if s != S::Stopped {
                assert_eq!(next(s, T::TimeOut), S::TimedOut);
            }
            assert!(next(s, T::Fence).killed_by_master());
            assert!(next(s, T::Stop).killed_by_master());
        }
        assert_eq!(next(S::TimedOut, T::Fence), S::TimedOut);
        assert_eq!(next(S::Retiring, T::Fence), S::Fenced);
    }

    #[test]
    fn a_stop_kills_a_live_worker_and_its_reason_outlasts_a_later_fence_or_timeout() {
        for s in [S::Starting, S::Serving, S::Paused, S::Retiring] {
            assert_eq!(next(s, T::Stop), S::Stopped, "{s:?}");
        }
        assert_eq!(next(S::Stopped, T::Fence), S::Stopped);
        assert_eq!(next(S::Stopped, T::TimeOut), S::Stopped);
        // Already being killed for its lease or a timeout: that kill's rule settles the job.
        assert_eq!(next(S::Fenced, T::Stop), S::Fenced);
        assert_eq!(next(S::TimedOut, T::Stop), S::TimedOut);
    }

    #[test]
    fn hello_pause_retire() {
        assert_eq!(next(S::Starting, T::Hello), S::Serving);
        assert_eq!(next(S::Serving, T::Pause), S::Paused);
        assert_eq!(next(S::Paused, T::Retire), S::Retiring);
        assert_eq!(next(S::Retiring, T::Pause), S::Retiring);
    }
}
