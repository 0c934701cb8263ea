//! Reloads (SIGHUP, `drover restart`): re-read the configuration in a task, then apply it —
//! pools added, resized, retired, and every worker replaced one by one with the new command.

use crate::config::{Balance, Member, PoolSpec, RunConfig};
use crate::master::pools::setup::{build_pool, pool_config, WorkerContext};
use crate::rules::autoscaling::fit_within;

use crate::master::pools::Pools;
use crate::rules::fleet_reload::FleetReload;
use crate::rules::queue_restart::{followed_path, QueueRestarts, ReleaseFollow};

use super::balancing::Autoscaling;
use super::events::Internal;
use super::{Master, Reloading};

/// What changes the pools while the master runs: reloads — SIGHUP, `drover restart`, a fleet
/// restart — and the autoscaler.
pub(super) struct Reconfiguring {
    /// Where the configuration comes from, the one running, what every worker gets.
    pub reloading: Reloading,
    /// Re-reads of the configuration running or asked for.
    pub rereads: Rereads,
    /// A restart of the whole fleet, as this master takes part in it (`rules::fleet_reload`).
    pub fleet_reload: FleetReload,
    /// Laravel's `queue:restart`, as the workers tell of it (`rules::queue_restart`).
    pub queue_restarts: QueueRestarts,
    /// A deploy that moved the application's path while a reload was under way
    /// (`rules::queue_restart`).
    pub release_follow: ReleaseFollow,
    /// The balancers of the `balance: auto` pools (`balancing`).
    pub autoscaling: Autoscaling,
}

impl Reconfiguring {
    pub(super) fn new(reloading: Reloading, pools: &Pools) -> Reconfiguring {
        Reconfiguring {
            autoscaling: Autoscaling::new(&reloading.current, pools),
            reloading,
            rereads: Rereads::default(),
            fleet_reload: FleetReload::default(),
            queue_restarts: QueueRestarts::default(),
            release_follow: ReleaseFollow::default(),
        }
    }
}

/// Whether a re-read of the configuration is running, and whether another was asked for
/// meanwhile: the deploy that asked may have changed the configuration after the running re-read
/// began, so it gets one more, once this one is applied; several requests meanwhile make one.
#[derive(Debug, Default)]
pub(super) struct Rereads {
    running: bool,
    /// Why the next re-read was asked for.
    again: Option<String>,
}

impl Rereads {
    /// A reload is asked for: true to start a re-read now, false when one is running (then
    /// another follows it).
    fn ask(&mut self, why: &str) -> bool {
        if self.running {
            self.again = Some(why.to_string());
            return false;
        }
        self.running = true;
        true
    }

    /// The running re-read came back: why the next one was asked for, if it was.
    fn done(&mut self) -> Option<String> {
        self.running = false;
        self.again.take()
    }

    /// A re-read is running (status's `reloading`).
    pub(super) fn running(&self) -> bool {
        self.running
    }
}

impl Master {
    /// A worker saw Laravel's `queue:restart` (or `horizon:terminate` without Horizon) of
    /// timestamp `at`: the first to tell of it starts a reload, as `drover restart` does — a new
    /// zygote from the release the application's path points to now, every worker replaced one
    /// by one — so the deploy script's `queue:restart` runs the new release's code.
    pub(super) fn on_queue_restart(&mut self, at: i64) {
        if self.reconfig.queue_restarts.heard(at) {
            self.start_reload("queue:restart");
        }
    }

    /// A worker started by a reload says hello from pid `pid`: if it runs another release than
    /// the application's path (a `current` symlink) resolves to now, a deploy moved the path while
    /// the reload was under way — its `queue:restart` landing on this reload — and the master
    /// reloads once more (`rules::queue_restart::ReleaseFollow`).
    /// The path compared is the worker's pool's own `cwd` where it has one (a pool that runs in
    /// another directory follows that one, and is never taken for a moved release).
    pub(super) fn follow_a_moved_release(&mut self, pool: &str, pid: u32) {
        if self.reconfig.rereads.running() {
            return;
        }
        let reloading = &self.reconfig.reloading;
        let Some(app) = followed_path(&reloading.current, reloading.source.cwd.as_deref(), pool)
        else {
            return;
        };
        let app = app.to_path_buf();
        let (Ok(now), Ok(runs)) = (
            std::fs::canonicalize(&app),
            std::fs::read_link(format!("/proc/{pid}/cwd")),
        ) else {
            return;
        };
        if self.reconfig.release_follow.moved(&runs, &now) {
            tracing::info!(
                runs = %runs.display(),
                now = %now.display(),
                "a worker of this reload runs {}, but {} points to {} now (a deploy moved it while the reload was under way): reloading again",
                runs.display(),
                app.display(),
                now.display()
            );
            self.start_reload("the application's path moved during the reload");
        }
    }

    /// SIGHUP or `drover restart`: read the configuration anew, then replace every worker one by
    /// one (new code, new settings); capacity never drops below the pool's size minus one.
    pub(super) fn start_reload(&mut self, why: &str) {
        if !self.life.running() {
            return;
        }
        if !self.reconfig.rereads.ask(why) {
            tracing::info!(
                why,
                "a reload is already re-reading the configuration; another follows when it is applied"
            );
            return;
        }
        tracing::info!(
            why,
            "reloading: re-reading the configuration, then replacing workers one by one"
        );
        self.life.notifier.reloading();
        let source = self.reconfig.reloading.source.clone();
        let tx = self.inbox.internal_tx.clone();
        tokio::spawn(async move {
            let reread = source.reread().await;
            let _ = tx.send(Internal::Reloaded(reread.map(|c| c.map(Box::new))));
        });
    }

    /// A re-read came back: apply it, then start the one asked for meanwhile, if any.
    /// NOTIFY drover_reloads: a fleet restart asked some master to reload; read whether it was
    /// this one (`rules::fleet_reload`).
    pub(super) fn read_fleet_reload(&mut self) {
        let store = self.store.clone();
        let tx = self.inbox.internal_tx.clone();
        let done = self.reconfig.fleet_reload.done();
        tokio::spawn(async move {
            let latest = store.fleet_reload(done).await;
            let _ = tx.send(Internal::FleetReload(latest));
        });
    }

    /// The newest fleet restart request made of this master: a new one reloads, as `drover
    /// restart` does.
    pub(super) fn on_fleet_reload(&mut self, latest: Result<i64, drover_broker::BrokerError>) {
        match latest {
            // A master that stops reloads nothing more; the restart moves on once its row goes.
            Ok(_) if !self.life.running() => {}
            Ok(latest) => {
                let reconfig = &mut self.reconfig;
                if reconfig
                    .fleet_reload
                    .requested(latest, reconfig.rereads.running())
                {
                    self.start_reload("drover:restart --fleet asked this master");
                }
            }
            Err(e) => {
                tracing::warn!(database = %self.store.address(), "{e}; a fleet restart's request is read again at the next one")
            }
        }
    }

    /// A reload was applied: the fleet restart request it answers, if any, is written to the
    /// node row (whoever restarts the fleet then waits for the workers to be replaced).
    fn fleet_reload_applied(&mut self) {
        let Some(answered) = self.reconfig.fleet_reload.applied() else {
            return;
        };
        tracing::info!(request = answered, "reloaded as a fleet restart asked");
        let store = self.store.clone();
        let tx = self.inbox.internal_tx.clone();
        tokio::spawn(async move {
            let latest = store.fleet_reload(answered).await;
            let _ = tx.send(Internal::FleetReload(latest));
        });
    }

    pub(super) fn on_reread(&mut self, result: Result<Option<Box<RunConfig>>, String>) {
        let again = self.reconfig.rereads.done();
        self.apply_reload(result);
        self.fleet_reload_applied();
        if let Some(why) = again {
            self.start_reload(&why);
        }
    }

    fn apply_reload(&mut self, result: Result<Option<Box<RunConfig>>, String>) {
        if !self.life.running() {
            return;
        }
        let config = self.config_to_apply(result);
        let context = self.reconfig.reloading.context.clone();
        // Each pool in fork mode gets a new zygote from the new release (or its line goes exec);
        // the old zygote exits with the last of its workers.
        let fill_now = match &context.zygotes {
            Some(zygotes) => zygotes.sync(&config, &context, true),
            None => Vec::new(),
        };
        // A pool given a longer outage grace: the node row must hold it before claims use it.
        self.store.want_grace(config.longest_outage_grace());
        let wanted = self.apply_pool_specs(&config, &context);
        self.retire_pools_not_in(&wanted);
        for line in fill_now {
            self.refill_pools_of(&line);
        }
        self.reconfig.autoscaling.reconfigure(&config, &self.pools);
        self.claimer.set_queue_rules(
            std::sync::Arc::new(config.queue_budgets()),
            std::sync::Arc::new(config.fair_queues()),
        );
        if let Some(schedule) = &self.reconfig.reloading.schedule {
            schedule.send_replace(config.schedule.clone());
        }
        self.reconfig.reloading.current = config;
        // config/drover.php's sizes hold again: those set from the console are over.
        self.forget_pool_sizes();
        let processes: usize = self.pools.iter().map(|p| p.pool().target()).sum();
        self.life
            .notifier
            .ready(&format!("{processes} workers; reloaded"));
    }

    /// The configuration a re-read brought, or, when there was none or it failed, the one
    /// running (its workers are replaced all the same).
    fn config_to_apply(&mut self, result: Result<Option<Box<RunConfig>>, String>) -> RunConfig {
        let new = match result {
            Ok(new) => new,
            Err(problem) => {
                tracing::error!("reload: {problem}; keeping the current configuration and replacing the workers with it");
                None
            }
        };
        match new {
            Some(new) => {
                self.warn_about_settings_needing_a_restart(&new);
                // The next reload asks the release that is current now.
                let source = &mut self.reconfig.reloading.source;
                source.reload_command = new.reload_command.clone();
                source.cwd = new.cwd.clone();
                *new
            }
            None => self.reconfig.reloading.current.clone(),
        }
    }

    /// Every pool (and per-queue member) of `config`: an existing one takes its new settings and
    /// size and replaces its workers, a new one starts. Returns their names.
    fn apply_pool_specs(&mut self, config: &RunConfig, context: &WorkerContext) -> Vec<String> {
        let mut wanted = Vec::new();
        for spec in &config.pools {
            let members = spec.members();
            let sizes = self.sizes_after_reload(spec, &members);
            for (member, size) in members.into_iter().zip(sizes) {
                wanted.push(member.name.clone());
                match self.pools.named(&member.name) {
                    Some(index) => {
                        let pool_cfg = pool_config(config, spec, &member, context);
                        let p = &mut self.pools[index];
                        if let Err(e) = p.reload(pool_cfg) {
                            tracing::error!(pool = %member.name, "reload: {e}; the pool keeps its workers as they are");
                            continue;
                        }
                        p.retired = false;
                        p.queues = member.queues.clone();
                        p.policy = spec.policy();
                        p.set_memory_limit(spec.memory);
                        p.scale_to(size);
                        self.claimer.want(index);
                    }
                    None => {
                        let paused = self.pools.paused_as_a_whole(&spec.name);
                        let events = self.inbox.workers_tx.clone();
                        match build_pool(config, spec, &member, context, events) {
                            Ok(mut pool) => {
                                tracing::info!(pool = %member.name, processes = member.processes, paused, "reload: starting a new pool");
                                // A member added to a pool the operator paused (`drover pause
                                // --pool`) is paused too: its workers learn it at hello.
                                pool.paused = paused;
                                pool.start_retrying();
                                self.pools.add(pool);
                            }
                            Err(e) => tracing::error!(pool = %member.name, "reload: {e}"),
                        }
                    }
                }
            }
        }
        wanted
    }

    /// Pools no longer in the configuration retire: their workers finish their jobs and stop.
    fn retire_pools_not_in(&mut self, wanted: &[String]) {
        for p in &mut self.pools {
            if !wanted.iter().any(|name| name == p.pool().name()) && !p.retired {
                tracing::info!(pool = p.pool().name(), "reload: the pool is gone from the configuration; its workers finish their jobs and stop");
                p.retired = true;
                p.scale_to(0);
            }
        }
    }

    /// The size of each of `spec`'s members after a reload: the configured one, but an autoscaled
    /// queue keeps its current size, within the new bounds — each member's and the pool's in
    /// all (a lower `max_processes` takes from the largest at once, not a step per cooldown).
    fn sizes_after_reload(&self, spec: &PoolSpec, members: &[Member]) -> Vec<usize> {
        let mut sizes: Vec<usize> = members
            .iter()
            .map(|m| match (spec.balance, self.pools.named(&m.name)) {
                (Balance::Auto, Some(index)) => self.pools[index]
                    .pool()
                    .target()
                    .clamp(spec.min_processes, spec.max_processes()),
                _ => m.processes,
            })
            .collect();
        if spec.balance == Balance::Auto {
            fit_within(&mut sizes, spec.min_processes, spec.max_processes());
        }
        sizes
    }

    /// Settings a reload cannot change in a running master.
    pub(super) fn warn_about_settings_needing_a_restart(&self, new: &RunConfig) {
        let changed = self
            .reconfig
            .reloading
            .current
            .changes_needing_a_restart(new);
        if !changed.is_empty() {
            tracing::warn!("reload: {} changed; these take effect at the next start of the master (systemctl restart drover), the rest is applied now", changed.join(", "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rereads;

    #[test]
    fn requests_during_a_reread_make_one_more_reload_after_it() {
        let mut r = Rereads::default();
        assert!(r.ask("SIGHUP"), "the first starts at once");
        assert!(r.running());
        assert!(!r.ask("deploy 1"));
        assert!(!r.ask("deploy 2"));
        assert_eq!(
            r.done().as_deref(),
            Some("deploy 2"),
            "one more, for the latest"
        );
        assert!(!r.running());
        assert!(r.ask("deploy 2"));
        assert_eq!(r.done(), None, "nothing asked meanwhile: no further reload");
    }
}
