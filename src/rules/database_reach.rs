//! Whether the master reaches its database, from what its own calls saw — claims, renewals,
//! heartbeats and settles, whichever speak first: unreachable from the first call that failed for
//! a lost connection (`BrokerError::is_connection_lost` decides, and nothing else), reachable
//! again once a call sent after that is answered. Pure: `master::database_reach` keeps the state
//! and feeds it each call's outcome; the status verdict (`rules::health`) takes the problem it
//! names.

use std::time::{Duration, Instant};

use drover_broker::BrokerError;

/// What one call says of the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// It answered (the statement did what it was sent for).
    Answered,
    /// There was no working connection (`is_connection_lost`): closed, refused, no answer in
    /// time, a standby, ...
    Lost,
    /// It failed on its own on a connection that works, or for a reason that is not the
    /// database's (a state directory's file): it says nothing of the database's reach.
    Nothing,
}

impl Seen {
    /// What `result` says of the database.
    pub fn of<T>(result: &Result<T, BrokerError>) -> Seen {
        match result {
            Ok(_) => Seen::Answered,
            Err(e) if e.is_connection_lost() => Seen::Lost,
            Err(_) => Seen::Nothing,
        }
    }
}

/// What the master's calls have said of its database so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    /// Since when it cannot be reached; `None` while it can.
    pub unreachable_since: Option<Instant>,
    /// When the latest call that was answered was sent: no outage began before it.
    pub answered_sent: Option<Instant>,
}

/// The reach after a call sent at `sent` saw `seen`.
///
/// - Lost: unreachable since the earliest the call could have found it so — when it was sent,
///   or, if a call sent later was answered, then — unless it already is.
/// - Answered: reachable again, unless the call was sent before the outage began (it was in
///   flight when another call failed, and says nothing of what came after).
pub fn next(reach: Reach, seen: Seen, sent: Instant) -> Reach {
    match seen {
        Seen::Nothing => reach,
        Seen::Lost => Reach {
            unreachable_since: reach
                .unreachable_since
                .or(Some(reach.answered_sent.map_or(sent, |a| a.max(sent)))),
            ..reach
        },
        Seen::Answered => Reach {
            unreachable_since: reach.unreachable_since.filter(|since| sent < *since),
            answered_sent: Some(reach.answered_sent.map_or(sent, |a| a.max(sent))),
        },
    }
}

/// The database is unreachable, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseProblem {
    /// Since the first call that failed for a lost connection.
    pub unreachable_for: Duration,
    /// Why the latest such call failed (the store's error, naming the server), for the operator.
    pub last_error: String,
}

/// The problem to report at `now`, if the database has been unreachable since
/// `unreachable_since`; `last_error` is why the latest call failed.
pub fn database_problem(
    unreachable_since: Option<Instant>,
    last_error: &str,
    now: Instant,
) -> Option<DatabaseProblem> {
    unreachable_since.map(|since| DatabaseProblem {
        unreachable_for: now.saturating_duration_since(since),
        last_error: last_error.to_string(),
    })
}

impl DatabaseProblem {
    /// The sentence status shows among its problems: the thing, what it does, and the fix.
    pub fn sentence(&self) -> String {
        format!(
            "database unreachable for {} s: no job is claimed and no lease renewed until it answers \
             (running jobs go on up to their lease and outage grace); the master reconnects by \
             itself: restore the database or the network to it (last error: {})",
            self.unreachable_for.as_secs(),
            self.last_error
        )
    }

    /// Seconds unreachable, for the status document and `/metrics`.
    pub fn secs(&self) -> f64 {
        self.unreachable_for.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    fn refused() -> BrokerError {
        BrokerError::ConnectTimedOut {
            address: "db:5432/app".into(),
            seconds: 5,
        }
    }

    #[test]
    fn only_a_lost_connection_makes_it_unreachable_and_only_an_answer_makes_it_reachable() {
        assert_eq!(Seen::of(&Ok::<(), _>(())), Seen::Answered);
        assert_eq!(Seen::of(&Err::<(), _>(refused())), Seen::Lost);
        let timed_out = BrokerError::TimedOut {
            about: "renewing leases",
        };
        assert_eq!(Seen::of(&Err::<(), _>(timed_out)), Seen::Lost);
        let not_the_database = BrokerError::NodeGone {
            about: "heartbeat",
            node: 7,
        };
        assert_eq!(Seen::of(&Err::<(), _>(not_the_database)), Seen::Nothing);
        let t0 = Instant::now();
        let lost = next(Reach::default(), Seen::Lost, at(t0, 1));
        assert_eq!(next(lost, Seen::Nothing, at(t0, 2)), lost);
    }

    #[test]
    fn unreachable_from_the_first_failed_call_until_one_sent_after_it_is_answered() {
        let t0 = Instant::now();
        let reach = next(Reach::default(), Seen::Answered, t0);
        assert_eq!(reach.unreachable_since, None);
        let reach = next(reach, Seen::Lost, at(t0, 10));
        assert_eq!(reach.unreachable_since, Some(at(t0, 10)));
        // Later failures keep the first one's time: N counts from the outage's start.
        let reach = next(reach, Seen::Lost, at(t0, 12));
        assert_eq!(reach.unreachable_since, Some(at(t0, 10)));
        // A call sent before the outage began, answered late: no word on what came after.
        let reach = next(reach, Seen::Answered, at(t0, 9));
        assert_eq!(reach.unreachable_since, Some(at(t0, 10)));
        // A claim sent once the database is back.
        let reach = next(reach, Seen::Answered, at(t0, 30));
        assert_eq!(reach.unreachable_since, None);
        assert_eq!(reach.answered_sent, Some(at(t0, 30)));
    }

    #[test]
    fn an_outage_does_not_begin_before_a_call_that_was_answered() {
        let t0 = Instant::now();
        // A renewal sent at 5 s is answered; a claim sent at 1 s then times out.
        let reach = next(Reach::default(), Seen::Answered, at(t0, 5));
        let reach = next(reach, Seen::Lost, at(t0, 1));
        assert_eq!(reach.unreachable_since, Some(at(t0, 5)));
    }

    #[test]
    fn the_problem_counts_the_seconds_since_the_outage_began_and_names_the_fix() {
        let t0 = Instant::now();
        assert_eq!(database_problem(None, "", at(t0, 5)), None);
        let problem = database_problem(Some(t0), "connection refused", at(t0, 12)).unwrap();
        assert_eq!(problem.unreachable_for, Duration::from_secs(12));
        assert_eq!(problem.secs(), 12.0);
        let sentence = problem.sentence();
        assert!(
            sentence.starts_with("database unreachable for 12 s: "),
            "{sentence}"
        );
        assert!(
            sentence.contains("restore the database") && sentence.contains("connection refused"),
            "{sentence}"
        );
        // A clock read before the outage's start (another task's) is no negative duration.
        let early = database_problem(Some(at(t0, 3)), "x", t0).unwrap();
        assert_eq!(early.unreachable_for, Duration::ZERO);
    }
}
