//! Claiming: leasing ready jobs queue by queue (`queries/claim.sql`; a fair queue's by fair tag,
//! `queries/claim_fair.sql`), with the acks that ride along, the pool's outage grace and the
//! fleet's queue budgets; and finding what claims whose
//! answer never came leased (`queries/unanswered_claims.sql`, `claim_tokens`).

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::budgets::QueueBudgets;
use crate::claim_cursor::{ClaimCursors, Scan};
use crate::claim_tokens::RESERVE;
use crate::fair::FairQueues;
use crate::job_connection::Conn;
use crate::leases::{stale, JobId, Lease, LeasedJob};
use crate::{Broker, BrokerError};

/// What a claim brought back.
#[derive(Debug, Default)]
pub struct Claimed {
    /// The jobs leased, in fetch order.
    pub jobs: Vec<LeasedJob>,
    /// The riding acks that changed nothing: their lease token is stale.
    pub stale_acks: Vec<JobId>,
    /// The outage grace given to these leases (the pool's, capped by what the node row holds):
    /// the reap waits that long past a lease's end, so its worker may run that long too.
    pub grace: Duration,
    /// A queue's budget left less room than the claim wanted: jobs of it may be waiting that the
    /// budget holds back, so an empty or short claim does not mean the queues are drained. The
    /// end of a budgeted lease wakes the masters (`NOTIFY drover_jobs`).
    pub held_by_budget: bool,
}

/// What a pool's claim asks of its leases beyond the jobs: the pool's outage grace and the
/// fleet's queue budgets.
#[derive(Debug, Clone, Default)]
pub struct ClaimTerms {
    /// The pool's outage grace (`Duration::ZERO`: none); see [`Broker::claim_with_terms`].
    pub grace: Duration,
    /// The queues' fleet-wide budgets (`crate::budgets`), shared by the master's pools.
    pub budgets: std::sync::Arc<QueueBudgets>,
    /// The fair queues (`crate::fair`): their claims take jobs by fair tag.
    pub fair: std::sync::Arc<FairQueues>,
}

/// What a claim's errors and deadline say it was doing.
const CLAIMING: &str = "claiming jobs";

/// The parameters every queue's statement of one claim shares.
struct ClaimParams {
    /// The statement's "now" (`None`: the database's).
    now: Option<SystemTime>,
    /// The lease length, in seconds.
    lease: f64,
    /// The outage grace asked for, in seconds (`None`: none).
    grace: Option<f64>,
    /// The claim's lease token.
    token: i64,
    /// The riding acks' jobs: sent with the first queue's statement only.
    ack_ids: Vec<JobId>,
    /// The riding acks' lease tokens, in the order of `ack_ids`.
    ack_tokens: Vec<i64>,
}

/// What one queue's statement answered.
#[derive(Default)]
struct QueueAnswer {
    /// The jobs it leased, in fetch order.
    jobs: Vec<LeasedJob>,
    /// The riding acks it wrote.
    acked: Vec<JobId>,
    /// Under a budget: the room the budget left this statement.
    room: Option<i64>,
    /// The least grace any leased row got (`None`: no row leased).
    least_grace: Option<Duration>,
    /// Each leased job's priority and `available_at`: where the queue's head was
    /// (`claim_cursor`).
    leased_at: Vec<(i16, SystemTime)>,
}

impl QueueAnswer {
    /// Reads the statement's rows: acks written, the budget's room, and leased jobs.
    fn read(rows: &[tokio_postgres::Row]) -> QueueAnswer {
        let mut answer = QueueAnswer::default();
        let mut batch: Vec<(i16, SystemTime, LeasedJob)> = Vec::with_capacity(rows.len());
        for r in rows {
            if let Some(id) = r.get::<_, Option<i64>>(11) {
                answer.acked.push(id);
                continue;
            }
            if let Some(n) = r.get::<_, Option<i64>>(13) {
                answer.room = Some(n);
                continue;
            }
            // What the statement wrote decides (it may refuse the grace asked for).
            let written = r
                .get::<_, Option<f64>>(12)
                .and_then(|g| Duration::try_from_secs_f64(g).ok())
                .unwrap_or_default();
            answer.least_grace = Some(
                answer
                    .least_grace
                    .map_or(written, |g: Duration| g.min(written)),
            );
            batch.push((
                r.get(6),
                r.get(7),
                LeasedJob {
                    id: r.get(0),
                    queue: r.get(1),
                    payload: r.get(2),
                    attempts: r.get(3),
                    max_attempts: r.get(4),
                    token: r.get(5),
                    failure: r.get(8),
                    waited: Duration::try_from_secs_f64(r.get::<_, f64>(9)).unwrap_or_default(),
                    grouped: r.get(10),
                },
            ));
        }
        answer.leased_at = batch.iter().map(|(p, at, _)| (*p, *at)).collect();
        // RETURNING has no order; hand jobs out in fetch order.
        batch.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.id.cmp(&b.2.id)));
        answer.jobs = batch.into_iter().map(|(_, _, job)| job).collect();
        answer
    }

    /// The budget held jobs back when it left less room than wanted and the statement filled
    /// it; fewer than the room means the queue had no more ready.
    fn held_by_budget(&self, want: usize) -> bool {
        self.room
            .is_some_and(|n| n < want as i64 && self.jobs.len() as i64 >= n)
    }
}

impl Broker {
    /// Leases up to `limit` ready jobs, taking queues in the given order of priority. Each
    /// lease ends `lease` after the database's now.
    pub async fn claim(
        &self,
        queues: &[String],
        limit: usize,
    ) -> Result<Vec<LeasedJob>, BrokerError> {
        Ok(self.claim_with_acks(queues, limit, &[]).await?.jobs)
    }

    /// [`Broker::claim`], deleting the completed jobs `acks` in the first queue's statement: the
    /// acks ride with the claim, and one commit (one WAL flush) carries both. Only acks of
    /// ungrouped jobs may ride (`claim.sql` says why).
    ///
    /// Within [`Broker::call_deadline`]; one statement per queue. When a later queue's statement
    /// fails or misses the deadline after earlier queues' claims were committed, the jobs
    /// already claimed are returned (and the problem logged) rather than stranded. An error
    /// means the acks may not have been written: the caller settles them again (a repeated ack
    /// matches nothing).
    pub async fn claim_with_acks(
        &self,
        queues: &[String],
        limit: usize,
        acks: &[Lease],
    ) -> Result<Claimed, BrokerError> {
        self.claim_with_grace(queues, limit, acks, Duration::ZERO)
            .await
    }

    /// [`Broker::claim_with_acks`] for a pool with an outage grace: each lease is taken back by
    /// the reap only `grace` after it ends (unless its holder's node row is gone), since the
    /// holder's worker may run the job that long while its master cannot reach the database
    /// (`migrations/0009_outage_grace.sql`). `Duration::ZERO`: no grace.
    pub async fn claim_with_grace(
        &self,
        queues: &[String],
        limit: usize,
        acks: &[Lease],
        grace: Duration,
    ) -> Result<Claimed, BrokerError> {
        let terms = ClaimTerms {
            grace,
            ..ClaimTerms::default()
        };
        self.claim_with_terms(queues, limit, acks, &terms).await
    }

    /// [`Broker::claim_with_grace`] under the fleet's queue budgets too: a budgeted queue's
    /// statement leases no more than its budget less the jobs of it leased now, fleet-wide
    /// (`queries/claim.sql`); [`Claimed::held_by_budget`] says when a budget held jobs back.
    pub async fn claim_with_terms(
        &self,
        queues: &[String],
        limit: usize,
        acks: &[Lease],
        terms: &ClaimTerms,
    ) -> Result<Claimed, BrokerError> {
        debug_assert!(
            !queues.is_empty() || acks.is_empty(),
            "riding acks need a queue's statement to ride in"
        );
        let deadline = Instant::now() + self.call_deadline();
        let conn = self
            .bounded(CLAIMING, self.call_deadline(), self.conn())
            .await?;
        let token = self.claim_token(&conn, deadline).await?;
        // From here the claim may commit without its answer reaching this task.
        let sending = self.tokens.sending(token);
        let mut whole = true;
        let grace = self.grace_to_give(terms.grace);
        let mut claimed = Claimed {
            grace,
            ..Claimed::default()
        };
        let mut params = ClaimParams {
            now: self.clock.now(),
            lease: self.config.lease.as_secs_f64(),
            grace: (!grace.is_zero()).then_some(grace.as_secs_f64()),
            token,
            ack_ids: acks.iter().map(|l| l.id).collect(),
            ack_tokens: acks.iter().map(|l| l.token).collect(),
        };
        let mut acked = Vec::with_capacity(acks.len());
        // The least grace any leased row got (None: no row leased).
        let mut given: Option<Duration> = None;
        let mut acks_written = acks.is_empty();
        for (i, queue) in queues.iter().enumerate() {
            let want = limit.saturating_sub(claimed.jobs.len());
            // Past the limit, the acks still need their statement.
            if want == 0 && acks_written {
                break;
            }
            if i > 0 {
                params.ack_ids.clear();
                params.ack_tokens.clear();
            }
            let budget = terms.budgets.of(queue).map(i64::from);
            let left = deadline.saturating_duration_since(Instant::now());
            let fair = terms.fair.is_fair(queue);
            let planned_at = std::time::Instant::now();
            let scan = match fair {
                true => Scan::Full,
                false => self.cursors().plan(queue, planned_at),
            };
            let statement = self.claim_queue(&conn, &params, queue, want, budget, fair, scan);
            let rows = match self.bounded(CLAIMING, left, statement).await {
                Ok(rows) => rows,
                // Earlier queues' claims are committed: hand those out rather than strand them.
                // This statement may have committed too: its token is asked about later.
                Err(e) if acks_written && !claimed.jobs.is_empty() => {
                    tracing::warn!(database = %conn.address, "{e}");
                    whole = false;
                    break;
                }
                Err(e) => return Err(e),
            };
            acks_written = true;
            let answer = QueueAnswer::read(&rows);
            if !fair {
                self.cursors()
                    .after(queue, scan, planned_at, &answer.leased_at);
            }
            acked.extend_from_slice(&answer.acked);
            if let Some(least) = answer.least_grace {
                given = Some(given.map_or(least, |g: Duration| g.min(least)));
            }
            if answer.held_by_budget(want) {
                claimed.held_by_budget = true;
            }
            claimed.jobs.extend(answer.jobs);
        }
        if let Some(given) = given {
            claimed.grace = given;
        }
        claimed.stale_acks = stale(acks.iter().map(|l| l.id), acked);
        sending.answered(claimed.jobs.iter().map(|j| j.id), whole);
        Ok(claimed)
    }

    /// The claim's lease token: a reserved one, or the first of [`RESERVE`] more reserved now,
    /// by `deadline`.
    async fn claim_token(&self, conn: &Conn, deadline: Instant) -> Result<i64, BrokerError> {
        if let Some(token) = self.tokens.take() {
            return Ok(token);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let reserve = async {
            conn.client
                .query(&conn.reserve_tokens, &[&RESERVE])
                .await
                .map_err(BrokerError::query("reserving lease tokens"))
        };
        let rows = self.bounded(CLAIMING, left, reserve).await?;
        self.tokens.add_spare(rows.iter().map(|r| r.get(0)));
        self.tokens.take().ok_or(BrokerError::Unexpected {
            about: "reserving lease tokens",
            problem: "the database returned no token".into(),
        })
    }

    /// The outage grace a claim may give its leases, of the `asked` one: no more than the node
    /// row holds (the row must outlive the lease and its grace), none while a master that would
    /// reap it at the lease's end has a row, and none before a heartbeat confirmed the row after
    /// a reconnect.
    fn grace_to_give(&self, asked: Duration) -> Duration {
        let confirmed = self
            .row_confirmed
            .load(std::sync::atomic::Ordering::Relaxed);
        match self.grace_in_force() && confirmed {
            true => asked.min(self.registered_grace()),
            false => Duration::ZERO,
        }
    }

    /// The queues' claim cursors (`claim_cursor`).
    fn cursors(&self) -> std::sync::MutexGuard<'_, ClaimCursors> {
        self.cursors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every queue's next claim reads it in full (`claim_cursor`): jobs went back in their
    /// place.
    pub(crate) fn forget_cursors(&self) {
        self.cursors().forget();
    }

    /// One queue's statement: leases up to `want` of its ready jobs (within `budget`, when it
    /// has one; by fair tag when it is `fair`; from its cursor when `scan` says so), writing the
    /// riding acks of `params`.
    #[allow(clippy::too_many_arguments)]
    async fn claim_queue(
        &self,
        conn: &Conn,
        params: &ClaimParams,
        queue: &str,
        want: usize,
        budget: Option<i64>,
        fair: bool,
        scan: Scan,
    ) -> Result<Vec<tokio_postgres::Row>, BrokerError> {
        let want = want as i64;
        let mut args: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
            &self.node,
            &params.lease,
            &queue,
            &params.now,
            &want,
            &params.ack_ids,
            &params.ack_tokens,
            &params.token,
            &params.grace,
            &budget,
        ];
        let (statement, cursor) = match (fair, scan) {
            (true, _) => (&conn.claim_fair, None),
            (false, Scan::Full) => (&conn.claim, None),
            (false, Scan::From { priority, floor }) => (&conn.claim_from, Some((priority, floor))),
        };
        if let Some((priority, floor)) = &cursor {
            args.push(priority);
            args.push(floor);
        }
        conn.client
            .query(statement, &args)
            .await
            .map_err(BrokerError::query(CLAIMING))
    }

    /// Whether a claim's answer was lost (see [`Broker::unanswered_claims`]).
    pub fn has_unanswered_claims(&self) -> bool {
        self.tokens.any_unanswered()
    }

    /// The jobs that claims whose answer never came leased to this node (the connection dropped
    /// after the commit, or the claim committed after its deadline), less those this master
    /// already has. No worker got them: the caller gives them back with their attempt uncharged
    /// (`claim_tokens`). A claim is asked about until two leases after it was given up on, for a
    /// statement that commits late; each job is returned once. Within [`Broker::call_deadline`].
    pub async fn unanswered_claims(&self) -> Result<Vec<Lease>, BrokerError> {
        const ABOUT: &str = "asking what unanswered claims leased";
        let asked = self.tokens.unanswered(
            std::time::Instant::now(),
            self.config.lease.saturating_mul(2),
        );
        if asked.tokens.is_empty() {
            return Ok(Vec::new());
        }
        let call = async {
            let conn = self.conn().await?;
            let (known_ids, known_tokens): (Vec<JobId>, Vec<i64>) =
                asked.known.iter().copied().unzip();
            conn.client
                .query(
                    &conn.unanswered_claims,
                    &[&self.node, &asked.tokens, &known_ids, &known_tokens],
                )
                .await
                .map_err(BrokerError::query(ABOUT))
        };
        let rows = self.bounded(ABOUT, self.call_deadline(), call).await?;
        let found: Vec<Lease> = rows
            .iter()
            .map(|r| Lease {
                id: r.get(0),
                token: r.get(1),
            })
            .collect();
        self.tokens.found(&found);
        Ok(found)
    }
}
