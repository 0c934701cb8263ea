//! A pool of identical workers: started together, restarted with backoff when they die, stopped
//! together. The pool does not decide what a worker's death means for its jobs — the master does,
//! on the `Exited` event.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::backoff::Backoff;
use crate::protocol::ToWorker;
use crate::worker::{self, Signal, WorkerCommand, WorkerEvent, WorkerHandle, WorkerId};
use crate::SupervisorError;

/// One pool's settings.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Name for logs. Default `default`.
    pub name: String,
    /// How many workers run at once. Default 4.
    pub processes: usize,
    /// How to start one.
    pub command: WorkerCommand,
    /// The longest frame a worker may send, newline excluded. Default 1 MiB.
    pub max_frame_bytes: usize,
    /// Restart delays.
    pub backoff: Backoff,
}

impl PoolConfig {
    pub fn new(command: WorkerCommand) -> Self {
        PoolConfig {
            name: "default".to_string(),
            processes: 4,
            command,
            max_frame_bytes: 1 << 20,
            backoff: Backoff::default(),
        }
    }

    pub fn validate(&self) -> Result<(), SupervisorError> {
        let mut problems = Vec::new();
        if self.processes == 0 {
            problems.push(format!("pool {}: processes must be at least 1", self.name));
        }
        if self.max_frame_bytes < 1024 {
            problems.push(format!(
                "pool {}: max_frame_bytes must be at least 1024",
                self.name
            ));
        }
        if self.command.program.as_os_str().is_empty() {
            problems.push(format!("pool {}: no worker command given", self.name));
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
    /// Which of the pool's `processes` places it fills; a restart fills the same place.
    index: usize,
    handle: WorkerHandle,
}

pub struct Pool {
    config: PoolConfig,
    /// Where worker events go (the master's one event channel).
    events: mpsc::UnboundedSender<WorkerEvent>,
    /// Live workers by id.
    workers: HashMap<WorkerId, Slot>,
    /// Restart delays, shared by the pool so a crash loop slows every restart.
    backoff: Backoff,
    /// Set by [`Pool::shut_down`]: no more restarts.
    closing: bool,
}

impl Pool {
    pub fn new(
        config: PoolConfig,
        events: mpsc::UnboundedSender<WorkerEvent>,
    ) -> Result<Pool, SupervisorError> {
        config.validate()?;
        Ok(Pool {
            backoff: config.backoff.clone(),
            config,
            events,
            workers: HashMap::new(),
            closing: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Starts every place of the pool.
    pub fn start(&mut self) -> Result<(), SupervisorError> {
        for index in 0..self.config.processes {
            self.spawn_into(index)?;
        }
        Ok(())
    }

    fn spawn_into(&mut self, index: usize) -> Result<WorkerId, SupervisorError> {
        let id = WorkerId::next();
        let handle = worker::spawn(
            id,
            &self.config.command,
            self.config.max_frame_bytes,
            self.events.clone(),
        )?;
        tracing::info!(pool = %self.config.name, worker = id.0, pid = handle.pid, "worker started");
        self.workers.insert(id, Slot { index, handle });
        Ok(id)
    }

    /// Sends a frame; false if the worker is gone.
    pub fn send(&self, id: WorkerId, frame: ToWorker) -> bool {
        self.workers
            .get(&id)
            .is_some_and(|s| s.handle.frames.send(frame).is_ok())
    }

    pub fn control(&self, id: WorkerId, control: Control) {
        let Some(slot) = self.workers.get(&id) else {
            return;
        };
        let _ = match control {
            Control::Stop => slot.handle.frames.send(ToWorker::Stop).map_err(drop),
            Control::Pause => slot.handle.frames.send(ToWorker::Pause).map_err(drop),
            Control::Resume => slot.handle.frames.send(ToWorker::Resume).map_err(drop),
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

    /// The PID of a live worker.
    pub fn pid(&self, id: WorkerId) -> Option<u32> {
        self.workers.get(&id).map(|s| s.handle.pid)
    }

    /// True if this worker belongs to this pool (ids are unique across pools).
    pub fn owns(&self, id: WorkerId) -> bool {
        self.workers.contains_key(&id)
    }

    /// Live worker ids.
    pub fn ids(&self) -> impl Iterator<Item = WorkerId> + '_ {
        self.workers.keys().copied()
    }

    pub fn live(&self) -> usize {
        self.workers.len()
    }

    /// Forgets an exited worker and, unless the pool is closing, schedules its replacement;
    /// returns the restart delay.
    /// `planned`: the worker exited by itself on purpose (max_jobs, max_time, memory limit,
    /// queue:restart): it is restarted at once and does not count as an early death.
    pub fn on_exit(&mut self, id: WorkerId, lived: Duration, planned: bool) -> Option<Duration> {
        let slot = self.workers.remove(&id)?;
        if self.closing {
            return None;
        }
        let delay = if planned {
            self.backoff.on_planned_exit()
        } else {
            self.backoff.on_exit(lived)
        };
        let events = self.events.clone();
        let index = slot.index;
        let pool = self.config.name.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = events.send(WorkerEvent::RestartDue { pool, slot: index });
        });
        Some(delay)
    }

    /// Fills a place whose restart delay has passed. Returns the new worker, if one was started.
    pub fn on_restart_due(&mut self, index: usize) -> Option<WorkerId> {
        if self.closing || self.workers.values().any(|s| s.index == index) {
            return None;
        }
        match self.spawn_into(index) {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::error!(pool = %self.config.name, "{e}");
                // Try again later rather than leave the place empty.
                let delay = self.backoff.on_exit(Duration::ZERO);
                let events = self.events.clone();
                let pool = self.config.name.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = events.send(WorkerEvent::RestartDue { pool, slot: index });
                });
                None
            }
        }
    }

    /// No more restarts from now on.
    pub fn shut_down(&mut self) {
        self.closing = true;
    }

    /// When this worker started.
    pub fn spawned_at(&self, id: WorkerId) -> Option<Instant> {
        self.workers.get(&id).map(|s| s.handle.spawned_at)
    }
}
