//! The master's event loop: it joins the supervisor (workers and their frames) to the broker
//! (leases in PostgreSQL). One task owns all state; database calls run in spawned tasks and report
//! back as [`Internal`] events, so a slow statement never stops frames from being read.
//!
//! Wake-ups for claiming: a worker's hello or a settled job (credit came back), `NOTIFY` from the
//! insert trigger, a committed release, the timer set to the next delayed job, a queue resumed
//! (`NOTIFY drover_pauses`, or a `pauseFor` ending), and a slow fallback poll.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_broker::listener::Wakes;
use drover_broker::{JobId, Lease};
use drover_supervisor::WorkerEvent;
use tokio::sync::mpsc;

use crate::config::RunConfig;
use crate::master::pools::setup::{ConfigSource, WorkerContext};
pub use crate::master::pools::{PoolId, PoolRuntime, Pools};
use crate::process::control::Request;
use crate::process::signals::{Sig, Signals};
use crate::process::systemd::Notifier;
use crate::rules::fleet_reload::FleetReload;
use crate::status_document::Totals;
use crate::store::Store;
use crate::MasterError;

mod balancing;
mod claims;
mod drain;
mod duties;
mod forking;
mod history_writer;
mod leases;
pub mod pools;
mod queue_pauses;
mod recorder;
mod reload;
mod riding_acks;
mod settler;
mod shutdown;
mod status;
#[cfg(test)]
mod tests;
mod timers;
mod workers;

pub(crate) use crate::process::memory::read_pss_kib;
pub use drain::{Exit, StopWhen};
pub use recorder::RecorderConfig;
use timers::{Tick, Timers};

/// When start-up's pages go back to the kernel if some pool never serves its whole target
/// (a worker that cannot boot): start-up is over by then either way.
const STARTUP_PAGES_AT_LATEST: Duration = Duration::from_secs(30);

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
    /// How long a completed job's ack may wait for a claim to carry it (one commit for both;
    /// `riding_acks`). Zero: every ack goes to the settler at once. Default 5 ms.
    pub ack_ride_wait: Duration,
    /// How often workers' PSS is sampled for pools with a memory limit. Default 5 s.
    pub memory_check_interval: Duration,
    /// Per-minute metrics in `drover.metrics`: on or off, how often written, how long kept.
    pub recorder: RecorderConfig,
    /// The Prometheus series the recorder feeds (and `--metrics-listen` serves).
    pub exposition: Arc<crate::metrics::Exposition>,
    /// When the master stops by itself (`--stop-when-empty`, `--max-jobs`, `--max-time`). Default:
    /// never; it serves until a signal or `drover terminate`.
    pub stop_when: StopWhen,
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            shutdown_grace: Duration::from_secs(30),
            poll_interval: Duration::from_secs(5),
            claim_batch_max: 256,
            settle_batch_max: 1024,
            ack_ride_wait: Duration::from_millis(5),
            memory_check_interval: Duration::from_secs(5),
            recorder: RecorderConfig::default(),
            exposition: Arc::new(crate::metrics::Exposition::new()),
            stop_when: StopWhen::default(),
        }
    }
}

/// How long an exiting master waits, once every worker is gone, for settles the database has not
/// taken yet (it is away): a service manager's stop timeout must leave room for the shutdown
/// grace and this (the Debian unit's TimeoutStopSec is 45 s against 30 + 10).
pub const SETTLE_WAIT_AT_EXIT: Duration = Duration::from_secs(10);

/// Everything the loop reacts to, from every source; [`Master::handle`] sends each to the part
/// that owns it.
enum Event {
    /// A worker's frame, bad input, exit, or a restart timer.
    Worker(WorkerEvent),
    /// A database task the loop started has finished.
    Internal(Internal),
    /// A command from the control socket.
    Control(Request),
    /// NOTIFY from the insert trigger, or a committed release: jobs may be claimable.
    Wake,
    /// NOTIFY from `drover.paused_queues`: a queue was paused, its pause changed, or it resumed.
    PausesChanged,
    /// NOTIFY from `drover.request_reload`: a fleet restart asked some master to reload.
    ReloadAsked,
    /// A duty of the clock (see `timers`).
    Tick(Tick),
    /// A signal (see `crate::process::signals`).
    Signal(Sig),
}

/// Results of the database tasks the loop started.
enum Internal {
    Claimed {
        pool: PoolId,
        result: Result<drover_broker::Claimed, drover_broker::BrokerError>,
        limit: usize,
        at: Instant,
        /// The acks that rode with the claim.
        acks: Vec<Lease>,
    },
    NextDue {
        pool: PoolId,
        /// How long until the next delayed job is due, by the database's clock.
        due: Option<Duration>,
    },
    Renewed {
        asked: Vec<Lease>,
        at: Instant,
        result: Result<Vec<JobId>, String>,
        /// What claims whose answer was lost leased to this master (`claim_tokens` in the broker).
        unanswered: Result<Vec<Lease>, drover_broker::BrokerError>,
    },
    /// This master's fleet restart requests were read (the newest made of it).
    FleetReload(Result<i64, drover_broker::BrokerError>),
    /// A reap pass ended; its heartbeat found this master's row gone and registered it again.
    Reaped {
        registered_again: bool,
    },
    Compacted(Result<drover_broker::Compaction, drover_broker::BrokerError>),
    /// A reload re-read the configuration (`None`: nothing to re-read, roll the workers only).
    Reloaded(Result<Option<Box<RunConfig>>, String>),
    /// `drover.paused_queues` was read.
    QueuePauses(Result<Vec<drover_broker::PausedQueue>, drover_broker::BrokerError>),
    /// Every `withdraw` frame of a round for a newly paused queue is written.
    Withdrawn {
        queue: String,
        round: u64,
    },
    /// The pauses this master holds were confirmed in its node row (or could not be).
    PausesConfirmed {
        versions: Vec<i64>,
        result: Result<(), drover_broker::BrokerError>,
    },
    /// An autoscaling pool's queues were counted.
    Counted {
        /// The balancer's pool, by its configured name (a reload rebuilds the balancers).
        balancer: String,
        result: Result<Vec<(String, i64)>, drover_broker::BrokerError>,
    },
}

/// What a reload needs: where the configuration comes from, the configuration running now, and
/// what every worker gets.
pub struct Reloading {
    pub source: ConfigSource,
    /// The configuration running now (replaced through [`Reloading::take_over`]).
    pub current: RunConfig,
    pub context: WorkerContext,
    /// `current`'s queue budgets as every claim takes them: built once per configuration, not
    /// per claim.
    budgets: std::sync::Arc<drover_broker::QueueBudgets>,
}

impl Reloading {
    pub fn new(source: ConfigSource, current: RunConfig, context: WorkerContext) -> Reloading {
        let budgets = std::sync::Arc::new(current.queue_budgets());
        Reloading {
            source,
            current,
            context,
            budgets,
        }
    }

    /// A reload's configuration becomes the running one.
    pub fn take_over(&mut self, config: RunConfig) {
        self.budgets = std::sync::Arc::new(config.queue_budgets());
        self.current = config;
    }

    /// The running configuration's queue budgets.
    pub fn budgets(&self) -> &std::sync::Arc<drover_broker::QueueBudgets> {
        &self.budgets
    }
}

/// Where the master is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Graceful: workers finish their running job; killed at the deadline, if there is one (a
    /// master stopping by itself has none: running jobs end under their own timeouts, as
    /// `queue:work --max-time` lets them).
    Draining {
        deadline: Option<tokio::time::Instant>,
    },
    /// Every worker killed; leases released as they exit.
    Stopping,
}

pub struct Master {
    config: MasterConfig,
    /// The job store (PostgreSQL through `drover_broker::Broker`; a fake in unit tests).
    broker: Arc<dyn Store>,
    pools: Pools,
    /// Worker events from every pool's tasks.
    worker_events: mpsc::UnboundedReceiver<WorkerEvent>,
    /// Results of database tasks.
    internal_tx: mpsc::UnboundedSender<Internal>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    /// Commands from the control socket.
    control: mpsc::UnboundedReceiver<Request>,
    /// The loop's side of settling: the batching task and what goes to it (`settler`).
    settling: settler::Settling,
    /// When the loop started (`--max-time`).
    started: Instant,
    /// Why a master stopping by itself gave up (every pool's circuit open): the exit says so.
    failed: Option<String>,
    /// The lease guard process: it stops workers at their deadline when this master cannot.
    guard: crate::process::lease_guard::GuardClient,
    /// Probes of the workers' /proc files and the recorder (`recorder`).
    metering: recorder::Metering,
    /// The status write in flight, if any (one at a time).
    status_write: Option<tokio::task::JoinHandle<()>>,
    /// What the LISTEN connection (and committed releases) wake: claims (`jobs`), a re-read of
    /// the paused queues (`pauses`), a look at this master's fleet restart requests (`reloads`).
    wakes: Wakes,
    /// A restart of the whole fleet, as this master takes part in it (`rules::fleet_reload`).
    fleet_reload: FleetReload,
    /// Claims sent so far: each claim is numbered by it (`PoolRuntime::claiming`), so a pause
    /// learned of is held once the claims sent before have answered (`queue_pauses`).
    claims_sent: u64,
    phase: Phase,
    /// Paused from the control socket: no claims, workers told to pause.
    paused: bool,
    /// Where the renewal of this master's leases is: idle, running, or failed last time (then
    /// tried again at every lease check, not only every lease/3: `rules::lease_deadlines`).
    renewal: leases::Renewal,
    /// Reaping, compaction, retention and the long-wait check (`crate::maintenance`).
    duties: crate::maintenance::Duties,
    /// For reloads (SIGHUP, `drover restart`).
    reloading: Reloading,
    /// Re-reads of the configuration running or asked for (`reload`).
    rereads: reload::Rereads,
    /// systemd's notification socket.
    notifier: Notifier,
    /// Where pools' worker events go (for pools a reload adds).
    events_tx: mpsc::UnboundedSender<WorkerEvent>,
    /// The balancers of the `balance: auto` pools (`balancing`).
    autoscaling: balancing::Autoscaling,
    /// Queues paused by name for every master (`queue:pause`), read from the database.
    queue_pauses: crate::rules::queue_pauses::QueuePauses,
    /// Counters for status and the exit summary.
    tally: Totals,
    /// Whether start-up's pages went back to the kernel (`startup_pages`): once, when every pool
    /// first serves its target, or at the first memory check past `STARTUP_PAGES_AT_LATEST`.
    startup_pages_released: bool,
}

impl Master {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: MasterConfig,
        broker: Arc<dyn Store>,
        pools: Vec<PoolRuntime>,
        worker_events: (
            mpsc::UnboundedSender<WorkerEvent>,
            mpsc::UnboundedReceiver<WorkerEvent>,
        ),
        control: mpsc::UnboundedReceiver<Request>,
        wakes: Wakes,
        reloading: Reloading,
        notifier: Notifier,
        guard: crate::process::lease_guard::GuardClient,
    ) -> Master {
        let (events_tx, worker_events) = worker_events;
        let pools = Pools::new(pools);
        let autoscaling = balancing::Autoscaling::new(&reloading.current, &pools);
        let (internal_tx, internal_rx) = mpsc::unbounded_channel();
        let settling = settler::Settling::start(
            broker.clone(),
            settler::Batching {
                max: config.settle_batch_max,
                // A drain claims once more after the last settle lands, to see the queues empty.
                wake_after_every_batch: config.stop_when.empty,
            },
            wakes.jobs.clone(),
            config.ack_ride_wait,
        );
        let metering = recorder::Metering::start(
            broker.clone(),
            config.exposition.clone(),
            config.recorder.clone(),
        );
        Master {
            config,
            broker,
            metering,
            status_write: None,
            pools,
            worker_events,
            internal_tx,
            internal_rx,
            control,
            settling,
            started: Instant::now(),
            failed: None,
            guard,
            wakes,
            fleet_reload: FleetReload::default(),
            claims_sent: 0,
            phase: Phase::Running,
            paused: false,
            renewal: leases::Renewal::Idle,
            duties: crate::maintenance::Duties::new(Instant::now()),
            autoscaling,
            queue_pauses: Default::default(),
            reloading,
            rereads: reload::Rereads::default(),
            notifier,
            events_tx,
            tally: Totals::default(),
            startup_pages_released: false,
        }
    }

    /// Start-up's pages back to the kernel, once (`startup_pages`).
    fn release_startup_pages(&mut self) {
        if std::mem::replace(&mut self.startup_pages_released, true) {
            return;
        }
        let r = crate::process::startup_pages::release();
        tracing::debug!(
            rss_before_kib = r.rss_before_kib,
            rss_after_kib = r.rss_after_kib,
            "start-up pages handed back to the kernel"
        );
    }

    fn live_workers(&self) -> usize {
        self.pools.iter().map(|p| p.pool.live()).sum()
    }

    /// Runs until a shutdown completes. Returns after every worker has exited and every settle
    /// has been written, or could not be ([`Exit`]). `signals` were installed at start (see
    /// `crate::process::signals`).
    pub async fn run(mut self, mut signals: Signals) -> Result<Exit, MasterError> {
        for p in &mut self.pools {
            p.pool.start()?;
        }
        let processes: usize = self.pools.iter().map(|p| p.pool.target()).sum();
        self.notifier.ready(&format!(
            "{processes} workers in {} pool(s)",
            self.pools.len()
        ));
        let mut timers = Timers::new(
            self.broker.lease_duration(),
            self.config.poll_interval,
            self.config.memory_check_interval,
            self.notifier.watchdog_interval(),
        );
        self.started = Instant::now();
        while !self.finished() {
            for index in self.pools.ids() {
                self.maybe_claim(index);
            }
            self.send_unridden_acks();
            let due = self
                .pools
                .iter()
                .flat_map(|p| [p.next_due, p.claim_after])
                .chain([self.settling.riding.due(), self.queue_pauses.next_expiry()])
                .flatten()
                .min();
            // `--max-time` only while serving: once draining, its instant is past.
            let stop_at = self.stop_at().filter(|_| self.phase == Phase::Running);
            let grace_over = match self.phase {
                Phase::Draining { deadline } => deadline,
                _ => None,
            };
            let event = tokio::select! {
                Some(event) = self.worker_events.recv() => Event::Worker(event),
                Some(internal) = self.internal_rx.recv() => Event::Internal(internal),
                Some(request) = self.control.recv() => Event::Control(request),
                _ = self.wakes.jobs.notified() => Event::Wake,
                _ = self.wakes.pauses.notified() => Event::PausesChanged,
                _ = self.wakes.reloads.notified() => Event::ReloadAsked,
                tick = timers.next(due, grace_over, stop_at) => Event::Tick(tick),
                sig = signals.recv() => Event::Signal(sig),
            };
            self.handle(event);
            self.check_stop();
        }
        self.send_unridden_acks();
        // A claim whose answer was lost may hold jobs no worker got: give them back now, before
        // the settler's last batch, rather than leave them to wait out their lease.
        if self.broker.has_unanswered_claims() {
            let found = self.broker.unanswered_claims().await;
            self.give_back_unanswered(found);
        }
        Ok(self.finish(signals).await)
    }

    /// Shutting down, every worker gone, no claim in flight (its jobs would need handing back).
    fn finished(&self) -> bool {
        self.phase != Phase::Running
            && self.live_workers() == 0
            && !self.pools.iter().any(|p| p.claiming.is_some())
    }

    /// One event, to the part that owns it.
    fn handle(&mut self, event: Event) {
        match event {
            Event::Worker(event) => self.on_worker_event(event),
            Event::Internal(internal) => self.on_internal(internal),
            Event::Control(request) => self.on_control(request),
            Event::Wake => self.want_claims(),
            Event::PausesChanged => self.on_pauses_changed(),
            Event::ReloadAsked => self.read_fleet_reload(),
            Event::Tick(tick) => self.on_tick(tick),
            Event::Signal(sig) => self.on_signal(sig),
        }
    }

    fn on_tick(&mut self, tick: Tick) {
        match tick {
            Tick::Poll => self.want_claims(),
            Tick::Due => self.on_due(),
            Tick::Renew => {
                self.sync_guard();
                self.start_renew()
            }
            Tick::LeaseCheck => {
                self.stop_workers_with_expiring_leases();
                if self.renewal == leases::Renewal::Failed {
                    self.start_renew();
                }
            }
            Tick::Timeouts => {
                self.stop_overdue_jobs();
                let now = Instant::now();
                for p in &mut self.pools {
                    p.tick(now);
                }
                self.tick_zygotes();
                self.start_balancing(now);
                self.maybe_read_queue_pauses(tokio::time::Instant::now());
                // A confirmation that failed is tried again.
                self.maybe_confirm_pauses();
            }
            Tick::Memory => {
                // The fallback for pools that never all serve (the interval's first tick comes
                // at once, during start-up itself).
                if self.started.elapsed() >= STARTUP_PAGES_AT_LATEST {
                    self.release_startup_pages();
                }
                for p in &mut self.pools {
                    p.recycle_over_memory();
                }
                self.publish_status();
            }
            Tick::Watchdog => self.notifier.watchdog(),
            Tick::Reap => {
                self.on_reap_tick();
            }
            Tick::GraceOver => self.grace_over(),
            // `check_stop` runs after every event.
            Tick::StopTime => {}
        }
    }

    fn on_signal(&mut self, sig: Sig) {
        match sig {
            Sig::Terminate | Sig::Interrupt => self.on_shutdown_signal(sig.name()),
            Sig::Quit => self.stop_now(sig.name()),
            Sig::Hangup => self.start_reload(sig.name()),
            Sig::Pause => self.set_paused(true),
            Sig::Continue => self.set_paused(false),
        }
    }

    /// Every worker is gone: leave the node table, write the last settles. A database that stays
    /// away is waited for up to [`SETTLE_WAIT_AT_EXIT`] (or until SIGTERM, SIGINT or SIGQUIT), then
    /// the settles still unwritten are counted in the [`Exit`]: their jobs run again once their
    /// leases expire. The last metrics and the node row get a few seconds more, and never change
    /// the exit.
    async fn finish(self, mut signals: Signals) -> Exit {
        let Master {
            settling:
                settler::Settling {
                    tx: settles,
                    task: settler,
                    unwritten,
                    ..
                },
            metering,
            broker,
            tally,
            failed,
            ..
        } = self;
        drop(settles);
        // No worker is left and no claim runs: this master hands out nothing more. Its row goes
        // now rather than after the last settles, so no queue pause waits for it meanwhile.
        let leaving = {
            let broker = broker.clone();
            tokio::spawn(async move { broker.deregister().await })
        };
        let recorder = metering.close();
        let stop_asked = async {
            loop {
                let sig = signals.recv().await;
                if matches!(sig, Sig::Terminate | Sig::Interrupt | Sig::Quit) {
                    tracing::warn!(
                        signal = sig.name(),
                        "stopping without waiting for the database"
                    );
                    return;
                }
            }
        };
        tokio::select! {
            _ = settler => {}
            _ = tokio::time::sleep(SETTLE_WAIT_AT_EXIT) => {}
            _ = stop_asked => {}
        }
        let left = unwritten.count();
        let rest = async {
            let _ = recorder.await;
            if let Ok(Err(e)) = leaving.await {
                tracing::warn!(database = %broker.address(), "{e}");
            }
        };
        if tokio::time::timeout(Duration::from_secs(5), rest)
            .await
            .is_err()
        {
            tracing::warn!("the last metrics and the node row were not written in 5s: the database does not answer (the row expires by itself)");
        }
        let exit = match (left, failed) {
            (0, None) => Exit::Clean,
            (0, Some(why)) => Exit::Failed { why },
            (count, _) => Exit::SettlesUnwritten { count },
        };
        tracing::info!(
            claimed = tally.claimed,
            done = tally.done,
            released = tally.released,
            failed = tally.failed,
            returned_unstarted = tally.returned_unstarted,
            acks_ridden = tally.acks_ridden,
            timed_out = tally.timed_out,
            worker_exits = tally.worker_exits,
            "master stopped"
        );
        exit
    }

    fn on_internal(&mut self, internal: Internal) {
        match internal {
            Internal::Claimed {
                pool,
                result,
                limit,
                at,
                acks,
            } => self.on_claimed(pool, result, limit, at, acks),
            Internal::NextDue { pool, due } => self.on_next_due(pool, due),
            Internal::Renewed {
                asked,
                at,
                result,
                unanswered,
            } => self.on_renewed(asked, at, result, unanswered),
            Internal::Reaped { registered_again } => self.on_reaped(registered_again),
            Internal::FleetReload(latest) => self.on_fleet_reload(latest),
            Internal::Counted { balancer, result } => self.balance(&balancer, result),
            Internal::Reloaded(result) => self.on_reread(result),
            Internal::Compacted(result) => self.on_compacted(result),
            Internal::QueuePauses(result) => self.on_queue_pauses(result),
            Internal::Withdrawn { queue, round } => self.on_withdrawn(&queue, round),
            Internal::PausesConfirmed { versions, result } => {
                self.on_pauses_confirmed(versions, result)
            }
        }
    }
}
