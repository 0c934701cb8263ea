//! What the master accepts on disk, decided from a file's facts alone (its kind, owner and mode,
//! as `lstat`/`fstat` read them, never following a link): pure, so every refusal is unit-tested
//! without planting anything.
//!
//! The principle: the master acts only on what its own user (or root) made and what no one else
//! can change — so a file planted by another account, a link to elsewhere, or a FIFO standing in
//! for a file is refused by name, with the fix, before the master reads, writes or binds it.

/// What `lstat`/`fstat` says a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Directory,
    Regular,
    Socket,
    Symlink,
    Fifo,
    /// A device, or anything else.
    Other,
}

impl Kind {
    /// From `st_mode`'s type bits.
    pub fn of_mode(mode: u32) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFDIR => Kind::Directory,
            libc::S_IFREG => Kind::Regular,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            _ => Kind::Other,
        }
    }

    fn named(self) -> &'static str {
        match self {
            Kind::Directory => "a directory",
            Kind::Regular => "a regular file",
            Kind::Socket => "a socket",
            Kind::Symlink => "a symbolic link",
            Kind::Fifo => "a FIFO (named pipe)",
            Kind::Other => "a device or special file",
        }
    }
}

/// A path's facts, as read without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    pub kind: Kind,
    /// Its owner.
    pub uid: u32,
    /// Its permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// Whether a file owned by `owner` may steer a master running as `euid`: its own user's, or
/// root's (root can do anything anyway). A root master trusts only root's.
pub fn trusted_owner(owner: u32, euid: u32) -> bool {
    owner == euid || owner == 0
}

/// Write permission for group or others.
const WRITABLE_BY_OTHERS: u32 = 0o022;

/// The state directory: a real directory (a link to one is refused: whoever can replace the link
/// decides where the sockets and the lock go), owned by the master's user. Its mode is then set
/// by the master ([`dir_mode`]), so a mode someone widened is narrowed again at every start.
pub fn judge_dir(facts: &Facts, euid: u32, shown: &str) -> Result<(), String> {
    if facts.kind != Kind::Directory {
        return Err(format!(
            "the state directory {shown} is {}, not a directory: drover keeps its lock, sockets and master.json there and follows no link to them; remove it (drover makes the directory) or set state_dir (DROVER_STATE_DIR) to a directory of the master's user",
            facts.kind.named()
        ));
    }
    if facts.uid != euid {
        return Err(format!(
            "the state directory {shown} belongs to uid {}, but this master runs as uid {euid}: only the master's user may own it (anyone who can write there can steer the master); {}",
            facts.uid,
            if facts.uid == 0 {
                format!("a root-started master of an earlier drover made it — as root, remove it (`rm -r {shown}`: it holds no job) or give it to the master's user (`chown -R {euid}: {shown}`)")
            } else {
                format!("give it to the master's user (`chown -R {euid}: {shown}`) or set state_dir (DROVER_STATE_DIR) to a directory of that user")
            }
        ));
    }
    Ok(())
}

/// The state directory's mode: the master's user writes; its group (the application's deploy
/// user, `php artisan drover:status` in the application) enters and reads; others nothing — but
/// for a root master whose embedded PostgreSQL runs as `postgres_user`, which must pass through to
/// its data directory (others may enter, not list).
pub fn dir_mode(root_master: bool, embedded: bool) -> u32 {
    if root_master && embedded {
        0o711
    } else {
        0o750
    }
}

/// A file the master keeps in its state directory (`master.lock`, `master.json`): a regular
/// file of the master's user, or it is refused by name.
pub fn judge_file(facts: &Facts, euid: u32, shown: &str) -> Result<(), String> {
    if facts.kind != Kind::Regular {
        return Err(format!(
            "{shown} is {}, not a regular file drover made: something other than drover put it there; remove it (`rm {shown}`) and start again",
            facts.kind.named()
        ));
    }
    if facts.uid != euid {
        return Err(format!(
            "{shown} belongs to uid {}, not to this master's user (uid {euid}): remove it (`rm {shown}`) and start again",
            facts.uid
        ));
    }
    Ok(())
}

/// What to do with whatever sits where the master binds a socket (`control.sock`, `fork.sock`),
/// once it holds the directory's lock (so no live master of this directory answers there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketSlot {
    /// Nothing there: bind.
    Free,
    /// A socket of the master's user left by a master that died: remove it, then bind.
    Stale,
}

/// [`SocketSlot`] for `facts` (`None`: nothing there); anything but a socket of the master's
/// user is refused by name.
pub fn judge_socket_slot(
    facts: Option<&Facts>,
    euid: u32,
    shown: &str,
) -> Result<SocketSlot, String> {
    let Some(facts) = facts else {
        return Ok(SocketSlot::Free);
    };
    if facts.kind != Kind::Socket {
        return Err(format!(
            "{shown} is {}, where drover binds its socket: something other than drover put it there; remove it (`rm {shown}`) and start again",
            facts.kind.named()
        ));
    }
    if facts.uid != euid {
        return Err(format!(
            "{shown} is a socket of uid {}, not of this master's user (uid {euid}): remove it (`rm {shown}`) and start again",
            facts.uid
        ));
    }
    Ok(SocketSlot::Stale)
}

/// The configuration (the contract `php artisan drover` writes, or a file given to `drover run
/// --config`): a regular file of the master's user or root, writable by no one else — else
/// whoever can write it chooses the commands the master runs.
pub fn judge_contract(facts: &Facts, euid: u32, shown: &str) -> Result<(), String> {
    if facts.kind != Kind::Regular {
        return Err(format!(
            "the configuration {shown} is {}, not a regular file: the master reads only a file its own user wrote; remove it and run `php artisan drover` again (it writes the file), or give --config a regular file",
            facts.kind.named()
        ));
    }
    if !trusted_owner(facts.uid, euid) {
        let fix = if euid == 0 {
            "a root-started master reads only root's files: start the master as the application's user (`drover launch --user USER --app APP`, or User= in the unit; docs/security.md)"
        } else {
            "write it as the master's user (run `php artisan drover` as that user) or as root"
        };
        return Err(format!(
            "the configuration {shown} belongs to uid {}, but this master runs as uid {euid}: {fix}",
            facts.uid
        ));
    }
    if facts.mode & WRITABLE_BY_OTHERS != 0 {
        return Err(format!(
            "the configuration {shown} is writable by its group or others (mode {:o}): anyone who can write it chooses what the master runs; `chmod go-w {shown}`",
            facts.mode
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(kind: Kind, uid: u32, mode: u32) -> Facts {
        Facts { kind, uid, mode }
    }

    #[test]
    fn a_state_directory_of_the_masters_user_is_taken_and_anything_else_is_refused_by_name() {
        assert!(judge_dir(&facts(Kind::Directory, 33, 0o755), 33, "/s").is_ok());
        let link = judge_dir(&facts(Kind::Symlink, 33, 0o777), 33, "/s").unwrap_err();
        assert!(link.contains("/s is a symbolic link"), "{link}");
        let root_made = judge_dir(&facts(Kind::Directory, 0, 0o711), 33, "/s").unwrap_err();
        assert!(
            root_made.contains("belongs to uid 0") && root_made.contains("rm -r /s"),
            "{root_made}"
        );
        let other = judge_dir(&facts(Kind::Directory, 1000, 0o700), 33, "/s").unwrap_err();
        assert!(other.contains("chown -R 33: /s"), "{other}");
        // A root master owns its directory as root.
        assert!(judge_dir(&facts(Kind::Directory, 0, 0o700), 0, "/s").is_ok());
        assert!(judge_dir(&facts(Kind::Directory, 33, 0o700), 0, "/s").is_err());
    }

    #[test]
    fn the_directory_is_closed_to_others_unless_a_root_masters_postgres_must_pass_through() {
        assert_eq!(dir_mode(false, false), 0o750);
        assert_eq!(dir_mode(false, true), 0o750);
        assert_eq!(dir_mode(true, false), 0o750);
        assert_eq!(dir_mode(true, true), 0o711);
    }

    #[test]
    fn the_lock_and_master_json_must_be_regular_files_of_the_masters_user() {
        assert!(judge_file(&facts(Kind::Regular, 33, 0o600), 33, "l").is_ok());
        for kind in [Kind::Symlink, Kind::Fifo, Kind::Directory, Kind::Other] {
            let why = judge_file(&facts(kind, 33, 0o600), 33, "/s/master.lock").unwrap_err();
            assert!(
                why.starts_with("/s/master.lock is") && why.contains("rm /s/master.lock"),
                "{why}"
            );
        }
        assert!(judge_file(&facts(Kind::Regular, 0, 0o600), 33, "l").is_err());
    }

    #[test]
    fn a_socket_slot_takes_nothing_or_a_stale_socket_of_ours_and_refuses_a_plant() {
        assert_eq!(judge_socket_slot(None, 33, "c"), Ok(SocketSlot::Free));
        assert_eq!(
            judge_socket_slot(Some(&facts(Kind::Socket, 33, 0o660)), 33, "c"),
            Ok(SocketSlot::Stale)
        );
        let fifo = judge_socket_slot(Some(&facts(Kind::Fifo, 33, 0o666)), 33, "/s/control.sock")
            .unwrap_err();
        assert!(fifo.contains("/s/control.sock is a FIFO"), "{fifo}");
        let link = judge_socket_slot(Some(&facts(Kind::Symlink, 33, 0o777)), 33, "c").unwrap_err();
        assert!(link.contains("symbolic link"), "{link}");
        assert!(judge_socket_slot(Some(&facts(Kind::Socket, 0, 0o660)), 33, "c").is_err());
    }

    #[test]
    fn a_contract_is_read_only_from_a_regular_file_of_the_masters_user_or_root_that_no_one_else_writes(
    ) {
        assert!(judge_contract(&facts(Kind::Regular, 33, 0o600), 33, "c").is_ok());
        assert!(judge_contract(&facts(Kind::Regular, 0, 0o644), 33, "c").is_ok());
        let fifo = judge_contract(&facts(Kind::Fifo, 33, 0o600), 33, "/s/config.json").unwrap_err();
        assert!(fifo.contains("/s/config.json is a FIFO"), "{fifo}");
        let planted = judge_contract(&facts(Kind::Regular, 33, 0o600), 0, "c").unwrap_err();
        assert!(
            planted.contains("a root-started master reads only root's files"),
            "{planted}"
        );
        let open = judge_contract(&facts(Kind::Regular, 33, 0o664), 33, "c").unwrap_err();
        assert!(open.contains("chmod go-w c"), "{open}");
        assert!(judge_contract(&facts(Kind::Regular, 1000, 0o600), 33, "c").is_err());
    }

    #[test]
    fn kinds_are_read_from_the_mode_bits() {
        assert_eq!(Kind::of_mode(libc::S_IFDIR | 0o755), Kind::Directory);
        assert_eq!(Kind::of_mode(libc::S_IFREG | 0o600), Kind::Regular);
        assert_eq!(Kind::of_mode(libc::S_IFSOCK | 0o660), Kind::Socket);
        assert_eq!(Kind::of_mode(libc::S_IFLNK | 0o777), Kind::Symlink);
        assert_eq!(Kind::of_mode(libc::S_IFIFO | 0o644), Kind::Fifo);
        assert_eq!(Kind::of_mode(libc::S_IFCHR | 0o666), Kind::Other);
    }
}
