//! The completer: settles (ack, release, fail) go to one batching task that writes them in rounds
//! of statements, and never drops one while the database is away.

use super::*;

impl Master {
    pub(super) fn settle(&mut self, settle: Settle) {
        match &settle {
            Settle::Ack(_) => self.tally.done += 1,
            Settle::Release { charged: true, .. } => self.tally.released += 1,
            Settle::Release { charged: false, .. } => self.tally.returned_unstarted += 1,
            Settle::FailLater { .. } | Settle::Fail { .. } => self.tally.failed += 1,
        }
        let _ = self.settles.send(settle);
    }
}

/// The settle batcher: takes every settle waiting, writes them in one round of statements, and
/// retries when the database is briefly away. Ends when the master drops its sender, after the
/// last batch is written. Released jobs are claimable once their batch commits, and no NOTIFY
/// announces them, so the batcher wakes the claim loop itself.
pub(super) async fn settle_batches(
    broker: Arc<Broker>,
    mut rx: mpsc::UnboundedReceiver<Settle>,
    max: usize,
    wake: Arc<Notify>,
) {
    let mut batch = Vec::with_capacity(max);
    while rx.recv_many(&mut batch, max).await > 0 {
        let releases = batch
            .iter()
            .any(|s| matches!(s, Settle::Release { .. } | Settle::FailLater { .. }));
        let mut delay = Duration::from_millis(100);
        let give_up = Instant::now() + broker.lease_duration();
        loop {
            let attempt =
                tokio::time::timeout(broker.lease_duration() / 2, broker.settle(&batch)).await;
            let attempt = attempt.unwrap_or_else(|_| {
                broker.suspect_connection();
                Err(drover_broker::BrokerError::TimedOut {
                    about: "settling jobs",
                })
            });
            match attempt {
                Ok(SettleOutcome { stale, .. }) => {
                    if !stale.is_empty() {
                        tracing::warn!(jobs = ?stale, "settle changed nothing for these jobs: their lease token is stale (the lease expired and the job was taken back)");
                    }
                    break;
                }
                Err(e) if !e.is_connection_lost() => {
                    // Something in the batch itself is wrong: settle one by one so the rest land.
                    tracing::error!(
                        "{e}; settling the {} jobs of this batch one by one",
                        batch.len()
                    );
                    for s in &batch {
                        if let Err(e) = broker.settle(std::slice::from_ref(s)).await {
                            tracing::error!(job = s.lease().id, "{e}; this settle is dropped: the job's lease will expire and it will run again");
                        }
                    }
                    break;
                }
                Err(e) if Instant::now() < give_up => {
                    tracing::warn!("{e}; retrying {} settles in {delay:?}", batch.len());
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    tracing::error!("{e}; giving up on {} settles: their leases will expire and the jobs run again", batch.len());
                    break;
                }
            }
        }
        if releases {
            wake.notify_one();
        }
        batch.clear();
    }
}
