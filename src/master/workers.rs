//! What workers say and do: frames (hello, started, done, release, return, fail) checked against
//! the assignments, protocol violations, and exits — each exit's jobs settled by the policy.

use std::time::Duration;

use drover_broker::JobId;
use drover_supervisor::{describe_exit, FromWorker, ProtocolError, WorkerEvent, WorkerId};

use crate::master::pools::runtime::Exited;
use crate::master::pools::PoolId;
use crate::metrics::usage::Probe;
use crate::metrics::{CompletedJob, Observation, Outcome};
use crate::rules::settle::{self, Cause, Counted, Ending};

use super::recorder::Metering;
use super::Master;

impl Master {
    pub(super) fn pool_of(&self, worker: WorkerId) -> Option<PoolId> {
        self.pools.of_worker(worker)
    }

    pub(super) fn on_worker_event(&mut self, event: WorkerEvent) {
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
            } => self.on_exit(worker, pid, status, lived),
            WorkerEvent::Zygote { line, event } => self.on_zygote_event(&line, event),
        }
    }

    /// A worker's process ended: the jobs it held are settled as the rules say for a dead (or
    /// timed-out) worker, and its pool decides whether and when to start another.
    fn on_exit(
        &mut self,
        worker: WorkerId,
        pid: u32,
        status: Option<std::process::ExitStatus>,
        lived: Duration,
    ) {
        let Some(index) = self.pool_of(worker) else {
            return;
        };
        // Reaped: its PID may be reused, so its /proc files must not be read again.
        self.upkeep.metering.forget(pid);
        let how = match status {
            Some(s) => describe_exit(s),
            // Asked of a zygote that did not fork it (it could not, or died first).
            None if pid == 0 => "was never forked".to_string(),
            None => "exited (status unknown)".to_string(),
        };
        let Exited {
            removed,
            planned,
            restart_in: restart,
        } = self.pools[index].on_exit(worker, status);
        let cause = match (&removed.stopped, removed.timed_out, &removed.misbehaved) {
            (Some(stop), _, _) => Cause::Stopped(stop.clone()),
            (None, true, _) => Cause::TimedOut,
            (None, false, Some(why)) => Cause::Died(format!("{how} after it {why}")),
            (None, false, None) => Cause::Died(how.clone()),
        };
        let held = removed.jobs.len();
        for (lease, job) in &removed.jobs {
            let counted =
                self.settler
                    .settle(settle::settle(*lease, job, Ending::Abandoned(&cause)));
            // The job it was running ended with it: counted as failed or taken back (the
            // process is gone, so its CPU and memory are not read).
            if let Some(outcome) = observed(counted) {
                self.upkeep
                    .metering
                    .observe(Seen::of(job).finished(outcome, None));
            }
        }
        if !self.life.running() || removed.timed_out || removed.stopped.is_some() {
            tracing::info!(worker = worker.0, pid, held, ?lived, "worker {how}");
        } else if planned && held == 0 {
            // Its own limit (max_jobs, max_time, memory) or queue:restart, with nothing
            // held: routine, and once per job under queue:listen.
            tracing::debug!(worker = worker.0, pid, ?lived, restart_in = ?restart, "worker {how}");
        } else {
            tracing::warn!(worker = worker.0, pid, held, ?lived, restart_in = ?restart, "worker {how}; its jobs were released");
        }
        self.claimer.want(index);
    }

    /// One frame of a worker of pool `index`, checked against what the assignments say it holds:
    /// a frame that does not fit is a protocol violation, and the worker is rejected.
    pub(super) fn on_frame(
        &mut self,
        index: PoolId,
        worker: WorkerId,
        frame: FromWorker,
    ) -> Result<(), ProtocolError> {
        match frame {
            FromWorker::Hello {
                v,
                pid,
                prefetch,
                max_jobs,
            } => self.on_hello(index, worker, v, pid, prefetch, max_jobs)?,
            FromWorker::Started { job, token } => self.on_started(index, worker, job, token)?,
            FromWorker::Done { job, token } => self.on_done(index, worker, job, token)?,
            FromWorker::Release {
                job,
                token,
                delay_ms,
            } => self.end_attempt(
                index,
                worker,
                "release",
                job,
                token,
                Ending::Released { delay_ms },
            )?,
            FromWorker::Return { job, token } => {
                let p = &mut self.pools[index];
                let (lease, held) = p.assignments.give_back(worker, job, token)?;
                self.claimer.want(index);
                self.settler
                    .settle(settle::settle(lease, &held, Ending::Returned));
            }
            FromWorker::QueueRestart { at } => self.on_queue_restart(at),
            FromWorker::Fail {
                job,
                token,
                error,
                logged,
            } => self.end_attempt(
                index,
                worker,
                "fail",
                job,
                token,
                Ending::Failed {
                    error: &error,
                    logged,
                },
            )?,
        }
        Ok(())
    }

    /// `hello`: the worker is ready (or, retired before it said so, told to stop), and its pool
    /// may claim for it.
    fn on_hello(
        &mut self,
        index: PoolId,
        worker: WorkerId,
        v: u32,
        pid: u32,
        prefetch: u32,
        max_jobs: u64,
    ) -> Result<(), ProtocolError> {
        let paused = self.life.paused || self.pools[index].paused;
        let running = self.life.running();
        let p = &mut self.pools[index];
        // From the master's asking (a fork request, or the exec) to the hello.
        let ready_ms = p
            .pool()
            .spawned_at(worker)
            .map(|t| t.elapsed().as_secs_f64() * 1000.0);
        let replaced = p.on_hello(worker, (v, prefetch, max_jobs), running, paused)?;
        tracing::debug!(worker = worker.0, pid, prefetch, ready_ms, "worker ready");
        if v < 2 {
            tracing::warn!(
                pool = p.pool().name(),
                worker = worker.0,
                pid,
                "worker speaks protocol {v} (drover/laravel 0.1, or a worker whose environment lost DROVER_PROTOCOL): it is given one job at a time and a queue pause cannot take back the one it was just handed (docs/upgrading.md, \"Workers\")"
            );
        }
        if let Some(old) = replaced {
            tracing::info!(
                pool = p.pool().name(),
                new = worker.0,
                old = old.0,
                "reload: worker {} replaces worker {}",
                worker.0,
                old.0
            );
        }
        if replaced.is_some() {
            let pool = p.pool().name().to_string();
            self.follow_a_moved_release(&pool, pid);
        }
        self.claimer.want(index);
        if !self.life.startup_pages_released
            && self
                .pools
                .iter()
                .all(|p| p.pool().serving() >= p.pool().target())
        {
            self.release_startup_pages();
        }
        Ok(())
    }

    /// `started`: the job's deadline is set from its payload, and its wait and usage marked.
    fn on_started(
        &mut self,
        index: PoolId,
        worker: WorkerId,
        job: JobId,
        token: i64,
    ) -> Result<(), ProtocolError> {
        let p = &mut self.pools[index];
        let policy = &p.policy;
        let pid = p.pool().pid(worker);
        let held = p
            .assignments
            .started(worker, job, token, |hints| policy.timeout_for(hints))?;
        let metering = &mut self.upkeep.metering;
        held.usage = pid
            .and_then(|pid| metering.probe(pid))
            .and_then(Probe::mark);
        let wait = held.waited.saturating_add(held.claimed_at.elapsed());
        held.wait = Some(wait);
        metering.observe(Observation::Started {
            queue: held.queue.clone(),
            class: held.hints.class.clone(),
            wait,
        });
        Ok(())
    }

    /// `done`: the job is acked (riding with the next claim unless it is grouped), its run time
    /// and usage observed, and its credit freed.
    fn on_done(
        &mut self,
        index: PoolId,
        worker: WorkerId,
        job: JobId,
        token: i64,
    ) -> Result<(), ProtocolError> {
        let p = &mut self.pools[index];
        let mut ran = None;
        let mut seen = None;
        let mut grouped = false;
        let pid = p.pool().pid(worker);
        let store = &self.store;
        let s = p
            .assignments
            .finish(worker, "done", job, token, |lease, held| {
                ran = held.started_at.map(|t| t.elapsed());
                grouped = held.grouped;
                let mut s = Seen::of(held);
                // The history keeps the completed job (its payload is kept only then).
                s.completed = held.payload.clone().zip(pid).map(|(payload, worker_pid)| {
                    Box::new(CompletedJob {
                        id: job,
                        attempt: held.attempts,
                        payload,
                        worker_pid,
                        wait: held.wait,
                        // Read only for the history: `done` is the hot path.
                        finished_at: store.database_time(),
                    })
                });
                seen = Some(s);
                settle::settle(lease, held, Ending::Done)
            })?;
        if let Some(ran) = ran {
            p.runtime = Some(match p.runtime {
                Some(avg) => avg.mul_f64(0.9) + ran.mul_f64(0.1),
                None => ran,
            });
        }
        // A finished job frees credit, and may let a claim find jobs no NOTIFY
        // announces. An ack that rides waits up to `ack_ride_wait` for a claim to carry
        // it (one commit for both), and a claim after that wait looks for the
        // unannounced jobs. Any other (a grouped job's moves its group on): claim right
        // after it.
        let acked = self.settler.ack(s, grouped, self.life.running());
        observe_end(&self.upkeep.metering, seen, acked.counted, pid);
        if acked.rides {
            self.claimer.want_within(index, self.settler.ride_wait());
        } else {
            self.claimer.want(index);
        }
        Ok(())
    }

    /// A `release` or `fail` frame: the job's attempt ended so; the settle rules say how it is
    /// written, and the metrics are told what it counts as.
    fn end_attempt(
        &mut self,
        index: PoolId,
        worker: WorkerId,
        frame: &'static str,
        job: JobId,
        token: i64,
        ending: Ending,
    ) -> Result<(), ProtocolError> {
        let p = &mut self.pools[index];
        let mut seen = None;
        let s = p
            .assignments
            .finish(worker, frame, job, token, |lease, held| {
                seen = Some(Seen::of(held));
                settle::settle(lease, held, ending)
            })?;
        let pid = p.pool().pid(worker);
        self.claimer.want(index);
        let counted = self.settler.settle(s);
        observe_end(&self.upkeep.metering, seen, counted, pid);
        Ok(())
    }

    /// A worker broke the protocol: name it, kill it; its exit releases its jobs.
    pub(super) fn reject(&mut self, index: PoolId, worker: WorkerId, problem: ProtocolError) {
        let p = &mut self.pools[index];
        let pid = p.pool().pid(worker).unwrap_or(0);
        tracing::error!(
            pool = p.pool().name(),
            worker = worker.0,
            pid,
            "worker {} (pid {pid}) {problem}; stopping it and releasing its jobs",
            worker.0
        );
        p.reject_worker(worker, problem.to_string());
    }
}

/// What the metrics need of a job whose attempt just ended, taken from the assignments's record.
struct Seen {
    queue: String,
    class: String,
    ran: Duration,
    usage: Option<crate::metrics::usage::UsageMark>,
    /// For the history, when it is on and the job completed.
    completed: Option<Box<CompletedJob>>,
}

impl Seen {
    fn of(held: &crate::rules::assignments::HeldJob) -> Seen {
        Seen {
            queue: held.queue.clone(),
            class: held.hints.class.clone(),
            ran: held.started_at.map(|t| t.elapsed()).unwrap_or_default(),
            usage: held.usage,
            completed: None,
        }
    }

    /// The observation, reading what the worker (its `probe`, while it lives) used since the
    /// start.
    fn finished(self, outcome: Outcome, probe: Option<&Probe>) -> Observation {
        Observation::Finished {
            queue: self.queue,
            class: self.class,
            outcome,
            runtime: self.ran,
            usage: probe
                .zip(self.usage)
                .and_then(|(probe, mark)| probe.measure(mark)),
            completed: self.completed,
        }
    }
}

/// Tells the metrics how an attempt its worker reported ended (`seen`, as the settler counted
/// it), with what worker `pid` used since the start, read while it lives.
fn observe_end(metering: &Metering, seen: Option<Seen>, counted: Counted, pid: Option<u32>) {
    if let (Some(seen), Some(outcome)) = (seen, observed(counted)) {
        let probe = pid.and_then(|pid| metering.probe_if_open(pid));
        metering.observe(seen.finished(outcome, probe));
    }
}

/// The metrics' outcome of an attempt that ended: none for a job that never started.
fn observed(counted: Counted) -> Option<Outcome> {
    match counted {
        Counted::Completed => Some(Outcome::Completed),
        Counted::Released => Some(Outcome::Released),
        Counted::Failed => Some(Outcome::Failed),
        Counted::ReturnedUnstarted => None,
    }
}
