//! Autoscaling of a `balance: auto` pool: each of its queues has its own workers (a member pool
//! `pool:queue`), and every `balance_cooldown` the balancer moves workers toward the queues that
//! need them.
//!
//! The decision, from the broker's own state — one statement per cooldown counts every queue's
//! backlog (capped), and the master measures each queue's average run time from the `started` and
//! `done` frames it already receives:
//!
//! - weight of a queue = backlog × average run time (`time`) or backlog (`size`);
//! - desired workers = its share of `max_processes` by weight, at least `min_processes`; with no
//!   backlog anywhere every queue wants `min_processes`;
//! - a queue below its desire gains up to `balance_max_shift` workers per cooldown, as long as the
//!   pool stays within `max_processes`;
//! - a queue above it loses up to `balance_max_shift` per cooldown, but only after wanting fewer for
//!   `scale_down_delay` without a break — so an empty queue sits at its minimum and a burst that
//!   pauses for a moment keeps its workers (no flapping).
//!
//! [`Balancer::decide`] is pure (targets in, targets out) and tested without processes.

use std::time::{Duration, Instant};

use crate::config::{PoolSpec, Strategy};

/// One `auto` pool's balancing state.
#[derive(Debug)]
pub struct Balancer {
    /// The pool's name in the configuration.
    pub name: String,
    /// Its member pools by name (`pool:queue`), one per queue, in queue order.
    pub members: Vec<String>,
    pub strategy: Strategy,
    pub min: usize,
    pub max: usize,
    pub max_shift: usize,
    pub cooldown: Duration,
    pub scale_down_delay: Duration,
    /// When the last decision was taken.
    pub last: Option<Instant>,
    /// A backlog count is running.
    pub counting: bool,
    /// Per member: since when it has wanted fewer workers without a break.
    wants_fewer_since: Vec<Option<Instant>>,
}

/// What the balancer knows of one queue at a decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueLoad {
    /// Jobs waiting.
    pub backlog: i64,
    /// Average run time of its jobs, if any ran yet.
    pub runtime: Option<Duration>,
    /// Workers it has now.
    pub current: usize,
    /// The queue's fleet-wide budget (`queue_budgets`): no more jobs of it run at once across
    /// the fleet, so more workers than that on this host would only wait. `None`: no budget.
    pub budget: Option<usize>,
}

impl Balancer {
    pub fn new(spec: &PoolSpec, members: Vec<String>) -> Balancer {
        Balancer {
            name: spec.name.clone(),
            wants_fewer_since: vec![None; members.len()],
            members,
            strategy: spec.autoscaling_strategy,
            min: spec.min_processes,
            max: spec.max_processes(),
            max_shift: spec.balance_max_shift,
            cooldown: Duration::from_secs_f64(spec.balance_cooldown),
            scale_down_delay: Duration::from_secs_f64(spec.scale_down_delay),
            last: None,
            counting: false,
        }
    }

    /// A reload rebuilt this balancer from the new configuration: it keeps what the one it
    /// replaces knew — when it last decided, whether a count is on its way (its result comes back
    /// by the pool's name and lands here), and, over the same members, how long each has wanted
    /// fewer workers — so a reload neither starts a second count nor resets the cooldowns.
    pub fn carry_over(&mut self, old: Balancer) {
        self.last = old.last;
        self.counting = old.counting;
        if old.members == self.members {
            self.wants_fewer_since = old.wants_fewer_since;
        }
    }

    /// A decision is due.
    pub fn due(&self, now: Instant) -> bool {
        !self.counting && self.last.is_none_or(|t| now >= t + self.cooldown)
    }

    /// What each queue wants, by its share of the weight.
    fn desired(&self, loads: &[QueueLoad]) -> Vec<usize> {
        // A queue whose jobs never ran yet counts as the average of the others (or 1 s).
        let known: Vec<f64> = loads
            .iter()
            .filter_map(|l| l.runtime.map(|r| r.as_secs_f64()))
            .collect();
        let fallback = if known.is_empty() {
            1.0
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        };
        let weights: Vec<f64> = loads
            .iter()
            .map(|l| {
                let backlog = l.backlog.max(0) as f64;
                match self.strategy {
                    Strategy::Size => backlog,
                    Strategy::Time => {
                        backlog
                            * l.runtime
                                .map(|r| r.as_secs_f64())
                                .unwrap_or(fallback)
                                .max(1e-3)
                    }
                }
            })
            .collect();
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return vec![self.min; loads.len()];
        }
        // A queue's share is at most its budget (never below the minimum); what a capped queue
        // cannot use is shared among the others by their weights, until no share exceeds a cap.
        let caps: Vec<usize> = loads
            .iter()
            .map(|l| l.budget.map_or(self.max, |b| b.max(self.min)))
            .collect();
        let mut capped = vec![false; loads.len()];
        let mut desired = vec![0usize; loads.len()];
        loop {
            let left = self.max.saturating_sub(
                (0..loads.len())
                    .filter(|&i| capped[i])
                    .map(|i| caps[i])
                    .sum::<usize>(),
            );
            let open: f64 = (0..loads.len())
                .filter(|&i| !capped[i])
                .map(|i| weights[i])
                .sum();
            for i in 0..loads.len() {
                desired[i] = match capped[i] {
                    true => caps[i],
                    false if open > 0.0 => ((weights[i] / open) * left as f64).round() as usize,
                    false => 0,
                }
                .clamp(self.min, self.max);
            }
            let over: Vec<usize> = (0..loads.len())
                .filter(|&i| !capped[i] && desired[i] > caps[i])
                .collect();
            if over.is_empty() {
                break;
            }
            for i in over {
                capped[i] = true;
                desired[i] = caps[i];
            }
        }
        // Rounding and the minimums can ask for more than max.
        fit_within(&mut desired, self.min, self.max);
        desired
    }

    /// New worker counts per member (same order as `loads`).
    pub fn decide(&mut self, loads: &[QueueLoad], now: Instant) -> Vec<usize> {
        self.last = Some(now);
        let desired = self.desired(loads);
        let mut targets: Vec<usize> = loads.iter().map(|l| l.current).collect();
        // Shrink first, so what is freed can go to the queues that grow.
        for (i, want) in desired.iter().enumerate() {
            let current = targets[i];
            if *want < current {
                let since = *self.wants_fewer_since[i].get_or_insert(now);
                if now >= since + self.scale_down_delay {
                    let step = self.max_shift.min(current - *want);
                    targets[i] = (current - step).max(self.min);
                }
            } else {
                self.wants_fewer_since[i] = None;
            }
        }
        for (i, want) in desired.iter().enumerate() {
            let current = targets[i];
            if *want > current {
                let room = self.max.saturating_sub(targets.iter().sum::<usize>());
                targets[i] = current + self.max_shift.min(*want - current).min(room);
            }
        }
        targets
    }
}

/// Brings the sizes of a pool's members within its maximum in all, taking one at a time from the
/// largest member above `min` (of equals, the last: the lowest-priority queue); sizes already
/// within it stay as they are. Used for the balancer's wishes and for a reload that lowered
/// `max_processes` under what the members run.
pub fn fit_within(sizes: &mut [usize], min: usize, max: usize) {
    while sizes.iter().sum::<usize>() > max {
        let Some((i, _)) = sizes
            .iter()
            .enumerate()
            .filter(|(_, d)| **d > min)
            .max_by_key(|(_, d)| **d)
        else {
            break;
        };
        sizes[i] -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_over_the_maximum_give_from_the_largest_down_to_the_minimum() {
        let mut sizes = [6, 1, 1];
        fit_within(&mut sizes, 1, 4);
        assert_eq!(sizes, [2, 1, 1]);
        let mut sizes = [3, 3, 1];
        fit_within(&mut sizes, 1, 6);
        assert_eq!(sizes, [3, 2, 1], "of equals, the last gives first");
        fit_within(&mut sizes, 1, 5);
        assert_eq!(sizes, [2, 2, 1], "then the largest again");
        let mut within = [2, 1];
        fit_within(&mut within, 1, 4);
        assert_eq!(within, [2, 1], "within the maximum: unchanged");
        let mut floor = [1, 1, 1];
        fit_within(&mut floor, 1, 2);
        assert_eq!(floor, [1, 1, 1], "never below the minimum");
    }

    fn members() -> Vec<String> {
        vec!["p:a".into(), "p:b".into(), "p:c".into()]
    }

    fn spec(strategy: &str) -> PoolSpec {
        serde_json::from_value(serde_json::json!({
            "name": "p", "queues": ["a", "b", "c"], "processes": 6, "command": ["x"],
            "balance": "auto", "min_processes": 1, "max_processes": 6, "balance_max_shift": 1,
            "balance_cooldown": 1, "scale_down_delay": 5, "autoscaling_strategy": strategy,
        }))
        .unwrap()
    }

    fn load(backlog: i64, ms: u64, current: usize) -> QueueLoad {
        QueueLoad {
            budget: None,
            backlog,
            runtime: Some(Duration::from_millis(ms)),
            current,
        }
    }

    #[test]
    fn a_backlog_draws_workers_one_shift_per_decision_within_the_maximum() {
        let mut b = Balancer::new(&spec("time"), members());
        let t = Instant::now();
        let mut current = vec![1, 1, 1];
        let mut seen = Vec::new();
        for k in 0..6 {
            let loads: Vec<QueueLoad> = current
                .iter()
                .enumerate()
                .map(|(i, c)| load(if i == 0 { 1000 } else { 0 }, 50, *c))
                .collect();
            current = b.decide(&loads, t + Duration::from_secs(k));
            assert!(current.iter().sum::<usize>() <= 6);
            seen.push(current[0]);
        }
        assert_eq!(
            seen,
            vec![2, 3, 4, 4, 4, 4],
            "one step per decision up to 6 - 2 minimums"
        );
        assert_eq!(&current[1..], &[1, 1], "empty queues keep their minimum");
    }

    #[test]
    fn a_budgeted_queue_gets_no_more_workers_than_its_budget_and_the_rest_go_to_the_others() {
        let mut b = Balancer::new(&spec("size"), members());
        let t = Instant::now();
        let mut current = vec![1, 1, 1];
        for k in 0..8 {
            let loads = [
                QueueLoad {
                    budget: Some(2),
                    ..load(1000, 50, current[0])
                },
                load(100, 50, current[1]),
                load(0, 50, current[2]),
            ];
            current = b.decide(&loads, t + Duration::from_secs(k));
        }
        assert_eq!(
            current,
            vec![2, 3, 1],
            "the budget's 2 (not 5 of 6 by its backlog); the second queue takes what is left"
        );
        // Without the budget the first queue's backlog would take the pool.
        let mut plain = Balancer::new(&spec("size"), members());
        let mut current = vec![1, 1, 1];
        for k in 0..8 {
            let loads = [
                load(1000, 50, current[0]),
                load(100, 50, current[1]),
                load(0, 50, current[2]),
            ];
            current = plain.decide(&loads, t + Duration::from_secs(k));
        }
        assert_eq!(current, vec![4, 1, 1]);
    }

    #[test]
    fn scaling_down_waits_for_the_delay_and_an_empty_pool_sits_at_its_minimum() {
        let mut b = Balancer::new(&spec("size"), members());
        let t = Instant::now();
        let empty = [load(0, 50, 4), load(0, 50, 1), load(0, 50, 1)];
        // Wants 1, has 4: nothing for 5 s, then one worker per decision.
        assert_eq!(b.decide(&empty, t), vec![4, 1, 1]);
        assert_eq!(b.decide(&empty, t + Duration::from_secs(4)), vec![4, 1, 1]);
        assert_eq!(b.decide(&empty, t + Duration::from_secs(5)), vec![3, 1, 1]);
        let now = [load(0, 50, 3), load(0, 50, 1), load(0, 50, 1)];
        assert_eq!(b.decide(&now, t + Duration::from_secs(6)), vec![2, 1, 1]);
        // A burst resets the delay.
        let burst = [load(100, 50, 2), load(0, 50, 1), load(0, 50, 1)];
        assert_eq!(b.decide(&burst, t + Duration::from_secs(7)), vec![3, 1, 1]);
        let quiet = [load(0, 50, 3), load(0, 50, 1), load(0, 50, 1)];
        assert_eq!(b.decide(&quiet, t + Duration::from_secs(8)), vec![3, 1, 1]);
        // At the minimum, an empty queue never moves.
        let idle = [load(0, 50, 1), load(0, 50, 1), load(0, 50, 1)];
        for k in 20..40 {
            assert_eq!(b.decide(&idle, t + Duration::from_secs(k)), vec![1, 1, 1]);
        }
    }

    #[test]
    fn time_weighs_slow_jobs_more_than_size_does() {
        let loads = [load(100, 1000, 2), load(100, 10, 2), load(0, 10, 2)];
        let time = Balancer::new(&spec("time"), members());
        assert_eq!(time.desired(&loads), vec![4, 1, 1]);
        let size = Balancer::new(&spec("size"), members());
        assert_eq!(size.desired(&loads), vec![3, 2, 1]);
    }

    #[test]
    fn a_reload_keeps_the_cooldown_and_the_count_in_flight_and_over_the_same_queues_the_scale_down_clocks(
    ) {
        let t0 = Instant::now();
        let loads = |current: [usize; 3]| {
            current.map(|current| QueueLoad {
                backlog: 0,
                runtime: None,
                current,
                budget: None,
            })
        };
        let mut old = Balancer::new(&spec("size"), members());
        // Every queue wants fewer (nothing waits), so each starts its scale-down clock now.
        old.decide(&loads([2, 2, 2]), t0);
        old.counting = true;
        let mut new = Balancer::new(&spec("size"), members());
        new.carry_over(old);
        assert_eq!(new.last, Some(t0));
        assert!(new.counting, "a count in flight is not started twice");
        assert!(!new.due(t0 + Duration::from_secs(60)));
        // The clocks carried over: past the delay, the queues shrink at once.
        new.counting = false;
        let later = t0 + new.scale_down_delay + new.cooldown;
        assert_eq!(new.decide(&loads([2, 2, 2]), later), vec![1, 1, 1]);

        // Over other queues the clocks start again.
        let mut old = Balancer::new(&spec("size"), members());
        old.decide(&loads([2, 2, 2]), t0);
        let mut other = Balancer::new(
            &spec("size"),
            vec!["p:a".into(), "p:b".into(), "p:d".into()],
        );
        other.carry_over(old);
        assert_eq!(other.decide(&loads([2, 2, 2]), later), vec![2, 2, 2]);
    }
}
