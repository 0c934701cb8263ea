//! Autoscaling of `balance: auto` pools: count the queues once per cooldown, let the balancer
//! decide, scale the member pools.

use super::*;

impl Master {
    /// Autoscaling pools whose cooldown passed: count their queues (one statement per pool).
    pub(super) fn start_balancing(&mut self, now: Instant) {
        if self.phase != Phase::Running {
            return;
        }
        for (index, b) in self.balancers.iter_mut().enumerate() {
            if !b.due(now) {
                continue;
            }
            b.counting = true;
            let queues: Vec<String> = b
                .members
                .iter()
                .flat_map(|m| self.pools[*m].queues.clone())
                .collect();
            let broker = self.broker.clone();
            let tx = self.internal_tx.clone();
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
                    balancer: index,
                    result,
                });
            });
        }
    }

    pub(super) fn balance(
        &mut self,
        index: usize,
        result: Result<Vec<(String, i64)>, drover_broker::BrokerError>,
    ) {
        let Some(b) = self.balancers.get_mut(index) else {
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
        let loads: Vec<QueueLoad> = b
            .members
            .iter()
            .map(|m| {
                let p = &self.pools[*m];
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
        let members = b.members.clone();
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
            for id in p.pool.scale_to(target) {
                p.assignments.transition(id, Transition::Retire);
            }
            p.claim_wanted = true;
        }
    }
}

/// A balancer for every `balance: auto` pool of the configuration, over its member pools.
pub(super) fn balancers_for(config: &RunConfig, pools: &[PoolRuntime]) -> Vec<Balancer> {
    config
        .pools
        .iter()
        .filter(|spec| spec.balance == Balance::Auto)
        .map(|spec| {
            let members = spec
                .members()
                .iter()
                .filter_map(|m| pools.iter().position(|p| p.pool.name() == m.name))
                .collect();
            Balancer::new(spec, members)
        })
        .collect()
}
