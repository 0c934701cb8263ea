//! A pool of identical workers: started together, restarted with backoff when they die, held back
//! by a circuit breaker when they keep dying, scaled up and down, replaced one by one on a reload,
//! stopped together. The pool does not decide what a worker's death means for its jobs — the master
//! does, on the `Exited` event.
//!
//! A worker's life as the pool sees it:
//!
//! ```text
//! spawned ──hello──▶ ready (serving) ──lived healthy_after──▶ healthy
//!    │                 │                                        │
//!    │ no hello within boot_timeout: killed                     │
//!    ▼                 ▼                                        ▼
//!  boot failure:       death in service (killed by OOM, an operator, a job that crashes it):
//!  backoff, counts     replaced at once — a short backoff (100 ms doubling to 1 s) only while
//!  toward the circuit  serving workers keep dying before they lived `healthy_after`; never
//!                      counts toward the circuit
//! planned exits (retired by the pool, a planned exit code after hello) are replaced at once
//! ```
//!
//! The circuit is for code that cannot boot (a broken release, a missing extension): it would
//! spin forever. A worker that said hello can boot; if something kills it in service, the pool
//! must keep its strength, and a job that kills its worker is settled by its attempts, not by
//! taking every other job's workers away.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::backoff::Backoff;
use crate::channel::Outgoing;
use crate::child::Signal;
use crate::circuit::{Circuit, CircuitConfig, CircuitState, MayStart};
use crate::command::WorkerCommand;
use crate::events::WorkerEvent;
use crate::protocol::ToWorker;
use crate::worker::{self, WorkerHandle};
use crate::worker_id::WorkerId;
use crate::zygote_line::{Fork, ZygoteLine};
use crate::SupervisorError;

#[cfg(feature = "stand-ins")]
mod stand_in;
#[cfg(feature = "stand-ins")]
pub use stand_in::StandIn;

/// A worker that exits as planned after living this long is replaced without a pause.
const PLANNED_AT_ONCE_AFTER: Duration = Duration::from_secs(1);

/// How a pool's workers are started.
#[derive(Debug, Clone, Default)]
pub enum Spawn {
    /// Each worker is its own `exec` of the command (it boots the application itself).
    #[default]
    Exec,
    /// Workers are forked from the line's zygote; while it is not ready they wait, and when the
    /// line falls back they are started by exec.
    Fork(ZygoteLine),
}

/// One pool's settings.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Name for logs. Default `default`.
    pub name: String,
    /// How many workers run at once (until [`Pool::scale_to`] says otherwise). Default 4.
    pub processes: usize,
    /// How to start one.
    pub command: WorkerCommand,
    /// The longest frame a worker may send, newline excluded. Default 1 MiB.
    pub max_frame_bytes: usize,
    /// Restart delays.
    pub backoff: Backoff,
    /// When to stop restarting a crash-looping worker for a while.
    pub circuit: CircuitConfig,
    /// A worker that has not said hello this long after it was started is killed and counted as
    /// a failed start. Default 60 s.
    pub boot_timeout: Duration,
    /// Started by exec (default) or forked from a zygote.
    pub spawn: Spawn,
}

impl PoolConfig {
    pub fn new(command: WorkerCommand) -> Self {
        PoolConfig {
            name: "default".to_string(),
            processes: 4,
            command,
            max_frame_bytes: 1 << 20,
            backoff: Backoff::default(),
            circuit: CircuitConfig::default(),
            boot_timeout: Duration::from_secs(60),
            spawn: Spawn::Exec,
        }
    }

    pub fn validate(&self) -> Result<(), SupervisorError> {
        let mut problems = Vec::new();
        if self.max_frame_bytes < 1024 {
            problems.push(format!(
                "pool {}: max_frame_bytes must be at least 1024",
                self.name
            ));
        }
        if self.command.program.as_os_str().is_empty() {
            problems.push(format!("pool {}: no worker command given", self.name));
        }
        if self.boot_timeout.is_zero() {
            problems.push(format!("pool {}: boot_timeout must be positive", self.name));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SupervisorError::Config(problems))
        }
    }
}

/// What the master can tell a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Finish the running job, start no other, exit (a `stop` frame).
    Stop,
    /// Start no new job until resumed (a `pause` frame).
    Pause,
    /// Start jobs again.
    Resume,
    /// SIGTERM.
    Terminate,
    /// SIGKILL: for misbehaving workers and immediate shutdown.
    Kill,
}

/// A live worker as the pool sees it.
#[derive(Debug)]
struct Slot {
    /// Which of the pool's places it fills; a restart fills the same place.
    index: usize,
    handle: WorkerHandle,
    /// The configuration generation it was started with; a reload starts a new one.
    generation: u64,
    /// When it said hello.
    ready_at: Option<Instant>,
    /// It said hello and then lived `healthy_after`: its death resets the in-service backoff.
    healthy: bool,
    /// Told to exit by the pool (scale down, reload, recycle): its exit is planned.
    retiring: bool,
    /// Killed for not saying hello within `boot_timeout`.
    boot_timed_out: bool,
    /// The circuit's half-open probe.
    probe: bool,
}

/// A worker's line for status.
#[derive(Debug, Clone)]
pub struct WorkerInfo {
    pub id: WorkerId,
    pub pid: u32,
    pub generation: u64,
    pub spawned_at: Instant,
    pub ready: bool,
    pub retiring: bool,
    /// Forked from a zygote (else started by exec).
    pub forked: bool,
}

/// What became of a worker's exit ([`Pool::on_exit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitVerdict {
    /// It left on purpose, or was asked to (retired, killed for a timeout, never ran): not a
    /// crash.
    pub planned: bool,
    /// When its replacement starts, if one does.
    pub restart_in: Option<Duration>,
}

pub struct Pool {
    config: PoolConfig,
    /// Where worker events go (the master's one event channel).
    events: mpsc::UnboundedSender<WorkerEvent>,
    /// Live workers by id.
    workers: HashMap<WorkerId, Slot>,
    /// Restart delays, shared by the pool so a crash loop slows every restart.
    backoff: Backoff,
    /// Stops restarts for a while when workers keep dying young.
    circuit: Circuit,
    /// Serving workers that died in a row before living `healthy_after` (the in-service backoff).
    in_service_deaths: u32,
    /// How many places the pool fills now.
    target: usize,
    /// The current configuration generation, bumped by [`Pool::reload`].
    generation: u64,
    /// A reload's step in progress: the new worker and the old one it will replace once ready.
    replacing: Option<(WorkerId, WorkerId)>,
    /// Places whose restart waits out a backoff, and when it is due: the master's loop wakes at
    /// the earliest ([`Pool::next_restart`]) and starts them ([`Pool::start_due_restarts`]).
    restarts_due: BTreeMap<usize, Instant>,
    /// No reload step before this (the last new worker died young: its backoff).
    reload_not_before: Option<Instant>,
    /// Set by [`Pool::shut_down`]: no more starts.
    closing: bool,
    /// In a master's unit test, the stand-ins placed instead of processes (`stand_in`); `None`:
    /// starts spawn processes.
    #[cfg(feature = "stand-ins")]
    stand_ins: Option<Vec<StandIn>>,
}

impl Pool {
    pub fn new(
        config: PoolConfig,
        events: mpsc::UnboundedSender<WorkerEvent>,
    ) -> Result<Pool, SupervisorError> {
        config.validate()?;
        Ok(Pool {
            backoff: config.backoff.clone(),
            circuit: Circuit::new(config.circuit.clone()),
            in_service_deaths: 0,
            target: config.processes,
            config,
            events,
            workers: HashMap::new(),
            generation: 0,
            replacing: None,
            restarts_due: BTreeMap::new(),
            reload_not_before: None,
            closing: false,
            #[cfg(feature = "stand-ins")]
            stand_ins: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Starts every place of the pool (in fork mode, the places wait for the zygote: see
    /// [`Pool::refill`]).
    pub fn start(&mut self) -> Result<(), SupervisorError> {
        for index in 0..self.target {
            if let MayStart::Yes | MayStart::Probe = self.circuit.may_start(Instant::now()) {
                self.spawn_into(index, false)?;
            }
        }
        Ok(())
    }

    /// Starts every place as [`Pool::start`] does, but a start that fails is counted and tried
    /// again later (the restart backoff and the circuit), as for a worker that died young: for a
    /// pool added to a running master, where no caller could do anything with the error.
    pub fn start_retrying(&mut self) {
        self.fill_all(Instant::now());
    }

    /// Starts a worker in place `index`: by exec, or by asking the zygote. `None` when the place
    /// waits for a zygote that is not ready.
    fn spawn_into(
        &mut self,
        index: usize,
        probe: bool,
    ) -> Result<Option<WorkerId>, SupervisorError> {
        #[cfg(feature = "stand-ins")]
        if self.stand_ins.is_some() {
            return Ok(Some(self.place_stand_in(index, probe)));
        }
        let id = WorkerId::next();
        let fork = match &self.config.spawn {
            Spawn::Exec => Fork::Exec,
            Spawn::Fork(line) => line.fork(id, self.config.max_frame_bytes, self.events.clone()),
        };
        let handle = match fork {
            Fork::Forking(handle) => handle,
            Fork::Wait => {
                if probe {
                    // Not started: the circuit lets the next start be its probe.
                    self.circuit.probe_gone();
                }
                return Ok(None);
            }
            Fork::Exec => worker::spawn(
                id,
                &self.config.command,
                self.config.max_frame_bytes,
                self.events.clone(),
            )?,
        };
        let how = if handle.zygote.is_some() {
            "forked"
        } else {
            "started"
        };
        let pid = handle.pid();
        if probe {
            tracing::info!(pool = %self.config.name, worker = id.0, pid, "worker {how} as the circuit's probe (restarts resume if it becomes healthy)");
        } else {
            tracing::info!(pool = %self.config.name, worker = id.0, pid, generation = self.generation, "worker {how}");
        }
        self.place(id, index, handle, probe);
        Ok(Some(id))
    }

    /// A worker just started (or a stand-in) takes place `index`, of this generation, not yet
    /// ready.
    fn place(&mut self, id: WorkerId, index: usize, handle: WorkerHandle, probe: bool) {
        self.workers.insert(
            id,
            Slot {
                index,
                handle,
                generation: self.generation,
                ready_at: None,
                healthy: false,
                retiring: false,
                boot_timed_out: false,
                probe,
            },
        );
    }

    fn occupied(&self, index: usize) -> bool {
        self.workers.values().any(|s| s.index == index)
    }

    /// Starts a worker in an empty place if the circuit lets it, or arranges to try again when it
    /// will.
    fn fill(&mut self, index: usize, now: Instant) {
        if self.closing || index >= self.target || self.occupied(index) {
            return;
        }
        match self.circuit.may_start(now) {
            answer @ (MayStart::Yes | MayStart::Probe) => {
                let probe = answer == MayStart::Probe;
                if let Err(e) = self.spawn_into(index, probe) {
                    tracing::error!(pool = %self.config.name, "{e}");
                    // A failed start; try again later rather than leave the place empty.
                    let delay = self.count_early_death(now);
                    self.restart_after(index, delay);
                }
            }
            MayStart::NotUntil(at) => self.restart_after(index, at.saturating_duration_since(now)),
            // Filled when the probe proves healthy (see `tick`).
            MayStart::WaitForProbe => {}
        }
    }

    fn fill_all(&mut self, now: Instant) {
        for index in 0..self.target {
            self.fill(index, now);
        }
    }

    /// Fills the places waiting for a zygote: call when the pool's line says its zygote became
    /// ready or the pool fell back to exec.
    pub fn refill(&mut self) {
        self.fill_all(Instant::now());
    }

    /// The zygote line this pool forks from, if any.
    pub fn line(&self) -> Option<&ZygoteLine> {
        match &self.config.spawn {
            Spawn::Fork(line) => Some(line),
            Spawn::Exec => None,
        }
    }

    fn restart_after(&mut self, index: usize, delay: Duration) {
        self.restarts_due
            .entry(index)
            .or_insert_with(|| Instant::now() + delay);
    }

    /// When the earliest restart waiting out its backoff is due.
    pub fn next_restart(&self) -> Option<Instant> {
        self.restarts_due.values().min().copied()
    }

    /// Starts the workers whose restart is due at `now`.
    pub fn start_due_restarts(&mut self, now: Instant) {
        let due: Vec<usize> = self
            .restarts_due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(index, _)| *index)
            .collect();
        for index in due {
            self.restarts_due.remove(&index);
            self.fill(index, now);
        }
    }

    /// Sends a frame; false if the worker is gone.
    pub fn send(&self, id: WorkerId, frame: ToWorker) -> bool {
        self.workers
            .get(&id)
            .is_some_and(|s| s.handle.frames.send(Outgoing::frame(frame)).is_ok())
    }

    /// Sends a frame and says when it was written: the receiver is told once the whole frame is
    /// in the worker's socket, so the worker reads it before it starts another job (it reads
    /// every frame waiting first, docs/protocol.md). It is dropped unsent when the frame never
    /// got there: the worker is gone or going, and starts nothing more either way.
    pub fn send_written(&self, id: WorkerId, frame: ToWorker) -> oneshot::Receiver<()> {
        let (written, heard) = oneshot::channel();
        if let Some(slot) = self.workers.get(&id) {
            let _ = slot.handle.frames.send(Outgoing {
                frame,
                written: Some(written),
            });
        }
        heard
    }

    pub fn control(&self, id: WorkerId, control: Control) {
        let Some(slot) = self.workers.get(&id) else {
            return;
        };
        let _ = match control {
            Control::Stop => slot
                .handle
                .frames
                .send(Outgoing::frame(ToWorker::Stop))
                .map_err(drop),
            Control::Pause => slot
                .handle
                .frames
                .send(Outgoing::frame(ToWorker::Pause))
                .map_err(drop),
            Control::Resume => slot
                .handle
                .frames
                .send(Outgoing::frame(ToWorker::Resume))
                .map_err(drop),
            Control::Terminate => slot.handle.signals.send(Signal::Terminate).map_err(drop),
            Control::Kill => slot.handle.signals.send(Signal::Kill).map_err(drop),
        };
    }

    /// Tells every live worker the same thing.
    pub fn control_all(&self, control: Control) {
        for id in self.workers.keys() {
            self.control(*id, control);
        }
    }

    /// Asks a worker to finish its job and exit; its exit is planned and its place is filled
    /// again (unless the pool shrank). False if it is gone or already retiring.
    pub fn retire(&mut self, id: WorkerId) -> bool {
        let Some(slot) = self.workers.get_mut(&id) else {
            return false;
        };
        if slot.retiring {
            return false;
        }
        slot.retiring = true;
        let _ = slot.handle.frames.send(Outgoing::frame(ToWorker::Stop));
        true
    }

    /// The PID of a live worker (a forked one's once it is known).
    pub fn pid(&self, id: WorkerId) -> Option<u32> {
        self.workers.get(&id).and_then(|s| s.handle.pid())
    }

    /// True if this worker belongs to this pool (ids are unique across pools).
    pub fn owns(&self, id: WorkerId) -> bool {
        self.workers.contains_key(&id)
    }

    /// True if this worker was asked to finish its job and exit ([`Pool::retire`]).
    pub fn is_retiring(&self, id: WorkerId) -> bool {
        self.workers.get(&id).is_some_and(|s| s.retiring)
    }

    /// Live worker ids.
    pub fn ids(&self) -> impl Iterator<Item = WorkerId> + '_ {
        self.workers.keys().copied()
    }

    /// Live workers, retiring ones included.
    pub fn live(&self) -> usize {
        self.workers.len()
    }

    /// Ready workers that are not retiring: the pool's working capacity.
    pub fn serving(&self) -> usize {
        self.workers
            .values()
            .filter(|s| s.ready_at.is_some() && !s.retiring)
            .count()
    }

    /// How many places the pool fills.
    pub fn target(&self) -> usize {
        self.target
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn circuit(&self) -> CircuitState {
        self.circuit.state()
    }

    /// Early deaths since the last healthy worker.
    pub fn failures_in_a_row(&self) -> u32 {
        self.circuit.failures_in_a_row()
    }

    /// Every live worker, for status.
    pub fn workers(&self) -> Vec<WorkerInfo> {
        let mut out: Vec<WorkerInfo> = self
            .workers
            .iter()
            .map(|(id, s)| WorkerInfo {
                id: *id,
                pid: s.handle.pid().unwrap_or(0),
                generation: s.generation,
                forked: s.handle.zygote.is_some(),
                spawned_at: s.handle.spawned_at,
                ready: s.ready_at.is_some(),
                retiring: s.retiring,
            })
            .collect();
        out.sort_by_key(|w| w.id);
        out
    }

    /// The worker said hello. Returns the old worker a reload step now retires (already told to
    /// stop), so the master stops handing it jobs.
    pub fn mark_ready(&mut self, id: WorkerId, now: Instant) -> Option<WorkerId> {
        let slot = self.workers.get_mut(&id)?;
        slot.ready_at = Some(now);
        // It booted: the code can start, so boot failures no longer hold the pool back.
        if self.circuit.on_healthy() {
            tracing::info!(pool = %self.config.name, "a worker booted; restarts resume (circuit closed)");
            self.fill_all(now);
        }
        match self.replacing {
            Some((new, old)) if new == id => {
                self.replacing = None;
                let retired = self.retire(old).then_some(old);
                // The next step at once, not at the next tick: a reload of forked workers takes
                // milliseconds per worker.
                self.step_reload(now);
                retired
            }
            _ => None,
        }
    }

    /// Forgets an exited worker, decides whether the exit was planned — the one place that does
    /// — and, unless the pool is closing or shrank, schedules its replacement. `None` for a
    /// worker it does not know.
    /// `status`: how the process ended, if known; a worker means to leave with code 0 or 12
    /// ([`crate::exit::meant`]). `killed_for_timeout`: the master killed it because its job
    /// outran its timeout, which is planned too. Either counts as planned only if the worker had
    /// said hello: a worker that exits 0 before it is even ready is a failed start.
    /// `ran_jobs`: it finished at least one job, so a planned exit is its work done (Laravel's
    /// `max_jobs`, 1 under `queue:listen`), not a worker that leaves as soon as it starts.
    pub fn on_exit(
        &mut self,
        id: WorkerId,
        status: Option<std::process::ExitStatus>,
        killed_by_master: bool,
        ran_jobs: bool,
    ) -> Option<ExitVerdict> {
        let planned_code = killed_by_master || crate::exit::meant(status);
        let now = Instant::now();
        let slot = self.workers.remove(&id)?;
        // A forked worker that never reached the master (the zygote could not fork it, died, did
        // not answer, or the process died before it connected): nothing of the worker's ran, so
        // nothing counts against it; the line judges its zygote.
        let never_ran = !slot.handle.attached();
        let planned = never_ran
            || slot.retiring
            || (planned_code && slot.ready_at.is_some() && !slot.boot_timed_out);
        // A boot failure: it never said hello (or was killed for not saying it in time).
        let early = !planned && slot.ready_at.is_none();
        let in_service = !planned && !early;
        let replacement_failed = matches!(self.replacing, Some((new, _)) if new == id);
        if replacement_failed {
            // The reload's new worker died before it was ready: the old one keeps serving, and
            // `tick` tries again after the backoff.
            self.replacing = None;
        }
        let delay = if early {
            self.count_early_death(now)
        } else if in_service {
            // Killed while serving: replaced at once, only slowed down (to 1 s at most) while
            // serving workers keep dying young, so a crash loop after hello cannot spin.
            self.in_service_deaths = if slot.healthy {
                1
            } else {
                self.in_service_deaths.saturating_add(1)
            };
            self.backoff.in_service_delay(self.in_service_deaths)
        } else {
            if slot.probe {
                self.circuit.probe_gone();
            }
            // A planned exit (max_jobs, max_time, a memory limit) of a worker that ran jobs or
            // served a while is replaced at once — in fork mode within milliseconds; one that
            // goes right after its start with nothing done waits `min`, so a worker that always
            // exits at once cannot spin.
            if ran_jobs || slot.handle.spawned_at.elapsed() >= PLANNED_AT_ONCE_AFTER {
                Duration::ZERO
            } else {
                self.backoff.min
            }
        };
        if replacement_failed && early {
            self.reload_not_before = Some(now + delay);
        }
        let mut verdict = ExitVerdict {
            planned,
            restart_in: None,
        };
        if self.closing || slot.index >= self.target || self.occupied(slot.index) {
            return Some(verdict);
        }
        if delay.is_zero() {
            self.fill(slot.index, now);
        } else {
            self.restart_after(slot.index, delay);
        }
        verdict.restart_in = Some(delay);
        Some(verdict)
    }

    /// Counts an early death (or a failed start) toward the circuit; returns the backoff before
    /// the next start.
    fn count_early_death(&mut self, now: Instant) -> Duration {
        if self.circuit.on_early_death(now) {
            tracing::error!(
                pool = %self.config.name,
                failures = self.circuit.failures_in_a_row(),
                "workers keep dying before they are healthy; restarts are suspended (circuit open), then one probe worker will be tried"
            );
        }
        self.backoff.delay(self.circuit.failures_in_a_row())
    }

    /// Time-driven duties, called often (every 100 ms): kill workers that did not say hello in
    /// time, mark workers that lived `healthy_after` healthy, and take the next step of a reload.
    /// Returns the worker a reload step retired (an old one past the target), for the caller's
    /// record of it to follow.
    pub fn tick(&mut self, now: Instant) -> Option<WorkerId> {
        let boot_timeout = self.config.boot_timeout;
        let healthy_after = self.backoff.healthy_after;
        let mut lived_long = false;
        for (id, slot) in self.workers.iter_mut() {
            match slot.ready_at {
                None if !slot.boot_timed_out && now >= slot.handle.spawned_at + boot_timeout => {
                    slot.boot_timed_out = true;
                    match (&self.config.spawn, slot.handle.pid()) {
                        (Spawn::Fork(line), None) if slot.handle.zygote.is_some() => {
                            // Never forked: the zygote is the one not answering.
                            line.unresponsive(*id);
                        }
                        (_, pid) => {
                            tracing::warn!(pool = %self.config.name, worker = id.0, pid, ?boot_timeout, "worker did not say hello in time; killing it (a failed start)");
                            let _ = slot.handle.signals.send(Signal::Kill);
                        }
                    }
                }
                Some(ready) if !slot.healthy && now >= ready + healthy_after => {
                    slot.healthy = true;
                    lived_long = true;
                }
                _ => {}
            }
        }
        if lived_long {
            self.in_service_deaths = 0;
        }
        self.step_reload(now)
    }

    /// One worker at a time: start a new-generation worker in the place of an old one; the old one
    /// is retired when the new one says hello ([`Pool::mark_ready`]). Capacity never drops below
    /// the target minus one, and while new workers fail to start, the old ones keep serving.
    fn step_reload(&mut self, now: Instant) -> Option<WorkerId> {
        if self.closing || self.replacing.is_some() {
            return None;
        }
        let generation = self.generation;
        let (old, index) = self
            .workers
            .iter()
            .filter(|(_, s)| s.generation < generation && !s.retiring)
            .min_by_key(|(_, s)| s.index)
            .map(|(id, s)| (*id, s.index))?;
        if index >= self.target {
            return self.retire(old).then_some(old);
        }
        if self.restarts_due.contains_key(&index) || self.reload_not_before.is_some_and(|t| now < t)
        {
            return None;
        }
        if let answer @ (MayStart::Yes | MayStart::Probe) = self.circuit.may_start(now) {
            match self.spawn_into(index, answer == MayStart::Probe) {
                Ok(Some(new)) => self.replacing = Some((new, old)),
                // The new zygote is not ready yet: the next tick tries again.
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(pool = %self.config.name, "{e}");
                    let delay = self.count_early_death(now);
                    self.reload_not_before = Some(now + delay);
                }
            }
        }
        None
    }

    /// Grows or shrinks the pool. Shrinking retires the workers of the places that go (they finish
    /// their job); returns them so the master stops handing them jobs.
    pub fn scale_to(&mut self, processes: usize) -> Vec<WorkerId> {
        let now = Instant::now();
        self.target = processes;
        let going: Vec<WorkerId> = self
            .workers
            .iter()
            .filter(|(_, s)| s.index >= processes && !s.retiring)
            .map(|(id, _)| *id)
            .collect();
        for id in &going {
            self.retire(*id);
        }
        self.fill_all(now);
        going
    }

    /// A new configuration: workers started from now on use its command (or are forked as its
    /// `spawn` says) and run by its limits, and the running ones are replaced one by one (see
    /// [`Pool::tick`]). Its name and size are ignored: the caller scales with [`Pool::scale_to`].
    pub fn reload(&mut self, new: PoolConfig) -> Result<(), SupervisorError> {
        new.validate()?;
        // Everything but the name and the size (the caller scales): the command and spawn mode
        // for the new workers, and the frame limit, boot timeout and restart rules they run by.
        self.config = PoolConfig {
            name: std::mem::take(&mut self.config.name),
            processes: self.config.processes,
            ..new
        };
        self.backoff = self.config.backoff.clone();
        self.generation += 1;
        // New code gets its own chances: a rollback after a release that could not boot starts
        // at once instead of after the open circuit's pause. New code that dies early opens the
        // circuit again, by the new rules.
        self.circuit.reset(self.config.circuit.clone());
        self.reload_not_before = None;
        Ok(())
    }

    /// No more starts from now on.
    pub fn shut_down(&mut self) {
        self.closing = true;
    }

    /// When this worker started.
    pub fn spawned_at(&self, id: WorkerId) -> Option<Instant> {
        self.workers.get(&id).map(|s| s.handle.spawned_at)
    }
}
