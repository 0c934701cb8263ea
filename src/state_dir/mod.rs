//! The master's state directory (`storage/drover` by default): its one-master lock, its control
//! and fork sockets, `master.json`, and the contract `php artisan drover` leaves for it — kept so
//! that nobody but the master's user can steer the master through them (docs/security.md).
//!
//! - [`rules`]: what is accepted, from a file's kind, owner and mode alone (pure, unit-tested).
//! - [`StateDir`]: the directory, opened once without following a link and checked; every file in
//!   it is then reached through that descriptor (`openat` with `O_NOFOLLOW`, created with
//!   `O_EXCL`, renamed into place), so a path swapped after the check changes nothing, and a
//!   symbolic link or FIFO planted in it is refused by name, never followed.
//! - [`legacy`]: a state directory a root master of drover 0.2 left, moved aside by `drover
//!   launch` once it is the application's user.
//! - [`read_contract`]: the configuration file, read only when it is a regular file of the
//!   master's user (or root) that no one else may write.
//!
//! Sockets are bound through the directory's descriptor too (`/proc/self/fd/N/NAME`), and their
//! mode set relative to it: the directory is the master's own and closed to others, so nothing
//! can stand in for the socket between the bind and the change of mode.

pub mod legacy;
pub mod rules;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode};

use crate::MasterError;
use rules::{Facts, Kind, SocketSlot};

/// The master's state directory, open.
#[derive(Debug)]
pub struct StateDir {
    /// The directory as configured: for messages, and the paths clients connect to.
    path: PathBuf,
    /// The directory itself, opened without following a link and checked: every file of the
    /// master is reached through it.
    fd: OwnedFd,
    /// The master's effective user, which must own the directory and its files.
    euid: u32,
}

/// `fstat`'s facts.
fn facts(stat: &FileStat) -> Facts {
    Facts {
        kind: Kind::of_mode(stat.st_mode),
        uid: stat.st_uid,
        mode: stat.st_mode & 0o7777,
    }
}

fn io(about: String, errno: Errno) -> MasterError {
    MasterError::Io {
        about,
        source: std::io::Error::from(errno),
    }
}

fn refused(problem: String) -> MasterError {
    MasterError::Config {
        source_name: "the state directory".into(),
        problems: vec![problem],
    }
}

/// `fd` from a call that returned it, owned.
fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by open/openat and is owned by no one else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Opens `path` with `flags`, never following a link, and checks what it opened with `judge`;
/// when the open fails because a link stands there (`ELOOP`) or something `flags` cannot open as
/// asked (`not_it`), `judge` names what stands there from its `lstat`. A refusal is `refuse(why)`.
fn open_judged(
    path: &Path,
    flags: OFlag,
    not_it: Errno,
    about: &str,
    judge: impl Fn(&Facts) -> Result<(), String>,
    refuse: impl Fn(String) -> MasterError,
) -> Result<OwnedFd, MasterError> {
    let fd = match nix::fcntl::open(
        path,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => owned(fd),
        Err(e) if e == Errno::ELOOP || e == not_it => {
            let stat =
                nix::sys::stat::lstat(path).map_err(|e| io(format!("reading {about}"), e))?;
            let why = judge(&facts(&stat))
                .err()
                .unwrap_or_else(|| format!("{about} cannot be opened as it is: remove it"));
            return Err(refuse(why));
        }
        Err(e) => return Err(io(format!("opening {about}"), e)),
    };
    let stat =
        nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| io(format!("reading {about}"), e))?;
    judge(&facts(&stat)).map_err(refuse)?;
    Ok(fd)
}

impl StateDir {
    /// Opens the state directory at `path` (creating it, mode 0750, and its parents when
    /// missing), checks that it is a directory of this process's user — refused by name, with
    /// the fix, otherwise — and sets its mode ([`rules::dir_mode`]; `root_embedded`: a root
    /// master whose embedded PostgreSQL runs as another user, who must pass through).
    pub fn open(path: &Path, root_embedded: bool) -> Result<StateDir, MasterError> {
        let shown = path.display().to_string();
        create_parent(path, &shown)?;
        match nix::unistd::mkdir(path, Mode::from_bits_truncate(0o750)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(io(format!("creating the state directory {shown}"), e)),
        }
        let euid = nix::unistd::geteuid().as_raw();
        // ENOTDIR: a file, FIFO or socket stands there; named by what it is.
        let fd = open_judged(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Errno::ENOTDIR,
            &format!("the state directory {shown}"),
            |f| rules::judge_dir(f, euid, &shown),
            refused,
        )?;
        let stat = nix::sys::stat::fstat(fd.as_raw_fd())
            .map_err(|e| io(format!("reading the state directory {shown}"), e))?;
        let mode = rules::dir_mode(euid == 0, root_embedded);
        if stat.st_mode & 0o7777 != mode {
            nix::sys::stat::fchmod(fd.as_raw_fd(), Mode::from_bits_truncate(mode)).map_err(
                |e| {
                    io(
                        format!("setting the mode of the state directory {shown}"),
                        e,
                    )
                },
            )?;
        }
        Ok(StateDir {
            path: path.to_path_buf(),
            fd,
            euid,
        })
    }

    /// Before a root-started master becomes its user: creates the state directory if it is
    /// missing and gives it to that user, so the master can then open it as itself. An existing
    /// directory is left as it is (the master, as its user, then takes it or refuses it by name):
    /// root changes nothing it did not make. `path` comes from root's own command line or a
    /// configuration file of root's (a root master reads no other).
    pub fn create_for(path: &Path, uid: u32, gid: u32) -> Result<(), MasterError> {
        let shown = path.display().to_string();
        create_parent(path, &shown)?;
        match nix::unistd::mkdir(path, Mode::from_bits_truncate(0o700)) {
            Ok(()) => {}
            Err(Errno::EEXIST) => return Ok(()),
            Err(e) => return Err(io(format!("creating the state directory {shown}"), e)),
        }
        let fd = nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map(owned)
        .map_err(|e| io(format!("opening the state directory {shown}"), e))?;
        nix::unistd::fchown(
            fd.as_raw_fd(),
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .map_err(|e| {
            io(
                format!("giving the state directory {shown} to uid {uid}"),
                e,
            )
        })
    }

    /// The directory as configured.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` in the directory, for messages and for clients.
    pub fn shown(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }

    /// `name`'s facts, without following it; `None` when there is nothing.
    fn entry(&self, name: &str) -> Result<Option<Facts>, MasterError> {
        match nix::sys::stat::fstatat(
            Some(self.fd.as_raw_fd()),
            name,
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => Ok(Some(facts(&stat))),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(io(format!("reading {}", self.shown(name)), e)),
        }
    }

    /// Opens `name` (created, with `mode`, when missing — `O_EXCL`, so never through a link), never
    /// following a link and never blocking on a FIFO, and checks that it is a regular file of the
    /// master's user.
    fn open_file(&self, name: &str, write: bool, mode: u32) -> Result<std::fs::File, MasterError> {
        let shown = self.shown(name);
        let access = if write {
            OFlag::O_RDWR
        } else {
            OFlag::O_RDONLY
        };
        let base = access | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let dir = Some(self.fd.as_raw_fd());
        let created = if write {
            nix::fcntl::openat(
                dir,
                name,
                base | OFlag::O_CREAT | OFlag::O_EXCL,
                Mode::from_bits_truncate(mode),
            )
        } else {
            Err(Errno::EEXIST)
        };
        let fd = match created {
            Ok(fd) => owned(fd),
            Err(Errno::EEXIST) => match nix::fcntl::openat(dir, name, base, Mode::empty()) {
                Ok(fd) => owned(fd),
                Err(Errno::ELOOP | Errno::ENXIO | Errno::EISDIR) => {
                    // A link, a FIFO without a writer or a directory: say what stands there.
                    let why = match self.entry(name)? {
                        Some(f) => rules::judge_file(&f, self.euid, &shown).err(),
                        None => None,
                    };
                    return Err(refused(why.unwrap_or_else(|| {
                        format!("{shown} is not a regular file drover made: remove it")
                    })));
                }
                Err(e) => return Err(io(format!("opening {shown}"), e)),
            },
            Err(e) => return Err(io(format!("creating {shown}"), e)),
        };
        let stat =
            nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| io(format!("reading {shown}"), e))?;
        rules::judge_file(&facts(&stat), self.euid, &shown).map_err(refused)?;
        // Back to blocking reads and writes: it is a regular file.
        let file = std::fs::File::from(fd);
        nix::fcntl::fcntl(
            file.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(OFlag::empty()),
        )
        .map_err(|e| io(format!("opening {shown}"), e))?;
        Ok(file)
    }

    /// The one-master lock, `master.lock`: held with `flock` for as long as the returned file is
    /// open (the master's life; the kernel lets go when it dies, however it dies). Two masters
    /// started at once cannot both pass, unlike a check of the socket followed by a bind. The file
    /// is opened close-on-exec, so workers do not hold it; a link or FIFO in its place is refused.
    pub fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, MasterError> {
        let file = self.open_file("master.lock", true, 0o600)?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
            |(_, errno)| match errno {
                Errno::EWOULDBLOCK => MasterError::AlreadyRunning {
                    state_dir: self.path.display().to_string(),
                },
                other => io(format!("locking {}", self.shown("master.lock")), other),
            },
        )
    }

    /// Where to bind the socket `name`, once this master holds the lock: what stands there is a
    /// stale socket of the master's user (removed) or nothing; anything else is refused by name.
    /// The returned path reaches the directory through its descriptor (`/proc/self/fd/N/NAME`),
    /// so the socket is made in the directory that was checked. Clients connect to
    /// `self.path()/NAME`, which must fit a socket address (107 bytes).
    pub fn socket_slot(&self, name: &str) -> Result<PathBuf, MasterError> {
        let shown = self.shown(name);
        if shown.len() > 107 {
            return Err(MasterError::Io {
                about: format!(
                    "the socket path {shown} is longer than 107 bytes (what a Unix socket address holds); use a shorter state directory (state_dir, DROVER_STATE_DIR)"
                ),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            });
        }
        match rules::judge_socket_slot(self.entry(name)?.as_ref(), self.euid, &shown)
            .map_err(refused)?
        {
            SocketSlot::Free => {}
            SocketSlot::Stale => self.remove(name)?,
        }
        Ok(PathBuf::from(format!(
            "/proc/self/fd/{}/{name}",
            self.fd.as_raw_fd()
        )))
    }

    /// Sets the mode of `name`, a socket this master just bound there (relative to the
    /// directory's descriptor: nobody else writes the directory, so nothing stands in for it).
    pub fn set_socket_mode(&self, name: &str, mode: u32) -> Result<(), MasterError> {
        nix::sys::stat::fchmodat(
            Some(self.fd.as_raw_fd()),
            name,
            Mode::from_bits_truncate(mode),
            FchmodatFlags::FollowSymlink,
        )
        .map_err(|e| io(format!("setting the mode of {}", self.shown(name)), e))
    }

    /// Writes `name` whole, with `mode`: a new file created with `O_EXCL` under a temporary name,
    /// then renamed over `name` (a rename replaces whatever entry was there — a planted link
    /// included — and follows nothing).
    pub fn write_new(&self, name: &str, bytes: &[u8], mode: u32) -> Result<(), MasterError> {
        let tmp = format!(".{name}.tmp");
        let dir = Some(self.fd.as_raw_fd());
        match nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(io(format!("removing {}", self.shown(&tmp)), e)),
        }
        let mut file = self.open_file(&tmp, true, mode)?;
        file.write_all(bytes).map_err(|source| MasterError::Io {
            about: format!("writing {}", self.shown(&tmp)),
            source,
        })?;
        // The mode asked for, whatever the umask took from it at creation.
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|source| MasterError::Io {
                about: format!("setting the mode of {}", self.shown(&tmp)),
                source,
            })?;
        nix::fcntl::renameat(dir, tmp.as_str(), dir, name)
            .map_err(|e| io(format!("writing {}", self.shown(name)), e))
    }

    /// The text of `name`, a regular file of the master's user; `None` when there is none. A
    /// link, FIFO or another user's file there is an error naming it.
    pub fn read(&self, name: &str) -> Result<Option<String>, MasterError> {
        if self.entry(name)?.is_none() {
            return Ok(None);
        }
        let mut text = String::new();
        self.open_file(name, false, 0)?
            .read_to_string(&mut text)
            .map_err(|source| MasterError::Io {
                about: format!("reading {}", self.shown(name)),
                source,
            })?;
        Ok(Some(text))
    }

    /// Removes `name` (the entry itself: a link is removed, not followed); nothing there is fine.
    pub fn remove(&self, name: &str) -> Result<(), MasterError> {
        match nix::unistd::unlinkat(
            Some(self.fd.as_raw_fd()),
            name,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        ) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(io(format!("removing {}", self.shown(name)), e)),
        }
    }
}

/// Reads the configuration at `path` (the contract `php artisan drover` wrote, or a file given to
/// `drover run --config`): opened without following a link or blocking on a FIFO, and read only
/// when it is a regular file of this process's user (or root) that no one else may write
/// ([`rules::judge_contract`]); otherwise refused by name, with the fix.
pub fn read_contract(path: &Path) -> Result<String, MasterError> {
    let shown = path.display().to_string();
    let euid = nix::unistd::geteuid().as_raw();
    let refuse = |problem: String| MasterError::Config {
        source_name: shown.clone(),
        problems: vec![problem],
    };
    // Non-blocking: a FIFO standing there is opened at once (and refused), never waited on.
    let fd = open_judged(
        path,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK,
        Errno::ENXIO,
        &format!("the config file {shown}"),
        |f| rules::judge_contract(f, euid, &shown),
        refuse,
    )?;
    let mut text = String::new();
    std::fs::File::from(fd)
        .read_to_string(&mut text)
        .map_err(|source| MasterError::Io {
            about: format!("reading the config file {shown}"),
            source,
        })?;
    Ok(text)
}

/// The directories above the state directory `path` (shown as `shown`), made if missing.
fn create_parent(path: &Path, shown: &str) -> Result<(), MasterError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| MasterError::Io {
            about: format!("creating the parent of the state directory {shown}"),
            source,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn the_directory_is_made_private_and_its_files_are_reached_through_it() {
        let tmp = dir();
        let path = tmp.path().join("state");
        let state = StateDir::open(&path, false).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o750);
        // A widened mode is narrowed at the next open.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        drop(state);
        let state = StateDir::open(&path, false).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o750);

        state.write_new("master.json", b"{}", 0o640).unwrap();
        assert_eq!(state.read("master.json").unwrap().as_deref(), Some("{}"));
        let mode = std::fs::metadata(path.join("master.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        assert_eq!(state.read("missing.json").unwrap(), None);
        let _lock = state.lock().unwrap();
        assert!(matches!(
            state.lock(),
            Err(MasterError::AlreadyRunning { .. })
        ));
    }

    #[test]
    fn a_link_or_fifo_planted_in_the_directory_is_refused_by_name_and_never_followed() {
        let tmp = dir();
        let path = tmp.path().join("state");
        let state = StateDir::open(&path, false).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, path.join("master.lock")).unwrap();
        let err = state.lock().unwrap_err().to_string();
        assert!(err.contains("master.lock is a symbolic link"), "{err}");
        nix::unistd::mkfifo(&path.join("master.json"), Mode::from_bits_truncate(0o600)).unwrap();
        let err = state.read("master.json").unwrap_err().to_string();
        assert!(err.contains("master.json is a FIFO"), "{err}");
        // A planted link where the socket goes is refused, a stale socket replaced.
        std::os::unix::fs::symlink(&victim, path.join("control.sock")).unwrap();
        let err = state.socket_slot("control.sock").unwrap_err().to_string();
        assert!(err.contains("control.sock is a symbolic link"), "{err}");
        // Writing over a planted link replaces the link, never the file it points to.
        std::os::unix::fs::symlink(&victim, path.join("other.json")).unwrap();
        state.write_new("other.json", b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert!(!std::fs::symlink_metadata(path.join("other.json"))
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_state_directory_that_is_a_link_is_refused() {
        let tmp = dir();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = tmp.path().join("state");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = StateDir::open(&link, false).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link, not a directory"), "{err}");
    }

    #[test]
    fn a_contract_that_is_a_fifo_a_link_or_writable_by_others_is_refused_and_a_fifo_never_blocks() {
        let tmp = dir();
        let good = tmp.path().join("config.json");
        std::fs::write(&good, "{}").unwrap();
        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_contract(&good).unwrap(), "{}");
        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = read_contract(&good).unwrap_err().to_string();
        assert!(err.contains("writable by its group or others"), "{err}");
        let fifo = tmp.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let err = read_contract(&fifo).unwrap_err().to_string();
        assert!(err.contains("is a FIFO (named pipe)"), "{err}");
        let link = tmp.path().join("link.json");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let err = read_contract(&link).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
    }
}
