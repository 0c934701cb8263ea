//! When a pool claims, and how many jobs: the one rule, from what the pool and its assignments
//! say. A pool claims only while the master serves and neither it nor every queue is paused, one
//! claim at a time, when something happened that may let a claim find jobs, and for its free
//! credit — under load in batches: once half its credit is free, unless a worker has nothing to
//! run (then at once). One claim per job would cost a statement and a commit per job; the
//! prefetched jobs keep every worker busy meanwhile.

/// What the rule reads of a pool at the moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolMoment {
    /// The master serves: running, not paused, and it has read which queues are paused.
    pub serving: bool,
    /// A claim of this pool is running.
    pub claiming: bool,
    /// Something happened that may let a claim find jobs.
    pub wanted: bool,
    /// Retired by a reload, or paused on its own.
    pub stopped: bool,
    /// Jobs its workers could take now (`Assignments::free_credit`).
    pub free: usize,
    /// Jobs its workers could hold in all (`Assignments::capacity`).
    pub capacity: usize,
    /// A worker has nothing to run.
    pub idle_worker: bool,
    /// The most jobs one claim leases (`MasterConfig::claim_batch_max`).
    pub batch_max: usize,
}

/// How many jobs to claim now; `None`: not now.
pub fn claim_now(p: PoolMoment) -> Option<usize> {
    if !p.serving || p.claiming || !p.wanted || p.stopped || p.free == 0 {
        return None;
    }
    if p.free.saturating_mul(2) < p.capacity && !p.idle_worker {
        return None;
    }
    Some(p.free.min(p.batch_max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(free: usize) -> PoolMoment {
        PoolMoment {
            serving: true,
            claiming: false,
            wanted: true,
            stopped: false,
            free,
            capacity: 32,
            idle_worker: false,
            batch_max: 256,
        }
    }

    #[test]
    fn under_load_a_pool_claims_once_half_its_credit_is_free_and_at_once_for_an_idle_worker() {
        assert_eq!(
            claim_now(busy(15)),
            None,
            "15 of 32 free, every worker busy"
        );
        assert_eq!(claim_now(busy(16)), Some(16));
        assert_eq!(
            claim_now(PoolMoment {
                idle_worker: true,
                ..busy(1)
            }),
            Some(1),
            "a worker with nothing to run is not kept waiting for a batch"
        );
    }

    #[test]
    fn a_claim_is_for_the_free_credit_at_most_a_batch() {
        assert_eq!(
            claim_now(PoolMoment {
                capacity: 1000,
                ..busy(1000)
            }),
            Some(256)
        );
        assert_eq!(claim_now(busy(0)), None, "no credit, no claim");
    }

    #[test]
    fn nothing_is_claimed_while_paused_stopped_claiming_or_unasked() {
        let free = busy(32);
        assert_eq!(claim_now(free), Some(32));
        for moment in [
            PoolMoment {
                serving: false,
                ..free
            },
            PoolMoment {
                claiming: true,
                ..free
            },
            PoolMoment {
                wanted: false,
                ..free
            },
            PoolMoment {
                stopped: true,
                ..free
            },
        ] {
            assert_eq!(claim_now(moment), None, "{moment:?}");
        }
    }
}
