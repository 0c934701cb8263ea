//! A pool's size set from the console (`drover.pool_sizes`): read on NOTIFY drover_console and
//! at every reap pass, decided by `rules::pool_size`, applied with the pool's own scaling, and
//! answered in the row; forgotten when the master re-reads its configuration.

use drover_broker::{BrokerError, PoolSize};

use super::events::Internal;
use super::Master;
use crate::rules::pool_size::{decide, outcome, Decision, PoolNow};

impl Master {
    /// Reads the pool sizes the console set for this master.
    pub(super) fn read_pool_sizes(&mut self) {
        let store = self.store.clone();
        let tx = self.inbox.internal_tx.clone();
        tokio::spawn(async move {
            let found = store.pool_sizes().await;
            let _ = tx.send(Internal::PoolSizes(found));
        });
    }

    /// The sizes read: each pool is scaled, left, or the size refused, and the row says which.
    pub(super) fn on_pool_sizes(&mut self, found: Result<Vec<PoolSize>, BrokerError>) {
        let sizes = match found {
            Ok(sizes) => sizes,
            Err(e) => {
                tracing::warn!(database = %self.store.address(), "{e}; the pool sizes set from the console are read again at the next reap pass");
                return;
            }
        };
        if sizes.is_empty() || !self.life.running() {
            return;
        }
        let (mut pools, mut processes, mut outcomes) = (Vec::new(), Vec::new(), Vec::new());
        for size in sizes {
            // A pool a reload retired is gone, whatever its slot still holds.
            let index = self
                .pools
                .named(&size.pool)
                .filter(|i| !self.pools[*i].retired);
            let now = index.map(|i| PoolNow {
                target: self.pools[i].pool().target(),
                autoscaled: self.reconfig.autoscaling.of_member(&size.pool).is_some(),
            });
            let decision = decide(&size.pool, size.processes, now);
            match (&decision, index) {
                (Decision::Scale(n), Some(i)) => {
                    tracing::warn!(pool = %size.pool, processes = n, by = %size.by, "pool {} scaled to {n} processes from the console by {} (until the next reload)", size.pool, size.by);
                    self.pools[i].scale_to(*n);
                    self.claimer.want(i);
                }
                (Decision::Refuse(why), _) => {
                    tracing::warn!(pool = %size.pool, by = %size.by, "a pool size set from the console was not applied: {why}");
                }
                _ => {}
            }
            pools.push(size.pool);
            processes.push(size.processes);
            outcomes.push(outcome(&decision));
        }
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store
                .pool_sizes_applied(&pools, &processes, &outcomes)
                .await
            {
                tracing::warn!(
                    "{e}; what became of the pool sizes {pools:?} is not recorded (it was done)"
                );
            }
        });
    }

    /// The configuration was re-read: sizes set from the console are over.
    pub(super) fn forget_pool_sizes(&mut self) {
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.forget_pool_sizes().await {
                tracing::warn!("{e}; the pool sizes set from the console for this master stay recorded, and apply again at the next reading");
            }
        });
    }
}
