//! The completer: settles (ack, release, fail) go to one batching task that writes them in rounds
//! of statements, and never drops one while the database is away.

use super::*;

impl Master {
    pub(super) fn settle(&mut self, settle: Settle) {
        match &settle {
            Settle::Ack(_) => self.tally.done += 1,
            Settle::Release { charged: true, .. } | Settle::TakeBack(_) => self.tally.released += 1,
            Settle::Release { charged: false, .. } => self.tally.returned_unstarted += 1,
            Settle::FailLater { .. } | Settle::Fail { .. } => self.tally.failed += 1,
        }
        let _ = self.settles.send(settle);
    }
}

/// The settle batcher: takes every settle waiting, writes them in one round of statements. A
/// settle is never dropped because the database is away (a lost connection, a restart, a
/// failover: `BrokerError::is_connection_lost` decides): the batch is retried on the next
/// connection until it lands — with a stale token it then changes nothing, which is safe — so a
/// job that finished is never run again because its ack was lost. Only a settle the database
/// refuses by itself (the statement fails on a live connection) is dropped, after the rest of its
/// batch was written one by one. Ends when the master drops its sender, after the last batch is
/// written. Released jobs are claimable once their batch commits, and no NOTIFY announces them,
/// so the batcher wakes the claim loop itself.
pub(super) async fn settle_batches(
    broker: Arc<Broker>,
    mut rx: mpsc::UnboundedReceiver<Settle>,
    max: usize,
    wake: Arc<Notify>,
) {
    let mut batch = Vec::with_capacity(max);
    let mut outage = Outage::default();
    while rx.recv_many(&mut batch, max).await > 0 {
        let releases = batch.iter().any(|s| {
            matches!(
                s,
                Settle::Release { .. } | Settle::TakeBack(_) | Settle::FailLater { .. }
            )
        });
        if let Err(e) = write(&broker, &batch, &mut outage).await {
            // Something in the batch itself is wrong: settle one by one so the rest land.
            tracing::error!(
                "{e}; settling the {} jobs of this batch one by one",
                batch.len()
            );
            for s in &batch {
                if let Err(e) = write(&broker, std::slice::from_ref(s), &mut outage).await {
                    tracing::error!(job = s.lease().id, "{e}; the database refuses this settle itself, so it is dropped: the job's lease will expire and it will run again");
                }
            }
        }
        if releases {
            wake.notify_one();
        }
        batch.clear();
    }
}

/// Writes `settles`, retrying through lost connections for as long as it takes; returns the
/// error of a statement the database refused on a live connection.
async fn write(
    broker: &Broker,
    settles: &[Settle],
    outage: &mut Outage,
) -> Result<(), drover_broker::BrokerError> {
    let mut delay = Duration::from_millis(50);
    loop {
        let attempt = tokio::time::timeout(broker.lease_duration() / 2, broker.settle(settles))
            .await
            .unwrap_or_else(|_| {
                broker.suspect_connection();
                Err(drover_broker::BrokerError::TimedOut {
                    about: "settling jobs",
                })
            });
        match attempt {
            Ok(SettleOutcome { stale, .. }) => {
                outage.over(settles.len());
                if !stale.is_empty() {
                    tracing::warn!(jobs = ?stale, "settle changed nothing for these jobs: their lease token is stale (the lease expired and the job was taken back)");
                }
                return Ok(());
            }
            Err(e) if e.is_connection_lost() => {
                outage.failed(&e, settles.len());
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(500));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Logs an outage once when it starts, at most every 30 s while it lasts, once when it ends.
#[derive(Default)]
struct Outage {
    /// When the current outage started, and when it was last reported.
    since: Option<(Instant, Instant)>,
}

impl Outage {
    fn failed(&mut self, e: &drover_broker::BrokerError, settles: usize) {
        let now = Instant::now();
        match &mut self.since {
            None => {
                tracing::warn!("{e}; keeping {settles} settles and retrying until the database answers (none is dropped)");
                self.since = Some((now, now));
            }
            Some((start, reported)) if now.duration_since(*reported) >= Duration::from_secs(30) => {
                tracing::warn!(
                    "still cannot settle ({:?} so far): {e}; {settles} settles kept",
                    now.duration_since(*start)
                );
                *reported = now;
            }
            Some(_) => {}
        }
    }

    fn over(&mut self, settles: usize) {
        if let Some((start, _)) = self.since.take() {
            tracing::info!(
                "settling again after {:?}; {settles} settles written",
                start.elapsed()
            );
        }
    }
}
