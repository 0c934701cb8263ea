//! The one verdict on whether a master serves its queues, for `drover status`, `php artisan
//! drover:status` and their exit codes (0 serving, 1 paused, 3 degraded; 2 is "no master", which
//! only a client can tell). A pure function of what the master knows, unit-tested without
//! processes; the status answer carries its result, so no client derives it again.

use serde::{Deserialize, Serialize};

/// The verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Every pool has a worker serving and no circuit is open.
    Serving,
    /// Paused by an operator (`drover pause`, SIGUSR2): jobs wait, nothing is wrong.
    Paused,
    /// Some queue is not being served: a circuit is open, a pool has no worker serving, the
    /// master is shutting down, or it has no pools at all.
    Degraded,
}

impl Health {
    /// The exit code of `drover status` and `php artisan drover:status`.
    pub fn exit_code(self) -> i32 {
        match self {
            Health::Serving => 0,
            Health::Paused => 1,
            Health::Degraded => 3,
        }
    }
}

/// What the verdict looks at, per pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolView {
    pub name: String,
    /// Workers the pool wants (0 for a pool that was reloaded away or scaled to nothing).
    pub wanted: usize,
    /// Workers that said hello and are not retiring.
    pub serving: usize,
    /// The restart circuit is open: the pool starts no worker until it closes.
    pub circuit_open: bool,
    /// Failed starts in a row (for the message).
    pub failures_in_a_row: u32,
    /// Gone from the configuration; its last workers finish and stop.
    pub retired: bool,
    /// Paused on its own (`drover pause --pool`).
    pub paused: bool,
}

/// The verdict and, when degraded, every reason (one line each, naming the pool).
pub fn assess(running: bool, paused: bool, pools: &[PoolView]) -> (Health, Vec<String>) {
    let mut reasons = Vec::new();
    if !running {
        reasons.push("the master is shutting down".to_string());
    }
    let live: Vec<&PoolView> = pools.iter().filter(|p| !p.retired).collect();
    if live.is_empty() {
        reasons.push("no pools: this master runs no workers (does drover.environments have an entry for this environment?)".to_string());
    }
    for p in live {
        if p.circuit_open {
            reasons.push(format!(
                "pool {}: circuit open after {} failed starts in a row; no worker is started until it closes (see the log for why they died)",
                p.name, p.failures_in_a_row
            ));
        } else if p.wanted > 0 && p.serving == 0 {
            reasons.push(format!(
                "pool {}: no worker serving (0 of {})",
                p.name, p.wanted
            ));
        }
    }
    let health = if !reasons.is_empty() {
        Health::Degraded
    } else if paused || pools.iter().any(|p| p.paused && !p.retired) {
        Health::Paused
    } else {
        Health::Serving
    };
    (health, reasons)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, wanted: usize, serving: usize) -> PoolView {
        PoolView {
            name: name.into(),
            wanted,
            serving,
            circuit_open: false,
            failures_in_a_row: 0,
            retired: false,
            paused: false,
        }
    }

    #[test]
    fn one_paused_pool_makes_the_master_paused_unless_something_is_wrong() {
        let mut mail = pool("mail", 1, 1);
        mail.paused = true;
        let (health, reasons) = assess(true, false, &[pool("default", 2, 2), mail.clone()]);
        assert_eq!((health, reasons.len()), (Health::Paused, 0));
        let (health, _) = assess(true, false, &[pool("default", 2, 0), mail]);
        assert_eq!(health, Health::Degraded, "a pool with no worker still wins");
    }

    #[test]
    fn every_pool_serving_is_serving_and_a_pause_is_paused() {
        let pools = [pool("default", 2, 2), pool("mail", 1, 1)];
        assert_eq!(assess(true, false, &pools), (Health::Serving, vec![]));
        assert_eq!(assess(true, true, &pools), (Health::Paused, vec![]));
        assert_eq!(Health::Serving.exit_code(), 0);
        assert_eq!(Health::Paused.exit_code(), 1);
    }

    #[test]
    fn an_open_circuit_is_degraded_even_while_old_workers_serve() {
        let mut p = pool("default", 2, 2);
        p.circuit_open = true;
        p.failures_in_a_row = 5;
        let (health, reasons) = assess(true, false, &[p]);
        assert_eq!(health, Health::Degraded);
        assert_eq!(health.exit_code(), 3);
        assert!(
            reasons[0].contains("pool default: circuit open after 5"),
            "{reasons:?}"
        );
    }

    #[test]
    fn a_pool_with_no_worker_serving_is_degraded_and_wins_over_a_pause() {
        let (health, reasons) = assess(true, true, &[pool("default", 2, 2), pool("mail", 3, 0)]);
        assert_eq!(health, Health::Degraded);
        assert_eq!(reasons, vec!["pool mail: no worker serving (0 of 3)"]);
    }

    #[test]
    fn retired_and_empty_pools_do_not_count_but_no_pools_at_all_does() {
        let mut old = pool("old", 0, 0);
        old.retired = true;
        assert_eq!(
            assess(
                true,
                false,
                &[pool("default", 1, 1), old.clone(), pool("idle", 0, 0)]
            )
            .0,
            Health::Serving
        );
        let (health, reasons) = assess(true, false, &[old]);
        assert_eq!(health, Health::Degraded);
        assert!(reasons[0].starts_with("no pools"), "{reasons:?}");
    }

    #[test]
    fn a_master_shutting_down_is_degraded() {
        let (health, reasons) = assess(false, false, &[pool("default", 1, 1)]);
        assert_eq!(health, Health::Degraded);
        assert_eq!(reasons, vec!["the master is shutting down"]);
    }
}
