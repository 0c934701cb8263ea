//! Fleet-wide budgets of queues: at most N jobs of a queue leased at once across every master of
//! the database (`budgets` in config/drover.php, docs/budgets.md). The rule is the claim's
//! (`queries/claim.sql`, `drover.budget_room` in `migrations/0010_queue_budgets.sql`): it counts
//! the queue's leases under a lock per queue and leases no more than the budget leaves. This
//! module only carries which queues have a budget, and how large, to the claim.

use std::collections::BTreeMap;

/// The budget of each budgeted queue, in jobs leased at once across the fleet. A queue not named
/// has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueBudgets {
    /// Queue name to budget (at least 1).
    by_queue: BTreeMap<String, u32>,
}

impl QueueBudgets {
    /// Budgets from queue name to jobs; a budget of 0 is no budget at all (the configuration
    /// refuses it before it gets here).
    pub fn new(by_queue: BTreeMap<String, u32>) -> QueueBudgets {
        QueueBudgets {
            by_queue: by_queue.into_iter().filter(|(_, n)| *n > 0).collect(),
        }
    }

    /// The budget of `queue`, if it has one.
    pub fn of(&self, queue: &str) -> Option<u32> {
        self.by_queue.get(queue).copied()
    }

    /// No queue has a budget.
    pub fn is_empty(&self) -> bool {
        self.by_queue.is_empty()
    }

    /// Every budgeted queue with its budget, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.by_queue.iter().map(|(q, n)| (q.as_str(), *n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_not_named_or_named_with_zero_has_no_budget() {
        let budgets = QueueBudgets::new(BTreeMap::from([
            ("api".to_string(), 10),
            ("off".to_string(), 0),
        ]));
        assert_eq!(budgets.of("api"), Some(10));
        assert_eq!(budgets.of("off"), None);
        assert_eq!(budgets.of("default"), None);
        assert_eq!(budgets.iter().collect::<Vec<_>>(), vec![("api", 10)]);
        assert!(QueueBudgets::default().is_empty());
    }
}
