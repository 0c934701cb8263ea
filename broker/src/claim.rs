//! Claiming: leasing ready jobs queue by queue (`queries/claim.sql`), with the acks that ride
//! along, the pool's outage grace and the fleet's queue budgets; and finding what claims whose
//! answer never came leased (`queries/unanswered_claims.sql`, `claim_tokens`).

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::budgets::QueueBudgets;
use crate::claim_tokens::RESERVE;
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
        let grace = terms.grace;
        const ABOUT: &str = "claiming jobs";
        debug_assert!(
            !queues.is_empty() || acks.is_empty(),
            "riding acks need a queue's statement to ride in"
        );
        let deadline = Instant::now() + self.call_deadline();
        let conn = self
            .bounded(ABOUT, self.call_deadline(), self.conn())
            .await?;
        let token = match self.tokens.take() {
            Some(token) => token,
            None => {
                let left = deadline.saturating_duration_since(Instant::now());
                let reserve = async {
                    conn.client
                        .query(&conn.reserve_tokens, &[&RESERVE])
                        .await
                        .map_err(BrokerError::query("reserving lease tokens"))
                };
                let rows = self.bounded(ABOUT, left, reserve).await?;
                self.tokens.add_spare(rows.iter().map(|r| r.get(0)));
                self.tokens.take().ok_or(BrokerError::Unexpected {
                    about: "reserving lease tokens",
                    problem: "the database returned no token".into(),
                })?
            }
        };
        // From here the claim may commit without its answer reaching this task.
        let sending = self.tokens.sending(token);
        let mut whole = true;
        let now = self.clock.now();
        let lease = self.config.lease.as_secs_f64();
        // No more than the node row holds (the row must outlive the lease and its grace), none
        // while a master that would reap it at the lease's end has a row, and none before a
        // heartbeat confirmed the row after a reconnect.
        let confirmed = self
            .row_confirmed
            .load(std::sync::atomic::Ordering::Relaxed);
        let grace = match self.grace_in_force() && confirmed {
            true => grace.min(self.registered_grace()),
            false => Duration::ZERO,
        };
        let mut claimed = Claimed {
            grace,
            ..Claimed::default()
        };
        let grace = (!grace.is_zero()).then_some(grace.as_secs_f64());
        let mut ack_ids: Vec<JobId> = acks.iter().map(|l| l.id).collect();
        let mut ack_tokens: Vec<i64> = acks.iter().map(|l| l.token).collect();
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
                ack_ids.clear();
                ack_tokens.clear();
            }
            let budget = terms.budgets.of(queue).map(i64::from);
            let statement = async {
                conn.client
                    .query(
                        &conn.claim,
                        &[
                            &self.node,
                            &lease,
                            queue,
                            &now,
                            &(want as i64),
                            &ack_ids,
                            &ack_tokens,
                            &token,
                            &grace,
                            &budget,
                        ],
                    )
                    .await
                    .map_err(BrokerError::query(ABOUT))
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let rows = match self.bounded(ABOUT, left, statement).await {
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
            // Under a budget: the room it left this statement.
            let mut room: Option<i64> = None;
            let mut batch: Vec<(i16, SystemTime, LeasedJob)> = Vec::with_capacity(rows.len());
            for r in &rows {
                if let Some(id) = r.get::<_, Option<i64>>(11) {
                    acked.push(id);
                    continue;
                }
                if let Some(n) = r.get::<_, Option<i64>>(13) {
                    room = Some(n);
                    continue;
                }
                // What the statement wrote decides (it may refuse the grace asked for).
                let written = r
                    .get::<_, Option<f64>>(12)
                    .and_then(|g| Duration::try_from_secs_f64(g).ok())
                    .unwrap_or_default();
                given = Some(given.map_or(written, |g: Duration| g.min(written)));
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
            // The budget held jobs back when it left less room than wanted and the statement
            // filled it; fewer than the room means the queue had no more ready.
            if room.is_some_and(|n| n < want as i64 && batch.len() as i64 >= n) {
                claimed.held_by_budget = true;
            }
            // RETURNING has no order; hand jobs out in fetch order.
            batch.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.id.cmp(&b.2.id)));
            claimed
                .jobs
                .extend(batch.into_iter().map(|(_, _, job)| job));
        }
        if let Some(given) = given {
            claimed.grace = given;
        }
        claimed.stale_acks = stale(acks.iter().map(|l| l.id), acked);
        sending.answered(claimed.jobs.iter().map(|j| j.id), whole);
        Ok(claimed)
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
