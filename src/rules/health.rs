//! The one verdict on whether a master serves its queues, for `drover status`, `php artisan
//! drover:status` and their exit codes (0 serving, 1 paused, 3 degraded, 5 degraded because the
//! database is unreachable; 2 "no master" and 4 "permission denied" only a client can tell). A
//! pure function of what the master knows, unit-tested without processes; the status answer
//! carries its result, so no client derives it again.

use serde::{Deserialize, Serialize};

use super::database_reach::DatabaseProblem;

/// The verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Every pool has a worker serving and no circuit is open.
    Serving,
    /// Paused by an operator (`drover pause`, SIGUSR2): jobs wait, nothing is wrong.
    Paused,
    /// Some queue is not being served: the database is unreachable, a circuit is open, a pool
    /// has no worker serving, the master is shutting down, or it has no pools at all.
    Degraded,
}

/// `drover status`'s exit code when the master is degraded because its database is unreachable,
/// whatever else is wrong (a pool whose workers were stopped for their lost leases follows from
/// it): the one cause to look at first.
pub const DATABASE_UNREACHABLE: i32 = 5;

/// The verdict with its exit code and, when degraded, every reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub health: Health,
    /// The exit code of `drover status` and `php artisan drover:status`: 0 serving, 1 paused,
    /// 3 degraded, [`DATABASE_UNREACHABLE`].
    pub exit_code: i32,
    /// One sentence each, naming the pool (or the database) and the fix.
    pub problems: Vec<String>,
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

/// The verdict and, when degraded, every reason (one line each, naming the pool); `database`:
/// the database is unreachable (`rules::database_reach`), reported first.
pub fn assess(
    running: bool,
    paused: bool,
    database: Option<&DatabaseProblem>,
    pools: &[PoolView],
) -> Verdict {
    let mut reasons: Vec<String> = database
        .map(DatabaseProblem::sentence)
        .into_iter()
        .collect();
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
    let exit_code = match health {
        Health::Degraded if database.is_some() => DATABASE_UNREACHABLE,
        Health::Degraded => 3,
        Health::Paused => 1,
        Health::Serving => 0,
    };
    Verdict {
        health,
        exit_code,
        problems: reasons,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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

    /// The verdict with no database problem, as (health, problems).
    fn verdict(running: bool, paused: bool, pools: &[PoolView]) -> (Health, Vec<String>) {
        let v = assess(running, paused, None, pools);
        (v.health, v.problems)
    }

    fn unreachable_for(secs: u64) -> DatabaseProblem {
        DatabaseProblem {
            unreachable_for: Duration::from_secs(secs),
            last_error: "cannot connect to PostgreSQL at db:5432/app: connection refused".into(),
        }
    }

    #[test]
    fn one_paused_pool_makes_the_master_paused_unless_something_is_wrong() {
        let mut mail = pool("mail", 1, 1);
        mail.paused = true;
        let (health, reasons) = verdict(true, false, &[pool("default", 2, 2), mail.clone()]);
        assert_eq!((health, reasons.len()), (Health::Paused, 0));
        let (health, _) = verdict(true, false, &[pool("default", 2, 0), mail]);
        assert_eq!(health, Health::Degraded, "a pool with no worker still wins");
    }

    #[test]
    fn every_pool_serving_is_serving_and_a_pause_is_paused() {
        let pools = [pool("default", 2, 2), pool("mail", 1, 1)];
        assert_eq!(verdict(true, false, &pools), (Health::Serving, vec![]));
        assert_eq!(verdict(true, true, &pools), (Health::Paused, vec![]));
        assert_eq!(assess(true, false, None, &pools).exit_code, 0);
        assert_eq!(assess(true, true, None, &pools).exit_code, 1);
    }

    #[test]
    fn an_open_circuit_is_degraded_even_while_old_workers_serve() {
        let mut p = pool("default", 2, 2);
        p.circuit_open = true;
        p.failures_in_a_row = 5;
        let v = assess(true, false, None, &[p]);
        assert_eq!((v.health, v.exit_code), (Health::Degraded, 3));
        assert!(
            v.problems[0].contains("pool default: circuit open after 5"),
            "{:?}",
            v.problems
        );
    }

    #[test]
    fn a_pool_with_no_worker_serving_is_degraded_and_wins_over_a_pause() {
        let (health, reasons) = verdict(true, true, &[pool("default", 2, 2), pool("mail", 3, 0)]);
        assert_eq!(health, Health::Degraded);
        assert_eq!(reasons, vec!["pool mail: no worker serving (0 of 3)"]);
    }

    #[test]
    fn retired_and_empty_pools_do_not_count_but_no_pools_at_all_does() {
        let mut old = pool("old", 0, 0);
        old.retired = true;
        assert_eq!(
            verdict(
                true,
                false,
                &[pool("default", 1, 1), old.clone(), pool("idle", 0, 0)]
            )
            .0,
            Health::Serving
        );
        let (health, reasons) = verdict(true, false, &[old]);
        assert_eq!(health, Health::Degraded);
        assert!(reasons[0].starts_with("no pools"), "{reasons:?}");
    }

    #[test]
    fn a_master_shutting_down_is_degraded() {
        let (health, reasons) = verdict(false, false, &[pool("default", 1, 1)]);
        assert_eq!(health, Health::Degraded);
        assert_eq!(reasons, vec!["the master is shutting down"]);
    }

    #[test]
    fn an_unreachable_database_degrades_a_serving_master_with_an_exit_code_of_its_own() {
        let problem = unreachable_for(12);
        let v = assess(true, false, Some(&problem), &[pool("default", 2, 2)]);
        assert_eq!((v.health, v.exit_code), (Health::Degraded, 5));
        assert_eq!(v.problems.len(), 1, "{:?}", v.problems);
        assert!(
            v.problems[0].starts_with("database unreachable for 12 s: "),
            "{:?}",
            v.problems
        );
        assert!(v.problems[0].contains("connection refused"));
        // Paused by an operator: still degraded, and still 5.
        let v = assess(true, true, Some(&problem), &[pool("default", 2, 2)]);
        assert_eq!((v.health, v.exit_code), (Health::Degraded, 5));
    }

    #[test]
    fn the_database_is_named_first_and_its_code_wins_over_the_problems_it_brings() {
        // Workers stopped for leases that could not be renewed: the pool has none serving.
        let v = assess(
            true,
            false,
            Some(&unreachable_for(20)),
            &[pool("default", 2, 0)],
        );
        assert_eq!(v.exit_code, DATABASE_UNREACHABLE);
        assert_eq!(v.problems.len(), 2);
        assert!(v.problems[0].starts_with("database unreachable for 20 s"));
        assert_eq!(v.problems[1], "pool default: no worker serving (0 of 2)");
        // Back: the pool's own problem is a 3 again.
        assert_eq!(
            assess(true, false, None, &[pool("default", 2, 0)]).exit_code,
            3
        );
    }
}
