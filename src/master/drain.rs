//! Stopping by itself, as `queue:work` does: `--stop-when-empty` (every queue drained),
//! `--max-jobs` and `--max-time`, checked after every event; and the outcome the process exits
//! with (docs/laravel-compatibility.md, "Exit codes").
//!
//! "Empty" is decided by the database, not guessed from idleness: a pool counts as drained when a
//! claim that began after every settle of this master was written found nothing, and nothing was
//! settled since. So a job released for a retry without delay, or the next job of an ordered group
//! freed by an ack, is claimed before the master may stop; a delayed job due later is not ready,
//! and does not keep it alive (as under `queue:work --stop-when-empty`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use drover_supervisor::CircuitState;

use crate::master::pools::PoolId;

use super::Master;

/// When a master stops without being told. Default: never.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopWhen {
    /// Once no queue of any pool has a ready job and no worker of this master holds one.
    pub empty: bool,
    /// Once this many jobs have been run (done, released or failed), across every pool.
    pub max_jobs: Option<u64>,
    /// Once the master has served this long.
    pub max_time: Option<Duration>,
}

impl StopWhen {
    /// Whether any condition is set.
    pub fn any(&self) -> bool {
        self.empty || self.max_jobs.is_some() || self.max_time.is_some()
    }
}

/// How a master that ran ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// Every worker exited and every settle was written (exit status 0, whatever the jobs did:
    /// their failures are in `failed_jobs`).
    Clean,
    /// Settles could not be written before the master had to go (the database stayed away past
    /// [`super::SETTLE_WAIT_AT_EXIT`], or a signal said stop now): those jobs run again once their
    /// leases expire (exit status 1).
    SettlesUnwritten { count: usize },
    /// A master stopping by itself could not serve (every pool's circuit opened: no worker
    /// starts; or, under `--stop-when-empty`, every other pool is drained), so it stopped instead
    /// of waiting for ever (exit status 1).
    Failed { why: String },
}

/// Settles handed to the batcher and not yet written (or dropped): the master's side of the count
/// the batcher decrements.
#[derive(Debug, Clone, Default)]
pub(super) struct Unwritten(Arc<AtomicUsize>);

impl Unwritten {
    pub(super) fn sent(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(super) fn written(&self, n: usize) {
        // Never below zero, whatever a caller counts.
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.saturating_sub(n))
            });
    }

    pub(super) fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl Master {
    /// After every event: stop gracefully if a `StopWhen` condition holds.
    pub(super) fn check_stop(&mut self) {
        if !self.life.running() {
            return;
        }
        let stop = self.config.stop_when;
        let counted = self.upkeep.totals.counts();
        let ran = counted.done + counted.released + counted.failed;
        let why = if let Some(max) = stop.max_jobs.filter(|&max| ran >= max) {
            format!("{max} job(s) run (--max-jobs)")
        } else if let Some(max) = stop
            .max_time
            .filter(|&max| self.life.started.elapsed() >= max)
        {
            format!("served for {max:?} (--max-time)")
        } else if stop.empty && self.drained() {
            "every queue is empty (--stop-when-empty)".to_string()
        } else if let Some(pool) = self.no_pool_can_serve() {
            let why = format!("no worker of pool {pool} can start (its circuit is open after repeated failed starts; see the log above), and this master stops by itself rather than wait");
            tracing::error!("{why}");
            self.life.failed = Some(why.clone());
            why
        } else {
            return;
        };
        self.begin_drain(&why, None);
    }

    /// With a stop condition set, a master whose serving pools all have their circuit open can
    /// run nothing until someone fixes the application; under `--stop-when-empty`, neither can
    /// one whose other pools are drained. The first such pool, to name.
    fn no_pool_can_serve(&self) -> Option<String> {
        let stop = self.config.stop_when;
        if !stop.any() {
            return None;
        }
        let mut first = None;
        for id in self.pools.ids().filter(|&id| !self.pools[id].retired) {
            let p = &self.pools[id];
            if matches!(p.pool().circuit(), CircuitState::Open { .. }) {
                first.get_or_insert_with(|| p.pool().name().to_string());
            } else if !(stop.empty && self.pool_drained(id)) {
                return None;
            }
        }
        first
    }

    /// When `--max-time` runs out, for the loop's clock.
    pub(super) fn stop_at(&self) -> Option<tokio::time::Instant> {
        let max = self.config.stop_when.max_time?;
        tokio::time::Instant::from_std(self.life.started).checked_add(max)
    }

    /// No settle waits, and every serving pool is drained.
    fn drained(&self) -> bool {
        self.pools
            .ids()
            .filter(|&id| !self.pools[id].retired)
            .all(|id| self.pool_drained(id))
    }

    /// No settle waits, and the pool's last claim, begun after the last settle was written, found
    /// nothing and gave its workers nothing since.
    fn pool_drained(&self, id: PoolId) -> bool {
        self.settler.unwritten() == 0
            && !self.claimer.claiming(id)
            && self.pools[id].assignments.held() == 0
            && self.claimer.found_empty(id) == Some(self.settler.epoch())
    }
}
