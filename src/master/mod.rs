//! The master's event loop: it joins the supervisor (workers and their frames) to the broker
//! (leases in PostgreSQL). One task owns all state, held by parts that each own theirs — the
//! claimer, the dispatcher, the settler, the lease keeper (docs/architecture.md, "The loop and who
//! owns what") — and this file only wires them and hands each event to its part. Database calls
//! run in spawned tasks and report back as [`Internal`] events, so a slow statement never stops
//! frames from being read.
//!
//! Wake-ups for claiming: a worker's hello or a settled job (credit came back), `NOTIFY` from the
//! insert trigger, a committed release, the timer set to the next delayed job, a queue resumed
//! (`NOTIFY drover_pauses`, or a `pauseFor` ending), and a slow fallback poll.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_broker::listener::Wakes;
use drover_supervisor::WorkerEvent;
use tokio::sync::mpsc;

use crate::config::RunConfig;
use crate::lifecycle::tally::Tally;
use crate::lifecycle::Lifecycle;
use crate::master::pools::setup::{ConfigSource, WorkerContext};
pub use crate::master::pools::{PoolId, PoolRuntime, Pools};
use crate::process::control::Request;
use crate::process::signals::{Sig, Signals};
use crate::process::systemd::Notifier;
use crate::status_document::Totals;
use crate::store::Store;
use crate::MasterError;

mod admission;
mod balancing;
mod claimer;
mod database_reach;
mod dispatcher;
mod drain;
mod duties;
mod events;
mod forking;
mod history_writer;
mod job_path;
mod leases;
mod life;
mod pool_sizes;
pub mod pools;
mod queue_pauses;
mod recorder;
mod reload;
mod riding_acks;
mod settler;
mod shutdown;
mod status;
mod stops;
#[cfg(test)]
mod tests;
mod timers;
mod workers;

pub(crate) use crate::process::memory::read_pss_kib;
pub use drain::{Exit, StopWhen};
use events::{Event, Inbox, Internal};
use life::{Life, Phase};
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
    /// The Prometheus series the recorder feeds, when `--metrics-listen` serves them. Default
    /// `None`: no series kept.
    pub exposition: Option<Arc<crate::metrics::Exposition>>,
    /// When the master stops by itself (`--stop-when-empty`, `--max-jobs`, `--max-time`). Default:
    /// never; it serves until a signal or `drover terminate`.
    pub stop_when: StopWhen,
    /// OpenTelemetry traces of the jobs (`crate::traces`). Default `None`: no tracer.
    pub traces: Option<crate::traces::TracesConfig>,
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
            exposition: None,
            stop_when: StopWhen::default(),
            traces: None,
        }
    }
}

/// How long an exiting master waits, once every worker is gone, for settles the database has not
/// taken yet (it is away): a service manager's stop timeout must leave room for the shutdown
/// grace and this (the Debian unit's TimeoutStopSec is 45 s against 30 + 10).
pub const SETTLE_WAIT_AT_EXIT: Duration = Duration::from_secs(10);

/// What a reload needs: where the configuration comes from, the configuration running now, and
/// what every worker gets.
pub struct Reloading {
    pub source: ConfigSource,
    /// The configuration running now.
    pub current: RunConfig,
    pub context: WorkerContext,
    /// Where a reload sends the new configuration's schedule settings, for the scheduler
    /// (`crate::scheduling`), which then reads the schedule of the new release. None: no
    /// scheduler listens.
    pub schedule: Option<tokio::sync::watch::Sender<Option<crate::config::ScheduleSpec>>>,
}

impl Reloading {
    pub fn new(source: ConfigSource, current: RunConfig, context: WorkerContext) -> Reloading {
        Reloading {
            source,
            current,
            context,
            schedule: None,
        }
    }

    /// Reloads send their schedule settings to `schedule`.
    pub fn with_schedule(
        mut self,
        schedule: tokio::sync::watch::Sender<Option<crate::config::ScheduleSpec>>,
    ) -> Reloading {
        self.schedule = Some(schedule);
        self
    }
}

/// The master: the wiring of its parts and the loop that gives each event to the part that owns
/// it. A job's way through it, part by part, is `docs/architecture.md`'s "One job, end to end".
pub struct Master {
    config: MasterConfig,
    /// The job store (PostgreSQL through `drover_broker::Broker`; a fake in unit tests); each
    /// part holds the role of it that it uses.
    store: Arc<dyn Store>,
    /// The pools of workers, and who holds what in each (`pools::runtime`).
    pools: Pools,
    /// Where events come from: workers, the loop's own database tasks, the control socket.
    inbox: Inbox,
    /// What to lease, for which pool, and when (`claimer`).
    claimer: claimer::Claimer,
    /// Which worker gets which leased job (`dispatcher`).
    dispatcher: dispatcher::Dispatcher,
    /// What each ending becomes on its way to the database, batched (`settler`).
    settler: settler::Settler,
    /// Renewing the leases held, and the deadlines that keep a job from running twice
    /// (`leases`).
    leases: leases::LeaseKeeper,
    /// Where the master is in its life: running, draining, stopping; paused; why it failed
    /// (`life`).
    life: Life,
    /// Reaping, compaction, retention, the long-wait check, metrics and the status row
    /// (`duties`).
    upkeep: duties::Upkeep,
    /// What changes the pools while the master runs: reloads (SIGHUP, `drover restart`, a fleet
    /// restart) and the autoscaler (`reload`, `balancing`).
    reconfig: reload::Reconfiguring,
    /// Each job's transitions, told to the observers registered at the start: the totals, the
    /// metrics and the history (`crate::lifecycle`).
    lifecycle: Lifecycle,
}

impl Master {
    /// Status and metrics show the schedule `view` gives.
    pub fn with_schedule_view(mut self, view: crate::scheduling::status::ScheduleView) -> Master {
        self.upkeep.schedule = Some(view);
        self
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: MasterConfig,
        store: Arc<dyn Store>,
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
        let pools = Pools::new(pools);
        let inbox = Inbox::new(worker_events, control, wakes);
        let database = Arc::new(database_reach::DatabaseReach::default());
        let settler = settler::Settler::start(
            store.clone(),
            settler::Batching {
                max: config.settle_batch_max,
                // A drain claims once more after the last settle lands, to see the queues empty.
                wake_after_every_batch: config.stop_when.empty,
            },
            inbox.wakes.jobs.clone(),
            config.ack_ride_wait,
            database.clone(),
            {
                let tx = inbox.internal_tx.clone();
                move |report| {
                    let _ = tx.send(Internal::Settles(report));
                }
            },
        );
        let claimer = claimer::Claimer::new(
            store.clone(),
            inbox.internal_tx.clone(),
            config.claim_batch_max,
            Arc::new(reloading.current.queue_budgets()),
            Arc::new(reloading.current.fair_queues()),
        );
        let admitter = admission::Admitter::new(
            store.clone(),
            inbox.internal_tx.clone(),
            inbox.wakes.limits.clone(),
        );
        let dispatcher = dispatcher::Dispatcher::new(store.lease_duration());
        let leases = leases::LeaseKeeper::new(store.clone(), guard, inbox.internal_tx.clone());
        // The observers of every job's way, registered once.
        let mut lifecycle = Lifecycle::default();
        let (tally, totals) = Tally::new();
        lifecycle.register(Box::new(tally));
        lifecycle.register(Box::new(recorder::Metering::start(
            store.clone(),
            config.exposition.clone(),
            config.recorder.clone(),
        )));
        if let Some(traces) = &config.traces {
            // Validated with the configuration: an error here is only logged.
            match crate::traces::start(traces) {
                Ok(tracer) => lifecycle.register(Box::new(tracer)),
                Err(e) => tracing::error!("{e}; no traces are exported"),
            }
        }
        let upkeep = duties::Upkeep::new(admitter, totals);
        let reconfig = reload::Reconfiguring::new(reloading, &pools);
        Master {
            config,
            store,
            pools,
            inbox,
            claimer,
            dispatcher,
            settler,
            leases,
            life: Life::new(notifier, database),
            upkeep,
            reconfig,
            lifecycle,
        }
    }

    /// Start-up's pages back to the kernel, once (`startup_pages`).
    fn release_startup_pages(&mut self) {
        if std::mem::replace(&mut self.life.startup_pages_released, true) {
            return;
        }
        let r = crate::process::startup_pages::release();
        tracing::debug!(
            rss_before_kib = r.rss_before_kib,
            rss_after_kib = r.rss_after_kib,
            "start-up pages handed back to the kernel"
        );
    }

    /// What the master did since start, from the parts that counted it.
    fn totals(&self) -> Totals {
        let counted = self.upkeep.totals.counts();
        Totals {
            claimed: counted.claimed,
            done: counted.done,
            released: counted.released,
            failed: counted.failed,
            returned_unstarted: counted.returned_unstarted,
            acks_ridden: counted.acks_ridden,
            completed_within: counted.completed_within,
            completed_after_exit: counted.completed_after_exit,
            admitted: self.upkeep.admitter.admitted(),
            timed_out: self.pools.iter().map(|p| p.timed_out).sum(),
            worker_exits: self.pools.iter().map(|p| p.exits).sum(),
        }
    }

    fn live_workers(&self) -> usize {
        self.pools.iter().map(|p| p.pool().live()).sum()
    }

    /// Runs until a shutdown completes. Returns after every worker has exited and every settle
    /// has been written, or could not be ([`Exit`]). `signals` were installed at start (see
    /// `crate::process::signals`).
    pub async fn run(mut self, mut signals: Signals) -> Result<Exit, MasterError> {
        for p in &mut self.pools {
            p.start()?;
        }
        let processes: usize = self.pools.iter().map(|p| p.pool().target()).sum();
        self.life.notifier.ready(&format!(
            "{processes} workers in {} pool(s)",
            self.pools.len()
        ));
        let mut timers = Timers::new(
            self.store.lease_duration(),
            self.config.poll_interval,
            self.config.memory_check_interval,
            self.life.notifier.watchdog_interval(),
        );
        self.life.started = Instant::now();
        while !self.finished() {
            for index in self.pools.ids() {
                self.maybe_claim(index);
            }
            self.settler.send_unridden(self.life.running());
            let restarts = self.pools.iter().filter_map(|p| p.next_restart()).min();
            let due = [
                self.claimer.next_wake(),
                self.settler.riding_due(),
                restarts.map(tokio::time::Instant::from_std),
            ]
            .into_iter()
            .flatten()
            .min();
            // `--max-time` only while serving: once draining, its instant is past.
            let stop_at = self.stop_at().filter(|_| self.life.running());
            let grace_over = match self.life.phase {
                Phase::Draining { deadline } => deadline,
                _ => None,
            };
            let event = tokio::select! {
                Some(event) = self.inbox.workers.recv() => Event::Worker(event),
                Some(internal) = self.inbox.internal.recv() => Event::Internal(internal),
                Some(request) = self.inbox.control.recv() => Event::Control(request),
                _ = self.inbox.wakes.jobs.notified() => Event::Wake,
                _ = self.inbox.wakes.pauses.notified() => Event::PausesChanged,
                _ = self.inbox.wakes.reloads.notified() => Event::ReloadAsked,
                _ = self.inbox.wakes.limits.notified() => Event::LimitsWoken,
                _ = self.inbox.wakes.console.notified() => Event::ConsoleAsked,
                tick = timers.next(due, grace_over, stop_at) => Event::Tick(tick),
                sig = signals.recv() => Event::Signal(sig),
            };
            self.handle(event);
            self.check_stop();
        }
        self.settler.send_unridden(false);
        // A claim whose answer was lost may hold jobs no worker got: give them back now, before
        // the settler's last batch, rather than leave them to wait out their lease.
        if self.store.has_unanswered_claims() {
            let found = self.store.unanswered_claims().await;
            self.give_back_unanswered(found);
        }
        Ok(self.finish(signals).await)
    }

    /// Shutting down, every worker gone, no claim in flight (its jobs would need handing back).
    fn finished(&self) -> bool {
        !self.life.running() && self.live_workers() == 0 && self.claimer.oldest_running().is_none()
    }

    /// One event, to the part that owns it.
    fn handle(&mut self, event: Event) {
        match event {
            Event::Worker(event) => self.on_worker_event(event),
            Event::Internal(internal) => self.on_internal(internal),
            Event::Control(request) => self.on_control(request),
            Event::Wake => self.claimer.want_all(),
            Event::PausesChanged => self.on_pauses_changed(),
            Event::ReloadAsked => self.read_fleet_reload(),
            Event::LimitsWoken => self.upkeep.admitter.on_wake(),
            Event::ConsoleAsked => {
                self.read_stop_requests();
                self.read_pool_sizes();
            }
            Event::Tick(tick) => self.on_tick(tick),
            Event::Signal(sig) => self.on_signal(sig),
        }
    }

    fn on_tick(&mut self, tick: Tick) {
        match tick {
            Tick::Poll => self.claimer.want_all(),
            Tick::Due => self.on_due(),
            Tick::Renew => {
                self.leases.sync_guard(&self.pools);
                self.leases.start_renew(&self.pools)
            }
            Tick::LeaseCheck => {
                self.leases
                    .stop_workers_with_expiring_leases(&mut self.pools);
                if self.leases.renewal() == leases::Renewal::Failed {
                    self.leases.start_renew(&self.pools);
                }
            }
            Tick::Timeouts => {
                leases::stop_overdue_jobs(&mut self.pools);
                let now = Instant::now();
                for p in &mut self.pools {
                    p.tick(now);
                }
                self.tick_zygotes();
                self.start_balancing(now);
                self.maybe_read_queue_pauses(tokio::time::Instant::now());
                // A confirmation that failed is tried again.
                self.maybe_confirm_pauses();
                self.republish_once_reachable();
            }
            Tick::Memory => {
                // The fallback for pools that never all serve (the interval's first tick comes
                // at once, during start-up itself).
                if self.life.started.elapsed() >= STARTUP_PAGES_AT_LATEST {
                    self.release_startup_pages();
                }
                for p in &mut self.pools {
                    p.recycle_over_memory();
                }
                self.publish_status();
            }
            Tick::Watchdog => self.life.notifier.watchdog(),
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
        let totals = self.totals();
        let Master {
            settler,
            lifecycle,
            store,
            life,
            ..
        } = self;
        let settling = settler.close();
        // No worker is left and no claim runs: this master hands out nothing more. Its row goes
        // now rather than after the last settles, so no queue pause waits for it meanwhile.
        let leaving = {
            let store = store.clone();
            tokio::spawn(async move { store.deregister().await })
        };
        // The observers' tasks (the recorder's last minutes and history rows).
        let observers = lifecycle.close();
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
            _ = settling.task => {}
            _ = tokio::time::sleep(SETTLE_WAIT_AT_EXIT) => {}
            _ = stop_asked => {}
        }
        let left = settling.unwritten.count();
        let rest = async {
            for task in observers {
                let _ = task.await;
            }
            if let Ok(Err(e)) = leaving.await {
                tracing::warn!(database = %store.address(), "{e}");
            }
        };
        if tokio::time::timeout(Duration::from_secs(5), rest)
            .await
            .is_err()
        {
            tracing::warn!("the last metrics and the node row were not written in 5s: the database does not answer (the row expires by itself)");
        }
        let exit = match (left, life.failed) {
            (0, None) => Exit::Clean,
            (0, Some(why)) => Exit::Failed { why },
            (count, _) => Exit::SettlesUnwritten { count },
        };
        tracing::info!(
            claimed = totals.claimed,
            done = totals.done,
            released = totals.released,
            failed = totals.failed,
            returned_unstarted = totals.returned_unstarted,
            acks_ridden = totals.acks_ridden,
            completed_within = totals.completed_within,
            admitted = totals.admitted,
            timed_out = totals.timed_out,
            worker_exits = totals.worker_exits,
            "master stopped"
        );
        exit
    }

    fn on_internal(&mut self, internal: Internal) {
        match internal {
            Internal::Claimed(answer) => self.on_claimed(answer),
            Internal::NextDue { pool, due } => self.claimer.on_next_due(pool, due),
            Internal::Renewed(answer) => self.on_renewed(answer),
            Internal::Reaped {
                registered_again,
                reaped,
            } => self.on_reaped(registered_again, reaped),
            Internal::Settles(report) => self.on_settles(report),
            Internal::Admitted(result) => self.upkeep.admitter.on_pass_ended(result),
            Internal::FleetReload(latest) => self.on_fleet_reload(latest),
            Internal::StopRequests(found) => self.on_stop_requests(found),
            Internal::PoolSizes(found) => self.on_pool_sizes(found),
            Internal::Backlog { balancer, result } => self.balance(&balancer, result),
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
