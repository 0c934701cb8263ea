//! Fair queues (`fair` in config/drover.php, docs/limits.md "Fair share"): a fair queue's claim
//! takes its jobs in the order of the tags given at enqueue (`queries/claim_fair.sql`,
//! `drover.fair_tag` in `migrations/0011_limits.sql`), so its keys (tenants) are taken in turn.
//! This module only carries which queues are fair to the claim.

use std::collections::BTreeSet;

/// The fair queues of the running configuration. A queue not named takes its jobs in due order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FairQueues {
    /// Queue names.
    queues: BTreeSet<String>,
}

impl FairQueues {
    pub fn new(queues: impl IntoIterator<Item = String>) -> FairQueues {
        FairQueues {
            queues: queues.into_iter().collect(),
        }
    }

    /// Whether `queue` is fair.
    pub fn is_fair(&self, queue: &str) -> bool {
        self.queues.contains(queue)
    }

    /// Every fair queue, by name.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.queues.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_queues_are_fair() {
        let fair = FairQueues::new(["tenants".to_string()]);
        assert!(fair.is_fair("tenants"));
        assert!(!fair.is_fair("default"));
        assert_eq!(fair.iter().collect::<Vec<_>>(), ["tenants"]);
    }
}
