//! Laravel's `queue:restart` under drover (docs/deploy.md, "queue:restart and horizon:terminate"):
//! every worker that sees its cache key change tells the master (`queue_restart`, protocol 3),
//! and the master reloads — a new zygote from the release the application's path points to now,
//! the workers replaced one by one — once per restart, however many workers tell it.

/// The restarts heard so far: only the newest matters.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueueRestarts {
    /// The timestamp of the restart this master last reloaded for (Laravel's cache key).
    reloaded_for: Option<i64>,
}

impl QueueRestarts {
    /// A worker saw the restart of timestamp `at`: true when the master should reload — the
    /// first to tell of a restart newer than the last one it reloaded for. Every other worker
    /// tells of the same restart until it is replaced; a key that went away (`at` 0: the cache
    /// was cleared, which Laravel's workers also take as a restart) counts once too.
    pub fn heard(&mut self, at: i64) -> bool {
        if self.reloaded_for.is_some_and(|seen| at <= seen) {
            return false;
        }
        self.reloaded_for = Some(at);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_worker_to_tell_of_a_restart_reloads_and_the_others_do_not() {
        let mut restarts = QueueRestarts::default();
        assert!(restarts.heard(1_700_000_000));
        assert!(
            !restarts.heard(1_700_000_000),
            "a second worker, same restart"
        );
        assert!(!restarts.heard(1_699_999_999), "an old one, told late");
        assert!(restarts.heard(1_700_000_060), "the next deploy's");
    }

    #[test]
    fn a_cleared_cache_counts_once_and_a_later_restart_still_reloads() {
        let mut restarts = QueueRestarts::default();
        assert!(restarts.heard(0));
        assert!(!restarts.heard(0));
        assert!(restarts.heard(1_700_000_000));
    }
}
