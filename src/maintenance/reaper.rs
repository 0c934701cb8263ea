//! The reaper: every half lease, this master's heartbeat and one pass that takes back the jobs
//! whose lease expired, whoever held them (a master that stopped renewing).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use drover_broker::BrokerError;

use crate::store::Store;

/// What a pass's heartbeat found, for whoever started it.
#[derive(Debug)]
pub struct Heartbeat {
    /// When it was sent.
    pub sent: Instant,
    /// Whether this master's row was gone and was registered again; or why the heartbeat failed
    /// (a lost connection: the database is unreachable).
    pub result: Result<bool, BrokerError>,
}

/// One pass at a time.
#[derive(Debug, Default)]
pub struct Reaper {
    /// A pass is running.
    running: bool,
}

impl Reaper {
    /// Starts a pass unless one runs: the heartbeat, then the reap — unless settles wait out an
    /// outage (`settles_held`): acks still waiting would be stale by the time they land if the
    /// reap took their jobs back first (their leases ran out meanwhile), and the finished jobs
    /// would run again. (Another master may still reap them: at-least-once, and the reason a
    /// lease must outlast a database restart.) The heartbeat goes on regardless: a master whose
    /// heartbeat stopped while it still renews would look gone to a queue pause before its
    /// workers are (`drover.pause_unconfirmed`). `heard` is told what the heartbeat found as soon
    /// as it answers (the reap may take up to its own deadline more: whether the database is
    /// reachable is not kept waiting for it); `done` is called when the pass ends, whatever its
    /// result, with whether the heartbeat found this master's row gone and registered it again,
    /// and how many jobs the reap took back.
    pub fn start(
        &mut self,
        store: Arc<dyn Store>,
        settles_held: &AtomicBool,
        heard: impl FnOnce(&Heartbeat) + Send + 'static,
        done: impl FnOnce(bool, u64) + Send + 'static,
    ) {
        if self.running {
            return;
        }
        let reap = !settles_held.load(Ordering::Relaxed);
        if !reap {
            tracing::debug!("not reaping while settles wait for the database");
        }
        self.running = true;
        tokio::spawn(async move {
            // Each call within the store's own deadline (`drover_broker::Broker::call_deadline`).
            // The status document goes with `publish_status` (every memory tick), on the side
            // connection: a heartbeat carrying an older one could land after a newer one.
            let heartbeat = Heartbeat {
                sent: Instant::now(),
                result: store.heartbeat(None).await,
            };
            if let Err(e) = &heartbeat.result {
                tracing::warn!(database = %store.address(), "{e}");
            }
            heard(&heartbeat);
            let result = match reap {
                true => store.reap_expired().await,
                false => Ok(drover_broker::ReapOutcome::default()),
            };
            let reaped = match &result {
                Ok(r) => u64::try_from(r.released.saturating_add(r.failed)).unwrap_or(0),
                Err(_) => 0,
            };
            match result {
                Ok(r) if r.released > 0 || r.failed > 0 => {
                    tracing::warn!(
                        released = r.released,
                        failed = r.failed,
                        "took back jobs whose lease expired (their master stopped renewing)"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(database = %store.address(), "{e}"),
            }
            done(heartbeat.result.unwrap_or(false), reaped);
        });
    }

    /// The pass ended.
    pub fn finished(&mut self) {
        self.running = false;
    }
}
