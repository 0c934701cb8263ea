//! The settler (River's completer): what each ending of a job becomes on its way to the
//! database. [`Settler`] is the loop's side — an ack rides with the next claim or goes on — and
//! [`settle_batches`] the batching task that writes them in rounds of statements and never drops
//! one while the database is away, reporting each batch back for the job lifecycle
//! (`crate::lifecycle`). What a frame's ending becomes is `rules::settle`'s to say, and what it
//! counts as the lifecycle's `Ended` event carries; the settler only carries the settle.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_broker::{JobId, Settle, SettleOutcome};
use tokio::sync::{mpsc, Notify};

use crate::lifecycle::{Event, Lifecycle};
use crate::rules::settle::Counted;
use crate::store::Settles;

use super::database_reach::DatabaseReach;
use super::drain::Unwritten;
use super::riding_acks::RidingAcks;

/// The settle side of the master: what each ending becomes on its way to the database — an ack
/// that waits to ride with the next claim, or a settle for the batching task — and what a drain
/// and the reaper need to know of the settles not yet written. What a settle counts as is the
/// lifecycle's (`crate::lifecycle`), told by whoever ended the attempt; the settler tells it
/// what was written, and what the database refused.
pub(super) struct Settler {
    /// Settles on their way to the batching task.
    tx: mpsc::UnboundedSender<Settle>,
    /// Acks waiting a moment for a claim to carry them (counted in `unwritten` meanwhile).
    riding: RidingAcks,
    /// The batching task, awaited at exit so no settle is lost.
    task: tokio::task::JoinHandle<()>,
    /// Settles sent to the batcher and not yet written (a drain waits for them; an exit counts
    /// those it could not wait for).
    unwritten: Unwritten,
    /// Bumped by every settle: a pool found empty at an older epoch may have work again.
    epoch: u64,
    /// Set by the batching task while an outage holds settles back: no reaping until they are
    /// written.
    held: Arc<AtomicBool>,
}

/// What a batch of the batching task came to, for the lifecycle (the loop turns it into
/// [`Event::SettlesWritten`] and [`Event::SettleDropped`]).
#[derive(Debug)]
pub(super) enum BatchReport {
    /// The settles of `jobs` written, in `took` (the retries through an outage included).
    /// `completed_after_exit`: those of them whose settle counted them otherwise (taken back,
    /// released, failed) and changed nothing, for their job had completed inside its own
    /// transaction before its worker could say so: now counted completed.
    Written {
        jobs: Vec<JobId>,
        took: Duration,
        completed_after_exit: Vec<JobId>,
    },
    /// The database refused the settle of `job` by itself: dropped.
    Dropped { job: JobId, error: String },
}

/// What an exiting master waits for of the settler: the batching task, and the settles it has
/// not written yet.
pub(super) struct Closing {
    /// Ends after the last batch is written (or never, while the database is away).
    pub task: tokio::task::JoinHandle<()>,
    /// Counts down as batches land.
    pub unwritten: Unwritten,
}

impl Settler {
    /// Starts the batching task over `store`; acks ride with a claim for up to `ride_wait`; what
    /// each round's calls see of the database goes to `reach`, what each batch came to to
    /// `report`.
    pub(super) fn start(
        store: Arc<dyn Settles>,
        batching: Batching,
        wake: Arc<Notify>,
        ride_wait: Duration,
        reach: Arc<DatabaseReach>,
        report: impl Fn(BatchReport) + Send + 'static,
    ) -> Settler {
        let (tx, rx) = mpsc::unbounded_channel();
        let held = Arc::new(AtomicBool::new(false));
        let unwritten = Unwritten::default();
        let task = tokio::spawn(settle_batches(
            store,
            rx,
            batching,
            wake,
            Outage::new(held.clone(), reach),
            unwritten.clone(),
            report,
        ));
        Settler {
            tx,
            riding: RidingAcks::new(ride_wait),
            task,
            unwritten,
            epoch: 0,
            held,
        }
    }

    /// A settle to write.
    pub(super) fn settle(&mut self, settle: Settle) {
        self.sending();
        let _ = self.tx.send(settle);
    }

    /// A completed job's ack (`settle::settle` of a `done`): it rides with the next claim if one
    /// starts within `ack_ride_wait` (`riding_acks`), else goes to the batcher. A grouped job's
    /// goes at once, as every ack does once the master stops serving (`serving` false). True
    /// when it rides.
    pub(super) fn ack(&mut self, ack: Settle, grouped: bool, serving: bool) -> bool {
        if grouped || !self.riding.enabled() || !serving {
            self.settle(ack);
            return false;
        }
        self.sending();
        self.riding.push(ack, tokio::time::Instant::now());
        true
    }

    /// How long an ack may wait for a claim.
    pub(super) fn ride_wait(&self) -> Duration {
        self.riding.wait()
    }

    /// When the oldest riding ack must go to the batcher.
    pub(super) fn riding_due(&self) -> Option<tokio::time::Instant> {
        self.riding.due()
    }

    /// Every riding ack, for the claim about to start.
    pub(super) fn take_riding(&mut self) -> Vec<Settle> {
        self.riding.take()
    }

    /// Acks no claim took in their wait (all of them once the master stops serving) go to the
    /// batcher.
    pub(super) fn send_unridden(&mut self, serving: bool) {
        let acks = if serving {
            self.riding.take_due(tokio::time::Instant::now())
        } else {
            self.riding.take()
        };
        for ack in acks {
            let _ = self.tx.send(ack);
        }
    }

    /// A claim that carried acks came back after `took`: written (`stale`: those that changed
    /// nothing; the lifecycle hears of them), or, on any error (it may not have committed), sent
    /// to the batcher, which writes them again — a repeated ack matches nothing. True when the
    /// claim wrote them.
    pub(super) fn on_ridden(
        &mut self,
        acks: Vec<Settle>,
        stale: Option<&[JobId]>,
        took: Duration,
        lifecycle: &mut Lifecycle,
    ) -> bool {
        if acks.is_empty() {
            return false;
        }
        let Some(stale) = stale else {
            for ack in acks {
                let _ = self.tx.send(ack);
            }
            return false;
        };
        self.unwritten.written(acks.len());
        let jobs: Vec<JobId> = acks.iter().map(|a| a.lease().id).collect();
        lifecycle.emit(Event::SettlesWritten {
            jobs: &jobs,
            rode_claim: true,
            took,
        });
        warn_stale(stale);
        true
    }

    /// The settle epoch, if every settle sent is written by now (what a claim starting now can
    /// vouch for, `drain`).
    pub(super) fn settled_epoch(&self) -> Option<u64> {
        (self.unwritten.count() == 0).then_some(self.epoch)
    }

    /// The settle epoch now.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Settles sent and not yet written.
    pub(super) fn unwritten(&self) -> usize {
        self.unwritten.count()
    }

    /// True while an outage holds settles back (the reaper waits).
    pub(super) fn held(&self) -> &Arc<AtomicBool> {
        &self.held
    }

    /// No settle comes any more: the batcher writes what it holds and ends.
    pub(super) fn close(self) -> Closing {
        drop(self.tx);
        Closing {
            task: self.task,
            unwritten: self.unwritten,
        }
    }

    /// The epoch and the unwritten count of a settle on its way.
    fn sending(&mut self) {
        self.epoch += 1;
        self.unwritten.sent();
    }
}

/// Settles that changed nothing: their lease token is stale.
fn warn_stale(jobs: &[JobId]) {
    if !jobs.is_empty() {
        tracing::warn!(jobs = ?jobs, "settle changed nothing for these jobs: their lease token is stale (the lease expired and the job was taken back)");
    }
}

/// The settle batcher: takes every settle waiting, writes them in one round of statements. A
/// settle is never dropped because the database is away (a lost connection, a restart, a
/// failover: `BrokerError::is_connection_lost` decides): the batch is retried on the next
/// connection until it lands — with a stale token it then changes nothing, which is safe — so a
/// job that finished is never run again because its ack was lost. Only a settle the database
/// refuses by itself (the statement fails on a live connection) is dropped, after the rest of its
/// batch was written one by one. Ends when the master drops its sender, after the last batch is
/// written. Released jobs are claimable once their batch commits, and no NOTIFY announces them,
/// so the batcher wakes the claim loop itself.
/// `outage` says while settles wait for the database to come back: the master does not reap
/// meanwhile (`Master::start_reap`), or it could take back a job whose ack is still waiting here,
/// once the ack's lease ran out during the outage, and run the finished job again; and it tells
/// the master's `DatabaseReach` what each call saw.
/// `unwritten` counts down as batches are written (or a settle is dropped); `report` is told what
/// each batch came to.
pub(super) async fn settle_batches(
    broker: Arc<dyn Settles>,
    mut rx: mpsc::UnboundedReceiver<Settle>,
    batching: Batching,
    wake: Arc<Notify>,
    mut outage: Outage,
    unwritten: Unwritten,
    report: impl Fn(BatchReport) + Send + 'static,
) {
    let Batching {
        max,
        wake_after_every_batch,
    } = batching;
    let mut batch = Vec::with_capacity(max);
    while rx.recv_many(&mut batch, max).await > 0 {
        let releases = batch.iter().any(|s| {
            matches!(
                s,
                Settle::Release { .. } | Settle::TakeBack { .. } | Settle::FailLater { .. }
            )
        });
        let started = Instant::now();
        let written_batch = write(broker.as_ref(), &batch, &mut outage).await;
        if let Err(e) = &written_batch {
            // Something in the batch itself is wrong: settle one by one so the rest land.
            tracing::error!(
                "{e}; settling the {} jobs of this batch one by one",
                batch.len()
            );
            let mut written = Vec::new();
            let mut completed_after_exit = Vec::new();
            for s in &batch {
                match write(broker.as_ref(), std::slice::from_ref(s), &mut outage).await {
                    Ok(found) => {
                        written.push(s.lease().id);
                        completed_after_exit.extend(found);
                    }
                    Err(e) => {
                        tracing::error!(job = s.lease().id, "{e}; the database refuses this settle itself, so it is dropped: the job's lease will expire and it will run again");
                        report(BatchReport::Dropped {
                            job: s.lease().id,
                            error: e.to_string(),
                        });
                    }
                }
            }
            if !written.is_empty() {
                report(BatchReport::Written {
                    jobs: written,
                    took: started.elapsed(),
                    completed_after_exit,
                });
            }
        } else if let Ok(completed_after_exit) = written_batch {
            report(BatchReport::Written {
                jobs: batch.iter().map(|s| s.lease().id).collect(),
                took: started.elapsed(),
                completed_after_exit,
            });
        }
        unwritten.written(batch.len());
        if releases || wake_after_every_batch {
            wake.notify_one();
        }
        batch.clear();
    }
}

/// Of the jobs of `settles` found completed inside their own transaction, those whose settle
/// counted them as something else (a worker that died after the commit was taken back): they
/// count as completed now. A `done` with `within` (or a plain `done` from a worker of protocol
/// 3) already counted its job completed.
fn completed_after_exit(settles: &[Settle], completed_within: &[JobId]) -> Vec<JobId> {
    settles
        .iter()
        .filter(|s| Counted::of(s) != Counted::Completed)
        .map(|s| s.lease().id)
        .filter(|id| completed_within.contains(id))
        .collect()
}

/// How the batcher batches.
pub(super) struct Batching {
    /// The most settles one batch carries.
    pub(super) max: usize,
    /// Wake the claim loop after every batch, not only after releases (`--stop-when-empty`).
    pub(super) wake_after_every_batch: bool,
}

/// Writes `settles`, retrying through lost connections for as long as it takes; returns the
/// jobs whose settle counted them otherwise but which had completed inside their own transaction
/// ([`completed_after_exit`]), or the error of a statement the database refused on a live
/// connection.
async fn write(
    broker: &dyn Settles,
    settles: &[Settle],
    outage: &mut Outage,
) -> Result<Vec<JobId>, drover_broker::BrokerError> {
    let mut delay = Duration::from_millis(50);
    loop {
        // The store bounds the call with its own deadline.
        let sent = Instant::now();
        let result = broker.settle(settles).await;
        outage.reach.saw(&result, sent);
        match result {
            Ok(SettleOutcome {
                stale,
                completed_within,
                ..
            }) => {
                outage.over(settles.len());
                warn_stale(&stale);
                return Ok(completed_after_exit(settles, &completed_within));
            }
            Err(e) if e.is_connection_lost() => {
                outage.failed(&e, settles.len(), &broker.address());
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(500));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Logs an outage once when it starts, at most every 30 s while it lasts, once when it ends.
pub(super) struct Outage {
    /// When the current outage started, and when it was last reported.
    since: Option<(Instant, Instant)>,
    /// Shared with the master: settles are held back by an outage (no reaping meanwhile).
    holding: Arc<AtomicBool>,
    /// Shared with the master: since when the database is unreachable, as every call sees it
    /// (status reports it).
    reach: Arc<DatabaseReach>,
}

impl Outage {
    pub(super) fn new(holding: Arc<AtomicBool>, reach: Arc<DatabaseReach>) -> Outage {
        Outage {
            since: None,
            holding,
            reach,
        }
    }

    /// `database`: the server the store reached last ("host:port/db").
    fn failed(&mut self, e: &drover_broker::BrokerError, settles: usize, database: &str) {
        self.holding
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let now = Instant::now();
        match &mut self.since {
            None => {
                tracing::warn!(database, "{e}; keeping {settles} settles and retrying until the database answers (none is dropped)");
                self.since = Some((now, now));
            }
            Some((start, reported)) if now.duration_since(*reported) >= Duration::from_secs(30) => {
                tracing::warn!(
                    database,
                    "still cannot settle ({:?} so far): {e}; {settles} settles kept",
                    now.duration_since(*start)
                );
                *reported = now;
            }
            Some(_) => {}
        }
    }

    fn over(&mut self, settles: usize) {
        self.holding
            .store(false, std::sync::atomic::Ordering::Relaxed);
        if let Some((start, _)) = self.since.take() {
            tracing::info!(
                "settling again after {:?}; {settles} settles written",
                start.elapsed()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    //! The completer's rules against a fake store: outcomes are scripted per call, so a lost
    //! connection or a refused statement lands on exactly the call that should see it.

    use std::collections::VecDeque;
    use std::sync::Mutex;

    use drover_broker::BrokerError;

    use drover_broker::Lease;

    use super::*;
    use crate::store::StoreCall;

    /// What the fake answers to a settle call.
    enum Answer {
        /// The connection is gone (`is_connection_lost`).
        Lost,
        /// Write the batch, unless it holds the refused job.
        Write,
    }

    /// A store whose settle calls answer from a script (then `Write`); a batch holding `refuse`
    /// fails as a statement the database refuses.
    struct FakeStore {
        script: Mutex<VecDeque<Answer>>,
        refuse: Option<JobId>,
        /// Every batch written, by job id.
        written: Mutex<Vec<Vec<JobId>>>,
        calls: Mutex<usize>,
    }

    impl FakeStore {
        fn new(script: Vec<Answer>, refuse: Option<JobId>) -> Arc<FakeStore> {
            Arc::new(FakeStore {
                script: Mutex::new(script.into()),
                refuse,
                written: Mutex::new(Vec::new()),
                calls: Mutex::new(0),
            })
        }

        fn written(&self) -> Vec<Vec<JobId>> {
            self.written.lock().unwrap().clone()
        }
    }

    // The settler holds the store as its role: the fake answers only that and the connection.
    impl crate::store::Connection for FakeStore {
        fn suspect_connection(&self) {}
        fn lease_duration(&self) -> Duration {
            Duration::from_secs(30)
        }
        fn database_time(&self) -> std::time::SystemTime {
            std::time::SystemTime::now()
        }
    }

    impl Settles for FakeStore {
        fn settle<'a>(&'a self, batch: &'a [Settle]) -> StoreCall<'a, SettleOutcome> {
            *self.calls.lock().unwrap() += 1;
            let answer = self
                .script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Answer::Write);
            let ids: Vec<JobId> = batch.iter().map(|s| s.lease().id).collect();
            let result = match answer {
                Answer::Lost => Err(BrokerError::TimedOut {
                    about: "settling jobs",
                }),
                Answer::Write if self.refuse.is_some_and(|r| ids.contains(&r)) => {
                    Err(BrokerError::Config(vec![
                        "the database refuses this statement".into(),
                    ]))
                }
                Answer::Write => {
                    self.written.lock().unwrap().push(ids);
                    Ok(SettleOutcome::default())
                }
            };
            Box::pin(async move { result })
        }
    }

    fn ack(id: JobId) -> Settle {
        Settle::Ack(Lease { id, token: id * 10 })
    }

    #[test]
    fn only_a_job_counted_otherwise_is_counted_again_when_its_completion_is_found() {
        let lease = |id| Lease { id, token: id * 10 };
        let batch = [
            // Its worker said `done` with `within`: counted completed already.
            Settle::CompletedWithin(lease(1)),
            // A plain `done` of a worker of protocol 3 whose job completed within: the same.
            ack(2),
            // Its worker was killed after the commit: counted taken back, completed after all.
            Settle::TakeBack {
                lease: lease(3),
                died: Some("was killed by SIGKILL".into()),
            },
            // Taken back and not completed: nothing found for it.
            Settle::TakeBack {
                lease: lease(4),
                died: None,
            },
        ];
        assert_eq!(completed_after_exit(&batch, &[1, 2, 3]), [3]);
        assert!(completed_after_exit(&batch, &[]).is_empty());
    }

    /// What a run of the batcher did.
    struct Ran {
        /// It woke the claim loop.
        woke: bool,
        /// What it reported, a line per batch report (`written 2`, `dropped 2`).
        reports: Vec<String>,
    }

    /// Queues `settles` before the batcher starts (so they form one batch), closes the channel
    /// and runs the batcher to its end.
    async fn run(store: Arc<FakeStore>, settles: Vec<Settle>) -> Ran {
        let sent = settles.len();
        let (tx, rx) = mpsc::unbounded_channel();
        for s in settles {
            tx.send(s).unwrap();
        }
        drop(tx);
        let wake = Arc::new(Notify::new());
        let unwritten = Unwritten::default();
        for _ in 0..sent {
            unwritten.sent();
        }
        let batching = Batching {
            max: 1024,
            wake_after_every_batch: false,
        };
        let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
        tokio::time::timeout(
            Duration::from_secs(10),
            settle_batches(
                store,
                rx,
                batching,
                wake.clone(),
                Outage::new(Default::default(), Default::default()),
                unwritten.clone(),
                {
                    let reports = reports.clone();
                    move |report| {
                        reports.lock().unwrap().push(match report {
                            BatchReport::Written { jobs, .. } => format!("written {jobs:?}"),
                            BatchReport::Dropped { job, .. } => format!("dropped {job}"),
                        })
                    }
                },
            ),
        )
        .await
        .expect("the batcher ends once its sender is gone and its last batch is written");
        // Written or dropped, every settle is counted off: a drain never waits on one forever.
        assert_eq!(unwritten.count(), 0);
        let woke = tokio::time::timeout(Duration::from_millis(10), wake.notified())
            .await
            .is_ok();
        let reports = reports.lock().unwrap().clone();
        Ran { woke, reports }
    }

    #[tokio::test]
    async fn a_batch_is_kept_through_a_lost_connection_and_written_once_the_database_answers() {
        let store = FakeStore::new(vec![Answer::Lost, Answer::Lost, Answer::Lost], None);
        let ran = run(store.clone(), vec![ack(1), ack(2), ack(3)]).await;
        assert_eq!(store.written(), vec![vec![1, 2, 3]], "written once, whole");
        assert_eq!(
            ran.reports,
            ["written [1, 2, 3]"],
            "one batch, reported once"
        );
        assert_eq!(
            *store.calls.lock().unwrap(),
            4,
            "three lost, the fourth landed"
        );
    }

    #[tokio::test]
    async fn settles_held_by_a_lost_connection_make_the_database_unreachable_until_one_lands() {
        let store = FakeStore::new(vec![Answer::Lost, Answer::Lost, Answer::Lost], None);
        let reach = Arc::new(DatabaseReach::default());
        let mut outage = Outage::new(Default::default(), reach.clone());
        let writing = tokio::spawn(async move {
            write(store.as_ref(), &[ack(1)], &mut outage).await.unwrap();
        });
        // The first attempt is lost at once; the retries wait 50, 100 and 200 ms.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!reach.reachable());
        assert!(reach.problem(Instant::now()).is_some());
        writing.await.unwrap();
        assert!(reach.reachable(), "the batch landed: the database answers");
    }

    #[tokio::test]
    async fn a_batch_the_database_refuses_is_written_one_by_one_dropping_only_the_refused_settle() {
        let store = FakeStore::new(vec![], Some(2));
        let ran = run(store.clone(), vec![ack(1), ack(2), ack(3)]).await;
        assert_eq!(store.written(), vec![vec![1], vec![3]]);
        assert_eq!(ran.reports, ["dropped 2", "written [1, 3]"]);
    }

    #[tokio::test]
    async fn a_connection_lost_during_the_one_by_one_fallback_is_waited_out_not_dropped() {
        // The batch is refused (job 2), then job 1's own write meets a lost connection twice.
        let store = FakeStore::new(vec![Answer::Write, Answer::Lost, Answer::Lost], Some(2));
        run(store.clone(), vec![ack(1), ack(2), ack(3)]).await;
        assert_eq!(store.written(), vec![vec![1], vec![3]]);
    }

    #[tokio::test]
    async fn a_release_wakes_the_claim_loop_and_an_ack_alone_does_not() {
        let released = Settle::Release {
            lease: Lease { id: 4, token: 40 },
            delay: Duration::ZERO,
            charged: true,
        };
        assert!(
            run(FakeStore::new(vec![], None), vec![ack(1), released])
                .await
                .woke
        );
        assert!(!run(FakeStore::new(vec![], None), vec![ack(1)]).await.woke);
    }

    #[tokio::test]
    async fn one_jobs_ack_rides_with_a_claim_and_another_goes_to_the_batcher_when_its_claim_failed()
    {
        let store = FakeStore::new(Vec::new(), None);
        let batching = Batching {
            max: 1024,
            wake_after_every_batch: false,
        };
        let wait = Duration::from_secs(60);
        let mut settler = Settler::start(
            store.clone(),
            batching,
            Arc::new(Notify::new()),
            wait,
            Default::default(),
            |_| {},
        );
        let (mut lifecycle, lines) = crate::lifecycle::notes::noted();
        // A done job's ack waits for a claim: unwritten, written by no one yet.
        assert!(settler.ack(ack(1), false, true), "it rides");
        assert_eq!((settler.unwritten(), settler.settled_epoch()), (1, None));
        // The claim takes it whole and writes it.
        let riding = settler.take_riding();
        assert_eq!(riding, vec![ack(1)]);
        assert!(settler.on_ridden(riding, Some(&[]), Duration::ZERO, &mut lifecycle));
        assert_eq!((settler.unwritten(), settler.settled_epoch()), (0, Some(1)));
        // The next claim fails: its ack goes to the batcher.
        settler.ack(ack(2), false, true);
        let riding = settler.take_riding();
        assert!(!settler.on_ridden(riding, None, Duration::ZERO, &mut lifecycle));
        // A grouped job's ack never rides.
        assert!(!settler.ack(ack(3), true, true));
        assert_eq!(
            *lines.lock().unwrap(),
            ["written [1] rode true"],
            "the one the claim wrote"
        );
        let closing = settler.close();
        tokio::time::timeout(Duration::from_secs(10), closing.task)
            .await
            .expect("the batcher ends once the settler is closed")
            .unwrap();
        assert_eq!(closing.unwritten.count(), 0);
        let written: Vec<JobId> = store.written().into_iter().flatten().collect();
        assert_eq!(written, [2, 3], "job 1 was written by its claim, once");
    }
}
