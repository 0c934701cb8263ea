//! Fork mode: workers forked from a zygote — a PHP process that booted the application once —
//! instead of each booting it (docs/decisions/0001-fork-workers-from-a-zygote.md).
//!
//! - [`ZygoteLine`]: one per pool of the configuration, shared by that pool's members (a balanced
//!   pool's per-queue pools fork from one zygote). It keeps the current zygote, asks it for
//!   workers, matches the `forked` reports to them, and drives [`state::next`].
//! - [`state`]: the pure state machine deciding whether the pool forks now, restarts its zygote,
//!   or falls back to exec.
//! - [`crate::zygote`]: one zygote process and its tasks. It is a module of its own, outside the
//!   line: every worker forked from a zygote holds it (`crate::worker`), and the line asks for
//!   those workers — the line stands above the workers, a zygote below them.
//!
//! Generations: a reload starts a new zygote from the new release; the old one is retired — told
//! to exit once the last worker forked from it is gone (each holds an `Arc` of it).

pub mod state;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::adopted::{self, PidCell};
use crate::backoff::Backoff;
use crate::command::WorkerCommand;
use crate::events::{WorkerEvent, ZygoteEvent};
use crate::exit::describe_exit;
use crate::one_off::{self, OneOff};
use crate::protocol::{FromZygote, MIN_ZYGOTE_PROTOCOL_VERSION, ZYGOTE_PROTOCOL_VERSION};
use crate::rendezvous::Rendezvous;
use crate::subreaper;
use crate::worker::{self, WorkerHandle};
use crate::worker_id::WorkerId;
use crate::zygote::Zygote;

use state::{Action, Event, Rules, State};

/// How a line's zygotes are started.
#[derive(Debug, Clone)]
pub struct ZygoteConfig {
    /// The zygote's command: the workers' (with their environment, directory, user and nice
    /// value), possibly with interpreter flags of its own (`php -d opcache.enable_cli=1 ...`).
    pub command: WorkerCommand,
    /// How long a zygote may take to say it is ready. Default 60 s (the workers' boot_timeout).
    pub boot_timeout: Duration,
    /// Restart delays after a death. Default: the workers'.
    pub backoff: Backoff,
    /// Deaths or failed forks in a row before the pool falls back to exec. Default 5 (the
    /// workers' restart circuit).
    pub failures: u32,
    /// The longest frame a zygote may send. Default 1 MiB.
    pub max_frame_bytes: usize,
}

impl ZygoteConfig {
    pub fn new(command: WorkerCommand) -> ZygoteConfig {
        let rules = Rules::default();
        ZygoteConfig {
            command,
            boot_timeout: rules.boot_timeout,
            backoff: rules.backoff,
            failures: rules.failures,
            max_frame_bytes: 1 << 20,
        }
    }

    fn rules(&self) -> Rules {
        Rules {
            boot_timeout: self.boot_timeout,
            backoff: self.backoff.clone(),
            failures: self.failures.max(1),
        }
    }
}

/// What a pool gets when it wants a worker from its line.
pub(crate) enum Fork {
    /// Asked for: the handle of the worker to come.
    Forking(WorkerHandle),
    /// No zygote is ready yet: the place waits (the pool is told to fill it when one is).
    Wait,
    /// Start it by exec (the pool is configured so, or fell back).
    Exec,
}

/// A line's state for `drover status`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ZygoteStatus {
    /// `fork` or `exec`: how the next worker is started.
    pub mode: &'static str,
    /// `booting`, `ready`, `restarting`, `exec`, `closed`.
    pub state: &'static str,
    /// The current zygote's PID.
    pub pid: Option<u32>,
    /// Why the pool starts its workers by exec although it is configured to fork.
    pub fell_back: Option<String>,
    /// The line's generation: bumped by every reload.
    pub generation: u64,
}

/// A worker asked of a zygote and not yet reported.
struct Pending {
    /// The zygote asked.
    zygote: u64,
    /// Where its PID goes.
    cell: PidCell,
    /// When it was asked (`proc_stat::boot_ticks_now`): what the zygote reports must be younger.
    asked_at: u64,
}

/// One pool's zygotes over time. Cloning shares it.
#[derive(Clone)]
pub struct ZygoteLine {
    inner: Arc<Mutex<Line>>,
}

impl std::fmt::Debug for ZygoteLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = self.lock();
        f.debug_struct("ZygoteLine")
            .field("name", &line.name)
            .field("state", &line.state)
            .finish_non_exhaustive()
    }
}

struct Line {
    /// The pool's name in the configuration (its members' names start with it).
    name: String,
    /// `None`: the pool starts its workers by exec.
    config: Option<ZygoteConfig>,
    /// The state machine's rules (the last configuration's).
    rules: Rules,
    /// Where forked workers connect, or why there is no such socket (then nothing forks).
    rendezvous: Result<Arc<Rendezvous>, String>,
    /// The master's event channel.
    events: mpsc::UnboundedSender<WorkerEvent>,
    state: State,
    /// The zygote new workers are forked from.
    current: Option<Arc<Zygote>>,
    /// Bumped by every reload.
    generation: u64,
    /// Workers asked for and not yet reported, by worker id.
    pending: HashMap<u64, Pending>,
    /// The PID of each zygote of this line still alive, by its id (a retired one's reports are
    /// checked against it too).
    pids: HashMap<u64, u32>,
    /// The master was made a subreaper (once, at the first zygote).
    subreaper: bool,
}

impl ZygoteLine {
    /// A line for the pool `name`; nothing starts until [`ZygoteLine::start`]. `config` `None`:
    /// exec mode.
    pub fn new(
        name: &str,
        config: Option<ZygoteConfig>,
        rendezvous: Result<Arc<Rendezvous>, String>,
        events: mpsc::UnboundedSender<WorkerEvent>,
    ) -> ZygoteLine {
        ZygoteLine {
            inner: Arc::new(Mutex::new(Line {
                name: name.to_string(),
                rules: config.as_ref().map(ZygoteConfig::rules).unwrap_or_default(),
                config,
                rendezvous,
                events,
                state: State::Exec { cause: None },
                current: None,
                generation: 0,
                pending: HashMap::new(),
                pids: HashMap::new(),
                subreaper: false,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Line> {
        self.inner
            .lock()
            .expect("the line's lock is never poisoned")
    }

    pub fn name(&self) -> String {
        self.lock().name.clone()
    }

    /// Starts forking (a zygote boots), if the line is configured to; true if places may be
    /// filled now (exec mode).
    pub fn start(&self) -> bool {
        let mut line = self.lock();
        let event = if line.config.is_some() {
            Event::Start
        } else {
            Event::UseExec
        };
        line.apply(event)
    }

    /// A reload: new code to fork from (`Some`: a new zygote from it), or exec from now on. True
    /// if places may be filled now.
    pub fn reload(&self, config: Option<ZygoteConfig>) -> bool {
        let mut line = self.lock();
        line.generation += 1;
        let event = if config.is_some() {
            Event::Start
        } else {
            Event::UseExec
        };
        if let Some(config) = &config {
            line.rules = config.rules();
        }
        line.config = config;
        line.apply(event)
    }

    /// No more zygotes; the current one exits with its last worker.
    pub fn shut_down(&self) {
        self.lock().apply(Event::ShutDown);
    }

    /// Time-driven duties (the boot timeout); true if places may be filled now.
    pub fn tick(&self) -> bool {
        self.lock().apply(Event::Tick)
    }

    /// A zygote's event; true if places may be filled now (a zygote became ready, or the pool
    /// fell back to exec).
    pub fn on_event(&self, event: ZygoteEvent) -> bool {
        self.lock().on_event(event)
    }

    /// A worker forked from the current zygote never said hello (or was never reported forked)
    /// within its boot timeout: a zygote that does not answer is killed and restarted.
    pub fn unresponsive(&self, worker: WorkerId) {
        let mut line = self.lock();
        if let Some(pending) = line.pending.remove(&worker.0) {
            pending
                .cell
                .none("the zygote did not answer the fork request in time");
            if let Some(current) = line.current.as_ref().filter(|c| c.id == pending.zygote) {
                tracing::warn!(pool = %line.name, pid = current.pid, worker = worker.0, "the zygote did not fork a worker within the boot timeout; killing it");
                current.kill();
            }
        }
    }

    /// Asks for a worker, or says to wait or to exec.
    pub(crate) fn fork(
        &self,
        id: WorkerId,
        max_frame_bytes: usize,
        events: mpsc::UnboundedSender<WorkerEvent>,
    ) -> Fork {
        let mut line = self.lock();
        match &line.state {
            State::Exec { .. } => return Fork::Exec,
            State::Ready { .. } => {}
            _ => return Fork::Wait,
        }
        let (Some(zygote), Ok(rendezvous)) = (line.current.clone(), line.rendezvous.clone()) else {
            return Fork::Wait;
        };
        let (token, attached) = match rendezvous.expect(id) {
            Ok(expected) => expected,
            Err(e) => {
                tracing::error!(pool = %line.name, worker = id.0, "no one-time token for a forked worker ({e}); starting it by exec");
                return Fork::Exec;
            }
        };
        let asked_at = crate::proc_stat::boot_ticks_now();
        let handle = worker::forked(
            id,
            zygote.clone(),
            rendezvous.clone(),
            token.clone(),
            attached,
            max_frame_bytes,
            events,
        );
        let env = BTreeMap::from([("DROVER_WORKER_ID".to_string(), id.0.to_string())]);
        if zygote.fork(id, rendezvous.path(), token, env, None) {
            if let Some(cell) = handle.forked_cell() {
                line.pending.insert(
                    id.0,
                    Pending {
                        zygote: zygote.id,
                        cell,
                        asked_at,
                    },
                );
            }
        } else {
            handle.not_forked("the zygote's channel is closed");
        }
        Fork::Forking(handle)
    }

    /// Asks the current zygote for a one-off ([`crate::one_off`]): a process that runs `run` (what
    /// the application's zygote understands, e.g. `{"kind":"schedule",...}`) with `env` added, and
    /// exits. `Err` says why not — no zygote ready, one too old to run one-offs, a pool that
    /// starts its workers by exec — and the caller starts the thing some other way. One the
    /// zygote does not report within the boot timeout is given up, and that zygote killed, as for
    /// a worker.
    pub fn fork_one_off(
        &self,
        run: BTreeMap<String, String>,
        env: BTreeMap<String, String>,
    ) -> Result<OneOff, String> {
        let mut line = self.lock();
        match &line.state {
            State::Ready { .. } => {}
            State::Exec { .. } | State::Closed => {
                return Err(format!("the pool {} does not fork", line.name))
            }
            _ => return Err(format!("the zygote of pool {} is not ready", line.name)),
        }
        let (Some(zygote), Ok(rendezvous)) = (line.current.clone(), line.rendezvous.clone()) else {
            return Err(format!("the zygote of pool {} is not ready", line.name));
        };
        if !zygote.runs_one_offs() {
            return Err(format!(
                "the zygote of pool {} speaks zygote protocol version 1 (drover/laravel 0.2 or before, or drover-worker): it forks workers only",
                line.name
            ));
        }
        let id = WorkerId::next();
        let (token, arrived) = rendezvous
            .expect(id)
            .map_err(|e| format!("no one-time token for a one-off ({e})"))?;
        let asked_at = crate::proc_stat::boot_ticks_now();
        let one_off = one_off::forked(
            id,
            zygote.clone(),
            rendezvous.clone(),
            token.clone(),
            arrived,
        );
        let cell = one_off.cell();
        if !zygote.fork(id, rendezvous.path(), token, env, Some(run)) {
            cell.none("the zygote's channel is closed");
            return Err(format!("the zygote of pool {} is gone", line.name));
        }
        line.pending.insert(
            id.0,
            Pending {
                zygote: zygote.id,
                cell,
                asked_at,
            },
        );
        // Not reported within the boot timeout: given up (and its zygote killed, if it never
        // answered); reported but never attached: killed.
        let timeout = line.rules.boot_timeout;
        let watch = (self.clone(), one_off.control());
        tokio::spawn(async move {
            let (line, one_off) = watch;
            tokio::select! {
                // Attached or gone: nothing to time out (and nothing held until the timeout).
                () = one_off.settled() => {}
                () = tokio::time::sleep(timeout) => {
                    if !one_off.attached() {
                        line.unresponsive(id);
                        one_off.kill();
                    }
                }
            }
        });
        Ok(one_off)
    }

    pub fn status(&self) -> ZygoteStatus {
        let line = self.lock();
        let (mode, state) = match &line.state {
            State::Exec { .. } => ("exec", "exec"),
            State::Booting { .. } => ("fork", "booting"),
            State::Ready { .. } => ("fork", "ready"),
            State::Waiting { .. } => ("fork", "restarting"),
            State::Closed => ("exec", "closed"),
        };
        ZygoteStatus {
            mode,
            state,
            pid: line.current.as_ref().map(|c| c.pid),
            fell_back: match &line.state {
                State::Exec { cause } => cause.clone(),
                _ => None,
            },
            generation: line.generation,
        }
    }
}

impl Line {
    /// Runs the state machine and does what it says; true if places may be filled.
    fn apply(&mut self, event: Event) -> bool {
        let now = Instant::now();
        let (state, actions) = state::next(&self.state, event, now, &self.rules);
        self.state = state;
        let mut fill = false;
        for action in actions {
            match action {
                Action::Spawn => {
                    if let Err(cause) = self.spawn() {
                        // Nothing to wait for: it cannot even be started.
                        fill |= self.apply(Event::Gone { cause });
                    }
                }
                Action::Kill => {
                    if let Some(current) = &self.current {
                        current.kill();
                    }
                }
                Action::Retire => {
                    if let Some(old) = self.current.take() {
                        self.abandon_pending(old.id, "its zygote was given up before it forked it");
                    }
                }
                Action::Fill => fill = true,
                Action::FallBack(cause) => {
                    tracing::warn!(pool = %self.name, "the pool starts its workers by exec instead of forking them: {cause}");
                }
                Action::WakeAt(at) => {
                    let events = self.events.clone();
                    let line = self.name.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep_until(at.into()).await;
                        let _ = events.send(WorkerEvent::Zygote {
                            line,
                            event: ZygoteEvent::Wake,
                        });
                    });
                }
            }
        }
        fill
    }

    /// Starts a zygote as the current one.
    fn spawn(&mut self) -> Result<(), String> {
        self.rendezvous.as_ref().map_err(Clone::clone)?;
        let config = self
            .config
            .clone()
            .ok_or("the pool is not configured to fork")?;
        if !self.subreaper {
            adopted::pidfds_work()?;
            subreaper::become_subreaper()
                .map_err(|e| format!("the master cannot become a subreaper (prctl: {e})"))?;
            crate::strays::start_once();
            self.subreaper = true;
        }
        if let Some(old) = self.current.take() {
            self.abandon_pending(old.id, "its zygote was replaced before it forked it");
        }
        let process = Zygote::spawn(
            &self.name,
            self.generation,
            &config.command,
            config.max_frame_bytes,
            self.events.clone(),
        )
        .map_err(|e| e.to_string())?;
        tracing::info!(pool = %self.name, pid = process.pid, generation = self.generation, "zygote started");
        self.pids.insert(process.id, process.pid);
        self.current = Some(Arc::new(process));
        Ok(())
    }

    /// Workers asked of the zygote `zygote` that will never come.
    fn abandon_pending(&mut self, zygote: u64, why: &str) {
        self.pending.retain(|_, p| {
            if p.zygote == zygote {
                p.cell.none(why);
                false
            } else {
                true
            }
        });
    }

    fn is_current(&self, zygote: u64) -> bool {
        self.current.as_ref().is_some_and(|c| c.id == zygote)
    }

    /// The PID of this line's zygote `id`, while it lives.
    fn zygote_pid(&self, id: u64) -> Option<u32> {
        self.pids.get(&id).copied()
    }

    fn on_event(&mut self, event: ZygoteEvent) -> bool {
        match event {
            ZygoteEvent::Wake => self.apply(Event::Tick),
            ZygoteEvent::Frame { zygote, frame } => self.on_frame(zygote, frame),
            ZygoteEvent::BadInput { zygote, problem } => {
                tracing::error!(pool = %self.name, "the zygote {problem}; killing it");
                self.give_up(zygote, problem.to_string())
            }
            // A worker of the current zygote reached the master: forking works.
            ZygoteEvent::Attached { zygote } if self.is_current(zygote) => {
                self.apply(Event::Forked)
            }
            ZygoteEvent::Attached { .. } => false,
            // A worker it forked died before it reached the master (it could not connect, its
            // parent-death signal could not be set, it crashed in its reset): the zygote's
            // failure, not the worker's.
            ZygoteEvent::Lost {
                zygote,
                worker,
                how,
            } => {
                tracing::error!(pool = %self.name, worker, "a worker forked from the zygote {how} before it reached the master");
                if self.is_current(zygote) {
                    self.apply(Event::ForkFailed {
                        cause: format!("a forked worker {how} before it reached the master"),
                    })
                } else {
                    false
                }
            }
            ZygoteEvent::Exited {
                zygote,
                pid,
                status,
                lived,
            } => {
                self.pids.remove(&zygote);
                self.abandon_pending(zygote, "its zygote exited before it forked it");
                if !self.is_current(zygote) {
                    tracing::debug!(pool = %self.name, pid, "a retired zygote exited");
                    return false;
                }
                let how = match status {
                    Some(s) => describe_exit(s),
                    None => "ended (status unknown)".into(),
                };
                tracing::warn!(pool = %self.name, pid, ?lived, "the zygote {how}");
                self.apply(Event::Gone { cause: how })
            }
        }
    }

    fn on_frame(&mut self, zygote: u64, frame: FromZygote) -> bool {
        match frame {
            FromZygote::Zygote { v, pid } => {
                if !self.is_current(zygote) {
                    return false;
                }
                if !(MIN_ZYGOTE_PROTOCOL_VERSION..=ZYGOTE_PROTOCOL_VERSION).contains(&v) {
                    return self.give_up(
                        zygote,
                        format!(
                            "speaks zygote protocol version {v}, the master speaks {MIN_ZYGOTE_PROTOCOL_VERSION} to {ZYGOTE_PROTOCOL_VERSION}"
                        ),
                    );
                }
                if let Some(current) = &self.current {
                    current.mark_ready(v);
                }
                tracing::info!(pool = %self.name, pid, "zygote ready: workers are forked from it");
                self.apply(Event::Ready)
            }
            FromZygote::Forked { worker, pid } => {
                let pending = self.pending.remove(&worker);
                // The zygote's word is checked against /proc before the master waits for or
                // signals that PID: a fork of this zygote, made after the request.
                let asked_at = pending.as_ref().map(|p| p.asked_at).unwrap_or(0);
                let plausible = self
                    .zygote_pid(zygote)
                    .is_some_and(|z| adopted::is_fork_of(pid, z, asked_at));
                if !plausible {
                    if let Some(p) = &pending {
                        p.cell.none("its zygote reported a PID it did not fork");
                    }
                    tracing::error!(pool = %self.name, worker, pid, "the zygote reported pid {pid} for worker {worker}, which is not a process it forked; killing the zygote");
                    return self.give_up(
                        zygote,
                        format!("reported pid {pid} for worker {worker}, which it did not fork"),
                    );
                }
                match pending {
                    Some(p) => {
                        if !p.cell.reported(pid) {
                            tracing::error!(pool = %self.name, worker, pid, connected = p.cell.get(), "the zygote reported another PID for a worker than the process that connected as it; killing the reported one");
                            adopted::kill_unwanted(pid);
                        }
                    }
                    None => {
                        // Given up (its boot timed out, or its zygote was): the process is ours
                        // now and must not run.
                        tracing::warn!(pool = %self.name, worker, pid, "a zygote forked a worker the master had given up; killing it");
                        adopted::kill_unwanted(pid);
                    }
                }
                false
            }
            FromZygote::ForkFailed { worker, error } => {
                tracing::error!(pool = %self.name, worker, "the zygote could not fork worker {worker}: {error}");
                if let Some(p) = self.pending.remove(&worker) {
                    p.cell.none(&error);
                }
                if self.is_current(zygote) {
                    self.apply(Event::ForkFailed { cause: error })
                } else {
                    false
                }
            }
            FromZygote::Failed { error } => {
                tracing::error!(pool = %self.name, "the zygote cannot serve: {error}");
                self.give_up(zygote, format!("said: {error}"))
            }
        }
    }

    /// The current zygote `zygote` is useless: killed, and the state machine told why.
    fn give_up(&mut self, zygote: u64, cause: String) -> bool {
        if !self.is_current(zygote) {
            return false;
        }
        if let Some(current) = &self.current {
            current.kill();
        }
        self.apply(Event::Gone { cause })
    }
}
