//! The reap tick's duties, carried out by `crate::maintenance` (each part keeps its own state),
//! and what comes back of them.

use std::sync::Arc;
use std::time::Instant;

use crate::lifecycle::tally::TallyReader;
use crate::lifecycle::Event as LifecycleEvent;

use super::events::Internal;
use super::Master;

/// The master's upkeep beside the jobs' way: the duties of the reap tick, admission passes, and
/// what status and metrics read.
pub(super) struct Upkeep {
    /// Reaping, compaction, retention and the long-wait check (`crate::maintenance`).
    pub duties: crate::maintenance::Duties,
    /// Admission passes for jobs dispatched under limits (`admission`): a pass on each wake-up
    /// and each reap tick.
    pub admitter: super::admission::Admitter,
    /// The totals since start, as the lifecycle's tally counted them (`crate::lifecycle::tally`).
    pub totals: TallyReader,
    /// The scheduler's tasks and their history, for status and metrics
    /// (`crate::scheduling::status`); `None` where no scheduler runs (unit tests).
    pub schedule: Option<crate::scheduling::status::ScheduleView>,
    /// The status write in flight, if any (one at a time).
    pub status_write: Option<tokio::task::JoinHandle<()>>,
    /// The latest status written to the node row said the database was unreachable: it is
    /// written again as soon as the database is reachable (`Master::republish_once_reachable`).
    pub row_says_unreachable: bool,
    /// The purge of rate windows and fair keys in flight, if any (one at a time: a purge of a
    /// million keys may outlast a short lease's reap tick).
    pub purge: Option<tokio::task::JoinHandle<()>>,
}

impl Upkeep {
    pub(super) fn new(admitter: super::admission::Admitter, totals: TallyReader) -> Upkeep {
        Upkeep {
            duties: crate::maintenance::Duties::new(Instant::now()),
            admitter,
            totals,
            schedule: None,
            status_write: None,
            row_says_unreachable: false,
            purge: None,
        }
    }
}

impl Master {
    /// Every half lease: heartbeat and reap, then, while serving, compaction, retention, the
    /// held-snapshot check and the long-wait check.
    pub(super) fn on_reap_tick(&mut self) {
        // An admission pass too: a note whose NOTIFY was missed waits no longer than this; and
        // the rate windows and fair keys that mean nothing any more are forgotten.
        self.upkeep.admitter.on_wake();
        if self.upkeep.purge.as_ref().is_none_or(|p| p.is_finished()) {
            let store = self.store.clone();
            self.upkeep.purge = Some(tokio::spawn(async move {
                if let Err(e) = store.purge_limits().await {
                    tracing::debug!("forgetting rate windows that are over: {e}");
                }
            }));
        }
        let tx = self.inbox.internal_tx.clone();
        let database = self.life.database.clone();
        self.upkeep.duties.reaper.start(
            self.store.clone(),
            self.settler.held(),
            move |heartbeat| database.saw(&heartbeat.result, heartbeat.sent),
            move |registered_again, reaped| {
                let _ = tx.send(Internal::Reaped {
                    registered_again,
                    reaped,
                });
            },
        );
        if !self.life.running() {
            return;
        }
        let holds_none = self.pools.iter().all(|p| p.assignments.held() == 0);
        let tx = self.inbox.internal_tx.clone();
        self.upkeep
            .duties
            .compactor
            .maybe_start(holds_none, self.store.clone(), move |result| {
                let _ = tx.send(Internal::Compacted(result));
            });
        let maintenance: Arc<dyn crate::store::Maintenance> = self.store.clone();
        let reloading = &self.reconfig.reloading;
        self.upkeep.duties.retention.tick(
            Instant::now(),
            reloading.current.failed_retention_days,
            &maintenance,
        );
        self.upkeep
            .duties
            .horizon
            .tick(reloading.current.snapshot_alert(), maintenance.clone());
        self.upkeep.duties.long_waits.tick(
            &reloading.current.long_waits,
            reloading.source.cwd.clone(),
            maintenance,
        );
    }

    /// A reap pass ended: jobs may have come back. If the heartbeat had to register this
    /// master's row again, the pauses it confirmed went with the old one: confirmed anew.
    pub(super) fn on_reaped(&mut self, registered_again: bool, reaped: u64) {
        self.upkeep.duties.reaper.finished();
        if reaped > 0 {
            self.lifecycle.emit(LifecycleEvent::Reaped { jobs: reaped });
        }
        self.claimer.want_all();
        // A fleet restart's request whose NOTIFY was missed (the LISTEN connection was down), or
        // whose answer could not be written: looked at every reap pass.
        self.read_fleet_reload();
        // A stop request whose NOTIFY was missed, or whose job had not started at the last one;
        // a pool size whose NOTIFY was missed.
        self.read_stop_requests();
        self.read_pool_sizes();
        if registered_again {
            // A new row: its fleet restart requests start again from none.
            self.reconfig.fleet_reload = Default::default();
            self.claimer.pauses_mut().row_lost();
            self.maybe_confirm_pauses();
        }
    }

    pub(super) fn on_compacted(
        &mut self,
        result: Result<Vec<drover_broker::TableCompaction>, drover_broker::BrokerError>,
    ) {
        let address = self.store.address();
        self.upkeep.duties.compactor.finished(result, &address);
    }
}
