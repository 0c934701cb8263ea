//! A pool's size set from the console (`drover.pool_sizes`): what the master does with it. Pure,
//! unit-tested; the master's part is `master::pool_sizes`.

/// The most processes the console may ask of one pool (the table's check says the same).
pub const MAX: i32 = 1000;

/// What to do with a size asked for a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Scale the pool to this many processes.
    Scale(usize),
    /// It has that many already.
    AsItIs,
    /// Not done, and why (said back to whoever asked).
    Refuse(String),
}

/// The pool as the master has it, for [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolNow {
    /// Processes it runs (its target).
    pub target: usize,
    /// Its workers follow its queues' backlog (`balance: auto`): the balancer sets its size.
    pub autoscaled: bool,
}

/// What becomes of `processes` asked for a pool that is `now` (None: no pool of that name here).
pub fn decide(pool: &str, processes: i32, now: Option<PoolNow>) -> Decision {
    let Some(now) = now else {
        return Decision::Refuse(format!(
            "this master has no pool named {pool:?} (a per-queue pool's members are named pool:queue)"
        ));
    };
    if now.autoscaled {
        return Decision::Refuse(format!(
            "pool {pool} is balanced by its queues' backlog (balance: auto): set its min and max in config/drover.php"
        ));
    }
    if !(0..=MAX).contains(&processes) {
        return Decision::Refuse(format!(
            "a pool's size is 0 to {MAX} processes, not {processes}"
        ));
    }
    let wanted = processes as usize;
    if wanted == now.target {
        Decision::AsItIs
    } else {
        Decision::Scale(wanted)
    }
}

/// The outcome recorded for a decision (what the console shows).
pub fn outcome(decision: &Decision) -> String {
    match decision {
        Decision::Scale(n) => format!("scaled to {n}"),
        Decision::AsItIs => "already that size".to_string(),
        Decision::Refuse(why) => format!("not scaled: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXED: PoolNow = PoolNow {
        target: 4,
        autoscaled: false,
    };

    #[test]
    fn a_fixed_pool_is_scaled_to_what_was_asked_and_left_as_it_is_when_it_has_it() {
        assert_eq!(decide("default", 2, Some(FIXED)), Decision::Scale(2));
        assert_eq!(decide("default", 0, Some(FIXED)), Decision::Scale(0));
        assert_eq!(decide("default", 4, Some(FIXED)), Decision::AsItIs);
        assert_eq!(outcome(&Decision::Scale(2)), "scaled to 2");
    }

    #[test]
    fn an_autoscaled_pool_an_unknown_one_and_a_size_out_of_range_are_refused_naming_why() {
        let auto = PoolNow {
            autoscaled: true,
            ..FIXED
        };
        assert!(
            matches!(decide("emails", 2, Some(auto)), Decision::Refuse(why) if why.contains("balance: auto"))
        );
        assert!(
            matches!(decide("nope", 2, None), Decision::Refuse(why) if why.contains("no pool named \"nope\""))
        );
        assert!(
            matches!(decide("default", 1001, Some(FIXED)), Decision::Refuse(why) if why.contains("0 to 1000"))
        );
        assert!(matches!(
            decide("default", -1, Some(FIXED)),
            Decision::Refuse(_)
        ));
        assert!(outcome(&decide("nope", 1, None)).starts_with("not scaled: "));
    }
}
