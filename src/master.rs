//! The master's event loop: it joins the supervisor (workers and their frames) to the broker
//! (leases in PostgreSQL). One task owns all state; database calls run in spawned tasks and report
//! back as [`Internal`] events, so a slow statement never stops frames from being read.
//!
//! Wake-ups for claiming: a worker's hello or a settled job (credit came back), `NOTIFY` from the
//! insert trigger, a committed release, the timer set to the next delayed job, and a slow
//! fallback poll.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use drover_broker::{Broker, Compaction, JobId, Lease, LeasedJob, Settle, SettleOutcome};
use drover_supervisor::{
    CircuitState, Control, FromWorker, Pool, ProtocolError, ToWorker, WorkerEvent, WorkerId,
};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, Notify};

use crate::balancer::{Balancer, QueueLoad};
use crate::contract::{Balance, RunConfig};
use crate::control::{Command, Request};
use crate::health::{self, PoolView};
use crate::ledger::Ledger;
use crate::policy::{Cause, PoolPolicy};
use crate::systemd::Notifier;
use crate::workforce::{pool_config, ConfigSource, WorkerContext};
use crate::MasterError;

/// The master's own settings (the broker's and the pools' are in their crates).
#[derive(Debug, Clone)]
pub struct MasterConfig {
    /// How long a graceful shutdown waits for running jobs before killing their workers.
    /// Default 30 s.
    pub shutdown_grace: Duration,
    /// The fallback poll, for wake-ups NOTIFY missed. Default 5 s.
    pub poll_interval: Duration,
    /// The most jobs one claim leases. Default 256.
    pub claim_batch_max: usize,
    /// The most settles one batch carries. Default 1024.
    pub settle_batch_max: usize,
    /// How often workers' PSS is sampled for pools with a memory limit. Default 5 s.
    pub memory_check_interval: Duration,
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            shutdown_grace: Duration::from_secs(30),
            poll_interval: Duration::from_secs(5),
            claim_batch_max: 256,
            settle_batch_max: 1024,
            memory_check_interval: Duration::from_secs(5),
        }
    }
}

/// A pool of workers and everything the master keeps about it.
pub struct PoolRuntime {
    pub pool: Pool,
    /// Queues it serves, highest priority first.
    pub queues: Vec<String>,
    /// Its defaults for jobs that do not carry their own rules.
    pub policy: PoolPolicy,
    /// Who holds what.
    ledger: Ledger,
    /// A claim for this pool is running.
    claiming: bool,
    /// Something happened that may let a claim find jobs.
    claim_wanted: bool,
    /// When the next delayed job of its queues becomes due.
    next_due: Option<tokio::time::Instant>,
    /// KiB of PSS above which a worker is recycled (finishes its job, is replaced).
    memory_limit_kib: Option<u64>,
    /// Removed from the configuration by a reload: its workers are retiring, it claims nothing.
    retired: bool,
    /// Average run time of its jobs (exponentially weighted), for the autoscaler.
    runtime: Option<Duration>,
}

impl PoolRuntime {
    pub fn new(pool: Pool, queues: Vec<String>, policy: PoolPolicy) -> PoolRuntime {
        PoolRuntime {
            pool,
            queues,
            policy,
            ledger: Ledger::default(),
            claiming: false,
            claim_wanted: true,
            next_due: None,
            memory_limit_kib: None,
            retired: false,
            runtime: None,
        }
    }

    /// Recycle workers above `mib` MiB of PSS (0 = no limit).
    pub fn with_memory_limit(mut self, mib: u64) -> PoolRuntime {
        self.set_memory_limit(mib);
        self
    }

    fn set_memory_limit(&mut self, mib: u64) {
        self.memory_limit_kib = (mib > 0).then_some(mib * 1024);
    }
}

/// The longest delay a release may ask for: ten years.
const MAX_RELEASE_DELAY_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// Results of the database tasks the loop started.
enum Internal {
    Claimed {
        pool: usize,
        result: Result<Vec<LeasedJob>, drover_broker::BrokerError>,
        limit: usize,
        at: Instant,
    },
    NextDue {
        pool: usize,
        due: Option<SystemTime>,
    },
    Renewed {
        asked: Vec<Lease>,
        at: Instant,
        result: Result<Vec<JobId>, String>,
    },
    Reaped,
    Compacted(Result<drover_broker::Compaction, drover_broker::BrokerError>),
    /// A reload re-read the configuration (`None`: nothing to re-read, roll the workers only).
    Reloaded(Result<Option<RunConfig>, String>),
    /// An autoscaling pool's queues were counted.
    Counted {
        balancer: usize,
        result: Result<Vec<(String, i64)>, drover_broker::BrokerError>,
    },
}

/// What a reload needs: where the configuration comes from, the configuration running now, and
/// what every worker gets.
pub struct Reloading {
    pub source: ConfigSource,
    pub current: RunConfig,
    pub context: WorkerContext,
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

/// Counters for status and the exit summary.
#[derive(Debug, Default, serde::Serialize)]
struct Tally {
    claimed: u64,
    done: u64,
    released: u64,
    failed: u64,
    returned_unstarted: u64,
    timed_out: u64,
    worker_exits: u64,
}

pub struct Master {
    config: MasterConfig,
    broker: Arc<Broker>,
    pools: Vec<PoolRuntime>,
    /// Worker events from every pool's tasks.
    worker_events: mpsc::UnboundedReceiver<WorkerEvent>,
    /// Results of database tasks.
    internal_tx: mpsc::UnboundedSender<Internal>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    /// Commands from the control socket.
    control: mpsc::UnboundedReceiver<Request>,
    /// Settles on their way to the batching task.
    settles: mpsc::UnboundedSender<Settle>,
    /// The batching task, awaited at exit so no settle is lost.
    settler: tokio::task::JoinHandle<()>,
    /// Notified by the LISTEN connection and by committed releases.
    wake: Arc<Notify>,
    phase: Phase,
    /// Paused from the control socket: no claims, workers told to pause.
    paused: bool,
    /// A renew statement is running.
    renewing: bool,
    /// A reap pass is running.
    reaping: bool,
    /// Jobs went through since `drover.jobs` was last found small: once this master holds nothing,
    /// the reap tick checks whether the drained table should be compacted.
    compact_due: bool,
    /// A compaction pass is running (on its own connection).
    compacting: bool,
    /// For reloads (SIGHUP, `drover restart`).
    reloading: Reloading,
    /// A reload is re-reading the configuration.
    reload_running: bool,
    /// systemd's notification socket.
    notifier: Notifier,
    /// Where pools' worker events go (for pools a reload adds).
    events_tx: mpsc::UnboundedSender<WorkerEvent>,
    /// One per `balance: auto` pool.
    balancers: Vec<Balancer>,
    tally: Tally,
}

impl Master {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: MasterConfig,
        broker: Arc<Broker>,
        pools: Vec<PoolRuntime>,
        worker_events: (
            mpsc::UnboundedSender<WorkerEvent>,
            mpsc::UnboundedReceiver<WorkerEvent>,
        ),
        control: mpsc::UnboundedReceiver<Request>,
        wake: Arc<Notify>,
        reloading: Reloading,
        notifier: Notifier,
    ) -> Master {
        let (events_tx, worker_events) = worker_events;
        let balancers = balancers_for(&reloading.current, &pools);
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
            pools,
            worker_events,
            internal_tx,
            internal_rx,
            control,
            settles,
            settler,
            wake,
            phase: Phase::Running,
            paused: false,
            renewing: false,
            reaping: false,
            compact_due: false,
            compacting: false,
            balancers,
            reloading,
            reload_running: false,
            notifier,
            events_tx,
            tally: Tally::default(),
        }
    }

    fn live_workers(&self) -> usize {
        self.pools.iter().map(|p| p.pool.live()).sum()
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
        let mut sighup = signal(SignalKind::hangup()).map_err(signal_err)?;
        let mut sigusr2 = signal(SignalKind::user_defined2()).map_err(signal_err)?;
        let mut sigcont = signal(SignalKind::from_raw(nix::libc::SIGCONT)).map_err(signal_err)?;

        for p in &mut self.pools {
            p.pool.start()?;
        }
        let processes: usize = self.pools.iter().map(|p| p.pool.target()).sum();
        self.notifier.ready(&format!(
            "{processes} workers in {} pool(s)",
            self.pools.len()
        ));
        let mut memory = tokio::time::interval(self.config.memory_check_interval);
        let mut watchdog = self.notifier.watchdog_interval().map(tokio::time::interval);
        let lease = self.broker.lease_duration();
        let mut poll = tokio::time::interval(self.config.poll_interval);
        let mut renew = tokio::time::interval(lease / 3);
        let mut lease_check = tokio::time::interval(lease / 10);
        let mut reap = tokio::time::interval(lease / 2);
        let mut timeouts = tokio::time::interval(Duration::from_millis(100));
        for t in [
            &mut poll,
            &mut renew,
            &mut lease_check,
            &mut reap,
            &mut timeouts,
            &mut memory,
        ] {
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }

        loop {
            // Wait for claims in flight too: their jobs are leased and must be handed back.
            if self.phase != Phase::Running
                && self.live_workers() == 0
                && !self.pools.iter().any(|p| p.claiming)
            {
                break;
            }
            for index in 0..self.pools.len() {
                self.maybe_claim(index);
            }
            let drain_deadline = match self.phase {
                Phase::Draining { deadline } => Some(deadline),
                _ => None,
            };
            let next_due = self.pools.iter().filter_map(|p| p.next_due).min();
            tokio::select! {
                Some(event) = self.worker_events.recv() => self.on_worker_event(event),
                Some(internal) = self.internal_rx.recv() => self.on_internal(internal),
                Some(request) = self.control.recv() => self.on_control(request),
                _ = self.wake.notified() => self.want_claims(),
                _ = poll.tick() => self.want_claims(),
                _ = sleep_until_opt(next_due) => {
                    let now = tokio::time::Instant::now();
                    for p in &mut self.pools {
                        if p.next_due.is_some_and(|d| d <= now) {
                            p.next_due = None;
                            p.claim_wanted = true;
                        }
                    }
                }
                _ = renew.tick() => self.start_renew(),
                _ = lease_check.tick() => self.stop_workers_with_expiring_leases(lease / 5),
                _ = timeouts.tick() => {
                    self.stop_overdue_jobs();
                    let now = Instant::now();
                    for p in &mut self.pools {
                        p.pool.tick(now);
                    }
                    self.start_balancing(now);
                }
                _ = memory.tick() => self.recycle_workers_over_memory(),
                _ = tick_opt(watchdog.as_mut()) => self.notifier.watchdog(),
                _ = reap.tick() => {
                    self.start_reap();
                    self.maybe_compact();
                }
                _ = sleep_until_opt(drain_deadline) => {
                    tracing::warn!(grace = ?self.config.shutdown_grace, live = self.live_workers(), "shutdown grace period over; killing the workers still running");
                    self.phase = Phase::Stopping;
                    for p in &self.pools {
                        p.pool.control_all(Control::Kill);
                    }
                }
                _ = sigterm.recv() => self.on_shutdown_signal("SIGTERM"),
                _ = sigint.recv() => self.on_shutdown_signal("SIGINT"),
                _ = sigquit.recv() => self.stop_now("SIGQUIT"),
                _ = sighup.recv() => self.start_reload("SIGHUP"),
                _ = sigusr2.recv() => self.set_paused(true),
                _ = sigcont.recv() => self.set_paused(false),
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
            timed_out = tally.timed_out,
            worker_exits = tally.worker_exits,
            "master stopped"
        );
        Ok(())
    }

    fn want_claims(&mut self) {
        for p in &mut self.pools {
            p.claim_wanted = true;
        }
    }

    fn on_shutdown_signal(&mut self, name: &str) {
        match self.phase {
            Phase::Running => {
                self.notifier.stopping();
                let deadline = tokio::time::Instant::now() + self.config.shutdown_grace;
                tracing::info!(signal = name, grace = ?self.config.shutdown_grace, "graceful shutdown: finishing running jobs, returning the rest");
                self.phase = Phase::Draining { deadline };
                for p in &mut self.pools {
                    p.pool.shut_down();
                    for id in p.pool.ids().collect::<Vec<_>>() {
                        p.ledger.close(id);
                    }
                    p.pool.control_all(Control::Stop);
                }
            }
            _ => self.stop_now(name),
        }
    }

    fn stop_now(&mut self, name: &str) {
        self.notifier.stopping();
        tracing::warn!(
            signal = name,
            "immediate shutdown: killing every worker and releasing its leases"
        );
        self.phase = Phase::Stopping;
        for p in &mut self.pools {
            p.pool.shut_down();
            p.pool.control_all(Control::Kill);
        }
    }

    /// Pause: no worker gets another job and each is told to start none it holds. Continue: undo.
    fn set_paused(&mut self, paused: bool) {
        if self.paused == paused {
            return;
        }
        self.paused = paused;
        if paused {
            tracing::info!("paused: no more jobs are handed out");
        } else {
            tracing::info!("continuing: handing out jobs again");
        }
        for p in &mut self.pools {
            for id in p.pool.ids().collect::<Vec<_>>() {
                if paused {
                    p.ledger.close(id);
                } else {
                    p.ledger.reopen(id);
                }
            }
            p.pool.control_all(if paused {
                Control::Pause
            } else {
                Control::Resume
            });
            p.claim_wanted = !paused;
        }
    }

    fn on_control(&mut self, request: Request) {
        let answer = match request.command {
            Command::Status => return self.answer_status(request.reply),
            Command::Pause => {
                self.set_paused(true);
                serde_json::json!({"ok": true, "paused": true})
            }
            Command::Continue => {
                self.set_paused(false);
                serde_json::json!({"ok": true, "paused": false})
            }
            Command::Restart => {
                self.start_reload("restart command");
                serde_json::json!({"ok": true, "reloading": true})
            }
            Command::Terminate => {
                self.on_shutdown_signal("terminate command");
                serde_json::json!({"ok": true, "terminating": true})
            }
        };
        let _ = request.reply.send(answer);
    }

    fn status(&self) -> serde_json::Value {
        let phase = match self.phase {
            Phase::Running => "running",
            Phase::Draining { .. } => "draining",
            Phase::Stopping => "stopping",
        };
        let pools: Vec<_> = self
            .pools
            .iter()
            .enumerate()
            .map(|(index, p)| {
                let autoscaling = self
                    .balancers
                    .iter()
                    .find(|b| b.members.contains(&index))
                    .map(|b| {
                        serde_json::json!({
                            "pool": b.name,
                            "min_processes": b.min,
                            "max_processes": b.max,
                            "runtime_ms": p.runtime.map(|r| r.as_secs_f64() * 1000.0),
                        })
                    });
                let workers: Vec<_> = p
                    .pool
                    .workers()
                    .iter()
                    .map(|w| {
                        let line = p.ledger.status(w.id);
                        let state = if w.retiring {
                            "retiring"
                        } else if !w.ready {
                            "starting"
                        } else if self.paused {
                            "paused"
                        } else if line.as_ref().is_some_and(|l| l.running.is_some()) {
                            "busy"
                        } else {
                            "idle"
                        };
                        serde_json::json!({
                            "id": w.id.0,
                            "pid": w.pid,
                            "state": state,
                            "generation": w.generation,
                            "held": line.as_ref().map(|l| l.held).unwrap_or(0),
                            "running": line.as_ref().and_then(|l| l.running),
                            "finished": line.as_ref().map(|l| l.finished).unwrap_or(0),
                            "pss_kib": read_pss_kib(w.pid),
                            "uptime_secs": w.spawned_at.elapsed().as_secs(),
                        })
                    })
                    .collect();
                let circuit = match p.pool.circuit() {
                    CircuitState::Closed => serde_json::json!({"state": "closed"}),
                    CircuitState::Open { until } => serde_json::json!({
                        "state": "open",
                        "retry_in_secs": until.saturating_duration_since(Instant::now()).as_secs_f64(),
                    }),
                    CircuitState::HalfOpen { .. } => serde_json::json!({"state": "half_open"}),
                };
                serde_json::json!({
                    "name": p.pool.name(),
                    "queues": p.queues,
                    "processes": p.pool.target(),
                    "serving": p.pool.serving(),
                    "generation": p.pool.generation(),
                    "memory_limit_kib": p.memory_limit_kib,
                    "circuit": circuit,
                    "failures_in_a_row": p.pool.failures_in_a_row(),
                    "retired": p.retired,
                    "autoscaling": autoscaling,
                    "workers": workers,
                })
            })
            .collect();
        let views: Vec<PoolView> = self
            .pools
            .iter()
            .map(|p| PoolView {
                name: p.pool.name().to_string(),
                wanted: p.pool.target(),
                serving: p.pool.serving(),
                circuit_open: matches!(p.pool.circuit(), CircuitState::Open { .. }),
                failures_in_a_row: p.pool.failures_in_a_row(),
                retired: p.retired,
            })
            .collect();
        let (health, problems) = health::assess(self.phase == Phase::Running, self.paused, &views);
        serde_json::json!({
            "pid": std::process::id(),
            "node": self.broker.node(),
            "health": health,
            "exit_code": health.exit_code(),
            "problems": problems,
            "phase": phase,
            "paused": self.paused,
            "reloading": self.reload_running,
            "pools": pools,
            "totals": self.tally,
        })
    }

    /// Status with each queue's backlog, counted by a task so the loop never waits on it.
    fn answer_status(&self, reply: tokio::sync::oneshot::Sender<serde_json::Value>) {
        let mut status = self.status();
        let mut queues: Vec<String> = self.pools.iter().flat_map(|p| p.queues.clone()).collect();
        queues.sort();
        queues.dedup();
        let broker = self.broker.clone();
        tokio::spawn(async move {
            let counted =
                tokio::time::timeout(Duration::from_secs(2), broker.backlog(&queues, 100_000))
                    .await;
            status["backlog"] = match counted {
                Ok(Ok(rows)) => rows
                    .into_iter()
                    .map(|(q, n)| (q, serde_json::json!(n)))
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
                Ok(Err(e)) => serde_json::json!({"error": e.to_string()}),
                Err(_) => serde_json::json!({"error": "the database did not answer in 2 s"}),
            };
            let _ = reply.send(status);
        });
    }

    fn maybe_claim(&mut self, index: usize) {
        if self.phase != Phase::Running || self.paused {
            return;
        }
        let p = &mut self.pools[index];
        if p.claiming || !p.claim_wanted || p.retired {
            return;
        }
        let free = p.ledger.free_credit();
        if free == 0 {
            return;
        }
        // Under load, claim in batches: wait until half the pool's credit is free, unless a worker
        // has nothing to run (then at once). One claim per job would cost a statement and a
        // commit per job; the prefetched jobs keep every worker busy meanwhile.
        if free * 2 < p.ledger.capacity() && !p.ledger.has_idle_worker() {
            return;
        }
        p.claim_wanted = false;
        p.claiming = true;
        let limit = free.min(self.config.claim_batch_max);
        let broker = self.broker.clone();
        let queues = p.queues.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let at = Instant::now();
            let result = match tokio::time::timeout(
                broker.lease_duration() / 2,
                broker.claim(&queues, limit),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => {
                    broker.suspect_connection();
                    Err(drover_broker::BrokerError::TimedOut {
                        about: "claiming jobs",
                    })
                }
            };
            let _ = tx.send(Internal::Claimed {
                pool: index,
                result,
                limit,
                at,
            });
        });
    }

    fn on_internal(&mut self, internal: Internal) {
        match internal {
            Internal::Claimed {
                pool,
                result,
                limit,
                at,
            } => {
                self.pools[pool].claiming = false;
                match result {
                    Ok(jobs) => self.hand_out(pool, jobs, limit, at),
                    Err(e) => {
                        tracing::error!("{e}; trying again in 1s");
                        self.pools[pool].next_due =
                            Some(tokio::time::Instant::now() + Duration::from_secs(1));
                    }
                }
            }
            Internal::NextDue { pool, due } => {
                self.pools[pool].next_due = due.map(|due| {
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
                        let lease = self.broker.lease_duration();
                        for p in &mut self.pools {
                            for (worker, job) in p.ledger.renewed(&renewed, &asked, at, lease) {
                                tracing::error!(worker = worker.0, job, "lease lost (its token moved on, the job was taken back); stopping the worker so the job never runs in two places");
                                p.ledger.close(worker);
                                p.pool.control(worker, Control::Kill);
                            }
                        }
                    }
                    Err(e) => tracing::error!("cannot renew leases: {e}; workers whose lease runs out first will be stopped"),
                }
            }
            Internal::Reaped => {
                self.reaping = false;
                self.want_claims();
            }
            Internal::Counted { balancer, result } => {
                self.balance(balancer, result);
            }
            Internal::Reloaded(result) => {
                self.reload_running = false;
                self.apply_reload(result);
            }
            Internal::Compacted(result) => {
                self.compacting = false;
                match result {
                    Ok(Compaction::Compacted { before, after }) => {
                        self.compact_due = false;
                        tracing::info!(
                            before_kib = before / 1024,
                            after_kib = after / 1024,
                            "the backlog is drained: vacuumed drover.jobs and rebuilt its indexes"
                        );
                    }
                    Ok(Compaction::Small { .. }) | Ok(Compaction::NotEmpty) => {
                        self.compact_due = false
                    }
                    Ok(Compaction::Busy) => {
                        tracing::debug!("drover.jobs was busy; compacting it at the next pass")
                    }
                    Err(e) => tracing::warn!("compacting the drained drover.jobs: {e}"),
                }
            }
        }
    }

    fn hand_out(&mut self, index: usize, jobs: Vec<LeasedJob>, limit: usize, at: Instant) {
        let full = jobs.len() == limit;
        self.compact_due |= !jobs.is_empty();
        self.tally.claimed += jobs.len() as u64;
        let lease = self.broker.lease_duration();
        let p = &mut self.pools[index];
        let (given, left) = p.ledger.assign(jobs, lease, at);
        for (worker, job) in given {
            let frame = ToWorker::Job {
                job: job.id,
                token: job.token,
                queue: job.queue,
                attempts: job.attempts,
                max_attempts: job.max_attempts,
                payload: job.payload,
                fail: job.failure,
            };
            // If the worker is already gone, its Exited event will release the job.
            p.pool.send(worker, frame);
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
        let p = &mut self.pools[index];
        if full {
            p.claim_wanted = true;
        } else {
            let broker = self.broker.clone();
            let queues = p.queues.clone();
            let tx = self.internal_tx.clone();
            tokio::spawn(async move {
                match broker.next_due(&queues).await {
                    Ok(due) => {
                        let _ = tx.send(Internal::NextDue { pool: index, due });
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
            Settle::FailLater { .. } | Settle::Fail { .. } => self.tally.failed += 1,
        }
        let _ = self.settles.send(settle);
    }

    fn pool_of(&self, worker: WorkerId) -> Option<usize> {
        self.pools.iter().position(|p| p.pool.owns(worker))
    }

    fn on_worker_event(&mut self, event: WorkerEvent) {
        match event {
            WorkerEvent::Frame { worker, frame } => {
                let Some(index) = self.pool_of(worker) else {
                    return;
                };
                if let Err(problem) = self.on_frame(index, worker, frame) {
                    self.reject(index, worker, problem);
                }
            }
            WorkerEvent::BadInput { worker, problem } => {
                if let Some(index) = self.pool_of(worker) {
                    self.reject(index, worker, problem);
                }
            }
            WorkerEvent::Exited {
                worker,
                pid,
                status,
                lived,
            } => {
                let Some(index) = self.pool_of(worker) else {
                    return;
                };
                self.tally.worker_exits += 1;
                let how = match status {
                    Some(s) => describe_exit(s),
                    None => "exited (status unknown)".to_string(),
                };
                let p = &mut self.pools[index];
                let removed = p.ledger.remove(worker);
                let cause = if removed.timed_out {
                    Cause::TimedOut
                } else {
                    Cause::Died(how.clone())
                };
                let settles: Vec<Settle> = removed
                    .jobs
                    .iter()
                    .map(|(lease, held)| p.policy.abandon(*lease, held, &cause))
                    .collect();
                let held = settles.len();
                // Exit 0 (max_jobs, max_time, queue:restart, stop), Laravel's 12 (memory limit) and
                // a kill for a job's timeout are planned; anything else counts as a crash.
                let planned = removed.timed_out
                    || matches!(status.and_then(|s| s.code()), Some(0) | Some(12));
                let restart = p.pool.on_exit(worker, planned);
                for s in settles {
                    self.settle(s);
                }
                if self.phase != Phase::Running || removed.timed_out {
                    tracing::info!(worker = worker.0, pid, held, ?lived, "worker {how}");
                } else {
                    tracing::warn!(worker = worker.0, pid, held, ?lived, restart_in = ?restart, "worker {how}; its jobs were released");
                }
                self.pools[index].claim_wanted = true;
            }
            WorkerEvent::RestartDue { pool, slot } => {
                if let Some(p) = self.pools.iter_mut().find(|p| p.pool.name() == pool) {
                    p.pool.on_restart_due(slot);
                }
            }
        }
    }

    fn on_frame(
        &mut self,
        index: usize,
        worker: WorkerId,
        frame: FromWorker,
    ) -> Result<(), ProtocolError> {
        let paused = self.paused;
        let running = self.phase == Phase::Running;
        let p = &mut self.pools[index];
        match frame {
            FromWorker::Hello { v, pid, prefetch } => {
                p.ledger.hello(worker, v, prefetch)?;
                tracing::debug!(worker = worker.0, pid, prefetch, "worker ready");
                if let Some(old) = p.pool.mark_ready(worker, Instant::now()) {
                    // A reload step: the new worker is ready, the old one finishes and goes.
                    p.ledger.close(old);
                    tracing::info!(
                        pool = p.pool.name(),
                        new = worker.0,
                        old = old.0,
                        "reload: worker {} replaces worker {}",
                        worker.0,
                        old.0
                    );
                }
                if p.retired {
                    p.ledger.close(worker);
                    p.pool.control(worker, Control::Stop);
                }
                if !running {
                    p.ledger.close(worker);
                    p.pool.control(worker, Control::Stop);
                } else if paused {
                    p.ledger.close(worker);
                    p.pool.control(worker, Control::Pause);
                }
                p.claim_wanted = true;
            }
            FromWorker::Started { job, token } => {
                let policy = &p.policy;
                p.ledger
                    .started(worker, job, token, |hints| policy.timeout_for(hints))?;
            }
            FromWorker::Done { job, token } => {
                let mut ran = None;
                let s = p.ledger.finish(worker, "done", job, token, |lease, held| {
                    ran = held.started_at.map(|t| t.elapsed());
                    Settle::Ack(lease)
                })?;
                if let Some(ran) = ran {
                    p.runtime = Some(match p.runtime {
                        Some(avg) => avg.mul_f64(0.9) + ran.mul_f64(0.1),
                        None => ran,
                    });
                }
                p.claim_wanted = true;
                self.settle(s);
            }
            FromWorker::Release {
                job,
                token,
                delay_ms,
            } => {
                // Clamped so a runaway delay cannot make the settle statement fail (timestamp range).
                let delay = Duration::from_millis(delay_ms.min(MAX_RELEASE_DELAY_MS));
                let s = p
                    .ledger
                    .finish(worker, "release", job, token, |lease, held| {
                        // A plain job with a max_attempts column that releases on its last attempt fails.
                        match held.max_attempts {
                            Some(max) if held.attempts >= max => Settle::Fail {
                                lease,
                                error: format!(
                                    "drover: released on its last attempt ({} of {max})",
                                    held.attempts
                                ),
                            },
                            _ => Settle::Release {
                                lease,
                                delay,
                                charged: true,
                            },
                        }
                    })?;
                p.claim_wanted = true;
                self.settle(s);
            }
            FromWorker::Return { job, token } => {
                let lease = p.ledger.give_back(worker, job, token)?;
                p.claim_wanted = true;
                self.settle(Settle::Release {
                    lease,
                    delay: Duration::ZERO,
                    charged: false,
                });
            }
            FromWorker::Fail {
                job,
                token,
                error,
                logged,
            } => {
                let s = p.ledger.finish(worker, "fail", job, token, |lease, _| {
                    if logged {
                        // Already in the application's failed_jobs: a second copy would only grow
                        // where `queue:flush` never reaches.
                        Settle::Ack(lease)
                    } else {
                        Settle::Fail {
                            lease,
                            // PostgreSQL text cannot hold NUL (PHP's anonymous class names contain one).
                            error: error.replace('\0', "\\0"),
                        }
                    }
                })?;
                p.claim_wanted = true;
                if logged {
                    self.tally.failed += 1;
                    let _ = self.settles.send(s);
                } else {
                    self.settle(s);
                }
            }
        }
        Ok(())
    }

    /// A worker broke the protocol: name it, kill it; its exit releases its jobs.
    fn reject(&mut self, index: usize, worker: WorkerId, problem: ProtocolError) {
        let p = &mut self.pools[index];
        let pid = p.pool.pid(worker).unwrap_or(0);
        tracing::error!(
            pool = p.pool.name(),
            worker = worker.0,
            pid,
            "worker {} (pid {pid}) {problem}; stopping it and releasing its jobs",
            worker.0
        );
        p.ledger.close(worker);
        p.pool.control(worker, Control::Kill);
    }

    /// Jobs past their timeout: kill the worker; its exit settles the job by the job's rules.
    fn stop_overdue_jobs(&mut self) {
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
                p.ledger.mark_timed_out(worker);
                p.pool.control(worker, Control::Kill);
            }
        }
    }

    fn start_renew(&mut self) {
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
    fn stop_workers_with_expiring_leases(&mut self, margin: Duration) {
        let deadline = Instant::now() + margin;
        for p in &mut self.pools {
            let mut seen = Vec::new();
            for (worker, job) in p.ledger.expiring(deadline) {
                if seen.contains(&worker) {
                    continue;
                }
                seen.push(worker);
                tracing::error!(worker = worker.0, job, "the lease of job {job} could not be renewed and ends within {margin:?}; killing worker {} so the job never runs in two places", worker.0);
                p.ledger.close(worker);
                p.pool.control(worker, Control::Kill);
            }
        }
    }

    /// Workers above their pool's memory limit (PSS, from /proc) finish their job and are
    /// replaced; the exit is planned, so it never counts as a crash.
    fn recycle_workers_over_memory(&mut self) {
        for p in &mut self.pools {
            let Some(limit) = p.memory_limit_kib else {
                continue;
            };
            for id in p.pool.ids().collect::<Vec<_>>() {
                let Some(pid) = p.pool.pid(id) else {
                    continue;
                };
                // PSS never exceeds RSS, and RSS is a counter the kernel keeps (statm), while PSS
                // walks every page table (smaps_rollup): only a worker whose RSS is over the limit
                // costs that walk. (64 idle workers: 0.96% of a core with a walk each every 5 s.)
                if read_rss_kib(pid).is_some_and(|rss| rss <= limit) {
                    continue;
                }
                let Some(pss) = read_pss_kib(pid) else {
                    continue;
                };
                if pss > limit && p.pool.retire(id) {
                    p.ledger.close(id);
                    tracing::warn!(
                        pool = p.pool.name(),
                        worker = id.0,
                        pss_mib = pss / 1024,
                        limit_mib = limit / 1024,
                        "worker {} uses {} MiB (PSS), over the pool's memory limit; it finishes its job and is replaced",
                        id.0,
                        pss / 1024
                    );
                }
            }
        }
    }

    /// Autoscaling pools whose cooldown passed: count their queues (one statement per pool).
    fn start_balancing(&mut self, now: Instant) {
        if self.phase != Phase::Running {
            return;
        }
        for (index, b) in self.balancers.iter_mut().enumerate() {
            if !b.due(now) {
                continue;
            }
            b.counting = true;
            let queues: Vec<String> = b
                .members
                .iter()
                .flat_map(|m| self.pools[*m].queues.clone())
                .collect();
            let broker = self.broker.clone();
            let tx = self.internal_tx.clone();
            tokio::spawn(async move {
                let result = match tokio::time::timeout(
                    Duration::from_secs(5),
                    broker.backlog(&queues, 1_000_000),
                )
                .await
                {
                    Ok(r) => r,
                    Err(_) => Err(drover_broker::BrokerError::TimedOut {
                        about: "counting the queues' backlog",
                    }),
                };
                let _ = tx.send(Internal::Counted {
                    balancer: index,
                    result,
                });
            });
        }
    }

    fn balance(
        &mut self,
        index: usize,
        result: Result<Vec<(String, i64)>, drover_broker::BrokerError>,
    ) {
        let Some(b) = self.balancers.get_mut(index) else {
            return;
        };
        b.counting = false;
        let counts = match result {
            Ok(c) => c,
            Err(e) => {
                b.last = Some(Instant::now());
                tracing::warn!(pool = %b.name, "autoscaling skipped: {e}");
                return;
            }
        };
        if self.phase != Phase::Running || self.paused {
            b.last = Some(Instant::now());
            return;
        }
        let loads: Vec<QueueLoad> = b
            .members
            .iter()
            .map(|m| {
                let p = &self.pools[*m];
                QueueLoad {
                    backlog: counts
                        .iter()
                        .find(|(q, _)| p.queues.first() == Some(q))
                        .map(|(_, n)| *n)
                        .unwrap_or(0),
                    runtime: p.runtime,
                    current: p.pool.target(),
                }
            })
            .collect();
        let targets = b.decide(&loads, Instant::now());
        let members = b.members.clone();
        for ((m, target), load) in members.into_iter().zip(targets).zip(loads) {
            if target == load.current {
                continue;
            }
            let p = &mut self.pools[m];
            tracing::info!(
                pool = p.pool.name(),
                from = load.current,
                to = target,
                backlog = load.backlog,
                "autoscaling: {} {} → {} workers",
                p.pool.name(),
                load.current,
                target
            );
            for id in p.pool.scale_to(target) {
                p.ledger.close(id);
            }
            p.claim_wanted = true;
        }
    }

    /// SIGHUP or `drover restart`: read the configuration anew, then replace every worker one by
    /// one (new code, new settings); capacity never drops below the pool's size minus one.
    fn start_reload(&mut self, why: &str) {
        if self.phase != Phase::Running {
            return;
        }
        if self.reload_running {
            tracing::info!(why, "a reload is already running");
            return;
        }
        tracing::info!(
            why,
            "reloading: re-reading the configuration, then replacing workers one by one"
        );
        self.notifier.reloading();
        self.reload_running = true;
        let source = self.reloading.source.clone();
        let run_as = self.reloading.context.run_as.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(Internal::Reloaded(source.reread(run_as.as_ref()).await));
        });
    }

    fn apply_reload(&mut self, result: Result<Option<RunConfig>, String>) {
        if self.phase != Phase::Running {
            return;
        }
        let new = match result {
            Ok(new) => new,
            Err(problem) => {
                tracing::error!("reload: {problem}; keeping the current configuration and replacing the workers with it");
                None
            }
        };
        let config = match new {
            Some(new) => {
                self.warn_about_settings_needing_a_restart(&new);
                // The next reload asks the release that is current now.
                self.reloading.source.reload_command = new.reload_command.clone();
                self.reloading.source.cwd = new.cwd.clone();
                new
            }
            None => self.reloading.current.clone(),
        };
        let context = self.reloading.context.clone();
        let mut wanted = Vec::new();
        for spec in &config.pools {
            for member in spec.members() {
                wanted.push(member.name.clone());
                let pool_cfg = pool_config(&config, spec, &member, &context);
                match self.pools.iter().position(|p| p.pool.name() == member.name) {
                    Some(index) => {
                        let p = &mut self.pools[index];
                        p.retired = false;
                        p.queues = member.queues.clone();
                        p.policy = spec.policy();
                        p.set_memory_limit(spec.memory);
                        p.pool.reload(pool_cfg.command);
                        // An autoscaled queue keeps its current size, within the new bounds.
                        let processes = match spec.balance {
                            Balance::Auto => p
                                .pool
                                .target()
                                .clamp(spec.min_processes, spec.max_processes()),
                            _ => member.processes,
                        };
                        for id in p.pool.scale_to(processes) {
                            p.ledger.close(id);
                        }
                        p.claim_wanted = true;
                    }
                    None => match Pool::new(pool_cfg, self.events_tx.clone()) {
                        Ok(mut pool) => {
                            tracing::info!(pool = %member.name, processes = member.processes, "reload: starting a new pool");
                            if let Err(e) = pool.start() {
                                tracing::error!(pool = %member.name, "{e}");
                            }
                            self.pools.push(
                                PoolRuntime::new(pool, member.queues.clone(), spec.policy())
                                    .with_memory_limit(spec.memory),
                            );
                        }
                        Err(e) => tracing::error!(pool = %member.name, "reload: {e}"),
                    },
                }
            }
        }
        for p in &mut self.pools {
            if !wanted.iter().any(|name| name == p.pool.name()) && !p.retired {
                tracing::info!(pool = p.pool.name(), "reload: the pool is gone from the configuration; its workers finish their jobs and stop");
                p.retired = true;
                for id in p.pool.scale_to(0) {
                    p.ledger.close(id);
                }
            }
        }
        self.balancers = balancers_for(&config, &self.pools);
        self.reloading.current = config;
        let processes: usize = self.pools.iter().map(|p| p.pool.target()).sum();
        self.notifier
            .ready(&format!("{processes} workers; reloaded"));
    }

    /// Settings a reload cannot change in a running master.
    fn warn_about_settings_needing_a_restart(&self, new: &RunConfig) {
        let changed = self.reloading.current.changes_needing_a_restart(new);
        if !changed.is_empty() {
            tracing::warn!("reload: {} changed; these take effect at the next start of the master (systemctl restart drover), the rest is applied now", changed.join(", "));
        }
    }

    /// Once the jobs that went through are all settled, gives back the space a drained backlog
    /// left in `drover.jobs` (see `drover_broker::compact`).
    fn maybe_compact(&mut self) {
        if !self.compact_due
            || self.compacting
            || self.phase != Phase::Running
            || self.pools.iter().any(|p| p.ledger.held() > 0)
        {
            return;
        }
        self.compacting = true;
        let broker = self.broker.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(Internal::Compacted(broker.compact_when_empty().await));
        });
    }

    fn start_reap(&mut self) {
        if self.reaping {
            return;
        }
        self.reaping = true;
        let broker = self.broker.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let limit = broker.lease_duration() / 2;
            let pass = async {
                if let Err(e) = broker.heartbeat().await {
                    tracing::warn!("{e}");
                }
                broker.reap_expired().await
            };
            let result = tokio::time::timeout(limit, pass).await.unwrap_or_else(|_| {
                broker.suspect_connection();
                Err(drover_broker::BrokerError::TimedOut {
                    about: "taking back expired leases",
                })
            });
            match result {
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

async fn tick_opt(interval: Option<&mut tokio::time::Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A balancer for every `balance: auto` pool of the configuration, over its member pools.
fn balancers_for(config: &RunConfig, pools: &[PoolRuntime]) -> Vec<Balancer> {
    config
        .pools
        .iter()
        .filter(|spec| spec.balance == Balance::Auto)
        .map(|spec| {
            let members = spec
                .members()
                .iter()
                .filter_map(|m| pools.iter().position(|p| p.pool.name() == m.name))
                .collect();
            Balancer::new(spec, members)
        })
        .collect()
}

/// A process's resident set size, KiB, from `/proc/<pid>/statm` (cheap: a counter).
fn read_rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant.
    let page = unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as u64 / 1024)
}

/// A process's proportional set size, KiB, from `/proc/<pid>/smaps_rollup`.
pub fn read_pss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
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
