//! A pool as the master runs it ([`PoolRuntime`]), and the master's pools by [`PoolId`].

use std::time::Duration;

use drover_supervisor::{Pool, WorkerId};

use crate::rules::assignments::Assignments;
use crate::rules::job_policy::PoolPolicy;

/// Names one of the master's pools. A pool keeps its id for the master's life: pools are only
/// ever added (a reload that drops a pool retires it, and its workers finish), so an id carried
/// by a task in flight — a claim, a count — always names the pool it was started for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId(usize);

/// The master's pools, in the order they were started.
#[derive(Default)]
pub struct Pools {
    /// Indexed by `PoolId`; never shrinks (see [`PoolId`]).
    slots: Vec<PoolRuntime>,
}

impl Pools {
    pub fn new(pools: Vec<PoolRuntime>) -> Pools {
        Pools { slots: pools }
    }

    /// Adds a pool started by a reload.
    pub fn add(&mut self, pool: PoolRuntime) -> PoolId {
        self.slots.push(pool);
        PoolId(self.slots.len() - 1)
    }

    pub fn ids(&self) -> impl Iterator<Item = PoolId> + use<> {
        (0..self.slots.len()).map(PoolId)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, PoolRuntime> {
        self.slots.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, PoolRuntime> {
        self.slots.iter_mut()
    }

    /// The pool of this (supervisor) name: a configured pool, or a member `pool:queue`.
    pub fn named(&self, name: &str) -> Option<PoolId> {
        self.slots
            .iter()
            .position(|p| p.pool.name() == name)
            .map(PoolId)
    }

    /// The pool a worker belongs to.
    pub fn of_worker(&self, worker: WorkerId) -> Option<PoolId> {
        self.slots
            .iter()
            .position(|p| p.pool.owns(worker))
            .map(PoolId)
    }
}

impl std::ops::Index<PoolId> for Pools {
    type Output = PoolRuntime;
    fn index(&self, id: PoolId) -> &PoolRuntime {
        &self.slots[id.0]
    }
}

impl std::ops::IndexMut<PoolId> for Pools {
    fn index_mut(&mut self, id: PoolId) -> &mut PoolRuntime {
        &mut self.slots[id.0]
    }
}

impl<'a> IntoIterator for &'a Pools {
    type Item = &'a PoolRuntime;
    type IntoIter = std::slice::Iter<'a, PoolRuntime>;
    fn into_iter(self) -> Self::IntoIter {
        self.slots.iter()
    }
}

impl<'a> IntoIterator for &'a mut Pools {
    type Item = &'a mut PoolRuntime;
    type IntoIter = std::slice::IterMut<'a, PoolRuntime>;
    fn into_iter(self) -> Self::IntoIter {
        self.slots.iter_mut()
    }
}

/// A pool of workers and everything the master keeps about it.
pub struct PoolRuntime {
    pub pool: Pool,
    /// Queues it serves, highest priority first.
    pub queues: Vec<String>,
    /// Its defaults for jobs that do not carry their own rules.
    pub policy: PoolPolicy,
    /// Who holds what.
    pub(in crate::master) assignments: Assignments,
    /// A claim for this pool is running.
    pub(in crate::master) claiming: bool,
    /// Something happened that may let a claim find jobs.
    pub(in crate::master) claim_wanted: bool,
    /// A worker finished a job, which may let a claim find jobs that no NOTIFY announces (a
    /// release or a group's move by another master): claim by then, unless a claim starts
    /// sooner and takes the acks waiting (`riding_acks`).
    pub(in crate::master) claim_after: Option<tokio::time::Instant>,
    /// When the next delayed job of its queues becomes due.
    pub(in crate::master) next_due: Option<tokio::time::Instant>,
    /// KiB of PSS above which a worker is recycled (finishes its job, is replaced).
    pub(in crate::master) memory_limit_kib: Option<u64>,
    /// Removed from the configuration by a reload: its workers are retiring, it claims nothing.
    pub(in crate::master) retired: bool,
    /// Paused by an operator for this pool alone (`drover pause --pool`); the master-wide pause
    /// is `Master::paused`. A pool claims and hands out only when neither is set.
    pub(in crate::master) paused: bool,
    /// Workers that exited unasked (crashed, killed) and were replaced, since start.
    pub(in crate::master) restarts: u64,
    /// Average run time of its jobs (exponentially weighted), for the autoscaler.
    pub(in crate::master) runtime: Option<Duration>,
    /// The running claim began after every settle was written: the settle epoch then (see
    /// `drain`).
    pub(in crate::master) claim_epoch: Option<u64>,
    /// The settle epoch at which a claim of this pool last found nothing (`--stop-when-empty`).
    pub(in crate::master) found_empty: Option<u64>,
}

impl PoolRuntime {
    pub fn new(pool: Pool, queues: Vec<String>, policy: PoolPolicy) -> PoolRuntime {
        PoolRuntime {
            pool,
            queues,
            policy,
            assignments: Assignments::default(),
            claiming: false,
            claim_wanted: true,
            claim_after: None,
            next_due: None,
            memory_limit_kib: None,
            retired: false,
            paused: false,
            restarts: 0,
            runtime: None,
            claim_epoch: None,
            found_empty: None,
        }
    }

    /// Recycle workers above `mib` MiB of PSS (0 = no limit).
    pub fn with_memory_limit(mut self, mib: u64) -> PoolRuntime {
        self.set_memory_limit(mib);
        self
    }

    pub(in crate::master) fn set_memory_limit(&mut self, mib: u64) {
        self.memory_limit_kib = (mib > 0).then_some(mib * 1024);
    }
}
