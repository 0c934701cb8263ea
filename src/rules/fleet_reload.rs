//! A restart of the whole fleet, host by host (`php artisan drover:restart --fleet`), as this
//! master sees it: whoever restarts asks one master at a time through its node row
//! (`drover.request_reload`, numbered requests), and waits for it to say it applied the request
//! (`reload_done`) and for its workers to be replaced before asking the next. This decides when a
//! request starts a reload, and which request a finished reload answers.
//!
//! A request that arrives while a reload runs is not answered by that reload (it may have read
//! the configuration before the new release was in place): it waits for the next one, which the
//! master's re-reads run after the current (`master::reload::Rereads`).

/// The requests of one master.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FleetReload {
    /// The newest request read from the node row.
    seen: i64,
    /// The request the running reload answers.
    in_flight: Option<i64>,
    /// A request that came while that reload ran: the next reload answers it.
    queued: Option<i64>,
    /// The newest request answered (written to `reload_done`).
    done: i64,
}

impl FleetReload {
    /// The node row says the newest request is `latest`; `busy`: a reload is already re-reading
    /// the configuration (asked by a signal or `drover restart`). Whether to ask for a reload: a
    /// new request always does — the master runs it now, or after the running one, which does not
    /// answer it (it may have read the configuration before the new release was in place).
    pub fn requested(&mut self, latest: i64, busy: bool) -> bool {
        if latest <= self.seen {
            return false;
        }
        self.seen = latest;
        if busy || self.in_flight.is_some() {
            self.queued = Some(latest);
        } else {
            self.in_flight = Some(latest);
        }
        true
    }

    /// A reload was applied: the request it answers, to be written to `reload_done`, if any.
    /// A request queued meanwhile is answered by the next reload.
    pub fn applied(&mut self) -> Option<i64> {
        let answered = self.in_flight.take();
        self.in_flight = self.queued.take();
        if let Some(n) = answered {
            self.done = self.done.max(n);
        }
        answered
    }

    /// The newest request answered so far.
    pub fn done(&self) -> i64 {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_request_starts_a_reload_which_answers_it_once_applied() {
        let mut f = FleetReload::default();
        assert!(!f.requested(0, false), "a fresh row asks nothing");
        assert!(f.requested(1, false));
        assert!(
            !f.requested(1, true),
            "the same request read again (a wake)"
        );
        assert_eq!(f.applied(), Some(1));
        assert_eq!(f.done(), 1);
        assert_eq!(
            f.applied(),
            None,
            "a reload nobody asked for answers nothing"
        );
    }

    #[test]
    fn a_request_during_a_reload_is_answered_by_the_next_one_not_this_one() {
        let mut f = FleetReload::default();
        assert!(f.requested(1, false));
        assert!(f.requested(2, true), "queued behind the running reload");
        assert_eq!(f.applied(), Some(1));
        assert_eq!(f.applied(), Some(2));
        assert_eq!(f.done(), 2);
    }

    #[test]
    fn a_reload_of_its_own_while_nothing_was_asked_answers_nothing_and_a_later_request_still_reloads(
    ) {
        let mut f = FleetReload::default();
        assert_eq!(f.applied(), None);
        assert!(f.requested(3, false));
        assert_eq!(f.applied(), Some(3));
    }

    #[test]
    fn a_request_while_a_reload_of_its_own_runs_waits_for_the_next_reload() {
        let mut f = FleetReload::default();
        assert!(f.requested(1, true), "a SIGHUP's reload is re-reading");
        assert_eq!(f.applied(), None, "that reload does not answer it");
        assert_eq!(f.applied(), Some(1), "the one after it does");
    }
}
