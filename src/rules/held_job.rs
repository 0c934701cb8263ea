//! A job the master has handed to a worker: what it knows of the job from its claim until it is
//! settled. The assignments hold these per worker ([`super::assignments`]); the settle rules
//! read one to decide how its time with its worker ends ([`super::settle`]).

use std::time::{Duration, Instant};

use crate::rules::job_policy::JobHints;

/// A job handed to a worker.
#[derive(Debug, Clone)]
pub struct HeldJob {
    pub token: i64,
    pub attempts: i32,
    pub max_attempts: Option<i32>,
    /// Set by the worker's `started` frame; decides whether the attempt is charged on release.
    pub started: bool,
    /// Until when the master knows the lease to be valid (claim or last successful renew).
    pub lease_until: Instant,
    /// The pool's outage grace the claim gave this lease: the reap leaves the job that long past
    /// the lease's end, so its worker may run it as long (`rules::lease_deadlines`).
    pub grace: Duration,
    /// The rules the payload carries (Laravel's maxTries, timeout, backoff, …).
    pub hints: JobHints,
    /// When a started job must be finished; past it the worker is killed.
    pub deadline: Option<Instant>,
    /// When the worker said `started` (for the run time the autoscaler weighs queues by).
    pub started_at: Option<Instant>,
    /// Its queue (metrics are per queue).
    pub queue: String,
    /// It belongs to an ordered group: its ack is written on its own, never riding with a
    /// claim (`LeasedJob::grouped`).
    pub grouped: bool,
    /// How long it had been available when claimed; with the time since `claimed_at`, its
    /// wait when it starts.
    pub waited: Duration,
    /// When the master received it from the claim (not when it sent the claim: the statement's
    /// time is in `waited`).
    pub claimed_at: Instant,
    /// What its job frame costs in the worker's socket until the worker reads it
    /// (`rules::socket_room::charge`).
    pub frame_charge: usize,
}

impl HeldJob {
    /// Its grace, or none when no grace is in force (a master that would reap the lease at its
    /// end has a row: `drover_broker::Broker::grace_in_force`).
    pub fn grace_if(&self, in_force: bool) -> Duration {
        match in_force {
            true => self.grace,
            false => Duration::ZERO,
        }
    }

    /// A job just received from a claim, not started: leased until `lease_until`.
    pub fn claimed(
        token: i64,
        attempts: i32,
        max_attempts: Option<i32>,
        hints: JobHints,
        queue: String,
        lease_until: Instant,
    ) -> HeldJob {
        HeldJob {
            token,
            attempts,
            max_attempts,
            started: false,
            lease_until,
            grace: Duration::ZERO,
            hints,
            deadline: None,
            started_at: None,
            queue,
            grouped: false,
            waited: Duration::ZERO,
            claimed_at: Instant::now(),
            frame_charge: 0,
        }
    }
}
