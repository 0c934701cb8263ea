//! Stopping a running job on an operator's request (`drover.stop_requests`): read on NOTIFY
//! drover_console and at every reap pass, carried out by killing exactly the worker that runs the
//! attempt named, and marked carried out. How the job is then settled is `rules::stop_request`,
//! applied when the worker's exit is reaped (`master::workers`).

use drover_broker::{BrokerError, StopRequest};

use super::events::Internal;
use super::Master;
use crate::rules::stop_request::Stop;

impl Master {
    /// Reads the requests to stop jobs this master holds.
    pub(super) fn read_stop_requests(&mut self) {
        let store = self.store.clone();
        let tx = self.inbox.internal_tx.clone();
        tokio::spawn(async move {
            let found = store.stop_requests().await;
            let _ = tx.send(Internal::StopRequests(found));
        });
    }

    /// The requests read: each worker running a named attempt is killed. A request for a job
    /// that no worker has started yet stays for the next reading.
    pub(super) fn on_stop_requests(&mut self, found: Result<Vec<StopRequest>, BrokerError>) {
        let requests = match found {
            Ok(requests) => requests,
            Err(e) => {
                tracing::warn!(database = %self.store.address(), "{e}; requests to stop jobs are read again at the next reap pass");
                return;
            }
        };
        let (mut taken, mut tokens) = (Vec::new(), Vec::new());
        for request in requests {
            let stop = match Stop::of(&request) {
                Ok(stop) => stop,
                Err(why) => {
                    tracing::error!(
                        job = request.job,
                        "a request to stop job {} cannot be carried out: {why}",
                        request.job
                    );
                    continue;
                }
            };
            for p in self.pools.iter_mut() {
                if let Some(worker) = p.stop_job(request.job, request.token, stop.clone()) {
                    tracing::warn!(
                        pool = p.pool().name(),
                        worker = worker.0,
                        job = request.job,
                        by = %request.by,
                        mode = %request.mode,
                        outcome = %request.outcome,
                        "job {} stopped by {}: killing worker {}; the job is settled as asked ({}, {})",
                        request.job,
                        request.by,
                        worker.0,
                        request.mode,
                        request.outcome
                    );
                    taken.push(request.job);
                    tokens.push(request.token);
                    break;
                }
            }
        }
        if taken.is_empty() {
            return;
        }
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.stops_taken(&taken, &tokens).await {
                tracing::warn!("{e}; the stopped jobs {taken:?} are not marked carried out (their jobs were stopped)");
            }
        });
    }
}
