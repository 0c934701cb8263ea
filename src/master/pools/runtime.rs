//! A pool as the master runs it ([`PoolRuntime`]), and the master's pools by [`PoolId`].

use std::time::Duration;

use drover_supervisor::{Control, ExitVerdict, Pool, ProtocolError, ToWorker, WorkerId};

use crate::process::memory::{read_pss_kib, read_rss_kib};
use crate::rules::assignments::{Assignments, Removed};
use crate::rules::job_policy::PoolPolicy;
use crate::rules::worker_state::{Transition, WorkerState};

/// Names one of the master's pools. A pool keeps its id for the master's life: pools are only
/// ever added (a reload that drops a pool retires it, and its workers finish), so an id carried
/// by a task in flight — a claim, a count — always names the pool it was started for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId(usize);

impl PoolId {
    /// The first pool's id (unit tests of a part that keeps state per pool).
    #[cfg(test)]
    pub fn first() -> PoolId {
        PoolId(0)
    }
}

/// The master's pools, in the order they were started.
#[derive(Default)]
pub struct Pools {
    /// Indexed by `PoolId`; never shrinks (see [`PoolId`]).
    slots: Vec<PoolRuntime>,
}

impl Pools {
    pub fn new(pools: Vec<PoolRuntime>) -> Pools {
        Pools { slots: pools }
    }

    /// Adds a pool started by a reload.
    pub fn add(&mut self, pool: PoolRuntime) -> PoolId {
        self.slots.push(pool);
        PoolId(self.slots.len() - 1)
    }

    pub fn ids(&self) -> impl Iterator<Item = PoolId> + use<> {
        (0..self.slots.len()).map(PoolId)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, PoolRuntime> {
        self.slots.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, PoolRuntime> {
        self.slots.iter_mut()
    }

    /// The pool of this (supervisor) name: a configured pool, or a member `pool:queue`.
    pub fn named(&self, name: &str) -> Option<PoolId> {
        self.slots
            .iter()
            .position(|p| p.pool.name() == name)
            .map(PoolId)
    }

    /// Whether the configured pool `name` is paused as a whole (`drover pause --pool NAME`):
    /// it has members (itself, or `NAME:queue` of a balanced pool) that are not retired, and
    /// every one of them is paused.
    pub fn paused_as_a_whole(&self, name: &str) -> bool {
        let mut members = self
            .slots
            .iter()
            .filter(|p| !p.retired && is_member_of(p.pool.name(), name))
            .peekable();
        members.peek().is_some() && members.all(|p| p.paused)
    }

    /// The pool a worker belongs to.
    pub fn of_worker(&self, worker: WorkerId) -> Option<PoolId> {
        self.slots
            .iter()
            .position(|p| p.pool.owns(worker))
            .map(PoolId)
    }
}

/// Whether the supervisor pool `member` runs (part of) the configured pool `pool`: it is `pool`
/// itself, or one of a balanced pool's per-queue members, `pool:queue`.
pub(in crate::master) fn is_member_of(member: &str, pool: &str) -> bool {
    member
        .strip_prefix(pool)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

impl std::ops::Index<PoolId> for Pools {
    type Output = PoolRuntime;
    fn index(&self, id: PoolId) -> &PoolRuntime {
        &self.slots[id.0]
    }
}

impl std::ops::IndexMut<PoolId> for Pools {
    fn index_mut(&mut self, id: PoolId) -> &mut PoolRuntime {
        &mut self.slots[id.0]
    }
}

impl<'a> IntoIterator for &'a Pools {
    type Item = &'a PoolRuntime;
    type IntoIter = std::slice::Iter<'a, PoolRuntime>;
    fn into_iter(self) -> Self::IntoIter {
        self.slots.iter()
    }
}

impl<'a> IntoIterator for &'a mut Pools {
    type Item = &'a mut PoolRuntime;
    type IntoIter = std::slice::IterMut<'a, PoolRuntime>;
    fn into_iter(self) -> Self::IntoIter {
        self.slots.iter_mut()
    }
}

/// What a worker's exit left to do.
pub(in crate::master) struct Exited {
    /// What it held, for the settle rules.
    pub removed: Removed,
    /// The exit was meant (its own limit, `queue:restart`, a stop, a kill for a timeout), not a
    /// crash.
    pub planned: bool,
    /// When its replacement starts, if one does.
    pub restart_in: Option<Duration>,
}

/// A pool of workers and everything the master keeps about it.
pub struct PoolRuntime {
    /// The supervisor's pool: its workers' processes. Read through [`PoolRuntime::pool`]; every
    /// change goes through a method here, so the pool and the assignments move together.
    pool: Pool,
    /// Queues it serves, highest priority first.
    pub queues: Vec<String>,
    /// Its defaults for jobs that do not carry their own rules.
    pub policy: PoolPolicy,
    /// Who holds what.
    pub(in crate::master) assignments: Assignments,
    /// KiB of PSS above which a worker is recycled (finishes its job, is replaced).
    pub(in crate::master) memory_limit_kib: Option<u64>,
    /// Removed from the configuration by a reload: its workers are retiring, it claims nothing.
    pub(in crate::master) retired: bool,
    /// Paused by an operator for this pool alone (`drover pause --pool`); the master-wide pause
    /// is `Master::paused`. A pool claims and hands out only when neither is set.
    pub(in crate::master) paused: bool,
    /// Workers that exited unasked (crashed, killed) and were replaced, since start.
    pub(in crate::master) restarts: u64,
    /// Average run time of its jobs (exponentially weighted), for the autoscaler.
    pub(in crate::master) runtime: Option<Duration>,
    /// Workers that exited, asked to or not, since start.
    pub(in crate::master) exits: u64,
    /// Jobs that outran their timeout (their worker was killed), since start.
    pub(in crate::master) timed_out: u64,
}

impl PoolRuntime {
    pub fn new(pool: Pool, queues: Vec<String>, policy: PoolPolicy) -> PoolRuntime {
        PoolRuntime {
            pool,
            queues,
            policy,
            assignments: Assignments::default(),
            memory_limit_kib: None,
            retired: false,
            paused: false,
            restarts: 0,
            runtime: None,
            exits: 0,
            timed_out: 0,
        }
    }

    /// Recycle workers above `mib` MiB of PSS (0 = no limit).
    pub fn with_memory_limit(mut self, mib: u64) -> PoolRuntime {
        self.set_memory_limit(mib);
        self
    }

    pub(in crate::master) fn set_memory_limit(&mut self, mib: u64) {
        self.memory_limit_kib = (mib > 0).then_some(mib * 1024);
    }

    /// The supervisor's pool, to read.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Starts its workers (at the master's start).
    pub(in crate::master) fn start(&mut self) -> Result<(), drover_supervisor::SupervisorError> {
        self.pool.start()
    }

    /// Starts its workers, retrying a failed start with backoff (a pool a reload added).
    pub(in crate::master) fn start_retrying(&mut self) {
        self.pool.start_retrying()
    }

    /// Fills the places that wait for a zygote (it became ready, or the pool fell back to
    /// exec).
    pub(in crate::master) fn refill(&mut self) {
        self.pool.refill()
    }

    /// Takes a reload's settings; its workers are then replaced one by one.
    pub(in crate::master) fn reload(
        &mut self,
        config: drover_supervisor::PoolConfig,
    ) -> Result<(), drover_supervisor::SupervisorError> {
        self.pool.reload(config)
    }

    /// When the earliest of its restarts waiting out a backoff is due (the loop wakes then).
    pub(in crate::master) fn next_restart(&self) -> Option<std::time::Instant> {
        self.pool.next_restart()
    }

    /// Starts the workers whose restart is due at `now`.
    pub(in crate::master) fn start_due_restarts(&mut self, now: std::time::Instant) {
        self.pool.start_due_restarts(now)
    }

    /// A frame to `worker`; the receiver hears when it is written (or the worker is gone).
    pub(in crate::master) fn send_written(
        &self,
        worker: WorkerId,
        frame: ToWorker,
    ) -> tokio::sync::oneshot::Receiver<()> {
        self.pool.send_written(worker, frame)
    }

    /// `worker`'s process ended (`status`, if known): its account closes — everything it held
    /// is returned, for the settle rules — and the pool decides whether and when another starts.
    pub(in crate::master) fn on_exit(
        &mut self,
        worker: WorkerId,
        status: Option<std::process::ExitStatus>,
    ) -> Exited {
        self.exits += 1;
        let removed = self.assignments.remove(worker);
        // The supervisor's pool decides whether the exit was planned (`Pool::on_exit`): a worker
        // the master killed for a timeout or an operator's stop did not crash.
        let killed_by_master = removed.timed_out || removed.stopped.is_some();
        let verdict = self
            .pool
            .on_exit(worker, status, killed_by_master, removed.finished > 0)
            .unwrap_or(ExitVerdict {
                planned: true,
                restart_in: None,
            });
        if !verdict.planned && verdict.restart_in.is_some() {
            self.restarts += 1;
        }
        Exited {
            removed,
            planned: verdict.planned,
            restart_in: verdict.restart_in,
        }
    }

    /// The stand-in workers started in place of processes (unit tests).
    #[cfg(test)]
    pub(in crate::master) fn take_stand_ins(&mut self) -> Vec<drover_supervisor::pool::StandIn> {
        self.pool.take_stand_ins()
    }

    /// A frame to `worker` (dropped if it is gone: its exit settles what it held).
    pub(in crate::master) fn send(&mut self, worker: WorkerId, frame: ToWorker) {
        self.pool.send(worker, frame);
    }
}

/// A worker's life, changed in one place: each of these tells the supervisor's pool and moves the
/// worker's state in the assignments together, so what the worker is told and whether it may get
/// jobs never disagree. The state is then the one status shows.
impl PoolRuntime {
    /// A worker said hello: its account opens (a hello the protocol refuses is an error, and
    /// nothing changes). It serves, unless it must stop — the pool was retired by a reload, the
    /// master no longer serves (`serving` false), or the pool retired it before it booted — or
    /// jobs are paused (`paused`). The old worker a reload step replaces with it retires; it is
    /// returned.
    pub(in crate::master) fn on_hello(
        &mut self,
        worker: WorkerId,
        (v, prefetch, max_jobs): (u32, u32, u64),
        serving: bool,
        paused: bool,
    ) -> Result<Option<WorkerId>, ProtocolError> {
        self.assignments.hello(worker, v, prefetch, max_jobs)?;
        let old = self.pool.mark_ready(worker, std::time::Instant::now());
        if let Some(old) = old {
            self.assignments.transition(old, Transition::Retire);
        }
        if self.pool.is_retiring(worker) {
            // Already told to stop, by the pool.
            self.assignments.transition(worker, Transition::Retire);
        } else if self.retired || !serving {
            self.stop_worker(worker);
        } else if paused {
            self.assignments.transition(worker, Transition::Pause);
            self.pool.control(worker, Control::Pause);
        }
        Ok(old)
    }

    /// `worker` finishes its running job, returns the rest and exits; it gets no more jobs.
    pub(in crate::master) fn stop_worker(&mut self, worker: WorkerId) {
        self.assignments.transition(worker, Transition::Retire);
        self.pool.control(worker, Control::Stop);
    }

    /// Every worker stops after its running job, and none is started again (shutdown).
    pub(in crate::master) fn stop_all(&mut self) {
        self.close(Control::Stop);
    }

    /// Every worker is killed now and none is started again (an immediate shutdown, or a
    /// graceful one whose grace is over): each that still served retires, so none gets a job.
    pub(in crate::master) fn kill_all(&mut self) {
        self.close(Control::Kill);
    }

    /// No worker starts again, each retires (gets no more jobs) and is told `control`.
    fn close(&mut self, control: Control) {
        self.pool.shut_down();
        for id in self.pool.ids().collect::<Vec<_>>() {
            self.assignments.transition(id, Transition::Retire);
        }
        self.pool.control_all(control);
    }

    /// The pool grows or shrinks to `processes`; the workers it lets go retire.
    pub(in crate::master) fn scale_to(&mut self, processes: usize) {
        for id in self.pool.scale_to(processes) {
            self.assignments.transition(id, Transition::Retire);
        }
    }

    /// `worker` is replaced after its running job (over its memory limit). False if it was
    /// retiring already.
    pub(in crate::master) fn recycle(&mut self, worker: WorkerId) -> bool {
        let retired = self.pool.retire(worker);
        if retired {
            self.assignments.transition(worker, Transition::Retire);
        }
        retired
    }

    /// Workers above the pool's memory limit (PSS, from /proc) finish their job and are
    /// replaced; the exit is planned, so it never counts as a crash.
    pub(in crate::master) fn recycle_over_memory(&mut self) {
        let Some(limit) = self.memory_limit_kib else {
            return;
        };
        for id in self.pool.ids().collect::<Vec<_>>() {
            let Some(pid) = self.pool.pid(id) else {
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
            if pss > limit && self.recycle(id) {
                tracing::warn!(
                    pool = self.pool.name(),
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

    /// `worker` is killed by the master: `why` is `Fence` (its lease is lost or about to end) or
    /// `TimeOut` (its job outran its timeout), which decides how its running job is settled.
    pub(in crate::master) fn kill_worker(&mut self, worker: WorkerId, why: Transition) {
        self.assignments.transition(worker, why);
        self.pool.control(worker, Control::Kill);
    }

    /// An operator stopped attempt `token` of `job`: the worker running it here is killed and
    /// the job settled as `stop` says when the worker is gone (`rules::stop_request`). Which
    /// worker, or None when none runs that attempt here (yet).
    pub(in crate::master) fn stop_job(
        &mut self,
        job: drover_broker::JobId,
        token: i64,
        stop: crate::rules::stop_request::Stop,
    ) -> Option<WorkerId> {
        let worker = self.assignments.stop(job, token, stop)?;
        self.pool.control(worker, Control::Kill);
        Some(worker)
    }

    /// `worker` broke the protocol: fenced, killed, and its running job charged with `why`.
    pub(in crate::master) fn reject_worker(&mut self, worker: WorkerId, why: String) {
        self.assignments.misbehaved(worker, why);
        self.pool.control(worker, Control::Kill);
    }

    /// The workers follow whether jobs are paused for this pool. Only workers the pause or
    /// continue really moves are told: a retiring, fenced or timed-out worker stays as it is
    /// (workers still starting learn it at hello).
    pub(in crate::master) fn follow_pause(&mut self, paused: bool) {
        let (transition, control) = if paused {
            (Transition::Pause, Control::Pause)
        } else {
            (Transition::Continue, Control::Resume)
        };
        for id in self.pool.ids().collect::<Vec<_>>() {
            let before = self.assignments.state(id);
            if before.is_some() && self.assignments.transition(id, transition) != before {
                self.pool.control(id, control);
            }
        }
    }

    /// The pool's clock duties (boot timeouts, health, the next reload step); a worker a reload
    /// step retired retires in the assignments too.
    pub(in crate::master) fn tick(&mut self, now: std::time::Instant) {
        if let Some(retired) = self.pool.tick(now) {
            self.assignments.transition(retired, Transition::Retire);
        }
    }

    /// What status shows of a worker: its one state, with a serving worker busy or idle.
    pub(in crate::master) fn shown_state(&self, worker: WorkerId) -> &'static str {
        match self.assignments.state(worker) {
            None | Some(WorkerState::Starting) => "starting",
            Some(WorkerState::Serving) => match self.assignments.status(worker) {
                Some(line) if line.running.is_some() => "busy",
                _ => "idle",
            },
            Some(WorkerState::Paused) => "paused",
            Some(WorkerState::Retiring) => "retiring",
            Some(WorkerState::Fenced) => "fenced",
            Some(WorkerState::TimedOut) => "timed_out",
            Some(WorkerState::Stopped) => "stopped",
        }
    }
}
