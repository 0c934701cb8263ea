//! How a worker (or a zygote, which runs the workers' command) is started: the command line,
//! environment, directory and nice value — [`WorkerCommand`]. Workers run as the master's own
//! user: a master never switches users (the root crate's `privileges`).

use std::ffi::OsString;
use std::path::PathBuf;

/// How to start a worker process.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    /// The program, e.g. `php`.
    pub program: PathBuf,
    /// Its arguments, e.g. `["artisan", "drover:work"]`.
    pub args: Vec<OsString>,
    /// Extra environment variables (the master adds `DROVER_MASTER_PID` and `DROVER_WORKER_ID`).
    pub env: Vec<(OsString, OsString)>,
    /// Working directory; default the master's.
    pub cwd: Option<PathBuf>,
    /// Scheduling priority (nice, -20 to 19); `None` keeps the master's.
    pub nice: Option<i32>,
}
