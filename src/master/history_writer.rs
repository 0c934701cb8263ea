//! The completed-job history's writer, inside the recorder: completed jobs queued in memory
//! (bounded by bytes, the oldest dropped first while the database is away) and written 500 per
//! statement by a task of their own, so the recorder keeps draining its observations while a
//! write waits on a slow database.

use std::collections::VecDeque;
use std::sync::Arc;

use drover_broker::HistoryRow;

use crate::store::Records;

/// Completed jobs per history statement.
pub(super) const HISTORY_PER_WRITE: usize = 500;
/// The most the queued rows may hold (payloads and all) while writes fail or lag.
pub(super) const MAX_HISTORY_BYTES: usize = 16 << 20;

/// A row's weight against [`MAX_HISTORY_BYTES`].
fn weight(row: &HistoryRow) -> usize {
    row.payload.len() + row.queue.len() + row.class.len() + 128
}

/// Queued rows and the write in flight.
#[derive(Default)]
pub(super) struct HistoryWriter {
    queue: VecDeque<HistoryRow>,
    /// What `queue` weighs.
    bytes: usize,
    /// The write in flight; it gives its rows back if they could not be written.
    writing: Option<tokio::task::JoinHandle<Result<(), Vec<HistoryRow>>>>,
    /// Writes are failing (said once per outage).
    failing: bool,
    /// Rows dropped for room in this outage (said once).
    dropped: u64,
}

impl HistoryWriter {
    /// Queues a completed job; starts a write when a statement's worth is waiting.
    pub(super) fn push(&mut self, row: HistoryRow, store: &Arc<dyn Records>) {
        self.bytes += weight(&row);
        self.queue.push_back(row);
        while self.bytes > MAX_HISTORY_BYTES {
            let Some(old) = self.queue.pop_front() else {
                break;
            };
            self.bytes -= weight(&old);
            self.dropped += 1;
            if self.dropped == 1 {
                tracing::warn!("the completed-job history is {} MiB behind; dropping the oldest rows until the database keeps up", MAX_HISTORY_BYTES >> 20);
            }
        }
        if self.queue.len() >= HISTORY_PER_WRITE && !self.failing {
            self.start(store);
        }
    }

    /// Starts a write of up to a statement's worth, unless one is in flight.
    pub(super) fn start(&mut self, store: &Arc<dyn Records>) {
        if self.writing.is_some() || self.queue.is_empty() {
            return;
        }
        let n = self.queue.len().min(HISTORY_PER_WRITE);
        let batch: Vec<HistoryRow> = self.queue.drain(..n).collect();
        self.bytes -= batch.iter().map(weight).sum::<usize>();
        let store = store.clone();
        self.writing = Some(tokio::spawn(async move {
            match store.record_history(&batch).await {
                Ok(()) => Ok(()),
                Err(e) => {
                    tracing::debug!("writing the completed-job history: {e}");
                    Err(batch)
                }
            }
        }));
    }

    /// Waits for the write in flight (pending forever when there is none: for `select!`).
    pub(super) async fn written(&mut self) -> Result<(), Vec<HistoryRow>> {
        match self.writing.as_mut() {
            Some(task) => {
                let result = task.await.unwrap_or(Ok(()));
                self.writing = None;
                result
            }
            None => std::future::pending().await,
        }
    }

    /// After a write: rows that failed go back to the front; the next write starts if due.
    pub(super) fn settle(&mut self, result: Result<(), Vec<HistoryRow>>, store: &Arc<dyn Records>) {
        match result {
            Ok(()) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!(
                        dropped = self.dropped,
                        "completed jobs are written to the history again"
                    );
                }
                self.dropped = 0;
                if self.queue.len() >= HISTORY_PER_WRITE {
                    self.start(store);
                }
            }
            Err(batch) => {
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!("cannot write completed jobs to the history; keeping up to {} MiB of them until the database answers", MAX_HISTORY_BYTES >> 20);
                }
                for row in batch.into_iter().rev() {
                    self.bytes += weight(&row);
                    self.queue.push_front(row);
                }
            }
        }
    }

    /// At exit: the write in flight, then what is queued, each statement tried once.
    pub(super) async fn finish(&mut self, store: &Arc<dyn Records>) {
        loop {
            if self.writing.is_none() {
                if self.queue.is_empty() {
                    return;
                }
                self.start(store);
            }
            if self.written().await.is_err() {
                return;
            }
        }
    }
}
