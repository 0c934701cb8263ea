//! The loop's side of queues paused by name for every master (`crate::rules::queue_pauses`
//! decides; docs/laravel-compatibility.md, "Pausing a queue"): reading `drover.paused_queues` the
//! moment a pause or a resume is signalled (`NOTIFY drover_pauses`; a poll every
//! `poll_interval` besides, for a notification lost with its connection), telling the workers
//! that hold a newly paused queue's jobs to give back those they have not started (`withdraw`),
//! handing back instead of out what a claim leases of a paused queue, claiming again from a
//! resumed queue, ending a `pauseFor` at its time, and confirming in this master's node row the
//! pauses it holds, which is what `queue:pause` waits for. The master-wide and per-pool pauses
//! (`drover pause`) are separate and stay as they are.

use drover_broker::{BrokerError, PausedQueue};
use drover_supervisor::ToWorker;
use tokio::time::Instant;

use super::events::Internal;
use super::Master;

impl Master {
    /// A pause, a change of one or a resume was signalled: read the table now.
    pub(super) fn on_pauses_changed(&mut self) {
        self.read_queue_pauses(Instant::now());
    }

    /// The fallback poll: read the table if none was read for a poll interval.
    pub(super) fn maybe_read_queue_pauses(&mut self, now: Instant) {
        if self
            .claimer
            .pauses()
            .read_due(now, self.config.poll_interval)
        {
            self.read_queue_pauses(now);
        }
    }

    fn read_queue_pauses(&mut self, now: Instant) {
        if !self.claimer.pauses_mut().start_read(now) {
            return;
        }
        let store = self.store.clone();
        let tx = self.inbox.internal_tx.clone();
        tokio::spawn(async move {
            let result = store.paused_queues().await;
            let _ = tx.send(Internal::QueuePauses(result));
        });
    }

    /// The table was read: what changed is carried out, and what this master now holds is
    /// confirmed once it may be.
    pub(super) fn on_queue_pauses(&mut self, result: Result<Vec<PausedQueue>, BrokerError>) {
        let first = !self.claimer.pauses().known();
        let now = Instant::now();
        let again = match result {
            Ok(rows) => {
                let sent = self.claimer.sent();
                let (changes, again) = self.claimer.pauses_mut().on_read(rows, now, sent);
                for queue in &changes.paused {
                    tracing::info!(queue = %queue, "queue paused: its workers give back the jobs of it they have not started, and nothing more of it is claimed (running jobs finish)");
                    self.withdraw(queue);
                }
                for queue in &changes.resumed {
                    tracing::info!(queue = %queue, "queue resumed: claiming from it again");
                }
                if !changes.resumed.is_empty() {
                    self.claimer.want_all();
                }
                again
            }
            Err(e) => {
                // What was known stays; the database refuses a paused queue's jobs to any claim.
                tracing::warn!(database = %self.store.address(), "{e}");
                self.claimer.pauses_mut().on_read_failed()
            }
        };
        if first {
            self.claimer.want_all();
        }
        if again {
            self.read_queue_pauses(now);
        }
        self.maybe_confirm_pauses();
    }

    /// Every worker holding jobs of `queue` it has not started is told to give them back; the
    /// pause is held once each of those frames is written.
    fn withdraw(&mut self, queue: &str) {
        let mut written = Vec::new();
        // Retired pools too: their workers may still hold jobs while they finish.
        for p in &mut self.pools {
            for worker in p.assignments.holding_unstarted(queue) {
                let frame = ToWorker::Withdraw {
                    queue: queue.to_string(),
                };
                written.push(p.send_written(worker, frame));
            }
        }
        if written.is_empty() {
            return;
        }
        let Some(round) = self.claimer.pauses_mut().withdrawing(queue) else {
            return;
        };
        let tx = self.inbox.internal_tx.clone();
        let queue = queue.to_string();
        tokio::spawn(async move {
            // Each frame written, or its worker gone (which starts nothing more either).
            for frame in written {
                let _ = frame.await;
            }
            let _ = tx.send(Internal::Withdrawn { queue, round });
        });
    }

    /// A round of `withdraw` frames is written.
    pub(super) fn on_withdrawn(&mut self, queue: &str, round: u64) {
        self.claimer.pauses_mut().withdrawn(queue, round);
        self.maybe_confirm_pauses();
    }

    /// Confirms the pauses this master holds, when there is something new to confirm and no
    /// claim that could still hand out their jobs is running (`rules::queue_pauses` decides).
    pub(super) fn maybe_confirm_pauses(&mut self) {
        let oldest_claim = self.claimer.oldest_running();
        let Some(versions) = self
            .claimer
            .pauses_mut()
            .confirmation_due(oldest_claim, Instant::now())
        else {
            return;
        };
        let store = self.store.clone();
        let tx = self.inbox.internal_tx.clone();
        tokio::spawn(async move {
            let result = store.confirm_pauses(&versions).await;
            let _ = tx.send(Internal::PausesConfirmed { versions, result });
        });
    }

    pub(super) fn on_pauses_confirmed(
        &mut self,
        versions: Vec<i64>,
        result: Result<(), BrokerError>,
    ) {
        match &result {
            Ok(()) => tracing::debug!(?versions, "confirmed the queue pauses this master holds"),
            Err(e) => tracing::warn!(database = %self.store.address(), "{e}; trying again in 1s"),
        }
        let ok = result.is_ok();
        self.claimer
            .pauses_mut()
            .confirmed(versions, ok, Instant::now());
        if ok {
            // A pause that became held while this was written is confirmed next, not at the
            // next tick. (A failure is tried again a second later, from the tick.)
            self.maybe_confirm_pauses();
        }
    }

    /// Pauses with a TTL (`pauseFor`) whose time came end here too: claim from their queues.
    pub(super) fn expire_queue_pauses(&mut self, now: Instant) {
        let over = self.claimer.pauses_mut().expire(now);
        for queue in &over {
            tracing::info!(queue = %queue, "queue's pause ended by itself: claiming from it again");
        }
        if !over.is_empty() {
            self.claimer.want_all();
        }
    }
}
