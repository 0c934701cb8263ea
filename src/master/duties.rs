//! The reap tick's duties, carried out by `crate::maintenance` (each part keeps its own state),
//! and what comes back of them.

use std::sync::Arc;
use std::time::Instant;

use super::{Internal, Master, Phase};

impl Master {
    /// Every half lease: heartbeat and reap, then, while serving, compaction, retention and the
    /// long-wait check.
    pub(super) fn on_reap_tick(&mut self) {
        let tx = self.internal_tx.clone();
        self.duties.reaper.start(
            self.broker.clone(),
            &self.settling.held,
            move |registered_again| {
                let _ = tx.send(Internal::Reaped { registered_again });
            },
        );
        if self.phase != Phase::Running {
            return;
        }
        let holds_none = self.pools.iter().all(|p| p.assignments.held() == 0);
        let tx = self.internal_tx.clone();
        self.duties
            .compactor
            .maybe_start(holds_none, self.broker.clone(), move |result| {
                let _ = tx.send(Internal::Compacted(result));
            });
        let maintenance: Arc<dyn crate::store::Maintenance> = self.broker.clone();
        self.duties.retention.tick(
            Instant::now(),
            self.reloading.current.failed_retention_days,
            &maintenance,
        );
        self.duties.long_waits.tick(
            &self.reloading.current.long_waits,
            self.reloading.source.cwd.clone(),
            self.reloading.context.run_as.clone(),
            maintenance,
        );
    }

    /// A reap pass ended: jobs may have come back. If the heartbeat had to register this
    /// master's row again, the pauses it confirmed went with the old one: confirmed anew.
    pub(super) fn on_reaped(&mut self, registered_again: bool) {
        self.duties.reaper.finished();
        self.want_claims();
        // A fleet restart's request whose NOTIFY was missed (the LISTEN connection was down), or
        // whose answer could not be written: looked at every reap pass.
        self.read_fleet_reload();
        if registered_again {
            // A new row: its fleet restart requests start again from none.
            self.fleet_reload = Default::default();
            self.queue_pauses.row_lost();
            self.maybe_confirm_pauses();
        }
    }

    pub(super) fn on_compacted(
        &mut self,
        result: Result<drover_broker::Compaction, drover_broker::BrokerError>,
    ) {
        let address = self.broker.address();
        self.duties.compactor.finished(result, &address);
    }
}
