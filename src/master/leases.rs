//! Leases and deadlines: renewing every lease the master holds, killing a worker whose lease
//! could not be renewed before it ends, and killing a worker whose job outran its timeout.

use super::*;

impl Master {
    pub(super) fn start_renew(&mut self) {
        if self.renewing {
            return;
        }
        let asked: Vec<Lease> = self.pools.iter().flat_map(|p| p.ledger.leases()).collect();
        if asked.is_empty() {
            return;
        }
        self.renewing = true;
        let broker = self.broker.clone();
        let tx = self.internal_tx.clone();
        let timeout = broker.lease_duration() / 3;
        tokio::spawn(async move {
            let at = Instant::now();
            let result = match tokio::time::timeout(timeout, broker.renew(&asked)).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => {
                    broker.suspect_connection();
                    Err(format!("no answer within {timeout:?}"))
                }
            };
            let _ = tx.send(Internal::Renewed { asked, at, result });
        });
    }

    /// Fencing on the master's side: a worker whose lease could not be renewed is killed before
    /// the lease ends, so no other node can start its job while it still runs.
    pub(super) fn stop_workers_with_expiring_leases(&mut self, margin: Duration) {
        let deadline = Instant::now() + margin;
        for p in &mut self.pools {
            let mut seen = Vec::new();
            for (worker, job) in p.ledger.expiring(deadline) {
                if seen.contains(&worker) {
                    continue;
                }
                seen.push(worker);
                tracing::error!(worker = worker.0, job, "the lease of job {job} could not be renewed and ends within {margin:?}; killing worker {} so the job never runs in two places", worker.0);
                p.ledger.transition(worker, Transition::Fence);
                p.pool.control(worker, Control::Kill);
            }
        }
    }

    /// Jobs past their timeout: kill the worker; its exit settles the job by the job's rules.
    pub(super) fn stop_overdue_jobs(&mut self) {
        let now = Instant::now();
        for p in &mut self.pools {
            for (worker, job) in p.ledger.overdue(now) {
                tracing::warn!(
                    pool = p.pool.name(),
                    worker = worker.0,
                    job,
                    "job {job} ran past its timeout; killing worker {} and settling the job now",
                    worker.0
                );
                self.tally.timed_out += 1;
                p.ledger.transition(worker, Transition::TimeOut);
                p.pool.control(worker, Control::Kill);
            }
        }
    }

    pub(super) fn on_renewed(
        &mut self,
        asked: Vec<Lease>,
        at: Instant,
        result: Result<Vec<JobId>, String>,
    ) {
        self.renewing = false;
        match result {
            Ok(renewed) => {
                let lease = self.broker.lease_duration();
                for p in &mut self.pools {
                    for (worker, job) in p.ledger.renewed(&renewed, &asked, at, lease) {
                        tracing::error!(worker = worker.0, job, "lease lost (its token moved on, the job was taken back); stopping the worker so the job never runs in two places");
                        p.ledger.transition(worker, Transition::Fence);
                        p.pool.control(worker, Control::Kill);
                    }
                }
            }
            Err(e) => tracing::error!(
                "cannot renew leases: {e}; workers whose lease runs out first will be stopped"
            ),
        }
    }
}
