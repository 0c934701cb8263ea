//! Who drover runs as (docs/security.md, "Who runs as whom"). A master serves as one user — the
//! application's — and so do its workers, zygotes, scheduled runs and the commands it runs for the
//! application; it never switches users while it serves. Root is only ever a way in:
//!
//! - `drover launch --user USER --app APP` (what the packaged `drover@.service` runs, as root)
//!   becomes USER — its groups, gid and uid, for good — and only then execs `php APP/artisan
//!   drover`, so the application boots as USER and never as root ([`launch`]).
//! - `drover run` started as root with a `user` becomes it before it opens its state directory,
//!   its database or any socket ([`become_account`], decided by [`rules::at_run`]).
//!
//! - [`rules`]: the decisions, from user ids alone.
//! - [`Account`]: a user, resolved by name with its groups.

pub mod rules;

use std::convert::Infallible;
use std::ffi::{CString, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use nix::unistd::{Gid, Uid};

use crate::MasterError;
use rules::AtLaunch;

/// An OS user, resolved once by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its name, for messages and `USER`/`LOGNAME`.
    pub name: String,
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
    /// Every group it is a member of (the primary one included), as `initgroups` would set them.
    pub groups: Vec<u32>,
    /// Its home, for `HOME`.
    pub home: PathBuf,
}

impl Account {
    /// Looks a user up by name, with its groups.
    pub fn lookup(name: &str) -> Result<Account, String> {
        let user = nix::unistd::User::from_name(name)
            .map_err(|e| format!("looking up user {name:?}: {e}"))?
            .ok_or_else(|| {
                format!(
                    "user {name:?} does not exist on this machine; create it or set another user"
                )
            })?;
        let cname = CString::new(name).map_err(|_| format!("user {name:?}: bad name"))?;
        let groups = nix::unistd::getgrouplist(&cname, user.gid)
            .map_err(|e| format!("reading the groups of user {name:?}: {e}"))?;
        Ok(Account {
            name: name.to_string(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups: groups.iter().map(|g| g.as_raw()).collect(),
            home: user.dir,
        })
    }
}

fn failed(about: String, errno: nix::errno::Errno) -> MasterError {
    MasterError::Io {
        about,
        source: std::io::Error::from(errno),
    }
}

/// Becomes `account` for good — supplementary groups, then gid, then uid (real, effective and
/// saved alike) — and checks that root cannot be taken back. Call while the process has one
/// thread (before the runtime starts). Sets `HOME`, `USER` and `LOGNAME` for what it starts next.
pub fn become_account(account: &Account) -> Result<(), MasterError> {
    let name = &account.name;
    let groups: Vec<Gid> = account.groups.iter().map(|g| Gid::from_raw(*g)).collect();
    let (uid, gid) = (Uid::from_raw(account.uid), Gid::from_raw(account.gid));
    nix::unistd::setgroups(&groups)
        .map_err(|e| failed(format!("taking the groups of user {name:?}"), e))?;
    nix::unistd::setresgid(gid, gid, gid)
        .map_err(|e| failed(format!("taking the group of user {name:?}"), e))?;
    nix::unistd::setresuid(uid, uid, uid)
        .map_err(|e| failed(format!("becoming user {name:?}"), e))?;
    let ids = nix::unistd::getresuid().map_err(|e| failed("reading the user ids".into(), e))?;
    if [ids.real, ids.effective, ids.saved] != [uid; 3]
        || nix::unistd::setuid(Uid::from_raw(0)).is_ok()
    {
        return Err(MasterError::Io {
            about: format!("becoming user {name:?}: root's privileges could be taken back"),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
    }
    // A change of user leaves the process undumpable (its /proc files root's): it is an
    // ordinary process of the user now, nothing of root's left in it.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
    // SAFETY: one thread (before the runtime starts), as documented above.
    std::env::set_var("HOME", &account.home);
    std::env::set_var("USER", name);
    std::env::set_var("LOGNAME", name);
    Ok(())
}

/// What `drover launch` starts: `PHP APP/artisan drover ARGS`.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The application's user: PHP starts as it.
    pub user: String,
    /// The application's path as the deploy tool names it (the `current` symlink).
    pub app: PathBuf,
    /// The PHP binary (found on `PATH` when it has no slash).
    pub php: PathBuf,
    /// More arguments for `php artisan drover` (e.g. `--max-time 3600`).
    pub args: Vec<OsString>,
}

/// `drover launch`: becomes `launch.user` when started as root (never starting PHP as root), then
/// replaces this process with `php APP/artisan drover` — the same PID, so systemd's `Type=notify`
/// and `$MAINPID` reach the master that PHP execs in its turn. Returns only with why it could not.
pub fn launch(launch: &Launch) -> Result<Infallible, MasterError> {
    let refuse = |problem: String| MasterError::Config {
        source_name: "drover launch".into(),
        problems: vec![problem],
    };
    let account = Account::lookup(&launch.user).map_err(refuse)?;
    match rules::at_launch(nix::unistd::geteuid().as_raw(), &account.name, account.uid) {
        AtLaunch::Refuse(why) => return Err(refuse(why)),
        AtLaunch::BecomeThenExec => become_account(&account)?,
        AtLaunch::Exec => {}
    }
    if !launch.app.is_absolute() {
        return Err(refuse(format!(
            "--app {} is not an absolute path: give the application's path as the deploy tool names it, e.g. /var/www/myapp/current",
            launch.app.display()
        )));
    }
    // As the user: the state directory a root master of 0.2 left in storage/ goes aside, so the
    // application (either release of its package) writes a new one.
    let state_dir = match std::env::var_os("DROVER_STATE_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => launch.app.join(dir),
        None => launch.app.join("storage/drover"),
    };
    match crate::state_dir::legacy::move_aside_if_root_made(&state_dir) {
        Ok(Some(aside)) => tracing::warn!(
            "the state directory {} belonged to root (a root master of an earlier drover made it; drover now runs as {}): moved aside to {} — remove it as root when convenient",
            state_dir.display(),
            account.name,
            aside.display()
        ),
        Ok(None) => {}
        Err(why) => return Err(refuse(why)),
    }
    // Checked as the user: what PHP will be able to open.
    let artisan = launch.app.join("artisan");
    if !Path::new(&artisan).is_file() {
        return Err(refuse(format!(
            "{} is not a file {} can read: --app (DROVER_APP) must name the Laravel application (its `current` symlink)",
            artisan.display(),
            account.name
        )));
    }
    let error = std::process::Command::new(&launch.php)
        .arg(&artisan)
        .arg("drover")
        .args(&launch.args)
        .exec();
    Err(MasterError::Io {
        about: format!(
            "starting {} {} drover as {}",
            launch.php.display(),
            artisan.display(),
            account.name
        ),
        source: error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_resolved_with_its_groups_and_an_unknown_one_is_named() {
        let root = Account::lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        let err = Account::lookup("no-such-user-drover").unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }
}
