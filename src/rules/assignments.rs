//! The master's record of which worker holds which leased job, and how much more each may take.
//! Every frame a worker sends about a job is checked against it, so a worker can only settle
//! what it holds, with the token it was given.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use drover_broker::{JobId, Lease, LeasedJob};
use drover_supervisor::{ProtocolError, WorkerId, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

// Re-exported: the assignments hand out and give back held jobs, and the master names the type
// by this path.
pub use crate::rules::held_job::HeldJob;
use crate::rules::job_policy::JobHints;
use crate::rules::lease_deadlines::hold_until;
use crate::rules::socket_room;
use crate::rules::worker_state::{next, Transition, WorkerState};

/// The highest prefetch a worker may announce.
pub const MAX_PREFETCH: u32 = 256;

/// What a claim's leases are: their length and the outage grace the reap adds to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTerms {
    pub lease: Duration,
    pub grace: Duration,
}

impl From<Duration> for LeaseTerms {
    /// A lease without grace.
    fn from(lease: Duration) -> LeaseTerms {
        LeaseTerms {
            lease,
            grace: Duration::ZERO,
        }
    }
}

/// One worker's side of the assignments.
#[derive(Debug)]
struct Account {
    /// How many jobs it may hold (from its hello).
    prefetch: u32,
    /// How many jobs it runs before it exits by itself (its hello's `max_jobs`; 0: no limit):
    /// it is given no more, so no job is prefetched to a worker that will leave without it.
    max_jobs: u64,
    /// Jobs it holds, by id.
    held: HashMap<JobId, HeldJob>,
    /// The job it is running, if any.
    running: Option<JobId>,
    /// Where it is (serving, paused, retiring, fenced, timed out): whether it gets jobs.
    state: WorkerState,
    /// Jobs it finished (done, released or failed), for status.
    finished: u64,
    /// What it did that made the master stop it (a bad frame), for the reason its running job
    /// is charged with.
    misbehaved: Option<String>,
    /// The operator's request its running job was stopped by, for how that job is settled.
    stop: Option<crate::rules::stop_request::Stop>,
    /// A `lease` frame was sent to it and it has said nothing since: it may not have read it, so
    /// it is sent no other (`rules::socket_room`).
    lease_frame_unread: bool,
    /// The protocol version it speaks: one of the previous release (1) knows no `withdraw`.
    protocol: u32,
}

impl Account {
    /// How many jobs it may hold together now: its prefetch, or fewer when its `max_jobs` leaves
    /// fewer to run than that.
    fn room(&self) -> usize {
        let prefetch = self.prefetch as usize;
        if self.max_jobs == 0 {
            return prefetch;
        }
        let left = self.max_jobs.saturating_sub(self.finished);
        prefetch.min(usize::try_from(left).unwrap_or(usize::MAX))
    }

    /// What the job frames it holds and has not started cost in its socket.
    fn unstarted_charge(&self) -> usize {
        self.held
            .values()
            .filter(|h| !h.started)
            .map(|h| h.frame_charge)
            .sum()
    }

    /// How many more jobs it may be given now, each costing `next` in its socket (0: not known):
    /// its room less what it holds, within the socket's budget (`rules::socket_room`).
    fn free(&self, next: usize) -> usize {
        let room = self.room().saturating_sub(self.held.len());
        socket_room::how_many(self.held.is_empty(), self.unstarted_charge(), room, next)
    }

    /// Whether a job frame costing `charge` may go to it now.
    fn takes(&self, charge: usize) -> bool {
        self.held.len() < self.room()
            && socket_room::takes(self.held.is_empty(), self.unstarted_charge(), charge)
    }
}

/// Marks `account` stopped by `stop` (the first kill's reason stands, `rules::worker_state`).
fn a_stop(account: &mut Account, stop: crate::rules::stop_request::Stop) {
    account.state = next(account.state, Transition::Stop);
    if account.state == WorkerState::Stopped {
        account.stop.get_or_insert(stop);
    }
}

/// What a worker held when it went away.
#[derive(Debug)]
pub struct Removed {
    /// Killed by the master for a timeout (rather than dying by itself).
    pub timed_out: bool,
    /// Killed by the master because an operator stopped its running job: how to settle it.
    pub stopped: Option<crate::rules::stop_request::Stop>,
    /// Every job it held, by id order.
    pub jobs: Vec<(Lease, HeldJob)>,
    /// Why the master stopped it, if it broke the protocol.
    pub misbehaved: Option<String>,
    /// Jobs it finished (done, released or failed): a planned exit after work is replaced at once.
    pub finished: u64,
}

/// One worker's line in `drover status`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerLine {
    pub id: u64,
    pub held: usize,
    pub running: Option<JobId>,
    pub finished: u64,
    pub accepting: bool,
}

#[derive(Debug, Default)]
pub struct Assignments {
    accounts: HashMap<WorkerId, Account>,
    /// What the cheapest job the last hand-out could not place for want of socket room costs
    /// (0: every job found a place): the credit counts jobs of that size, so a claim does not
    /// lease jobs only to hand them back, and busy workers get none until one runs empty and can
    /// take it (a large job is not overtaken for ever by small ones).
    waiting_charge: usize,
}

impl Assignments {
    /// A worker's hello: checks the version and opens its account.
    pub fn hello(
        &mut self,
        worker: WorkerId,
        v: u32,
        prefetch: u32,
        max_jobs: u64,
    ) -> Result<(), ProtocolError> {
        if self.accounts.contains_key(&worker) {
            return Err(ProtocolError::RepeatedHello);
        }
        if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&v) {
            return Err(ProtocolError::WrongVersion { got: v });
        }
        if prefetch == 0 || prefetch > MAX_PREFETCH {
            return Err(ProtocolError::BadPrefetch {
                got: prefetch,
                max: MAX_PREFETCH,
            });
        }
        // A worker of the previous release cannot be told to give prefetched jobs back when
        // their queue is paused: it holds one job at a time, which it starts when handed it
        // (docs/upgrading.md, "Workers").
        let prefetch = if v < 2 { 1 } else { prefetch };
        self.accounts.insert(
            worker,
            Account {
                prefetch,
                max_jobs,
                held: HashMap::new(),
                running: None,
                state: next(WorkerState::Starting, Transition::Hello),
                finished: 0,
                misbehaved: None,
                stop: None,
                lease_frame_unread: false,
                protocol: v,
            },
        );
        Ok(())
    }

    /// True once the worker said hello (and until it exits).
    pub fn knows(&self, worker: WorkerId) -> bool {
        self.accounts.contains_key(&worker)
    }

    /// Moves a worker's state (see `crate::rules::worker_state`); returns the new one.
    pub fn transition(&mut self, worker: WorkerId, t: Transition) -> Option<WorkerState> {
        let a = self.accounts.get_mut(&worker)?;
        a.state = next(a.state, t);
        Some(a.state)
    }

    /// The worker broke the protocol: fenced (it gets nothing more), and `why` is kept for the
    /// reason its running job is charged with.
    pub fn misbehaved(&mut self, worker: WorkerId, why: String) {
        if let Some(a) = self.accounts.get_mut(&worker) {
            a.state = next(a.state, Transition::Fence);
            a.misbehaved.get_or_insert(why);
        }
    }

    /// An operator asked to stop `job`'s attempt `token`: the worker running it (started, with
    /// that token) is to be killed, and the job settled as `stop` says; which worker, or None
    /// when no worker here runs that attempt (not started yet: asked again at the next reading)
    /// or the one that does is already being killed for its lease or a timeout (that kill's
    /// rule settles the job).
    pub fn stop(
        &mut self,
        job: JobId,
        token: i64,
        stop: crate::rules::stop_request::Stop,
    ) -> Option<WorkerId> {
        let (worker, account) = self.accounts.iter_mut().find(|(_, a)| {
            a.running == Some(job) && a.held.get(&job).is_some_and(|h| h.token == token)
        })?;
        a_stop(account, stop);
        // Already being killed for its lease or a timeout: that kill's rule settles the job, and
        // the request is not said to be carried out.
        (account.state == WorkerState::Stopped).then_some(*worker)
    }

    /// A worker's state, once it said hello.
    pub fn state(&self, worker: WorkerId) -> Option<WorkerState> {
        self.accounts.get(&worker).map(|a| a.state)
    }

    /// Jobs all open workers could take now.
    pub fn free_credit(&self) -> usize {
        self.accounts
            .values()
            .filter(|a| a.state.accepts_jobs())
            .map(|a| a.free(self.waiting_charge))
            .sum()
    }

    /// Jobs all open workers could hold together.
    pub fn capacity(&self) -> usize {
        self.accounts
            .values()
            .filter(|a| a.state.accepts_jobs())
            .map(Account::room)
            .sum()
    }

    /// An open worker holds nothing: it is waiting for work right now.
    pub fn has_idle_worker(&self) -> bool {
        self.accounts
            .values()
            .any(|a| a.state.accepts_jobs() && a.held.is_empty() && a.room() > 0)
    }

    /// Hands claimed jobs out, most free credit first. Jobs nobody can take come back in the second
    /// vector (to be released uncharged).
    pub fn assign(
        &mut self,
        jobs: Vec<(LeasedJob, JobHints)>,
        terms: impl Into<LeaseTerms>,
        claimed_at: Instant,
    ) -> (Vec<(WorkerId, LeasedJob)>, Vec<LeasedJob>) {
        let terms = terms.into();
        let mut given = Vec::with_capacity(jobs.len());
        let mut left = Vec::new();
        let mut waiting_charge: Option<usize> = None;
        for (job, hints) in jobs {
            let charge = socket_room::charge(socket_room::frame_len(&job));
            let best = self
                .accounts
                .iter_mut()
                .filter(|(_, a)| a.state.accepts_jobs() && a.takes(charge))
                // Idle workers first, then the emptiest; ties by id keep it deterministic.
                .min_by_key(|(id, a)| {
                    (
                        a.running.is_some() || !a.held.is_empty(),
                        a.held.len(),
                        **id,
                    )
                });
            match best {
                Some((id, account)) => {
                    account.held.insert(
                        job.id,
                        // Received now: the claim's own round trip is already in `waited`.
                        HeldJob {
                            grouped: job.grouped,
                            waited: job.waited,
                            frame_charge: charge,
                            grace: terms.grace,
                            ..HeldJob::claimed(
                                job.token,
                                job.attempts,
                                job.max_attempts,
                                hints,
                                job.queue.clone(),
                                claimed_at + terms.lease,
                            )
                        },
                    );
                    given.push((*id, job));
                }
                None => {
                    // Left for want of socket room, not of credit: remember its size.
                    let room = self
                        .accounts
                        .values()
                        .any(|a| a.state.accepts_jobs() && a.held.len() < a.room());
                    if room {
                        waiting_charge = Some(waiting_charge.map_or(charge, |c| c.min(charge)));
                    }
                    left.push(job);
                }
            }
        }
        self.waiting_charge = waiting_charge.unwrap_or(0);
        (given, left)
    }

    fn held_mut(
        &mut self,
        worker: WorkerId,
        frame: &'static str,
        job: JobId,
        token: i64,
    ) -> Result<&mut Account, ProtocolError> {
        let account = self
            .accounts
            .get_mut(&worker)
            .ok_or(ProtocolError::NoHello { frame })?;
        match account.held.get(&job) {
            Some(h) if h.token == token => {
                // It spoke: it read its socket before, so it may be sent a `lease` frame again.
                account.lease_frame_unread = false;
                Ok(account)
            }
            _ => Err(ProtocolError::UnknownJob { frame, job, token }),
        }
    }

    /// A `started` frame. `timeout` gives the job's limit from its hints; the deadline starts now.
    pub fn started(
        &mut self,
        worker: WorkerId,
        job: JobId,
        token: i64,
        timeout: impl FnOnce(&JobHints) -> Option<Duration>,
    ) -> Result<&mut HeldJob, ProtocolError> {
        let account = self.held_mut(worker, "started", job, token)?;
        if let Some(running) = account.running {
            return Err(ProtocolError::AlreadyRunning { job, running });
        }
        account.running = Some(job);
        let h = account
            .held
            .get_mut(&job)
            .ok_or(ProtocolError::UnknownJob {
                frame: "started",
                job,
                token,
            })?;
        h.started = true;
        h.started_at = Some(Instant::now());
        // A deadline no clock can hold is no deadline (timeouts are bounded before this).
        h.deadline = timeout(&h.hints).and_then(|t| Instant::now().checked_add(t));
        Ok(h)
    }

    /// Running jobs past their deadline, with their workers.
    pub fn overdue(&self, now: Instant) -> Vec<(WorkerId, JobId)> {
        self.accounts
            .iter()
            .filter(|(_, a)| a.state != WorkerState::TimedOut)
            .filter_map(|(w, a)| {
                let job = a.running?;
                let deadline = a.held.get(&job)?.deadline?;
                (deadline <= now).then_some((*w, job))
            })
            .collect()
    }

    /// A worker's line for `drover status`, once it said hello.
    pub fn status(&self, worker: WorkerId) -> Option<WorkerLine> {
        self.accounts.get(&worker).map(|a| WorkerLine {
            id: worker.0,
            held: a.held.len(),
            running: a.running,
            finished: a.finished,
            accepting: a.state.accepts_jobs(),
        })
    }

    /// The record of job `job` that worker `worker` holds.
    pub fn held_job(&self, worker: WorkerId, job: JobId) -> Option<&HeldJob> {
        self.accounts.get(&worker)?.held.get(&job)
    }

    /// A `done`, `release` or `fail` frame: removes the job and returns its lease and record.
    pub fn finish(
        &mut self,
        worker: WorkerId,
        frame: &'static str,
        job: JobId,
        token: i64,
    ) -> Result<(Lease, HeldJob), ProtocolError> {
        let account = self.held_mut(worker, frame, job, token)?;
        if account.running != Some(job) {
            return Err(ProtocolError::NotStarted { frame, job });
        }
        account.running = None;
        account.finished += 1;
        let held =
            account
                .held
                .remove(&job)
                .ok_or(ProtocolError::UnknownJob { frame, job, token })?;
        Ok((Lease { id: job, token }, held))
    }

    /// A `return` frame: the worker gives back a prefetched job it never started.
    pub fn give_back(
        &mut self,
        worker: WorkerId,
        job: JobId,
        token: i64,
    ) -> Result<(Lease, HeldJob), ProtocolError> {
        let account = self.held_mut(worker, "return", job, token)?;
        if account.held.get(&job).is_some_and(|h| h.started) {
            return Err(ProtocolError::ReturnedStarted { job });
        }
        let held = account.held.remove(&job).ok_or(ProtocolError::UnknownJob {
            frame: "return",
            job,
            token,
        })?;
        Ok((Lease { id: job, token }, held))
    }

    /// A worker is gone: everything it held, for the settle rules (`rules::settle`).
    pub fn remove(&mut self, worker: WorkerId) -> Removed {
        let Some(account) = self.accounts.remove(&worker) else {
            return Removed {
                timed_out: false,
                stopped: None,
                jobs: Vec::new(),
                misbehaved: None,
                finished: 0,
            };
        };
        let mut jobs: Vec<(Lease, HeldJob)> = account
            .held
            .into_iter()
            .map(|(id, h)| (Lease { id, token: h.token }, h))
            .collect();
        jobs.sort_by_key(|(l, _)| l.id);
        Removed {
            timed_out: account.state == WorkerState::TimedOut,
            stopped: account
                .stop
                .filter(|_| account.state == WorkerState::Stopped),
            jobs,
            misbehaved: account.misbehaved,
            finished: account.finished,
        }
    }

    /// Every lease held, for renewal.
    pub fn leases(&self) -> Vec<Lease> {
        self.accounts
            .values()
            .flat_map(|a| {
                a.held.iter().map(|(id, h)| Lease {
                    id: *id,
                    token: h.token,
                })
            })
            .collect()
    }

    /// Records a successful renewal (asked for at `at`): the leases renewed hold `lease` from
    /// `at`; those completed in their job's own transaction (their worker says `done` next, or
    /// its exit's settle learns it) and those busy (their row locked this moment) are not lost;
    /// any other lease asked for is: returned, for its worker to be stopped.
    pub fn renewed(
        &mut self,
        found: &drover_broker::Renewed,
        asked: &[Lease],
        at: Instant,
        lease: Duration,
    ) -> Vec<(WorkerId, JobId)> {
        let renewed: std::collections::HashSet<JobId> = found.renewed.iter().copied().collect();
        let spared: std::collections::HashSet<JobId> = (found.completed.iter())
            .chain(&found.busy)
            .copied()
            .collect();
        let mut lost = Vec::new();
        for (worker, account) in &mut self.accounts {
            for l in asked {
                if let Some(h) = account.held.get_mut(&l.id) {
                    if h.token != l.token {
                        continue;
                    }
                    if renewed.contains(&l.id) {
                        h.lease_until = at + lease;
                    } else if spared.contains(&l.id) {
                        continue;
                    } else {
                        lost.push((*worker, l.id));
                    }
                }
            }
        }
        lost
    }

    /// For each worker holding jobs, when the first of their holds ends (a lease's end plus its
    /// grace, while `grace_in_force`): what its lease guard's deadline is counted from.
    pub fn hold_floors(&self, grace_in_force: bool) -> Vec<(WorkerId, Instant)> {
        self.accounts
            .iter()
            .filter_map(|(w, a)| {
                a.held
                    .values()
                    .map(|h| hold_until(h.lease_until, h.grace_if(grace_in_force)))
                    .min()
                    .map(|u| (*w, u))
            })
            .collect()
    }

    /// The `lease` frames to send after a renewal: to each worker holding unstarted jobs (only
    /// their deadlines matter to a worker) that has said something since the last one it was sent,
    /// when the first of its leases now ends. Those workers are marked as sent one.
    pub fn lease_frames_due(&mut self) -> Vec<(WorkerId, Instant)> {
        let mut due = Vec::new();
        for (w, a) in &mut self.accounts {
            if a.lease_frame_unread || a.held.values().all(|h| h.started) {
                continue;
            }
            if let Some(until) = a.held.values().map(|h| h.lease_until).min() {
                a.lease_frame_unread = true;
                due.push((*w, until));
            }
        }
        due
    }

    /// Every job held, with its worker and when its hold ends (its lease's end plus its grace,
    /// while `grace_in_force`).
    pub fn holds(&self, grace_in_force: bool) -> Vec<(WorkerId, JobId, Instant)> {
        self.accounts
            .iter()
            .flat_map(|(w, a)| {
                a.held.iter().map(move |(id, h)| {
                    let hold = hold_until(h.lease_until, h.grace_if(grace_in_force));
                    (*w, *id, hold)
                })
            })
            .collect()
    }

    /// Workers holding a job of `queue` they have not started (as far as the master has heard):
    /// those a pause of the queue must tell to give such jobs back. A worker of protocol 1 is
    /// not among them: it knows no `withdraw`, and holds only the one job it is starting.
    pub fn holding_unstarted(&self, queue: &str) -> Vec<WorkerId> {
        let mut workers: Vec<WorkerId> = self
            .accounts
            .iter()
            .filter(|(_, a)| a.protocol >= 2)
            .filter(|(_, a)| a.held.values().any(|h| !h.started && h.queue == queue))
            .map(|(w, _)| *w)
            .collect();
        workers.sort_by_key(|w| w.0);
        workers
    }

    /// Jobs held in all.
    pub fn held(&self) -> usize {
        self.accounts.values().map(|a| a.held.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::settle::{settle, Cause, Ending};
    use drover_broker::Settle;

    /// The protocol version workers speak.
    const V: u32 = PROTOCOL_VERSION;

    fn job(id: i64, token: i64) -> LeasedJob {
        LeasedJob {
            id,
            queue: "default".into(),
            payload: "{}".into(),
            attempts: 1,
            max_attempts: Some(3),
            token,
            failure: None,
            waited: Duration::ZERO,
            grouped: false,
        }
    }

    fn hinted(jobs: Vec<LeasedJob>) -> Vec<(LeasedJob, JobHints)> {
        jobs.into_iter()
            .map(|j| {
                let hints = JobHints::from_payload(&j.payload);
                (j, hints)
            })
            .collect()
    }

    fn no_timeout(_: &JobHints) -> Option<Duration> {
        None
    }

    #[test]
    fn credit_assignment_and_settle_checks() {
        let mut l = Assignments::default();
        let (a, b) = (WorkerId(1), WorkerId(2));
        l.hello(a, V, 2, 0).unwrap();
        l.hello(b, V, 2, 0).unwrap();
        assert_eq!(l.free_credit(), 4);
        let (given, left) = l.assign(
            (1..=5)
                .map(|i| (job(i, 10 + i), JobHints::default()))
                .collect(),
            Duration::from_secs(30),
            Instant::now(),
        );
        assert_eq!(given.len(), 4);
        assert_eq!(left.len(), 1);
        assert_eq!(l.free_credit(), 0);
        let (w, j) = (given[0].0, given[0].1.id);
        // A frame for a job the worker does not hold, or with the wrong token, is rejected.
        let other = if w == a { b } else { a };
        assert!(matches!(
            l.started(other, j, 10 + j, no_timeout),
            Err(ProtocolError::UnknownJob { .. })
        ));
        assert!(matches!(
            l.started(w, j, 999, no_timeout),
            Err(ProtocolError::UnknownJob { .. })
        ));
        assert!(matches!(
            l.finish(w, "done", j, 10 + j),
            Err(ProtocolError::NotStarted { .. })
        ));
        l.started(w, j, 10 + j, no_timeout).unwrap();
        assert_eq!(l.finish(w, "done", j, 10 + j).unwrap().0.id, j);
        assert_eq!(l.free_credit(), 1);
        assert_eq!(l.status(w).unwrap().finished, 1);
    }

    #[test]
    fn a_dead_worker_gives_back_prefetched_jobs_uncharged_and_its_running_job_charged() {
        let mut l = Assignments::default();
        let w = WorkerId(1);
        l.hello(w, V, 4, 0).unwrap();
        let mut jobs: Vec<_> = (1..=4).map(|i| job(i, i)).collect();
        jobs[3].attempts = 3; // the last attempt
        l.assign(hinted(jobs), Duration::from_secs(30), Instant::now());
        l.started(w, 1, 1, no_timeout).unwrap();
        let removed = l.remove(w);
        let settles: Vec<Settle> = removed
            .jobs
            .iter()
            .map(|(lease, h)| {
                settle(
                    *lease,
                    h,
                    Ending::Abandoned(&Cause::Died("was killed".into())),
                )
            })
            .collect();
        assert!(matches!(settles[0], Settle::TakeBack { .. }));
        assert!(matches!(settles[1], Settle::Release { charged: false, .. }));
        assert!(
            matches!(settles[3], Settle::Release { charged: false, .. }),
            "unstarted: never charged, even on its last attempt"
        );
        assert_eq!(l.held(), 0);
    }

    #[test]
    fn the_running_job_fails_when_its_attempts_are_used_up() {
        let mut l = Assignments::default();
        let w = WorkerId(1);
        l.hello(w, V, 1, 0).unwrap();
        let mut j = job(1, 1);
        j.attempts = 3;
        l.assign(hinted(vec![j]), Duration::from_secs(30), Instant::now());
        l.started(w, 1, 1, no_timeout).unwrap();
        let removed = l.remove(w);
        let (lease, held) = &removed.jobs[0];
        assert!(matches!(
            settle(
                *lease,
                held,
                Ending::Abandoned(&Cause::Died("was killed".into()))
            ),
            Settle::Fail { .. }
        ));
    }

    #[test]
    fn a_busy_worker_is_prefetched_only_while_its_unstarted_job_frames_leave_its_socket_room() {
        let mut l = Assignments::default();
        let w = WorkerId(1);
        l.hello(w, V, 8, 0).unwrap();
        let sized = |id: i64, kib: usize| LeasedJob {
            payload: "x".repeat(kib * 1024),
            ..job(id, id * 10)
        };
        let assign = |l: &mut Assignments, jobs: Vec<LeasedJob>| {
            let (given, left) = l.assign(hinted(jobs), Duration::from_secs(30), Instant::now());
            (
                given.iter().map(|(_, j)| j.id).collect::<Vec<_>>(),
                left.iter().map(|j| j.id).collect::<Vec<_>>(),
            )
        };
        // Holding nothing, it reads its socket: a job of any size goes to it; the next large one
        // does not fit beside it, and is left.
        assert_eq!(
            assign(&mut l, vec![sized(1, 200), sized(2, 70)]),
            (vec![1], vec![2])
        );
        // The credit now counts jobs of the size left waiting: none, so a claim leases nothing
        // only to hand it back; the same while job 1 runs.
        assert_eq!(l.free_credit(), 0);
        l.started(w, 1, 10, no_timeout).unwrap();
        assert_eq!(
            l.free_credit(),
            0,
            "busy: the large job waits for an idle worker"
        );
        // Small jobs (what fits is handed out, and then nothing waits): 1 KiB frames cost
        // 2,304 bytes each, 28 fit the budget, the room (7) is the limit.
        assert_eq!(
            assign(&mut l, vec![sized(3, 1), sized(4, 1)]),
            (vec![3, 4], vec![])
        );
        assert_eq!(l.free_credit(), 5);
        // It finishes everything: holding nothing, it takes the large one.
        for id in [1, 3, 4] {
            if id != 1 {
                l.started(w, id, id * 10, no_timeout).unwrap();
            }
            l.finish(w, "done", id, id * 10).unwrap();
        }
        assert_eq!(assign(&mut l, vec![sized(2, 70)]), (vec![2], vec![]));
    }

    #[test]
    fn a_lease_frame_goes_to_a_worker_holding_unstarted_jobs_and_no_other_until_it_speaks() {
        let mut l = Assignments::default();
        let (a, b) = (WorkerId(1), WorkerId(2));
        l.hello(a, V, 2, 0).unwrap();
        l.hello(b, V, 1, 0).unwrap();
        let (given, _) = l.assign(
            hinted(vec![job(1, 10), job(2, 20), job(3, 30)]),
            Duration::from_secs(30),
            Instant::now(),
        );
        let on = |w: WorkerId| -> Vec<i64> {
            given
                .iter()
                .filter(|(x, _)| *x == w)
                .map(|(_, j)| j.id)
                .collect()
        };
        let (a_jobs, b_jobs) = (on(a), on(b));
        assert_eq!((a_jobs.len(), b_jobs.len()), (2, 1));
        // b runs its one job: nothing of it waits on a deadline it must know.
        l.started(b, b_jobs[0], b_jobs[0] * 10, no_timeout).unwrap();
        l.started(a, a_jobs[0], a_jobs[0] * 10, no_timeout).unwrap();
        let due = |l: &mut Assignments| -> Vec<WorkerId> {
            l.lease_frames_due().into_iter().map(|(w, _)| w).collect()
        };
        assert_eq!(due(&mut l), [a], "a holds one unstarted");
        assert!(due(&mut l).is_empty(), "a has not spoken since");
        l.finish(a, "done", a_jobs[0], a_jobs[0] * 10).unwrap();
        assert_eq!(due(&mut l), [a], "it spoke");
    }

    #[test]
    fn the_workers_holding_a_queues_unstarted_jobs_are_found() {
        let mut l = Assignments::default();
        let (a, b, c) = (WorkerId(1), WorkerId(2), WorkerId(3));
        for w in [a, b, c] {
            l.hello(w, V, 1, 0).unwrap();
        }
        let other = LeasedJob {
            queue: "other".into(),
            ..job(3, 30)
        };
        let (given, _) = l.assign(
            hinted(vec![job(1, 10), job(2, 20), other]),
            Duration::from_secs(30),
            Instant::now(),
        );
        let holder = |id: i64| given.iter().find(|(_, j)| j.id == id).unwrap().0;
        l.started(holder(1), 1, 10, no_timeout).unwrap();
        // Job 1 runs, job 2 waits in its worker's prefetch, job 3 is another queue's.
        assert_eq!(l.holding_unstarted("default"), [holder(2)]);
        assert_eq!(l.holding_unstarted("other"), [holder(3)]);
        assert!(l.holding_unstarted("none").is_empty());
    }

    #[test]
    fn wrong_version_and_bad_prefetch_are_refused() {
        let mut l = Assignments::default();
        assert!(matches!(
            l.hello(WorkerId(1), 0, 1, 0),
            Err(ProtocolError::WrongVersion { got: 0 })
        ));
        assert!(matches!(
            l.hello(WorkerId(1), V + 1, 1, 0),
            Err(ProtocolError::WrongVersion { .. })
        ));
        assert!(matches!(
            l.hello(WorkerId(1), V, 0, 0),
            Err(ProtocolError::BadPrefetch { .. })
        ));
        l.hello(WorkerId(1), V, 1, 0).unwrap();
        assert!(matches!(
            l.hello(WorkerId(1), V, 1, 0),
            Err(ProtocolError::RepeatedHello)
        ));
    }

    #[test]
    fn a_worker_of_the_previous_protocol_holds_one_job_and_is_never_told_to_withdraw() {
        let mut l = Assignments::default();
        let (old, new) = (WorkerId(1), WorkerId(2));
        l.hello(old, 1, 8, 0).unwrap();
        l.hello(new, V, 8, 0).unwrap();
        assert_eq!(
            l.capacity(),
            9,
            "the old worker's prefetch of 8 counts as 1"
        );
        let (given, _) = l.assign(
            hinted((1..=9).map(|i| job(i, i)).collect()),
            Duration::from_secs(30),
            Instant::now(),
        );
        let to = |w: WorkerId| given.iter().filter(|(g, _)| *g == w).count();
        assert_eq!((to(old), to(new)), (1, 8));
        assert_eq!(l.holding_unstarted("default"), vec![new]);
    }

    #[test]
    fn lost_and_expiring_leases_are_found() {
        let mut l = Assignments::default();
        let w = WorkerId(7);
        l.hello(w, V, 4, 0).unwrap();
        let t0 = Instant::now();
        let lease = Duration::from_secs(2);
        l.assign(
            hinted(vec![job(1, 1), job(2, 2), job(3, 3), job(4, 4)]),
            lease,
            t0,
        );
        let asked = l.leases();
        // 1 renewed, 3 completed in its own transaction, 4 busy (its row locked): only 2 lost.
        let found = drover_broker::Renewed {
            renewed: vec![1],
            completed: vec![3],
            busy: vec![4],
        };
        let lost = l.renewed(&found, &asked, t0 + Duration::from_secs(1), lease);
        assert_eq!(lost, vec![(w, 2)]);
        let holds = l.holds(true);
        let hold = |id: i64| holds.iter().find(|h| h.1 == id).unwrap().2;
        assert_eq!(hold(1), t0 + Duration::from_secs(3));
        assert_eq!(hold(2), t0 + lease);
        assert_eq!(hold(4), t0 + lease, "a busy lease is not renewed");
    }

    #[test]
    fn a_grace_lengthens_the_hold_a_guard_counts_from_but_not_what_a_lease_frame_says() {
        let mut l = Assignments::default();
        let w = WorkerId(7);
        l.hello(w, V, 2, 0).unwrap();
        let t0 = Instant::now();
        let terms = LeaseTerms {
            lease: Duration::from_secs(30),
            grace: Duration::from_secs(90),
        };
        l.assign(hinted(vec![job(1, 1), job(2, 2)]), terms, t0);
        assert_eq!(
            l.hold_floors(true),
            vec![(w, t0 + Duration::from_secs(120))]
        );
        assert!(l
            .holds(true)
            .iter()
            .all(|h| h.2 == t0 + Duration::from_secs(120)));
        // While a master that ignores graces has a row, the grace is not relied on.
        assert_eq!(l.hold_floors(false), vec![(w, t0 + terms.lease)]);
        assert!(l.holds(false).iter().all(|h| h.2 == t0 + terms.lease));
        // A renewal moves the lease, and the hold with it by the same grace.
        let asked = l.leases();
        let at = t0 + Duration::from_secs(10);
        let found = drover_broker::Renewed::all(vec![1, 2]);
        assert!(l.renewed(&found, &asked, at, terms.lease).is_empty());
        assert_eq!(
            l.hold_floors(true),
            vec![(w, at + Duration::from_secs(120))]
        );
        // A worker holding unstarted jobs is told the lease's own end: it starts none past it.
        assert_eq!(l.lease_frames_due(), vec![(w, at + terms.lease)]);
    }

    #[test]
    fn a_worker_with_max_jobs_is_given_no_more_than_it_will_run() {
        let mut l = Assignments::default();
        let w = WorkerId(1);
        l.hello(w, V, 4, 2).unwrap();
        assert_eq!(l.capacity(), 2, "prefetch 4, but only 2 jobs left to run");
        let (given, left) = l.assign(
            hinted((1..=3).map(|i| job(i, i)).collect()),
            Duration::from_secs(30),
            Instant::now(),
        );
        assert_eq!((given.len(), left.len()), (2, 1));
        l.started(w, 1, 1, no_timeout).unwrap();
        l.finish(w, "done", 1, 1).unwrap();
        assert_eq!(
            l.free_credit(),
            0,
            "one finished, one held: nothing left to give"
        );
        l.started(w, 2, 2, no_timeout).unwrap();
        l.finish(w, "done", 2, 2).unwrap();
        assert_eq!(
            (l.free_credit(), l.capacity()),
            (0, 0),
            "it is about to exit"
        );
        assert!(
            !l.has_idle_worker(),
            "a worker with no job left to run is not waiting for one"
        );
        assert_eq!(l.remove(w).finished, 2);
    }

    #[test]
    fn capacity_and_idleness_drive_batched_claims() {
        let mut l = Assignments::default();
        let (a, b) = (WorkerId(1), WorkerId(2));
        l.hello(a, V, 4, 0).unwrap();
        l.hello(b, V, 4, 0).unwrap();
        assert_eq!(l.capacity(), 8);
        assert!(l.has_idle_worker());
        l.assign(
            hinted((1..=8).map(|i| job(i, i)).collect()),
            Duration::from_secs(30),
            Instant::now(),
        );
        assert!(!l.has_idle_worker());
        assert_eq!(l.free_credit(), 0);
        l.transition(b, Transition::Retire);
        assert_eq!(l.capacity(), 4, "a closed worker takes no more jobs");
    }

    #[test]
    fn a_running_job_past_its_timeout_is_overdue_once() {
        let mut l = Assignments::default();
        let w = WorkerId(3);
        l.hello(w, V, 1, 0).unwrap();
        l.assign(
            hinted(vec![job(1, 1)]),
            Duration::from_secs(30),
            Instant::now(),
        );
        l.started(w, 1, 1, |_| Some(Duration::from_millis(10)))
            .unwrap();
        assert!(l.overdue(Instant::now()).is_empty());
        assert_eq!(
            l.overdue(Instant::now() + Duration::from_millis(20)),
            vec![(w, 1)]
        );
        l.transition(w, Transition::TimeOut);
        assert!(
            l.overdue(Instant::now() + Duration::from_secs(1))
                .is_empty(),
            "reported once"
        );
        assert!(l.remove(w).timed_out);
    }
}
