//! The master's event loop: it joins the supervisor (workers and their frames) to the broker
//! (leases in PostgreSQL). One task owns all state; database calls run in spawned tasks and report
//! back as [`Internal`] events, so a slow statement never stops frames from being read.
//!
//! Wake-ups for claiming: a worker's hello or a settled job (credit came back), `NOTIFY` from the
//! insert trigger, the timer set to the next delayed job, and a slow fallback poll.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use drover_broker::{Broker, JobId, Lease, LeasedJob, Settle, SettleOutcome};
use drover_supervisor::{
    Control, FromWorker, Pool, ProtocolError, ToWorker, WorkerEvent, WorkerId,
};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, Notify};

use crate::ledger::Ledger;
use crate::MasterError;

/// The master's own settings (the broker's and the pool's are in their crates).
#[derive(Debug, Clone)]
pub struct MasterConfig {
    /// Queues to serve, highest priority first. Default `["default"]`.
    pub queues: Vec<String>,
    /// How long a graceful shutdown waits for running jobs before killing their workers.
    /// Default 30 s.
    pub shutdown_grace: Duration,
    /// The fallback poll, for wake-ups NOTIFY missed. Default 5 s.
    pub poll_interval: Duration,
    /// The most jobs one claim statement leases. Default 256.
    pub claim_batch_max: usize,
    /// The most settles one batch carries. Default 1024.
    pub settle_batch_max: usize,
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            queues: vec!["default".to_string()],
            shutdown_grace: Duration::from_secs(30),
            poll_interval: Duration::from_secs(5),
            claim_batch_max: 256,
            settle_batch_max: 1024,
        }
    }
}

/// Results of the database tasks the loop started.
enum Internal {
    Claimed {
        result: Result<Vec<LeasedJob>, drover_broker::BrokerError>,
        limit: usize,
        at: Instant,
    },
    NextDue(Option<SystemTime>),
    Renewed {
        asked: Vec<Lease>,
        at: Instant,
        result: Result<Vec<JobId>, String>,
    },
    Reaped,
}

/// Where the master is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Graceful: workers finish their running job; killed at the deadline.
    Draining {
        deadline: tokio::time::Instant,
    },
    /// Every worker killed; leases released as they exit.
    Stopping,
}

/// Counters for the exit summary.
#[derive(Debug, Default)]
struct Tally {
    claimed: u64,
    done: u64,
    released: u64,
    failed: u64,
    returned_unstarted: u64,
    worker_exits: u64,
}

pub struct Master {
    config: MasterConfig,
    broker: Arc<Broker>,
    pool: Pool,
    /// Who holds what.
    ledger: Ledger,
    /// Worker events from the pool's tasks.
    worker_events: mpsc::UnboundedReceiver<WorkerEvent>,
    /// Results of database tasks.
    internal_tx: mpsc::UnboundedSender<Internal>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    /// Settles on their way to the batching task.
    settles: mpsc::UnboundedSender<Settle>,
    /// The batching task, awaited at exit so no settle is lost.
    settler: tokio::task::JoinHandle<()>,
    /// Notified by the LISTEN connection.
    wake: Arc<Notify>,
    phase: Phase,
    /// A claim statement is running.
    claiming: bool,
    /// Something happened that may let a claim find jobs.
    claim_wanted: bool,
    /// A renew statement is running.
    renewing: bool,
    /// A reap pass is running.
    reaping: bool,
    /// When the next delayed job becomes due.
    next_due: Option<tokio::time::Instant>,
    tally: Tally,
}

impl Master {
    pub fn new(
        config: MasterConfig,
        broker: Arc<Broker>,
        pool: Pool,
        worker_events: mpsc::UnboundedReceiver<WorkerEvent>,
        wake: Arc<Notify>,
    ) -> Master {
        let (internal_tx, internal_rx) = mpsc::unbounded_channel();
        let (settles, settle_rx) = mpsc::unbounded_channel();
        let settler = tokio::spawn(settle_batches(
            broker.clone(),
            settle_rx,
            config.settle_batch_max,
            wake.clone(),
        ));
        Master {
            config,
            broker,
            pool,
            ledger: Ledger::default(),
            worker_events,
            internal_tx,
            internal_rx,
            settles,
            settler,
            wake,
            phase: Phase::Running,
            claiming: false,
            claim_wanted: true,
            renewing: false,
            reaping: false,
            next_due: None,
            tally: Tally::default(),
        }
    }

    /// Runs until a shutdown completes. Returns after every worker has exited and every settle
    /// has been written.
    pub async fn run(mut self) -> Result<(), MasterError> {
        let signal_err = |source| MasterError::Io {
            about: "installing signal handlers".into(),
            source,
        };
        let mut sigterm = signal(SignalKind::terminate()).map_err(signal_err)?;
        let mut sigint = signal(SignalKind::interrupt()).map_err(signal_err)?;
        let mut sigquit = signal(SignalKind::quit()).map_err(signal_err)?;

        self.pool.start()?;
        let lease = self.broker.lease_duration();
        let mut poll = tokio::time::interval(self.config.poll_interval);
        let mut renew = tokio::time::interval(lease / 3);
        let mut lease_check = tokio::time::interval(lease / 10);
        let mut reap = tokio::time::interval(lease / 2);
        for t in [&mut poll, &mut renew, &mut lease_check, &mut reap] {
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }

        loop {
            if self.phase != Phase::Running && self.pool.live() == 0 {
                break;
            }
            self.maybe_claim();
            let drain_deadline = match self.phase {
                Phase::Draining { deadline } => Some(deadline),
                _ => None,
            };
            tokio::select! {
                Some(event) = self.worker_events.recv() => self.on_worker_event(event),
                Some(internal) = self.internal_rx.recv() => self.on_internal(internal),
                _ = self.wake.notified() => self.claim_wanted = true,
                _ = poll.tick() => self.claim_wanted = true,
                _ = sleep_until_opt(self.next_due) => {
                    self.next_due = None;
                    self.claim_wanted = true;
                }
                _ = renew.tick() => self.start_renew(),
                _ = lease_check.tick() => self.stop_workers_with_expiring_leases(lease / 5),
                _ = reap.tick() => self.start_reap(),
                _ = sleep_until_opt(drain_deadline) => {
                    tracing::warn!(grace = ?self.config.shutdown_grace, live = self.pool.live(), "shutdown grace period over; killing the workers still running");
                    self.phase = Phase::Stopping;
                    self.pool.control_all(Control::Kill);
                }
                _ = sigterm.recv() => self.on_shutdown_signal("SIGTERM"),
                _ = sigint.recv() => self.on_shutdown_signal("SIGINT"),
                _ = sigquit.recv() => self.stop_now("SIGQUIT"),
            }
        }

        // Every worker is gone; write the last settles.
        let Master {
            settles,
            settler,
            broker,
            tally,
            ..
        } = self;
        drop(settles);
        let _ = settler.await;
        if let Err(e) = broker.deregister().await {
            tracing::warn!("{e}");
        }
        tracing::info!(
            claimed = tally.claimed,
            done = tally.done,
            released = tally.released,
            failed = tally.failed,
            returned_unstarted = tally.returned_unstarted,
            worker_exits = tally.worker_exits,
            "master stopped"
        );
        Ok(())
    }

    fn on_shutdown_signal(&mut self, name: &str) {
        match self.phase {
            Phase::Running => {
                let deadline = tokio::time::Instant::now() + self.config.shutdown_grace;
                tracing::info!(signal = name, grace = ?self.config.shutdown_grace, "graceful shutdown: finishing running jobs, returning the rest");
                self.phase = Phase::Draining { deadline };
                self.pool.shut_down();
                for id in self.pool.ids().collect::<Vec<_>>() {
                    self.ledger.close(id);
                }
                self.pool.control_all(Control::Stop);
            }
            _ => self.stop_now(name),
        }
    }

    fn stop_now(&mut self, name: &str) {
        tracing::warn!(
            signal = name,
            "immediate shutdown: killing every worker and releasing its leases"
        );
        self.phase = Phase::Stopping;
        self.pool.shut_down();
        self.pool.control_all(Control::Kill);
    }

    fn maybe_claim(&mut self) {
        if self.phase != Phase::Running || self.claiming || !self.claim_wanted {
            return;
        }
        let free = self.ledger.free_credit();
        if free == 0 {
            return;
        }
        self.claim_wanted = false;
        self.claiming = true;
        let limit = free.min(self.config.claim_batch_max);
        let broker = self.broker.clone();
        let queues = self.config.queues.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let at = Instant::now();
            let result = broker.claim(&queues, limit).await;
            let _ = tx.send(Internal::Claimed { result, limit, at });
        });
    }

    fn on_internal(&mut self, internal: Internal) {
        match internal {
            Internal::Claimed { result, limit, at } => {
                self.claiming = false;
                match result {
                    Ok(jobs) => self.hand_out(jobs, limit, at),
                    Err(e) => {
                        tracing::error!("{e}; trying again in 1s");
                        self.next_due = Some(tokio::time::Instant::now() + Duration::from_secs(1));
                    }
                }
            }
            Internal::NextDue(due) => {
                self.next_due = due.map(|due| {
                    let wait = due
                        .duration_since(self.broker.now())
                        .unwrap_or(Duration::ZERO);
                    tokio::time::Instant::now() + wait
                });
            }
            Internal::Renewed { asked, at, result } => {
                self.renewing = false;
                match result {
                    Ok(renewed) => {
                        let lost = self.ledger.renewed(&renewed, &asked, at, self.broker.lease_duration());
                        for (worker, job) in lost {
                            tracing::error!(worker = worker.0, job, "lease lost (its token moved on, the job was taken back); stopping the worker so the job never runs in two places");
                            self.pool.control(worker, Control::Kill);
                        }
                    }
                    Err(e) => tracing::error!("cannot renew leases: {e}; workers whose lease runs out first will be stopped"),
                }
            }
            Internal::Reaped => {
                self.reaping = false;
                self.claim_wanted = true;
            }
        }
    }

    fn hand_out(&mut self, jobs: Vec<LeasedJob>, limit: usize, at: Instant) {
        let full = jobs.len() == limit;
        self.tally.claimed += jobs.len() as u64;
        let (given, left) = self.ledger.assign(jobs, self.broker.lease_duration(), at);
        for (worker, job) in given {
            let frame = ToWorker::Job {
                job: job.id,
                token: job.token,
                queue: job.queue,
                attempts: job.attempts,
                max_attempts: job.max_attempts,
                payload: job.payload,
            };
            // If the worker is already gone, its Exited event will release the job.
            self.pool.send(worker, frame);
        }
        for job in left {
            self.settle(Settle::Release {
                lease: Lease {
                    id: job.id,
                    token: job.token,
                },
                delay: Duration::ZERO,
                charged: false,
            });
        }
        if full {
            self.claim_wanted = true;
        } else {
            let broker = self.broker.clone();
            let queues = self.config.queues.clone();
            let tx = self.internal_tx.clone();
            tokio::spawn(async move {
                match broker.next_due(&queues).await {
                    Ok(due) => {
                        let _ = tx.send(Internal::NextDue(due));
                    }
                    Err(e) => tracing::warn!("{e}"),
                }
            });
        }
    }

    fn settle(&mut self, settle: Settle) {
        match &settle {
            Settle::Ack(_) => self.tally.done += 1,
            Settle::Release { charged: true, .. } => self.tally.released += 1,
            Settle::Release { charged: false, .. } => self.tally.returned_unstarted += 1,
            Settle::Fail { .. } => self.tally.failed += 1,
        }
        let _ = self.settles.send(settle);
    }

    fn on_worker_event(&mut self, event: WorkerEvent) {
        match event {
            WorkerEvent::Frame { worker, frame } => {
                if let Err(problem) = self.on_frame(worker, frame) {
                    self.reject(worker, problem);
                }
            }
            WorkerEvent::BadInput { worker, problem } => self.reject(worker, problem),
            WorkerEvent::Exited {
                worker,
                pid,
                status,
                lived,
            } => {
                self.tally.worker_exits += 1;
                let how = match status {
                    Some(s) => describe_exit(s),
                    None => "exited (status unknown)".to_string(),
                };
                let settles = self.ledger.remove(worker, &how);
                let held = settles.len();
                for s in settles {
                    self.settle(s);
                }
                let restart = self.pool.on_exit(worker, lived);
                let expected = self.phase != Phase::Running;
                if expected {
                    tracing::info!(worker = worker.0, pid, held, "worker {how}");
                } else {
                    tracing::warn!(worker = worker.0, pid, held, restart_in = ?restart, "worker {how}; its jobs were released");
                }
                self.claim_wanted = true;
            }
            WorkerEvent::RestartDue { slot } => {
                self.pool.on_restart_due(slot);
            }
        }
    }

    fn on_frame(&mut self, worker: WorkerId, frame: FromWorker) -> Result<(), ProtocolError> {
        match frame {
            FromWorker::Hello { v, pid, prefetch } => {
                self.ledger.hello(worker, v, prefetch)?;
                tracing::debug!(worker = worker.0, pid, prefetch, "worker ready");
                if self.phase != Phase::Running {
                    self.ledger.close(worker);
                    self.pool.control(worker, Control::Stop);
                }
                self.claim_wanted = true;
            }
            FromWorker::Started { job, token } => self.ledger.started(worker, job, token)?,
            FromWorker::Done { job, token } => {
                let s = self
                    .ledger
                    .finish(worker, "done", job, token, Settle::Ack)?;
                self.settle(s);
                self.claim_wanted = true;
            }
            FromWorker::Release {
                job,
                token,
                delay_ms,
            } => {
                let delay = Duration::from_millis(delay_ms);
                let s =
                    self.ledger
                        .finish(worker, "release", job, token, |lease| Settle::Release {
                            lease,
                            delay,
                            charged: true,
                        })?;
                self.settle(s);
                self.claim_wanted = true;
            }
            FromWorker::Fail { job, token, error } => {
                let s = self
                    .ledger
                    .finish(worker, "fail", job, token, |lease| Settle::Fail {
                        lease,
                        error,
                    })?;
                self.settle(s);
                self.claim_wanted = true;
            }
        }
        Ok(())
    }

    /// A worker broke the protocol: name it, kill it; its exit releases its jobs.
    fn reject(&mut self, worker: WorkerId, problem: ProtocolError) {
        let pid = self.pool.pid(worker).unwrap_or(0);
        tracing::error!(
            worker = worker.0,
            pid,
            "worker {} (pid {pid}) {problem}; stopping it and releasing its jobs",
            worker.0
        );
        self.ledger.close(worker);
        self.pool.control(worker, Control::Kill);
    }

    fn start_renew(&mut self) {
        if self.renewing {
            return;
        }
        let asked = self.ledger.leases();
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
                Err(_) => Err(format!("no answer within {timeout:?}")),
            };
            let _ = tx.send(Internal::Renewed { asked, at, result });
        });
    }

    /// Fencing on the master's side: a worker whose lease could not be renewed is killed before
    /// the lease ends, so no other node can start its job while it still runs.
    fn stop_workers_with_expiring_leases(&mut self, margin: Duration) {
        let mut seen = Vec::new();
        for (worker, job) in self.ledger.expiring(Instant::now() + margin) {
            if seen.contains(&worker) {
                continue;
            }
            seen.push(worker);
            tracing::error!(worker = worker.0, job, "the lease of job {job} could not be renewed and ends within {margin:?}; killing worker {} so the job never runs in two places", worker.0);
            self.ledger.close(worker);
            self.pool.control(worker, Control::Kill);
        }
    }

    fn start_reap(&mut self) {
        if self.reaping {
            return;
        }
        self.reaping = true;
        let broker = self.broker.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            if let Err(e) = broker.heartbeat().await {
                tracing::warn!("{e}");
            }
            match broker.reap_expired().await {
                Ok(r) if r.released > 0 || r.failed > 0 => {
                    tracing::warn!(
                        released = r.released,
                        failed = r.failed,
                        "took back jobs whose lease expired (their master stopped renewing)"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("{e}"),
            }
            let _ = tx.send(Internal::Reaped);
        });
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (_, Some(sig)) => {
            let name = nix::sys::signal::Signal::try_from(sig)
                .map(|s| s.as_str())
                .unwrap_or("unknown signal");
            format!("was killed by {name}")
        }
        _ => format!("ended ({status})"),
    }
}

/// The settle batcher: takes every settle waiting, writes them in one round of statements, and
/// retries when the database is briefly away. Ends when the master drops its sender, after the
/// last batch is written. Released jobs are claimable once their batch commits, and no NOTIFY
/// announces them, so the batcher wakes the claim loop itself.
async fn settle_batches(
    broker: Arc<Broker>,
    mut rx: mpsc::UnboundedReceiver<Settle>,
    max: usize,
    wake: Arc<Notify>,
) {
    let mut batch = Vec::with_capacity(max);
    while rx.recv_many(&mut batch, max).await > 0 {
        let releases = batch.iter().any(|s| matches!(s, Settle::Release { .. }));
        let mut delay = Duration::from_millis(100);
        let give_up = Instant::now() + broker.lease_duration();
        loop {
            match broker.settle(&batch).await {
                Ok(SettleOutcome { stale, .. }) => {
                    if !stale.is_empty() {
                        tracing::warn!(jobs = ?stale, "settle changed nothing for these jobs: their lease token is stale (the lease expired and the job was taken back)");
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
