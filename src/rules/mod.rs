//! The master's decisions as pure functions and plain data, unit-tested without a database or
//! processes. The event loop (`master`) feeds them what happened and carries out what they say.
//!
//! - [`assignments`]: which worker holds which leased job, and how much more each may take
//!   (credit); every frame about a job is checked against it.
//! - [`held_job`]: what the master knows of a job it handed to a worker, until it is settled.
//! - [`claiming`]: when a pool claims, and how many jobs.
//! - [`worker_state`]: one worker's state and the one rule that moves it (may it get jobs?).
//! - [`job_policy`]: a job's own rules from its payload (timeout, class) and the pool's default.
//! - [`settle`]: every rule that turns the end of a job's attempt into a settle, and what each
//!   settle counts as.
//! - [`health`]: the one verdict on whether the master serves its queues (status exit codes).
//! - [`database_reach`]: since when the master cannot reach its database, from what its calls
//!   saw, and the problem status names meanwhile.
//! - [`autoscaling`]: the balancer of `balance: auto` pools (workers follow each queue's backlog).
//! - [`queue_pauses`]: the queues paused by name for every master, and when this master holds a
//!   pause (may confirm it to whoever paused).
//! - [`fleet_reload`]: a restart of the whole fleet, host by host: when a request starts a
//!   reload, and which request a reload answers.
//! - [`queue_restart`]: Laravel's `queue:restart`, told by the workers: one reload per restart.
//! - [`lease_deadlines`]: when the master, the lease guard, a worker and the reap act on a
//!   lease, with a pool's outage grace.
//! - [`pool_size`]: a pool's size set from the console, and what the master does with it.
//! - [`stop_request`]: an operator's request to stop a running job, and how the job is then
//!   settled.
//! - [`socket_room`]: what a worker's socket may hold while it runs a job, so a control frame is
//!   never stuck behind others.
//! - [`exit_code`]: how `drover` exits when it fails — 78 when only an operator can make a start
//!   succeed, which the units do not restart on.

pub mod assignments;
pub(crate) mod autoscaling;
pub(crate) mod claiming;
pub(crate) mod database_reach;
pub mod exit_code;
pub(crate) mod fleet_reload;
pub(crate) mod health;
pub mod held_job;
pub mod job_policy;
pub mod lease_deadlines;
pub(crate) mod pool_size;
pub(crate) mod queue_pauses;
pub(crate) mod queue_restart;
pub mod settle;
pub(crate) mod socket_room;
pub mod stop_request;
pub(crate) mod worker_state;
