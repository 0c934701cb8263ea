//! How a worker (or a zygote, which runs the workers' command) is started: the command line,
//! environment, directory, nice value and user — [`WorkerCommand`], with the user as [`RunAs`].

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
    /// The user to run as (set when the master runs as root); `None` keeps the master's.
    pub run_as: Option<RunAs>,
}

/// An OS user a worker runs as: resolved once by the master, applied between fork and exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the user's memberships in /etc/group).
    pub groups: Vec<u32>,
    pub home: PathBuf,
}

impl RunAs {
    /// Looks a user up by name, with its groups.
    pub fn lookup(name: &str) -> Result<RunAs, String> {
        let user = nix::unistd::User::from_name(name)
            .map_err(|e| format!("looking up user {name:?}: {e}"))?
            .ok_or_else(|| {
                format!(
                    "user {name:?} does not exist on this machine; create it or set another user"
                )
            })?;
        let cname = std::ffi::CString::new(name).map_err(|_| format!("user {name:?}: bad name"))?;
        let groups = nix::unistd::getgrouplist(&cname, user.gid)
            .map_err(|e| format!("reading the groups of user {name:?}: {e}"))?;
        Ok(RunAs {
            name: name.to_string(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups: groups.iter().map(|g| g.as_raw()).collect(),
            home: user.dir,
        })
    }
}
