//! Autoscaling of `balance: auto` pools: count the queues once per cooldown, let the balancer
//! decide, scale the member pools.

use std::time::{Duration, Instant};

use crate::config::{Balance, RunConfig};
use crate::master::pools::{PoolId, Pools};
use crate::rules::autoscaling::{Balancer, QueueLoad};

use super::{Internal, Master, Phase};

impl Master {
    /// Autoscaling pools whose cooldown passed: count their queues (one statement per pool).
    pub(super) fn start_balancing(&mut self, now: Instant) {
        if self.phase != Phase::Running {
            return;
        }
        for b in &mut self.balancers {
            if !b.due(now) {
                continue;
            }
            b.counting = true;
            let queues: Vec<String> = b
                .members
                .iter()
                .filter_map(|m| self.pools.named(m))
                .flat_map(|m| self.pools[m].queues.clone())
                .collect();
            let broker = self.broker.clone();
            let tx = self.internal_tx.clone();
            let name = b.name.clone();
            tokio::spawn(async move {
                let result = match tokio::time::timeout(
                    Duration::from_secs(5),
                    broker.backlog(&queues, 1_000_000),
                )
                .await
                {
                    Ok(r) => r,
                    Err(_) => Err(drover_broker::BrokerError::TimedOut {
                        about: "counting the queues' backlog",
                    }),
                };
                let _ = tx.send(Internal::Counted {
                    balancer: name,
                    result,
                });
            });
        }
    }

    /// The count of balancer `name`'s queues came back: decide and scale its member pools.
    pub(super) fn balance(
        &mut self,
        name: &str,
        result: Result<Vec<(String, i64)>, drover_broker::BrokerError>,
    ) {
        // Gone when a reload dropped the pool (or its `balance: auto`) meanwhile.
        let Some(b) = self.balancers.iter_mut().find(|b| b.name == name) else {
            return;
        };
        b.counting = false;
        let counts = match result {
            Ok(c) => c,
            Err(e) => {
                b.last = Some(Instant::now());
                tracing::warn!(pool = %b.name, "autoscaling skipped: {e}");
                return;
            }
        };
        if self.phase != Phase::Running || self.paused {
            b.last = Some(Instant::now());
            return;
        }
        // Every member is a pool: a balancer is built over pools that exist, and none is removed.
        let Some(members) = b
            .members
            .iter()
            .map(|m| self.pools.named(m))
            .collect::<Option<Vec<PoolId>>>()
        else {
            return;
        };
        let loads: Vec<QueueLoad> = members
            .iter()
            .map(|&m| {
                let p = &self.pools[m];
                QueueLoad {
                    backlog: counts
                        .iter()
                        .find(|(q, _)| p.queues.first() == Some(q))
                        .map(|(_, n)| *n)
                        .unwrap_or(0),
                    runtime: p.runtime,
                    current: p.pool.target(),
                }
            })
            .collect();
        let targets = b.decide(&loads, Instant::now());
        for ((m, target), load) in members.into_iter().zip(targets).zip(loads) {
            if target == load.current {
                continue;
            }
            let p = &mut self.pools[m];
            tracing::info!(
                pool = p.pool.name(),
                from = load.current,
                to = target,
                backlog = load.backlog,
                "autoscaling: {} {} → {} workers",
                p.pool.name(),
                load.current,
                target
            );
            p.scale_to(target);
            p.claim_wanted = true;
        }
    }
}

/// A balancer for every `balance: auto` pool of the configuration, over its member pools; on a
/// reload, each takes over the state of the balancer of the same pool in `old`.
pub(super) fn balancers_for(
    config: &RunConfig,
    pools: &Pools,
    old: Vec<Balancer>,
) -> Vec<Balancer> {
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
