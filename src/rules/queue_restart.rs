//! Laravel's `queue:restart` under drover (docs/deploy.md, "queue:restart and horizon:terminate"):
//! every worker that sees its cache key change tells the master (`queue_restart`, protocol 3),
//! and the master reloads — a new zygote from the release the application's path points to now,
//! the workers replaced one by one — once per restart, however many workers tell it.

use std::path::{Path, PathBuf};

use crate::config::RunConfig;

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

/// A reload runs the release the application's path (a deploy's `current`) points to when its
/// zygote starts. A deploy that moves the path while the reload is under way — its `queue:restart`
/// then lands on a reload already running: a fleet whose hosts deploy one after another shares
/// the cache, so each host's restart reloads every master — leaves the new workers on the
/// release before, and their restart baseline, read as they start, already holds that deploy's
/// restart: nobody would tell of it again. So when a reload's new worker says hello from another
/// release than the path resolves to now, the master reloads once more, once per release moved to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReleaseFollow {
    /// The release a reload was last started for because the path had moved.
    followed: Option<PathBuf>,
}

impl ReleaseFollow {
    /// A reload's new worker runs in `runs`, the application's path resolves to `now`: true when
    /// the master should reload again (the path moved, and not to a release it already reloaded
    /// for on this account).
    pub fn moved(&mut self, runs: &Path, now: &Path) -> bool {
        if runs == now || self.followed.as_deref() == Some(now) {
            return false;
        }
        self.followed = Some(now.to_path_buf());
        true
    }
}

/// The path whose release the workers of pool `pool` (a configured name, or `name:queue` for a
/// balanced pool's member) run: the pool's own `cwd`, else the configuration's, else the
/// contract's — where their worker processes start. `None`: nothing names one (the master's own
/// directory, which no deploy moves).
pub fn followed_path<'a>(
    config: &'a RunConfig,
    contract_cwd: Option<&'a Path>,
    pool: &str,
) -> Option<&'a Path> {
    let configured = pool.split_once(':').map_or(pool, |(name, _)| name);
    config
        .pools
        .iter()
        .find(|spec| spec.name == configured)
        .and_then(|spec| spec.cwd.as_deref())
        .or(config.cwd.as_deref())
        .or(contract_cwd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_with_its_own_directory_follows_that_one_and_the_others_the_applications() {
        let mut config = RunConfig::from_json(
            r#"{"version":1,"cwd":"/s/current","pools":[
                {"name":"default","queues":["default"],"processes":1,"command":["php","artisan","drover:work"]},
                {"name":"reports","queues":["reports"],"processes":1,"command":["php","artisan","drover:work"],"cwd":"/r/current"}]}"#,
        )
        .expect("a configuration");
        let contract = Some(Path::new("/contract"));
        assert_eq!(
            followed_path(&config, contract, "default"),
            Some(Path::new("/s/current"))
        );
        assert_eq!(
            followed_path(&config, contract, "reports:reports"),
            Some(Path::new("/r/current")),
            "a balanced pool's member is its pool's"
        );
        config.cwd = None;
        assert_eq!(followed_path(&config, contract, "default"), contract);
        assert_eq!(followed_path(&config, None, "default"), None);
    }

    #[test]
    fn a_reload_whose_workers_run_another_release_than_the_path_reloads_once_for_it() {
        let mut follow = ReleaseFollow::default();
        let (r3, r4, r5) = (
            Path::new("/s/releases/3"),
            Path::new("/s/releases/4"),
            Path::new("/s/releases/5"),
        );
        assert!(
            !follow.moved(r3, r3),
            "the workers run the release the path names"
        );
        assert!(follow.moved(r3, r4), "the path moved during the reload");
        assert!(!follow.moved(r3, r4), "another worker of that reload: once");
        assert!(!follow.moved(r4, r4), "the next reload's workers");
        assert!(follow.moved(r4, r5), "the next deploy's");
    }

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
