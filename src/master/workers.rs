//! What workers say and do: frames (hello, started, done, release, return, fail) checked against
//! the assignments, protocol violations, and exits — each exit's jobs settled by the policy.

use std::time::Duration;

use drover_broker::{JobId, Settle};
use drover_supervisor::{describe_exit, FromWorker, ProtocolError, WorkerEvent, WorkerId};

use crate::lifecycle::{EndedBy, Event, JobRef};
use crate::master::pools::runtime::Exited;
use crate::master::pools::PoolId;
use crate::rules::held_job::HeldJob;
use crate::rules::settle::{self, Cause, Counted, Ending};

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
        // Reaped: its PID may be reused, so what observers keep by it goes.
        self.lifecycle.emit(Event::WorkerGone { pid });
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
            // The job it was running ended with it: counted as failed or taken back (the
            // process is gone, so its CPU and memory are not read); those it held unstarted go
            // back uncharged.
            let s = settle::settle(*lease, job, Ending::Abandoned(&cause));
            self.ended(lease.id, job, EndedBy::WorkerGone, &s, None);
            self.settler.settle(s);
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
            FromWorker::Done { job, token, within } => {
                self.on_done(index, worker, job, token, within)?
            }
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
                let pid = p.pool().pid(worker);
                self.claimer.want(index);
                let s = settle::settle(lease, &held, Ending::Returned);
                self.ended(job, &held, EndedBy::Returned, &s, pid);
                self.settler.settle(s);
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
        let wait = held.waited.saturating_add(held.claimed_at.elapsed());
        self.lifecycle.emit(Event::Started {
            job: JobRef::held(job, held),
            pid,
            wait,
        });
        Ok(())
    }

    /// `done`: the job is acked (riding with the next claim unless it is grouped), its run time
    /// and usage observed, and its credit freed. `within`: the job's own transaction completed it
    /// (its row is gone); its ack forgets its completion row, riding a claim as any ack does.
    fn on_done(
        &mut self,
        index: PoolId,
        worker: WorkerId,
        job: JobId,
        token: i64,
        within: bool,
    ) -> Result<(), ProtocolError> {
        let p = &mut self.pools[index];
        let pid = p.pool().pid(worker);
        let (lease, held) = p.assignments.finish(worker, "done", job, token)?;
        if let Some(ran) = held.started_at.map(|t| t.elapsed()) {
            p.runtime = Some(match p.runtime {
                Some(avg) => avg.mul_f64(0.9) + ran.mul_f64(0.1),
                None => ran,
            });
        }
        let (ending, by) = match within {
            true => (Ending::DoneWithin, EndedBy::DoneWithin),
            false => (Ending::Done, EndedBy::Done),
        };
        let s = settle::settle(lease, &held, ending);
        self.ended(job, &held, by, &s, pid);
        // A finished job frees credit, and may let a claim find jobs no NOTIFY
        // announces. An ack that rides waits up to `ack_ride_wait` for a claim to carry
        // it (one commit for both), and a claim after that wait looks for the
        // unannounced jobs. Any other (a grouped job's moves its group on): claim right
        // after it.
        if self.settler.ack(s, held.grouped, self.life.running()) {
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
        let (lease, held) = p.assignments.finish(worker, frame, job, token)?;
        let pid = p.pool().pid(worker);
        self.claimer.want(index);
        let s = settle::settle(lease, &held, ending);
        let by = match ending {
            Ending::Failed { .. } => EndedBy::Failed,
            _ => EndedBy::Released,
        };
        self.ended(job, &held, by, &s, pid);
        self.settler.settle(s);
        Ok(())
    }

    /// Job `id`'s attempt ended `by` so, settled by `settle`; `pid` is its worker while it is
    /// there to be read.
    fn ended(&mut self, id: JobId, held: &HeldJob, by: EndedBy, settle: &Settle, pid: Option<u32>) {
        self.lifecycle.emit(Event::Ended {
            job: JobRef::held(id, held),
            by,
            counted: Counted::of(settle),
            ran: held.started_at.map(|t| t.elapsed()),
            pid,
        });
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
