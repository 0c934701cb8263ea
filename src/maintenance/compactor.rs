//! The compactor: once the jobs that went through are all settled, gives back the space a drained
//! backlog left in `drover.jobs` and the rooms where jobs wait before it (see
//! `drover_broker::compact`).

use std::sync::Arc;

use drover_broker::{BrokerError, Compaction, TableCompaction};

use crate::store::Maintenance;

#[derive(Debug, Default)]
pub struct Compactor {
    /// Jobs went through since `drover.jobs` was last found small: once this master holds
    /// nothing, the next pass checks whether the drained table should be compacted.
    due: bool,
    /// A pass is running (on its own connection).
    running: bool,
}

impl Compactor {
    /// Jobs were claimed: the table may need compacting once they are gone.
    pub fn jobs_went_through(&mut self) {
        self.due = true;
    }

    /// Starts a pass if one is due and none runs, and this master holds no job (`holds_none`);
    /// `done` gets its result.
    pub fn maybe_start(
        &mut self,
        holds_none: bool,
        store: Arc<dyn Maintenance>,
        done: impl FnOnce(Result<Vec<TableCompaction>, BrokerError>) + Send + 'static,
    ) {
        if !self.due || self.running || !holds_none {
            return;
        }
        self.running = true;
        tokio::spawn(async move { done(store.compact_when_empty().await) });
    }

    /// A pass ended; `address` names the database in a warning.
    pub fn finished(&mut self, result: Result<Vec<TableCompaction>, BrokerError>, address: &str) {
        self.running = false;
        match result {
            Ok(tables) => {
                // Done unless a table was busy: that one is tried again at the next pass.
                self.due = false;
                for TableCompaction { table, outcome } in tables {
                    match outcome {
                        Compaction::Compacted { before, after } => tracing::info!(
                            table,
                            before_kib = before / 1024,
                            after_kib = after / 1024,
                            "the backlog is drained: vacuumed the table and rebuilt its indexes"
                        ),
                        Compaction::Small { .. } | Compaction::NotEmpty => {}
                        Compaction::Busy => {
                            self.due = true;
                            tracing::debug!(table, "busy; compacting it at the next pass")
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(database = %address, "compacting the drained tables: {e}")
            }
        }
    }
}
