//! Queues paused by name, for every master of the database: Laravel's `queue:pause
//! connection:queue`, `Queue::pause()` and `Queue::pauseFor()` write `drover.paused_queues` (the
//! package does, on QueuePaused / QueueResumed); every master reads it each second and claims
//! nothing from a paused queue. Running and prefetched jobs finish; a pause with a TTL ends by
//! itself, by the database's clock. The master-wide and per-pool pauses (`drover pause`) are
//! separate and stay as they are.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::master::pools::PoolId;

use super::{Internal, Master};

/// How often the table is read: a pause or resume takes effect within this (plus a claim).
const READ_EVERY: Duration = Duration::from_secs(1);

/// What this master knows of the paused queues.
#[derive(Debug, Default)]
pub(super) struct QueuePauses {
    /// Paused queue → when its pause ends (`None`: until resumed), by this master's clock.
    paused: BTreeMap<String, Option<Instant>>,
    /// A read is running.
    reading: bool,
    /// When the last read started.
    last_read: Option<Instant>,
    /// The first read has answered (or failed): until then nothing is claimed, so a queue paused
    /// before this master started is not claimed from in its first second.
    answered: bool,
}

impl QueuePauses {
    /// Whether claims may begin: the table was read once (or could not be: then claims go on
    /// with what is known, as they would after an outage).
    pub(super) fn known(&self) -> bool {
        self.answered
    }

    pub(super) fn is_paused(&self, queue: &str) -> bool {
        self.paused.contains_key(queue)
    }

    /// For status: each paused queue and the seconds its pause has left (`null`: until resumed).
    pub(super) fn status(&self) -> std::collections::BTreeMap<String, Option<f64>> {
        let now = Instant::now();
        self.paused
            .iter()
            .map(|(queue, until)| {
                let left = until.map(|u| u.saturating_duration_since(now).as_secs_f64());
                (queue.clone(), left)
            })
            .collect()
    }
}

impl Master {
    /// Every timeouts tick: read the table if a second has passed and no read is running.
    pub(super) fn maybe_read_queue_pauses(&mut self, now: Instant) {
        let pauses = &mut self.queue_pauses;
        if pauses.reading || pauses.last_read.is_some_and(|at| now - at < READ_EVERY) {
            return;
        }
        pauses.reading = true;
        pauses.last_read = Some(now);
        let broker = self.broker.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let result = broker.paused_queues().await;
            let _ = tx.send(Internal::QueuePauses(result));
        });
    }

    /// The table was read: log what changed; resumed queues may have work at once.
    pub(super) fn on_queue_pauses(
        &mut self,
        result: Result<Vec<(String, Option<Duration>)>, drover_broker::BrokerError>,
    ) {
        self.queue_pauses.reading = false;
        if !self.queue_pauses.answered {
            self.queue_pauses.answered = true;
            self.want_claims();
        }
        let rows = match result {
            Ok(rows) => rows,
            Err(e) => {
                // Keep what was known: a queue paused stays paused while the database is away
                // (nothing can be claimed then anyway).
                tracing::warn!(database = %self.broker.address(), "{e}");
                return;
            }
        };
        let now = Instant::now();
        let paused: BTreeMap<String, Option<Instant>> = rows
            .into_iter()
            .map(|(queue, left)| (queue, left.and_then(|l| now.checked_add(l))))
            .collect();
        let mut resumed = false;
        for queue in self.queue_pauses.paused.keys() {
            if !paused.contains_key(queue) {
                tracing::info!(queue = %queue, "queue resumed: claiming from it again");
                resumed = true;
            }
        }
        for (queue, until) in &paused {
            if !self.queue_pauses.paused.contains_key(queue) {
                match until {
                    Some(until) => {
                        tracing::info!(queue = %queue, for_secs = until.saturating_duration_since(now).as_secs(), "queue paused: nothing more is claimed from it (running jobs finish)")
                    }
                    None => {
                        tracing::info!(queue = %queue, "queue paused until resumed: nothing more is claimed from it (running jobs finish)")
                    }
                }
            }
        }
        self.queue_pauses.paused = paused;
        if resumed {
            self.want_claims();
        }
    }

    /// The queues of a pool that may be claimed from now, in its priority order.
    pub(super) fn claimable_queues(&self, index: PoolId) -> Vec<String> {
        self.pools[index]
            .queues
            .iter()
            .filter(|q| !self.queue_pauses.is_paused(q))
            .cloned()
            .collect()
    }
}
