//! The held-snapshot alert: on each reap tick (every half lease) the master reads what holds
//! the database's vacuum horizon back ([`drover_broker::Horizon`]); a holding that lasts past
//! `snapshot_alert_secs` is warned of once, naming the session, standby, slot or prepared
//! transaction and how to end it, and its end is said too. While it lasts, every job settled
//! leaves dead rows VACUUM may not remove, and each claim walks past more of them
//! (docs/decisions/0010-a-held-snapshot.md; docs/operations.md, "A held snapshot").
//!
//! The rules are [`next`], a pure function of what was watched and what is seen; the check's
//! reading runs on a task of its own, one at a time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover_broker::{HolderKind, Horizon, SnapshotHolder};

use crate::store::Maintenance;

/// The alert's state and its check in flight.
#[derive(Debug, Default)]
pub struct HorizonWatch {
    /// What the last check saw, kept across checks (each runs on its own task).
    watching: Arc<Mutex<Watching>>,
    /// The running check, if any.
    check: Option<tokio::task::JoinHandle<()>>,
}

/// What the watch remembers between checks.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Watching {
    /// The holding seen last, if any.
    holding: Option<Holding>,
    /// The master was told once that its role cannot see other roles' snapshots.
    told_unseen: bool,
}

/// One holding of the horizon: one holder at one transaction id.
#[derive(Debug, Clone, PartialEq)]
pub struct Holding {
    /// Who holds it and at what transaction id.
    key: HoldingKey,
    /// Its description for the log lines.
    holder: SnapshotHolder,
    /// When it began, as best known: its transaction's start where PostgreSQL says, else when
    /// this master first saw it.
    since: Instant,
    /// Warned of already: once per holding.
    warned: bool,
}

/// What tells one holding from the next.
#[derive(Debug, Clone, PartialEq)]
struct HoldingKey {
    kind: HolderKind,
    pid: Option<i32>,
    name: String,
    xmin: Option<i64>,
}

impl HoldingKey {
    fn of(h: &SnapshotHolder) -> HoldingKey {
        HoldingKey {
            kind: h.kind,
            pid: h.pid,
            name: h.name.clone(),
            xmin: h.xmin,
        }
    }
}

/// What a check has to say.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// `holder` has held the horizon back for `held_for`, past the threshold.
    Held {
        holder: SnapshotHolder,
        held_for: Duration,
        jobs_dead_tuples: Option<i64>,
    },
    /// A holding warned of has ended after at least `held_for`.
    Released {
        holder: SnapshotHolder,
        held_for: Duration,
    },
    /// The master's role cannot see other roles' snapshots (said once).
    Unseen,
}

/// The watch's rules: from what was watched and what a read saw at `now`, what is watched next
/// and what to say. A `threshold` of zero turns the alert off.
pub fn next(
    watching: Watching,
    seen: &Horizon,
    now: Instant,
    threshold: Duration,
) -> (Watching, Vec<Notice>) {
    if threshold.is_zero() {
        return (Watching::default(), Vec::new());
    }
    let mut notices = Vec::new();
    let told_unseen = watching.told_unseen || !seen.sees_all_sessions;
    if !seen.sees_all_sessions && !watching.told_unseen {
        notices.push(Notice::Unseen);
    }
    let mut holding = match (watching.holding, &seen.oldest) {
        (Some(prev), Some(h)) if prev.key == HoldingKey::of(h) => Some(Holding {
            holder: h.clone(),
            ..prev
        }),
        (prev, now_seen) => {
            if let Some(prev) = prev.filter(|p| p.warned) {
                notices.push(Notice::Released {
                    held_for: now.saturating_duration_since(prev.since),
                    holder: prev.holder,
                });
            }
            now_seen.as_ref().map(|h| Holding {
                key: HoldingKey::of(h),
                holder: h.clone(),
                since: h
                    .open_for
                    .and_then(|open| now.checked_sub(open))
                    .unwrap_or(now),
                warned: false,
            })
        }
    };
    if let Some(h) = holding.as_mut() {
        let held_for = now.saturating_duration_since(h.since);
        if !h.warned && held_for >= threshold {
            h.warned = true;
            notices.push(Notice::Held {
                holder: h.holder.clone(),
                held_for,
                jobs_dead_tuples: seen.jobs_dead_tuples,
            });
        }
    }
    (
        Watching {
            holding,
            told_unseen,
        },
        notices,
    )
}

/// What ends or bounds a holder of `kind`: the fix the warning names.
pub fn fix(holder: &SnapshotHolder) -> String {
    match holder.kind {
        HolderKind::Session => format!(
            "End it if it is stuck (SELECT pg_terminate_backend({})), and bound such sessions for \
             their role: ALTER ROLE … SET idle_in_transaction_session_timeout = '60s' (and \
             statement_timeout for reports); run long reports on a standby without \
             hot_standby_feedback",
            holder
                .pid
                .map(|p| p.to_string())
                .unwrap_or_else(|| "pid".into())
        ),
        HolderKind::Standby => "The standby's queries hold it through hot_standby_feedback: \
             bound them with statement_timeout on the standby, or turn hot_standby_feedback off \
             there (its long queries may then be cancelled by max_standby_streaming_delay)"
            .into(),
        HolderKind::ReplicationSlot => format!(
            "A replication slot keeps it until its consumer catches up; if that consumer is gone, \
             drop the slot: SELECT pg_drop_replication_slot('{}')",
            holder.name.replace('\'', "''")
        ),
        HolderKind::PreparedTransaction => format!(
            "A prepared transaction holds it until it is committed or rolled back: ROLLBACK \
             PREPARED '{}' if its coordinator is gone",
            holder.name.replace('\'', "''")
        ),
    }
}

/// `session pid 42 (nightly report, reporting, idle in transaction)`.
pub fn describe(h: &SnapshotHolder) -> String {
    let mut who = vec![h.name.clone()];
    who.extend(h.role.clone());
    who.extend(h.state.clone());
    format!(
        "{}{} ({})",
        h.kind.as_str().replace('_', " "),
        h.pid.map(|p| format!(" pid {p}")).unwrap_or_default(),
        who.join(", ")
    )
}

impl HorizonWatch {
    /// Starts a check unless one is still running (a slow database).
    pub fn tick(&mut self, threshold: Duration, store: Arc<dyn Maintenance>) {
        if threshold.is_zero() || self.check.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let watching = self.watching.clone();
        self.check = Some(tokio::spawn(async move {
            let seen = match store.horizon().await {
                Ok(seen) => seen,
                Err(e) => {
                    tracing::debug!("vacuum horizon check: {e}");
                    return;
                }
            };
            let notices = {
                let mut w = watching.lock().unwrap_or_else(|p| p.into_inner());
                let (next_state, notices) = next(w.clone(), &seen, Instant::now(), threshold);
                *w = next_state;
                notices
            };
            for notice in notices {
                say(&notice);
            }
        }));
    }
}

/// Logs a notice.
fn say(notice: &Notice) {
    match notice {
        Notice::Held {
            holder,
            held_for,
            jobs_dead_tuples,
        } => tracing::warn!(
            "the database's vacuum horizon has been held back for {:.0}s ({} transactions) by \
             {}{}: every job settled since leaves dead rows VACUUM cannot remove, and claims slow \
             as they walk past them{}. {} (docs/operations.md, \"A held snapshot\")",
            held_for.as_secs_f64(),
            holder.xid_age,
            describe(holder),
            holder
                .query
                .as_ref()
                .map(|q| format!(", running {q:?}"))
                .unwrap_or_default(),
            jobs_dead_tuples
                .map(|n| format!(" ({n} dead tuples in drover.jobs)"))
                .unwrap_or_default(),
            fix(holder)
        ),
        Notice::Released { holder, held_for } => tracing::info!(
            "{} no longer holds the vacuum horizon back (held at least {:.0}s); autovacuum can \
             remove the dead rows now",
            describe(holder),
            held_for.as_secs_f64()
        ),
        Notice::Unseen => tracing::warn!(
            "the master's database role cannot see other roles' snapshots, so a session holding \
             the vacuum horizon back may go unseen: GRANT pg_read_all_stats TO the master's role \
             (docs/operations.md, \"A held snapshot\")"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn report(open_for: Option<Duration>, xmin: i64) -> SnapshotHolder {
        SnapshotHolder {
            kind: HolderKind::Session,
            pid: Some(42),
            name: "nightly report".into(),
            role: Some("reporting".into()),
            state: Some("idle in transaction".into()),
            xid_age: 1000,
            open_for,
            query: Some("SELECT sum(total) FROM orders".into()),
            xmin: Some(xmin),
        }
    }

    fn seen(oldest: Option<SnapshotHolder>) -> Horizon {
        Horizon {
            oldest,
            jobs_dead_tuples: Some(5000),
            sees_all_sessions: true,
        }
    }

    fn kinds(notices: &[Notice]) -> Vec<&'static str> {
        notices
            .iter()
            .map(|n| match n {
                Notice::Held { .. } => "held",
                Notice::Released { .. } => "released",
                Notice::Unseen => "unseen",
            })
            .collect()
    }

    #[test]
    fn a_report_open_past_the_threshold_is_warned_of_once_and_its_end_is_said() {
        let t0 = Instant::now();
        let (w, n) = next(
            Watching::default(),
            &seen(Some(report(Some(Duration::from_secs(10)), 7))),
            t0,
            MINUTE,
        );
        assert!(n.is_empty(), "10 s open is under a minute");
        let (w, n) = next(
            w,
            &seen(Some(report(Some(Duration::from_secs(40)), 7))),
            t0 + Duration::from_secs(30),
            MINUTE,
        );
        assert!(n.is_empty());
        let (w, n) = next(
            w,
            &seen(Some(report(Some(Duration::from_secs(70)), 7))),
            t0 + Duration::from_secs(60),
            MINUTE,
        );
        assert_eq!(kinds(&n), ["held"]);
        let Notice::Held { held_for, .. } = &n[0] else {
            unreachable!()
        };
        assert_eq!(*held_for, Duration::from_secs(70));
        let (w, n) = next(
            w,
            &seen(Some(report(Some(Duration::from_secs(100)), 7))),
            t0 + Duration::from_secs(90),
            MINUTE,
        );
        assert!(n.is_empty(), "once per holding");
        let (w, n) = next(w, &seen(None), t0 + Duration::from_secs(120), MINUTE);
        assert_eq!(kinds(&n), ["released"]);
        assert_eq!(w.holding, None);
    }

    #[test]
    fn a_holder_that_does_not_say_since_when_counts_from_when_the_master_first_saw_it() {
        let slot = SnapshotHolder {
            kind: HolderKind::ReplicationSlot,
            pid: None,
            name: "standby_b".into(),
            role: None,
            state: Some("inactive".into()),
            xid_age: 90_000,
            open_for: None,
            query: None,
            xmin: Some(700),
        };
        let t0 = Instant::now();
        let (w, n) = next(Watching::default(), &seen(Some(slot.clone())), t0, MINUTE);
        assert!(n.is_empty());
        let (_, n) = next(w, &seen(Some(slot)), t0 + MINUTE, MINUTE);
        assert_eq!(kinds(&n), ["held"]);
        let Notice::Held { holder, .. } = &n[0] else {
            unreachable!()
        };
        assert!(fix(holder).contains("pg_drop_replication_slot('standby_b')"));
    }

    #[test]
    fn the_same_session_in_a_new_transaction_is_a_new_holding() {
        let t0 = Instant::now();
        let (w, n) = next(
            Watching::default(),
            &seen(Some(report(Some(2 * MINUTE), 7))),
            t0,
            MINUTE,
        );
        assert_eq!(kinds(&n), ["held"]);
        // Its report ended and a short one began: the first is released, the second not yet
        // worth a word.
        let (w, n) = next(
            w,
            &seen(Some(report(Some(Duration::from_secs(1)), 9000))),
            t0 + Duration::from_secs(15),
            MINUTE,
        );
        assert_eq!(kinds(&n), ["released"]);
        assert!(!w.holding.as_ref().unwrap().warned);
    }

    #[test]
    fn a_holding_never_warned_of_ends_without_a_word() {
        let t0 = Instant::now();
        let (w, _) = next(
            Watching::default(),
            &seen(Some(report(Some(Duration::from_secs(5)), 7))),
            t0,
            MINUTE,
        );
        let (_, n) = next(w, &seen(None), t0 + Duration::from_secs(15), MINUTE);
        assert!(n.is_empty());
    }

    #[test]
    fn a_role_that_cannot_see_other_sessions_is_told_once() {
        let blind = Horizon {
            oldest: None,
            jobs_dead_tuples: None,
            sees_all_sessions: false,
        };
        let (w, n) = next(Watching::default(), &blind, Instant::now(), MINUTE);
        assert_eq!(kinds(&n), ["unseen"]);
        let (_, n) = next(w, &blind, Instant::now(), MINUTE);
        assert!(n.is_empty());
    }

    #[test]
    fn a_threshold_of_zero_turns_the_alert_off() {
        let (w, n) = next(
            Watching::default(),
            &seen(Some(report(Some(10 * MINUTE), 7))),
            Instant::now(),
            Duration::ZERO,
        );
        assert!(n.is_empty());
        assert_eq!(w, Watching::default());
    }

    #[test]
    fn the_fix_for_a_session_names_its_pid_and_the_timeout_that_bounds_it() {
        let f = fix(&report(None, 7));
        assert!(f.contains("pg_terminate_backend(42)"), "{f}");
        assert!(f.contains("idle_in_transaction_session_timeout"), "{f}");
        assert_eq!(
            describe(&report(None, 7)),
            "session pid 42 (nightly report, reporting, idle in transaction)"
        );
    }
}
