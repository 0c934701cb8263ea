//! Settling: how a held job ends ([`Settle`]) and the batch that writes many endings at once,
//! one statement per kind of outcome, pipelined (`queries/ack.sql`, `ack_failed.sql`,
//! `release.sql`, `fail.sql`), with the ordered groups' deferred moves caught up behind it
//! (`groups_catch_up.sql`).

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio_postgres::Row;

use crate::job_connection::Conn;
use crate::leases::{stale, JobId, Lease};
use crate::{Broker, BrokerError};

/// How a held job ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// It completed: delete it. A grouped job's group goes on with its next job.
    Ack(Lease),
    /// It completed inside its own transaction (`drover.complete_within`, migration 0015), which
    /// deleted it: forget its completion row. Written as an ack too, which matches nothing —
    /// unless the completion was never committed (a worker that says so wrongly), when the job
    /// completes as an ack completes it.
    CompletedWithin(Lease),
    /// It failed for good and the application recorded the failure itself (Laravel's failer,
    /// `failed_jobs`): delete it, as an ack does, except that a grouped job under `hold` holds
    /// its group (docs/ordered-groups.md).
    Failed(Lease),
    /// Give it back. `charged: false` returns the attempt taken at claim (the job never started)
    /// and keeps its place in line (`delay` is ignored); `charged: true` means the job ended its
    /// own attempt with a release or backoff: it becomes available `delay` after the database's
    /// now, behind what is already due, and a failure request it carried is cleared (handled).
    Release {
        lease: Lease,
        delay: Duration,
        charged: bool,
    },
    /// Taken back because the worker (or master) holding it died while it ran: the attempt stays
    /// charged (the job may have run) and the job keeps its place in line (`available_at` as it
    /// was), ahead of jobs enqueued after it — what the reap does for an expired lease. A failure
    /// request it carried stands (the worker died before handling it). `died` says how the
    /// worker died, for the next worker to name if the application's rules fail the job
    /// (Laravel's tries): kept as the note `died: <how>`, which a failure request outranks.
    TakeBack { lease: Lease, died: Option<String> },
    /// Give it back, uncharged, to be failed by the next worker with this reason (through the
    /// application's own failure path) instead of being run.
    FailLater { lease: Lease, reason: String },
    /// It failed for good: move it to `drover.failed_jobs` with the error.
    Fail { lease: Lease, error: String },
}

impl Settle {
    /// The lease it settles.
    pub fn lease(&self) -> Lease {
        match self {
            Settle::Ack(lease)
            | Settle::CompletedWithin(lease)
            | Settle::Failed(lease)
            | Settle::TakeBack { lease, .. }
            | Settle::Release { lease, .. }
            | Settle::FailLater { lease, .. }
            | Settle::Fail { lease, .. } => *lease,
        }
    }
}

/// The prefix of the note a job taken back from a dead worker carries in `failure`: not a
/// request to fail it, only how its last attempt ended (`LeasedJob::died`).
pub const DIED_NOTE: &str = "died: ";

/// What a batch of settles did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SettleOutcome {
    /// Jobs deleted: acked, or failed for good and recorded by the application.
    pub acked: usize,
    /// Jobs given back (released, taken back, or to be failed by the next worker).
    pub released: usize,
    /// Jobs moved to `drover.failed_jobs`.
    pub failed: usize,
    /// Jobs whose token no longer matched: the settle changed nothing, and no completion under
    /// that lease was found either.
    pub stale: Vec<JobId>,
    /// Jobs of the batch that had completed inside their own transaction under the lease settled
    /// (their completion rows, now deleted): those whose worker said so, and those whose settle
    /// would otherwise be stale (the worker died after the commit). The caller counts each once.
    pub completed_within: Vec<JobId>,
}

/// How often a settle batch finishes the group moves deferred behind a producer's lock, at most.
pub(crate) const CATCH_UP_EVERY: Duration = Duration::from_millis(100);

/// A batch sorted into the arrays of its statements, each id beside its lease token.
#[derive(Default)]
struct Sorted {
    /// Completed jobs: deleted.
    ack_ids: Vec<JobId>,
    /// The lease tokens of `ack_ids`.
    ack_tokens: Vec<i64>,
    /// Completed inside their own transaction, by their worker's word: their completion rows
    /// are forgotten (their ids and tokens are in `ack_ids` too).
    within_ids: Vec<JobId>,
    /// The lease tokens of `within_ids`.
    within_tokens: Vec<i64>,
    /// Failed for good, recorded by the application: deleted like acks, holding a group.
    gone_ids: Vec<JobId>,
    /// The lease tokens of `gone_ids`.
    gone_tokens: Vec<i64>,
    /// Jobs given back.
    rel_ids: Vec<JobId>,
    /// The lease tokens of `rel_ids`.
    rel_tokens: Vec<i64>,
    /// Per release: the delay in ms, or None to keep the job's place in line.
    rel_delays: Vec<Option<i64>>,
    /// Per release: whether the attempt stays charged.
    rel_charged: Vec<bool>,
    /// Per release: the failure request or note it leaves in `failure` (`None`: cleared).
    rel_failure: Vec<Option<String>>,
    /// Jobs that failed for good: moved to `drover.failed_jobs`.
    fail_ids: Vec<JobId>,
    /// The lease tokens of `fail_ids`.
    fail_tokens: Vec<i64>,
    /// Per failed job: its error.
    fail_errors: Vec<String>,
}

impl Sorted {
    fn of(batch: &[Settle]) -> Sorted {
        let mut s = Sorted::default();
        for settle in batch {
            match settle {
                Settle::Ack(l) => {
                    s.ack_ids.push(l.id);
                    s.ack_tokens.push(l.token);
                }
                Settle::CompletedWithin(l) => {
                    s.ack_ids.push(l.id);
                    s.ack_tokens.push(l.token);
                    s.within_ids.push(l.id);
                    s.within_tokens.push(l.token);
                }
                Settle::Failed(l) => {
                    s.gone_ids.push(l.id);
                    s.gone_tokens.push(l.token);
                }
                Settle::Release {
                    lease,
                    delay,
                    charged,
                } => {
                    s.rel_ids.push(lease.id);
                    s.rel_tokens.push(lease.token);
                    s.rel_delays
                        .push(charged.then(|| delay.as_millis().min(i64::MAX as u128) as i64));
                    s.rel_charged.push(*charged);
                    s.rel_failure.push(None);
                }
                Settle::TakeBack { lease, died } => {
                    s.rel_ids.push(lease.id);
                    s.rel_tokens.push(lease.token);
                    s.rel_delays.push(None);
                    s.rel_charged.push(true);
                    s.rel_failure
                        .push(died.as_ref().map(|how| format!("{DIED_NOTE}{how}")));
                }
                Settle::FailLater { lease, reason } => {
                    s.rel_ids.push(lease.id);
                    s.rel_tokens.push(lease.token);
                    s.rel_delays.push(None);
                    s.rel_charged.push(false);
                    s.rel_failure.push(Some(reason.clone()));
                }
                Settle::Fail { lease, error } => {
                    s.fail_ids.push(lease.id);
                    s.fail_tokens.push(lease.token);
                    s.fail_errors.push(error.clone());
                }
            }
        }
        s
    }

    /// Deletes the acked jobs, then those failed for good that the application recorded: the ids
    /// deleted.
    async fn ack(
        &self,
        conn: &Conn,
        now: &Option<SystemTime>,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let acked = if self.ack_ids.is_empty() {
            Vec::new()
        } else {
            conn.client
                .query(&conn.ack, &[&self.ack_ids, &self.ack_tokens])
                .await?
        };
        if self.gone_ids.is_empty() {
            return Ok(acked);
        }
        let mut gone = conn
            .client
            .query(&conn.ack_failed, &[&self.gone_ids, &self.gone_tokens, now])
            .await?;
        gone.extend(acked);
        Ok(gone)
    }

    /// Gives the released jobs back: the ids given back.
    async fn release(
        &self,
        conn: &Conn,
        now: &Option<SystemTime>,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        if self.rel_ids.is_empty() {
            return Ok(Vec::new());
        }
        conn.client
            .query(
                &conn.release,
                &[
                    &self.rel_ids,
                    &self.rel_tokens,
                    now,
                    &self.rel_delays,
                    &self.rel_charged,
                    &self.rel_failure,
                ],
            )
            .await
    }

    /// Forgets the completion rows of the jobs completed within their own transaction: the ids
    /// found.
    async fn learn(&self, conn: &Conn) -> Result<Vec<Row>, tokio_postgres::Error> {
        learn_completions(conn, &self.within_ids, &self.within_tokens).await
    }

    /// Moves the failed jobs to `drover.failed_jobs`: the ids moved.
    async fn fail(
        &self,
        conn: &Conn,
        now: &Option<SystemTime>,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        if self.fail_ids.is_empty() {
            return Ok(Vec::new());
        }
        conn.client
            .query(
                &conn.fail,
                &[&self.fail_ids, &self.fail_tokens, &self.fail_errors, now],
            )
            .await
    }
}

/// The completion rows of `ids` under `tokens`, deleted: the ids found (`learn_completions.sql`).
async fn learn_completions(
    conn: &Conn,
    ids: &[JobId],
    tokens: &[i64],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    conn.client
        .query(&conn.learn_completions, &[&ids, &tokens])
        .await
}

impl Broker {
    /// Settles many jobs at once: one statement per kind of outcome, pipelined, within
    /// [`Broker::call_deadline`].
    pub async fn settle(&self, batch: &[Settle]) -> Result<SettleOutcome, BrokerError> {
        self.bounded(
            "settling jobs",
            self.call_deadline(),
            self.settle_now(batch),
        )
        .await
    }

    async fn settle_now(&self, batch: &[Settle]) -> Result<SettleOutcome, BrokerError> {
        let conn = self.conn().await?;
        let now = self.clock.now();
        let sorted = Sorted::of(batch);
        // After the batch, on the same connection (pipelined, in order): the group moves that an
        // earlier settle had to leave to a producer holding the group's lock. Its outcome is not
        // the batch's: an error here is logged and the next batch or reap tries again.
        let due = self.catch_up_due();
        let catch_up = async {
            if !due {
                return;
            }
            if let Err(e) = conn.client.query_one(&conn.catch_up, &[]).await {
                tracing::debug!("catching up on ordered groups after a settle: {e}");
            }
        };
        let (acked, released, failed, learned, ()) = futures_util::future::join5(
            sorted.ack(&conn, &now),
            sorted.release(&conn, &now),
            sorted.fail(&conn, &now),
            sorted.learn(&conn),
            catch_up,
        )
        .await;
        let ids = |rows: Result<Vec<Row>, tokio_postgres::Error>| {
            rows.map(|rows| rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>())
                .map_err(BrokerError::query("settling jobs"))
        };
        let (acked, released, failed) = (ids(acked)?, ids(released)?, ids(failed)?);
        let mut completed_within = ids(learned)?;
        if !released.is_empty() {
            // Given back in their place, perhaps before a claim cursor's floor.
            self.forget_cursors();
        }
        let done: Vec<i64> = acked
            .iter()
            .chain(&released)
            .chain(&failed)
            .copied()
            .collect();
        let done: Vec<i64> = done
            .into_iter()
            .chain(completed_within.iter().copied())
            .collect();
        let mut stale = stale(batch.iter().map(|s| s.lease().id), done);
        if !stale.is_empty() {
            // A settle that changed nothing: its job may have completed inside its own
            // transaction, its worker killed before it could say so.
            let tokens: Vec<i64> = stale
                .iter()
                .filter_map(|id| batch.iter().find(|s| s.lease().id == *id))
                .map(|s| s.lease().token)
                .collect();
            let found = ids(learn_completions(&conn, &stale, &tokens).await)?;
            stale.retain(|id| !found.contains(id));
            completed_within.extend(found);
        }
        Ok(SettleOutcome {
            acked: acked.len(),
            released: released.len(),
            failed: failed.len(),
            stale,
            completed_within,
        })
    }

    /// Whether this batch pipelines `groups_catch_up`: at most every [`CATCH_UP_EVERY`]. When
    /// it does, the time is taken for it.
    fn catch_up_due(&self) -> bool {
        let now_ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let due = now_ms.saturating_sub(self.last_catch_up_ms.load(Ordering::Relaxed))
            >= CATCH_UP_EVERY.as_millis() as u64;
        if due {
            self.last_catch_up_ms.store(now_ms, Ordering::Relaxed);
        }
        due
    }
}
