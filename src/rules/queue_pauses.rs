//! Queues paused by name for every master of the database (`drover.paused_queues`: Laravel's
//! `queue:pause`, `Queue::pauseFor()`, `drover:pause --queue`): what this master knows of them,
//! and when it may tell whoever paused that it holds a pause.
//!
//! A pause holds from the moment `queue:pause` returns (docs/laravel-compatibility.md, "Pausing
//! a queue"). The database does most of it: a claim never crosses a pause committed before it
//! began (`claim.sql`), a pause wakes every master at once (`NOTIFY drover_pauses`), and the
//! pause returns once every master that may still hand out jobs has confirmed it
//! (`drover.pause_unconfirmed`). What is left is this master's side, decided here:
//!
//! - **which queues are paused now**: each read of the table replaces what was known; a pause
//!   with a TTL ends by itself at its time ([`QueuePauses::expire`]), by the database's clock
//!   (its seconds left, counted on this master's monotonic clock from the read);
//! - **what a read changed** ([`Changes`]): queues newly paused, whose prefetched jobs the
//!   workers are told to give back (`withdraw`), and queues resumed, which are claimed from again;
//! - **when a pause is held**: once every claim sent before the read that showed it has answered
//!   (a claim that began before the pause committed may still lease its jobs: they are handed
//!   back, never out) and every `withdraw` frame for it is in its worker's socket (a worker reads
//!   every frame waiting before it starts a job). Then its version goes into what the master
//!   confirms ([`QueuePauses::confirmation_due`]).
//!
//! Pure: no database, no processes, the clock passed in; the loop (`master/queue_pauses.rs`)
//! carries out what it says.

use std::collections::BTreeMap;
use std::time::Duration;

use drover_broker::PausedQueue;
use tokio::time::Instant;

/// After a confirmation failed (the database is away), the next try waits this long.
const CONFIRM_RETRY: Duration = Duration::from_secs(1);

/// What this master knows of the paused queues, and what it has confirmed.
#[derive(Debug, Default)]
pub struct QueuePauses {
    /// Paused queue → its pause.
    paused: BTreeMap<String, Pause>,
    /// A read of the table is running.
    reading: bool,
    /// The pauses changed (a NOTIFY) while a read was running: read again when it answers, since
    /// it may have begun before the change.
    reread: bool,
    /// When the last read started (the fallback poll counts from it).
    last_read: Option<Instant>,
    /// The first read has answered (or failed): until then nothing is claimed, so a queue paused
    /// before this master started is not claimed from before it is known.
    answered: bool,
    /// The versions this master last confirmed (`drover.nodes.pauses_held`).
    confirmed: Vec<i64>,
    /// A confirmation is being written.
    confirming: bool,
    /// No confirmation is tried before this (one failed).
    confirm_after: Option<Instant>,
    /// Numbers the rounds of `withdraw` frames, so a round's end clears only its own wait.
    rounds: u64,
}

/// One queue's pause, as this master holds it.
#[derive(Debug, Clone, PartialEq)]
struct Pause {
    /// Its version in the table: a queue paused again is a new pause, confirmed anew.
    version: i64,
    /// When it ends by itself (a TTL); `None`: when resumed.
    until: Option<Instant>,
    /// What must happen before this master holds it; `None`: held.
    waits: Option<Waits>,
}

/// What a pause this master learned of waits for before it is held.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Waits {
    /// Claims numbered up to this one were sent before the read that showed the pause answered:
    /// until each has answered (its jobs of the queue handed back, not out), one may still hand
    /// out a job of it.
    claims_upto: u64,
    /// The round of `withdraw` frames not yet all written, if any.
    withdrawing: Option<u64>,
}

/// What a read of the table changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Queues paused that were not: their workers must give back what they hold of them.
    pub paused: Vec<String>,
    /// Queues no longer paused (resumed, or their TTL ended): claim from them again.
    pub resumed: Vec<String>,
}

impl QueuePauses {
    /// Whether claims may begin: the table was read once (or could not be: claims then go on
    /// with what is known, and the database still refuses to lease a paused queue's jobs).
    pub fn known(&self) -> bool {
        self.answered
    }

    pub fn is_paused(&self, queue: &str) -> bool {
        self.paused.contains_key(queue)
    }

    /// The fallback poll (a NOTIFY lost with its connection): a read is due when none runs and
    /// the last began `every` ago or more.
    pub fn read_due(&self, now: Instant, every: Duration) -> bool {
        !self.reading && self.last_read.is_none_or(|at| now - at >= every)
    }

    /// A read begins now; false when one is already running (it is read again once that one
    /// answers, as the change may have come after it began).
    pub fn start_read(&mut self, now: Instant) -> bool {
        if self.reading {
            self.reread = true;
            return false;
        }
        self.reading = true;
        self.last_read = Some(now);
        true
    }

    /// A read answered with the pauses in force. `claims_sent`: the number of the last claim
    /// sent so far. Returns what changed, and whether to read again at once.
    pub fn on_read(
        &mut self,
        rows: Vec<PausedQueue>,
        now: Instant,
        claims_sent: u64,
    ) -> (Changes, bool) {
        let again = self.finish_read();
        let mut changes = Changes::default();
        let mut known = BTreeMap::new();
        for row in rows {
            // A wait beyond what an Instant can hold is no end at all.
            let until = row.left.and_then(|left| now.checked_add(left));
            let waits = match self.paused.remove(&row.queue) {
                // Already paused here: nothing was handed out of it since; a new version is held
                // when the one before it is.
                Some(before) => before.waits,
                None => {
                    changes.paused.push(row.queue.clone());
                    Some(Waits {
                        claims_upto: claims_sent,
                        withdrawing: None,
                    })
                }
            };
            known.insert(
                row.queue,
                Pause {
                    version: row.version,
                    until,
                    waits,
                },
            );
        }
        changes.resumed = std::mem::replace(&mut self.paused, known)
            .into_keys()
            .collect();
        (changes, again)
    }

    /// A read failed: what was known stays (a queue paused stays paused while the database is
    /// away; nothing can be claimed then anyway). Returns whether to read again at once.
    pub fn on_read_failed(&mut self) -> bool {
        self.finish_read()
    }

    fn finish_read(&mut self) -> bool {
        self.reading = false;
        self.answered = true;
        std::mem::take(&mut self.reread)
    }

    /// `withdraw` frames for `queue` are on their way: its pause is not held before they are all
    /// written ([`QueuePauses::withdrawn`] with the round returned).
    pub fn withdrawing(&mut self, queue: &str) -> Option<u64> {
        let waits = self.paused.get_mut(queue)?.waits.as_mut()?;
        self.rounds += 1;
        waits.withdrawing = Some(self.rounds);
        Some(self.rounds)
    }

    /// Every `withdraw` frame of `round` was written (or its worker is gone).
    pub fn withdrawn(&mut self, queue: &str, round: u64) {
        if let Some(waits) = self
            .paused
            .get_mut(queue)
            .and_then(|p| p.waits.as_mut())
            .filter(|w| w.withdrawing == Some(round))
        {
            waits.withdrawing = None;
        }
    }

    /// Pauses whose TTL ended by `now` end here too; their queues are returned.
    pub fn expire(&mut self, now: Instant) -> Vec<String> {
        let over: Vec<String> = self
            .paused
            .iter()
            .filter(|(_, p)| p.until.is_some_and(|until| until <= now))
            .map(|(queue, _)| queue.clone())
            .collect();
        for queue in &over {
            self.paused.remove(queue);
        }
        over
    }

    /// When the next pause ends by itself.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.paused.values().filter_map(|p| p.until).min()
    }

    /// The versions to confirm now, if the master should write them: every pause it holds,
    /// when that is more than it last confirmed. `oldest_claim`: the number of the oldest claim
    /// still running, if any. A pause is held once the claims sent before it was read have all
    /// answered and its `withdraw` frames are written.
    pub fn confirmation_due(
        &mut self,
        oldest_claim: Option<u64>,
        now: Instant,
    ) -> Option<Vec<i64>> {
        if self.confirming || self.confirm_after.is_some_and(|at| now < at) {
            return None;
        }
        for pause in self.paused.values_mut() {
            if let Some(w) = pause.waits {
                let claims_answered = oldest_claim.is_none_or(|oldest| oldest > w.claims_upto);
                if claims_answered && w.withdrawing.is_none() {
                    pause.waits = None;
                }
            }
        }
        let held: Vec<i64> = self
            .paused
            .values()
            .filter(|p| p.waits.is_none())
            .map(|p| p.version)
            .collect();
        if held.iter().all(|v| self.confirmed.contains(v)) {
            return None;
        }
        self.confirming = true;
        Some(held)
    }

    /// The confirmation of `versions` was written (`ok`) or failed (tried again a little later).
    pub fn confirmed(&mut self, versions: Vec<i64>, ok: bool, now: Instant) {
        self.confirming = false;
        if ok {
            self.confirmed = versions;
            self.confirm_after = None;
        } else {
            self.confirm_after = Some(now + CONFIRM_RETRY);
        }
    }

    /// This master's row was lost and registered again: nothing it confirmed is there any more,
    /// so every pause it holds is confirmed anew.
    pub fn row_lost(&mut self) {
        self.confirmed.clear();
    }

    /// For status: each paused queue and the seconds its pause has left (`None`: until
    /// resumed).
    pub fn status(&self, now: Instant) -> BTreeMap<String, Option<f64>> {
        self.paused
            .iter()
            .map(|(queue, p)| {
                let left = p
                    .until
                    .map(|u| u.saturating_duration_since(now).as_secs_f64());
                (queue.clone(), left)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(queue: &str, version: i64, left: Option<u64>) -> PausedQueue {
        PausedQueue {
            queue: queue.into(),
            left: left.map(Duration::from_secs),
            version,
        }
    }

    /// A master that has read the table once and found `rows`, with `claims_sent` claims sent.
    fn read(rows: Vec<PausedQueue>, claims_sent: u64) -> (QueuePauses, Changes) {
        let mut pauses = QueuePauses::default();
        let now = Instant::now();
        assert!(pauses.start_read(now));
        let (changes, again) = pauses.on_read(rows, now, claims_sent);
        assert!(!again);
        (pauses, changes)
    }

    #[test]
    fn nothing_is_known_before_the_first_read_answers_even_if_it_fails() {
        let mut pauses = QueuePauses::default();
        assert!(!pauses.known());
        assert!(pauses.start_read(Instant::now()));
        assert!(!pauses.known());
        assert!(!pauses.on_read_failed());
        assert!(pauses.known());
    }

    #[test]
    fn a_read_says_which_queues_were_paused_and_which_resumed() {
        let (mut pauses, changes) = read(vec![row("a", 1, None), row("b", 2, None)], 0);
        assert_eq!(changes.paused, ["a", "b"]);
        assert!(changes.resumed.is_empty());
        assert!(pauses.is_paused("a") && pauses.is_paused("b"));
        let now = Instant::now();
        pauses.start_read(now);
        let (changes, _) = pauses.on_read(vec![row("b", 2, None), row("c", 3, None)], now, 0);
        assert_eq!(
            changes,
            Changes {
                paused: vec!["c".into()],
                resumed: vec!["a".into()],
            }
        );
        assert!(!pauses.is_paused("a"));
    }

    #[test]
    fn a_change_while_a_read_runs_reads_again_when_it_answers() {
        let mut pauses = QueuePauses::default();
        let now = Instant::now();
        assert!(pauses.start_read(now));
        assert!(!pauses.start_read(now), "one read at a time");
        let (_, again) = pauses.on_read(Vec::new(), now, 0);
        assert!(again, "the running read may have begun before the change");
        assert!(pauses.start_read(now));
        let (_, again) = pauses.on_read(Vec::new(), now, 0);
        assert!(!again);
    }

    #[test]
    fn the_fallback_poll_is_due_every_interval_and_never_beside_a_running_read() {
        let mut pauses = QueuePauses::default();
        let now = Instant::now();
        let every = Duration::from_secs(5);
        assert!(pauses.read_due(now, every));
        pauses.start_read(now);
        assert!(!pauses.read_due(now + every, every));
        pauses.on_read(Vec::new(), now, 0);
        assert!(!pauses.read_due(now + Duration::from_secs(4), every));
        assert!(pauses.read_due(now + every, every));
    }

    #[test]
    fn a_pause_is_confirmed_once_the_claims_sent_before_it_was_read_have_answered() {
        // Claims 1 to 3 were sent before the read answered; claim 3 still runs.
        let (mut pauses, _) = read(vec![row("a", 7, None)], 3);
        let now = Instant::now();
        assert_eq!(
            pauses.confirmation_due(Some(3), now),
            None,
            "claim 3 may lease a's jobs"
        );
        assert_eq!(
            pauses.confirmation_due(Some(4), now),
            Some(vec![7]),
            "claim 4 saw the pause"
        );
    }

    #[test]
    fn a_pause_is_confirmed_once_its_withdraw_frames_are_written() {
        let (mut pauses, _) = read(vec![row("a", 7, None)], 0);
        let now = Instant::now();
        let round = pauses.withdrawing("a").unwrap();
        assert_eq!(pauses.confirmation_due(None, now), None);
        pauses.withdrawn("a", round + 1);
        assert_eq!(
            pauses.confirmation_due(None, now),
            None,
            "another round's end"
        );
        pauses.withdrawn("a", round);
        assert_eq!(pauses.confirmation_due(None, now), Some(vec![7]));
    }

    #[test]
    fn the_pauses_held_are_confirmed_without_waiting_for_one_still_withdrawing() {
        let (mut pauses, _) = read(vec![row("a", 7, None), row("b", 8, None)], 0);
        let now = Instant::now();
        let round = pauses.withdrawing("b").unwrap();
        assert_eq!(pauses.confirmation_due(None, now), Some(vec![7]));
        pauses.confirmed(vec![7], true, now);
        assert_eq!(pauses.confirmation_due(None, now), None, "nothing new");
        pauses.withdrawn("b", round);
        assert_eq!(pauses.confirmation_due(None, now), Some(vec![7, 8]));
    }

    #[test]
    fn one_confirmation_at_a_time_and_a_failed_one_is_tried_again_a_second_later() {
        let (mut pauses, _) = read(vec![row("a", 7, None)], 0);
        let now = Instant::now();
        assert_eq!(pauses.confirmation_due(None, now), Some(vec![7]));
        assert_eq!(
            pauses.confirmation_due(None, now),
            None,
            "one is being written"
        );
        pauses.confirmed(vec![7], false, now);
        assert_eq!(pauses.confirmation_due(None, now), None);
        assert_eq!(
            pauses.confirmation_due(None, now + CONFIRM_RETRY),
            Some(vec![7])
        );
        pauses.confirmed(vec![7], true, now);
        assert_eq!(pauses.confirmation_due(None, now + CONFIRM_RETRY), None);
    }

    #[test]
    fn a_row_registered_again_has_every_pause_held_confirmed_anew() {
        let (mut pauses, _) = read(vec![row("a", 7, None)], 0);
        let now = Instant::now();
        let versions = pauses.confirmation_due(None, now).unwrap();
        pauses.confirmed(versions, true, now);
        assert_eq!(pauses.confirmation_due(None, now), None);
        pauses.row_lost();
        assert_eq!(pauses.confirmation_due(None, now), Some(vec![7]));
    }

    #[test]
    fn a_queue_paused_again_is_a_new_version_held_as_soon_as_the_one_before_it() {
        let (mut pauses, _) = read(vec![row("a", 7, None)], 0);
        let now = Instant::now();
        let versions = pauses.confirmation_due(None, now).unwrap();
        pauses.confirmed(versions, true, now);
        // Paused again (a pauseFor over it): nothing was handed out of it since.
        pauses.start_read(now);
        let (changes, _) = pauses.on_read(vec![row("a", 9, Some(60))], now, 5);
        assert!(changes.paused.is_empty() && changes.resumed.is_empty());
        assert_eq!(pauses.confirmation_due(Some(1), now), Some(vec![9]));
    }

    #[test]
    fn a_new_version_of_a_pause_still_withdrawing_waits_for_the_same_frames() {
        let (mut pauses, _) = read(vec![row("a", 7, None)], 0);
        let now = Instant::now();
        let round = pauses.withdrawing("a").unwrap();
        pauses.start_read(now);
        pauses.on_read(vec![row("a", 8, None)], now, 0);
        assert_eq!(pauses.confirmation_due(None, now), None);
        pauses.withdrawn("a", round);
        assert_eq!(pauses.confirmation_due(None, now), Some(vec![8]));
    }

    #[test]
    fn a_pause_with_a_ttl_ends_by_itself_at_its_time() {
        let mut pauses = QueuePauses::default();
        let now = Instant::now();
        pauses.start_read(now);
        pauses.on_read(vec![row("a", 1, Some(2)), row("b", 2, None)], now, 0);
        assert_eq!(pauses.next_expiry(), Some(now + Duration::from_secs(2)));
        assert!(pauses.expire(now + Duration::from_millis(1999)).is_empty());
        assert_eq!(pauses.expire(now + Duration::from_secs(2)), ["a"]);
        assert!(!pauses.is_paused("a") && pauses.is_paused("b"));
        assert_eq!(pauses.next_expiry(), None);
        let status = pauses.status(now);
        assert_eq!(status.into_iter().collect::<Vec<_>>(), [("b".into(), None)]);
    }

    #[test]
    fn a_ttl_beyond_what_a_clock_holds_never_ends() {
        let mut pauses = QueuePauses::default();
        let now = Instant::now();
        pauses.start_read(now);
        let rows = vec![PausedQueue {
            queue: "a".into(),
            left: Some(Duration::MAX),
            version: 1,
        }];
        pauses.on_read(rows, now, 0);
        assert_eq!(pauses.next_expiry(), None);
        assert!(pauses.is_paused("a"));
    }

    #[test]
    fn the_status_shows_the_seconds_a_pause_has_left() {
        let mut pauses = QueuePauses::default();
        let now = Instant::now();
        pauses.start_read(now);
        pauses.on_read(vec![row("a", 1, Some(10))], now, 0);
        let left = pauses.status(now + Duration::from_secs(4))["a"].unwrap();
        assert!((left - 6.0).abs() < 0.001, "{left}");
    }
}
