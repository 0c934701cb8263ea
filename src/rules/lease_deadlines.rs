//! When each party acts on a lease: the master, the lease guard, the worker and the reap. One
//! place for the margins and for a pool's outage grace (docs/leases.md, "Margins" and "Outage
//! grace").
//!
//! A lease ends `lease` after the claim or renewal that set it was sent (the master's count,
//! never later than the database's). Without a grace, the master stops a worker whose lease it
//! could not renew a fifth of the lease before the end, and the guard a tenth before it. With an
//! outage grace `g`, a *started* job's worker may go on for `g` more: the reap waits that long
//! too (`reap_expired.sql`), so no other master takes the job back meanwhile. A job not yet
//! started is never started past the lease's own end, grace or not: a master cut off from the
//! database does not start new work, and a queue pause that waits for live masters only is kept.

use std::time::{Duration, Instant};

/// How long before a hold ends (the lease's end plus the grace) the master kills a worker whose
/// lease it could not renew (its lease check runs every lease/10): a fifth of the lease. With
/// the default 30 s lease: 6 s.
pub fn stop_margin(lease: Duration) -> Duration {
    lease / 5
}

/// The margin of the deadline each worker's guard enforces, for when the master cannot act
/// (frozen, stopped): a tenth of the lease before the hold ends. Smaller than the master's, so a
/// healthy worker's deadline leaves a late renewal more room (docs/leases.md, "Margins").
pub fn worker_margin(lease: Duration) -> Duration {
    lease / 10
}

/// Until when a job leased until `lease_until` may keep running with outage grace `grace`:
/// the end of what the reap leaves it.
pub fn hold_until(lease_until: Instant, grace: Duration) -> Instant {
    lease_until.checked_add(grace).unwrap_or(lease_until)
}

/// When the master kills the worker of a job held until `hold` if no renewal moved it.
pub fn fence_at(hold: Instant, lease: Duration) -> Instant {
    hold.checked_sub(stop_margin(lease)).unwrap_or(hold)
}

/// When the lease guard kills a worker whose first hold ends at `hold` (the master frozen or
/// gone).
pub fn guard_at(hold: Instant, lease: Duration) -> Instant {
    hold.checked_sub(worker_margin(lease)).unwrap_or(hold)
}

/// The last moment a worker may start a job leased until `lease_until` (it wants a second of it
/// left, `Feeder`): never later than the lease's own end less the worker's margin, whatever the
/// grace.
pub fn start_by(lease_until: Instant, lease: Duration) -> Instant {
    guard_at(lease_until, lease)
}

/// How long into a database outage the master kills a started job's worker, earliest and
/// latest: renewals run every lease/3, so an outage begins between 0 and lease/3 after the last
/// one that succeeded, and the kill comes at the hold's end less the master's margin. With the
/// default 30 s lease and no grace: 14 to 24 s (the issue's four workers, killed 18 s into a 60 s
/// stop, fell between).
pub fn killed_into_outage(lease: Duration, grace: Duration) -> (Duration, Duration) {
    let latest = (lease + grace).saturating_sub(stop_margin(lease));
    (latest.saturating_sub(lease / 3), latest)
}

/// The database outage a started job outlives, surely and at best: a renewal must land before
/// the kill, and after a failed one the master tries again at every lease check (lease/10,
/// `master::leases`), so one lands within lease/10 of the database's return when a down server
/// refuses connections at once. With the default 30 s lease and no grace: 11 s surely, 24 s at
/// best. A host that cannot be reached at all (connections hang until a renewal's deadline,
/// lease/3) may need up to lease/3 instead: 4 s surely.
pub fn outage_outlived(lease: Duration, grace: Duration) -> (Duration, Duration) {
    let (earliest_kill, latest_kill) = killed_into_outage(lease, grace);
    (earliest_kill.saturating_sub(lease / 10), latest_kill)
}

/// How long after its master was lost (host down, network cut, frozen) a job it held comes
/// back to the queue, at most: the lease from its last renewal, the grace, and one pass of the
/// reap (every lease/2, by any live master). A master restarted in the same state directory
/// gives its predecessor's jobs back as soon as their leases end (their node row is removed).
pub fn lost_host_return(lease: Duration, grace: Duration) -> Duration {
    lease + grace + lease / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MIN_LEASE_SECS;

    /// The margins of docs/leases.md, for the shortest lease allowed and longer ones: a healthy
    /// worker's nearest deadline, just before the next renewal, still leaves that renewal its
    /// whole client deadline (lease/3) and the worker the second it wants before starting a job;
    /// the worker stops itself, and the master kills it, before the lease ends.
    #[test]
    fn renewal_deadlines_leave_a_renewal_its_time_and_stop_every_worker_before_its_lease_ends() {
        for secs in [MIN_LEASE_SECS, 10.0, 30.0, 300.0] {
            let lease = Duration::from_secs_f64(secs);
            let renew_every = lease / 3;
            let nearest = lease - worker_margin(lease) - renew_every;
            assert!(nearest >= renew_every, "lease {secs} s: {nearest:?}");
            assert!(
                nearest >= Duration::from_secs(1),
                "lease {secs} s: a prefetched job's second"
            );
            assert!(worker_margin(lease) > Duration::ZERO);
            assert!(stop_margin(lease) > worker_margin(lease));
            assert!(stop_margin(lease) < lease);
        }
    }

    #[test]
    fn without_grace_the_master_and_the_guard_act_before_the_lease_ends() {
        let lease = Duration::from_secs(30);
        let t0 = Instant::now();
        let until = t0 + lease;
        let hold = hold_until(until, Duration::ZERO);
        assert_eq!(hold, until);
        assert_eq!(fence_at(hold, lease), t0 + Duration::from_secs(24));
        assert_eq!(guard_at(hold, lease), t0 + Duration::from_secs(27));
        assert!(fence_at(hold, lease) < guard_at(hold, lease));
        assert!(guard_at(hold, lease) < until);
    }

    #[test]
    fn a_grace_moves_the_kill_of_a_started_job_but_never_the_start_of_one() {
        let lease = Duration::from_secs(30);
        let grace = Duration::from_secs(90);
        let t0 = Instant::now();
        let until = t0 + lease;
        let hold = hold_until(until, grace);
        assert_eq!(fence_at(hold, lease), t0 + Duration::from_secs(114));
        assert_eq!(guard_at(hold, lease), t0 + Duration::from_secs(117));
        // The reap waits until `hold`: both act before it.
        assert!(guard_at(hold, lease) < hold);
        // A prefetched job starts by the lease's own end less the margin, as without a grace.
        assert_eq!(start_by(until, lease), t0 + Duration::from_secs(27));
    }

    #[test]
    fn the_kill_comes_when_the_issue_measured_it_and_the_outage_outlived_grows_by_the_grace() {
        let lease = Duration::from_secs(30);
        let (earliest, latest) = killed_into_outage(lease, Duration::ZERO);
        assert_eq!(earliest, Duration::from_secs(14));
        assert_eq!(latest, Duration::from_secs(24));
        // Killed 18 s into a 60 s stop (issue 36): between the two.
        assert!(earliest <= Duration::from_secs(18) && Duration::from_secs(18) <= latest);
        // Outlived surely only if a renewal lands before the kill: a retry every lease/10.
        let (surely, at_best) = outage_outlived(lease, Duration::ZERO);
        assert_eq!(surely, Duration::from_secs(11));
        assert_eq!(at_best, Duration::from_secs(24));
        let (surely, at_best) = outage_outlived(lease, Duration::from_secs(120));
        assert_eq!(surely, Duration::from_secs(131));
        assert_eq!(at_best, Duration::from_secs(144));
        // What it costs: a lost host's jobs come back later by the grace.
        assert_eq!(
            lost_host_return(lease, Duration::from_secs(120))
                - lost_host_return(lease, Duration::ZERO),
            Duration::from_secs(120)
        );
    }

    #[test]
    fn a_hold_beyond_what_a_clock_holds_saturates_instead_of_panicking() {
        let now = Instant::now();
        let hold = hold_until(now, Duration::MAX);
        assert_eq!(hold, now);
        assert!(fence_at(now, Duration::from_secs(30)) <= now);
    }
}
