//! Where a scheduled run may be forked from instead of started: a pool's zygote, which booted the
//! application once (zygote protocol 2's one-offs, `drover_supervisor::one_off`). A run forked so
//! starts within milliseconds of its due time and costs no boot; a pool without a ready zygote
//! that runs one-offs leaves the run to the run command.

use std::collections::BTreeMap;

use drover_supervisor::OneOff;

use crate::master::pools::setup::Zygotes;

/// The master's zygotes, as the scheduler asks them for runs.
pub trait Forks: Send + Sync {
    /// A one-off running `run` forked from the zygote of pool `pool`, or why there is none.
    fn one_off(&self, pool: &str, run: BTreeMap<String, String>) -> Result<OneOff, String>;
}

impl Forks for Zygotes {
    fn one_off(&self, pool: &str, run: BTreeMap<String, String>) -> Result<OneOff, String> {
        let line = self
            .get(pool)
            .ok_or_else(|| format!("the pool {pool} does not fork its workers"))?;
        line.fork_one_off(run, BTreeMap::new())
    }
}

/// What a run of a task asks the zygote to run (`WorkCommand::runOneOff` in the package): with
/// `due` (Unix seconds) when it is a due time of the schedule, for Laravel's `onOneServer()`
/// mutex (a package of the previous release ignores the key).
pub fn schedule_request(key: &str, index: u32, due: Option<i64>) -> BTreeMap<String, String> {
    let mut request = BTreeMap::from([
        ("kind".to_string(), "schedule".to_string()),
        ("task".to_string(), key.to_string()),
        ("index".to_string(), index.to_string()),
    ]);
    if let Some(due) = due {
        request.insert("due".to_string(), due.to_string());
    }
    request
}
