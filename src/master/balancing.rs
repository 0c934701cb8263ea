//! Autoscaling of `balance: auto` pools: count the queues once per cooldown, let the balancer
//! decide, scale the member pools.
//!
//! [`Autoscaling`] owns the balancers (one per `auto` pool, found by the pool's configured name,
//! so a count in flight across a reload reaches its own pool or none) and applies what they
//! decide to the pools; the loop only runs the counts, which need the database.

use std::time::{Duration, Instant};

use crate::config::{Balance, RunConfig};
use crate::master::pools::{PoolId, PoolRuntime, Pools};
use crate::rules::autoscaling::{Balancer, QueueLoad};

use super::events::Internal;
use super::Master;

/// The balancers of the configuration's `balance: auto` pools.
pub(super) struct Autoscaling {
    /// One per `auto` pool, in configuration order.
    balancers: Vec<Balancer>,
}

/// A backlog count a balancer is due for.
pub(super) struct Count {
    /// The balancer's pool, by its configured name.
    pub balancer: String,
    /// Its member pools' queues.
    pub queues: Vec<String>,
}

impl Autoscaling {
    /// A balancer for every `balance: auto` pool of `config`, over its member pools.
    pub(super) fn new(config: &RunConfig, pools: &Pools) -> Autoscaling {
        Autoscaling {
            balancers: balancers_for(config, pools, Vec::new()),
        }
    }

    /// After a reload: a balancer for every `auto` pool of `config`; each takes over the state of
    /// the balancer of the same pool before (its last decision, a count running).
    pub(super) fn reconfigure(&mut self, config: &RunConfig, pools: &Pools) {
        self.balancers = balancers_for(config, pools, std::mem::take(&mut self.balancers));
    }

    /// The balancer whose member `pool` is (a pool named `pool:queue`), if any.
    pub(super) fn of_member(&self, pool: &str) -> Option<&Balancer> {
        self.balancers
            .iter()
            .find(|b| b.members.iter().any(|m| m == pool))
    }

    /// The counts due at `now` (the cooldown passed and none is running); each balancer named is
    /// marked as counting until [`Autoscaling::counted`] hears back.
    pub(super) fn due(&mut self, now: Instant, pools: &Pools) -> Vec<Count> {
        let mut due = Vec::new();
        for b in &mut self.balancers {
            if !b.due(now) {
                continue;
            }
            b.counting = true;
            let queues = b
                .members
                .iter()
                .filter_map(|m| pools.named(m))
                .flat_map(|m| pools[m].queues.clone())
                .collect();
            due.push(Count {
                balancer: b.name.clone(),
                queues,
            });
        }
        due
    }

    /// The count of balancer `name`'s queues came back: decide and scale its member pools, or,
    /// when `may_scale` is false (the master is draining or paused), only note that a decision
    /// was due. A balancer a reload dropped meanwhile is gone: its count scales nothing. A member
    /// `idle` says can run nothing (its queue or the member itself is paused) weighs as no
    /// backlog: its jobs wait for the pause, not for workers, so the others may have them.
    /// Returns the pools it scaled.
    pub(super) fn counted(
        &mut self,
        name: &str,
        result: Result<Vec<(String, i64)>, drover_broker::BrokerError>,
        pools: &mut Pools,
        may_scale: bool,
        idle: impl Fn(&PoolRuntime) -> bool,
        budgets: &drover_broker::QueueBudgets,
    ) -> Vec<PoolId> {
        let mut scaled = Vec::new();
        let Some(b) = self.balancers.iter_mut().find(|b| b.name == name) else {
            return scaled;
        };
        b.counting = false;
        let counts = match result {
            Ok(c) => c,
            Err(e) => {
                b.last = Some(Instant::now());
                tracing::warn!(pool = %b.name, "autoscaling skipped: {e}");
                return scaled;
            }
        };
        if !may_scale {
            b.last = Some(Instant::now());
            return scaled;
        }
        // Every member is a pool: a balancer is built over pools that exist, and none is removed.
        let Some(members) = b
            .members
            .iter()
            .map(|m| pools.named(m))
            .collect::<Option<Vec<PoolId>>>()
        else {
            return scaled;
        };
        let loads: Vec<QueueLoad> = members
            .iter()
            .map(|&m| {
                let p = &pools[m];
                let backlog = counts
                    .iter()
                    .find(|(q, _)| p.queues.first() == Some(q))
                    .map(|(_, n)| *n)
                    .unwrap_or(0);
                QueueLoad {
                    backlog: if idle(p) { 0 } else { backlog },
                    runtime: p.runtime,
                    current: p.pool().target(),
                    budget: p
                        .queues
                        .first()
                        .and_then(|q| budgets.of(q))
                        .map(|n| n as usize),
                }
            })
            .collect();
        let targets = b.decide(&loads, Instant::now());
        for ((m, target), load) in members.into_iter().zip(targets).zip(loads) {
            if target == load.current {
                continue;
            }
            let p = &mut pools[m];
            tracing::info!(
                pool = p.pool().name(),
                from = load.current,
                to = target,
                backlog = load.backlog,
                "autoscaling: {} {} → {} workers",
                p.pool().name(),
                load.current,
                target
            );
            p.scale_to(target);
            scaled.push(m);
        }
        scaled
    }
}

impl Master {
    /// Autoscaling pools whose cooldown passed: count their queues (one statement per pool).
    pub(super) fn start_balancing(&mut self, now: Instant) {
        if !self.life.running() {
            return;
        }
        for Count { balancer, queues } in self.reconfig.autoscaling.due(now, &self.pools) {
            let store = self.store.clone();
            let tx = self.inbox.internal_tx.clone();
            tokio::spawn(async move {
                let result = match tokio::time::timeout(
                    Duration::from_secs(5),
                    store.backlog(&queues, 1_000_000),
                )
                .await
                {
                    Ok(r) => r,
                    Err(_) => Err(drover_broker::BrokerError::TimedOut {
                        about: "counting the queues' backlog",
                    }),
                };
                let _ = tx.send(Internal::Backlog { balancer, result });
            });
        }
    }

    /// The count of balancer `name`'s queues came back.
    pub(super) fn balance(
        &mut self,
        name: &str,
        result: Result<Vec<(String, i64)>, drover_broker::BrokerError>,
    ) {
        let may_scale = self.life.serving();
        let pauses = self.claimer.pauses();
        let idle = |p: &PoolRuntime| p.paused || p.queues.iter().all(|q| pauses.is_paused(q));
        let budgets = self.claimer.budgets().clone();
        let scaled = self.reconfig.autoscaling.counted(
            name,
            result,
            &mut self.pools,
            may_scale,
            idle,
            &budgets,
        );
        for pool in scaled {
            self.claimer.want(pool);
        }
    }
}

/// A balancer for every `balance: auto` pool of the configuration, over its member pools; on a
/// reload, each takes over the state of the balancer of the same pool in `old`.
fn balancers_for(config: &RunConfig, pools: &Pools, old: Vec<Balancer>) -> Vec<Balancer> {
    let mut old = old;
    config
        .pools
        .iter()
        .filter(|spec| spec.balance == Balance::Auto)
        .map(|spec| {
            let members = spec
                .members()
                .iter()
                .filter(|m| pools.named(&m.name).is_some())
                .map(|m| m.name.clone())
                .collect();
            let mut balancer = Balancer::new(spec, members);
            if let Some(i) = old.iter().position(|b| b.name == spec.name) {
                balancer.carry_over(old.swap_remove(i));
            }
            balancer
        })
        .collect()
}
