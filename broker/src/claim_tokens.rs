//! The lease tokens claims use, and the claims whose answer never came.
//!
//! Every job a claim leases gets that claim's one token, reserved from `drover.lease_tokens`
//! before the claim is sent ([`RESERVE`] at a time, `reserve_tokens.sql`). The broker therefore
//! knows a claim's token even when its answer is lost: the connection dropped between the commit
//! and the reply (a primary that died), or the deadline passed and the statement committed
//! afterwards. It can then ask the database which jobs that token leased to this node
//! (`unanswered_claims.sql`). No worker ever got those jobs, so the master gives them back with
//! their attempt uncharged. Without this they would wait out their lease and lose an attempt to
//! the reap, and a job with one try would fail without having run.
//!
//! A token is reserved once and used by one claim only, so (job, token) still names one lease of
//! one job: the fencing every settle and renewal relies on.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::leases::{JobId, Lease};

/// How many tokens one reservation takes: one round trip per this many claims.
pub(crate) const RESERVE: i64 = 64;

/// The reserved tokens and the claims sent with them.
#[derive(Default)]
pub(crate) struct ClaimTokens {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Reserved tokens no claim has used yet, smallest first: one node's tokens only grow.
    spare: VecDeque<i64>,
    /// Claims sent whose answer did not come back whole: in flight, or given up on.
    open: Vec<Open>,
}

struct Open {
    token: i64,
    /// When the claim was given up on; `None` while it may still be answered (its jobs may yet
    /// be handed out, so they must not be asked about).
    given_up: Option<Instant>,
    /// Jobs with this token the master already has: handed out by a claim that failed part-way,
    /// or found and given back by an earlier question.
    known: Vec<JobId>,
}

/// The claims to ask about: their tokens, and the jobs of each the master already has.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Unanswered {
    pub tokens: Vec<i64>,
    /// (job, token) pairs to leave out.
    pub known: Vec<(JobId, i64)>,
}

impl ClaimTokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reserved token, if one is left.
    pub(crate) fn take(&self) -> Option<i64> {
        self.lock().spare.pop_front()
    }

    /// Tokens just reserved; the caller keeps one of them for its claim.
    pub(crate) fn add_spare(&self, tokens: impl IntoIterator<Item = i64>) {
        self.lock().spare.extend(tokens);
    }

    /// A claim with `token` is about to be sent. Until [`Sending::answered`], the claim counts as
    /// unanswered: a claim cancelled at its deadline (its future dropped) is asked about later.
    pub(crate) fn sending(&self, token: i64) -> Sending<'_> {
        self.lock().open.push(Open {
            token,
            given_up: None,
            known: Vec::new(),
        });
        Sending {
            tokens: self,
            token,
            done: false,
        }
    }

    /// Whether some claim was given up on.
    pub(crate) fn any_unanswered(&self) -> bool {
        self.lock().open.iter().any(|o| o.given_up.is_some())
    }

    /// The claims given up on, forgetting those given up on more than `keep` before `now`: by
    /// then their leases have run out, and the reap has taken their jobs back.
    pub(crate) fn unanswered(&self, now: Instant, keep: Duration) -> Unanswered {
        let mut inner = self.lock();
        inner.open.retain(|o| {
            o.given_up
                .is_none_or(|at| now.saturating_duration_since(at) <= keep)
        });
        let mut asked = Unanswered::default();
        for o in inner.open.iter().filter(|o| o.given_up.is_some()) {
            asked.tokens.push(o.token);
            asked.known.extend(o.known.iter().map(|id| (*id, o.token)));
        }
        asked
    }

    /// Jobs found under unanswered claims' tokens: the master gives them back, and a later
    /// question leaves them out.
    pub(crate) fn found(&self, leases: &[Lease]) {
        let mut inner = self.lock();
        for l in leases {
            if let Some(o) = inner.open.iter_mut().find(|o| o.token == l.token) {
                o.known.push(l.id);
            }
        }
    }
}

/// A claim in flight with its token (see [`ClaimTokens::sending`]).
pub(crate) struct Sending<'a> {
    tokens: &'a ClaimTokens,
    token: i64,
    done: bool,
}

impl Sending<'_> {
    /// The claim's answer came back with `jobs`. `whole`: every statement answered, so no job
    /// has this token but those; otherwise a later statement may have committed unanswered.
    pub(crate) fn answered(mut self, jobs: impl Iterator<Item = JobId>, whole: bool) {
        self.done = true;
        let mut inner = self.tokens.lock();
        let Some(at) = inner.open.iter().position(|o| o.token == self.token) else {
            return;
        };
        if whole {
            inner.open.swap_remove(at);
        } else {
            let open = &mut inner.open[at];
            open.given_up = Some(Instant::now());
            open.known = jobs.collect();
        }
    }
}

impl Drop for Sending<'_> {
    /// An error or a cancelled future: the claim may have committed.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut inner = self.tokens.lock();
        if let Some(open) = inner.open.iter_mut().find(|o| o.token == self.token) {
            open.given_up = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: Duration = Duration::from_secs(60);

    #[test]
    fn an_answered_claim_is_never_asked_about_and_one_in_flight_not_yet() {
        let tokens = ClaimTokens::default();
        tokens.add_spare([7, 8]);
        let (a, b) = (tokens.take().unwrap(), tokens.take().unwrap());
        assert_eq!((a, b), (7, 8), "one node's tokens only grow");
        assert_eq!(tokens.take(), None);
        let first = tokens.sending(a);
        let _in_flight = tokens.sending(b);
        first.answered([1, 2].into_iter(), true);
        assert!(!tokens.any_unanswered());
        assert_eq!(
            tokens.unanswered(Instant::now(), KEEP),
            Unanswered::default()
        );
    }

    #[test]
    fn a_failed_or_cancelled_claim_is_asked_about_until_its_leases_have_run_out() {
        let tokens = ClaimTokens::default();
        drop(tokens.sending(5));
        assert!(tokens.any_unanswered());
        let asked = tokens.unanswered(Instant::now(), KEEP);
        assert_eq!(asked.tokens, [5]);
        assert!(asked.known.is_empty());
        let later = Instant::now() + KEEP + Duration::from_secs(1);
        assert_eq!(tokens.unanswered(later, KEEP), Unanswered::default());
        assert!(!tokens.any_unanswered());
    }

    #[test]
    fn a_claim_answered_in_part_leaves_out_the_jobs_handed_out_and_those_found() {
        let tokens = ClaimTokens::default();
        tokens.sending(9).answered([3, 4].into_iter(), false);
        tokens.found(&[Lease { id: 6, token: 9 }]);
        let asked = tokens.unanswered(Instant::now(), KEEP);
        assert_eq!(asked.tokens, [9]);
        assert_eq!(asked.known, [(3, 9), (4, 9), (6, 9)]);
    }
}
