//! What a lease is made of: the job it leases, the node that holds it, and the token that fences
//! it. These are the names every other part uses (claims, settles, renewals, the claim tokens);
//! the statements themselves live in [`crate::claim`], [`crate::settle`] and [`crate::expiry`].

use std::time::Duration;

/// A job's primary key in `drover.jobs`.
pub type JobId = i64;
/// A master's row in `drover.nodes`.
pub type NodeId = i64;

/// The identity of a lease: a job and the token it was claimed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The job leased.
    pub id: JobId,
    /// The fencing token of the claim that leased it: a settle or renewal with another token
    /// changes nothing.
    pub token: i64,
}

/// A job this node holds: what a worker needs to run it, and the token that proves the lease.
#[derive(Debug, Clone)]
pub struct LeasedJob {
    /// Its primary key in `drover.jobs`.
    pub id: JobId,
    /// The queue it was claimed from.
    pub queue: String,
    /// The job as the producer wrote it (Laravel's JSON payload).
    pub payload: String,
    /// Attempts so far, this one included.
    pub attempts: i32,
    /// How many attempts the producer allowed; `None` = no limit.
    pub max_attempts: Option<i32>,
    /// The fencing token of this lease.
    pub token: i64,
    /// Set when the job must not run again but be failed by the worker with this reason.
    pub failure: Option<String>,
    /// How long it had been available when it was claimed (the database's clock): the first
    /// part of its wait, which the master completes when a worker starts it.
    pub waited: Duration,
    /// It belongs to an ordered group or holds a concurrency slot: its ack moves the group on
    /// or admits the next job of its key, so it is settled on its own (it never rides with a
    /// claim).
    pub grouped: bool,
}

/// What a renewal found of the leases it was asked to renew (`queries/renew.sql`); a lease in
/// none of the three was lost (its token moved on: the job was taken back).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Renewed {
    /// Extended to the database's now plus the lease.
    pub renewed: Vec<JobId>,
    /// Completed inside the job's own transaction under this lease (migration 0015): not lost;
    /// its worker says `done`, or its exit's settle learns it.
    pub completed: Vec<JobId>,
    /// Still held, but its row was locked (the job's own transaction completing it, most
    /// likely): not renewed this time, and not lost.
    pub busy: Vec<JobId>,
}

impl Renewed {
    /// Every lease renewed; nothing completed or busy.
    pub fn all(renewed: Vec<JobId>) -> Renewed {
        Renewed {
            renewed,
            ..Renewed::default()
        }
    }
}

/// The settled jobs of `asked` that are not in `done` (the ids the statements changed): their
/// lease token was stale.
pub(crate) fn stale(asked: impl Iterator<Item = JobId>, mut done: Vec<JobId>) -> Vec<JobId> {
    done.sort_unstable();
    asked.filter(|id| done.binary_search(id).is_err()).collect()
}
