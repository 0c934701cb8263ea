//! A state directory that a root master of drover 0.2 left: owned by root (mode 0711, its lock and
//! contract root's), in the application's `storage/`. The master now runs as the application's
//! user, who cannot write there; `drover launch` moves it aside — once it has become that user, so
//! root changes nothing of the application's — and an upgrade needs no step by hand (docs/
//! upgrading.md). One that keeps an embedded PostgreSQL, or whose lock a master still holds, is
//! left as it is and named.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What is done with the state directory at `drover launch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Legacy {
    /// Nothing: missing, or not root's (the master takes it or refuses it by name).
    Leave,
    /// Root's, free: renamed beside itself, and a new one made by the master.
    MoveAside,
    /// Root's, but it keeps an embedded cluster or a master holds it: named, not touched.
    Refuse(String),
}

/// The verdict for a directory owned by `owner`, seen by a process of `euid`, that keeps an
/// embedded cluster (`postgres/`) or not, and whose lock a master holds or not.
pub fn judge(owner: u32, euid: u32, embedded: bool, held: bool, shown: &str) -> Legacy {
    if owner != 0 || euid == 0 {
        return Legacy::Leave;
    }
    if embedded {
        return Legacy::Refuse(format!(
            "the state directory {shown} belongs to root and keeps an embedded PostgreSQL (made by a root master of an earlier drover): drover now runs as the application's user and leaves it be; as root, stop that master and remove the directory (`rm -r {shown}`) or give it to the application's user (`chown -R USER: {shown}`)"
        ));
    }
    if held {
        return Legacy::Refuse(format!(
            "the state directory {shown} belongs to root and a master still holds its lock (a root master of an earlier drover): stop it first (`systemctl stop` its unit)"
        ));
    }
    Legacy::MoveAside
}

/// Applies [`judge`] to `dir`: moves a root-made one aside (to `<dir>.root-owned-<unix time>`),
/// returning where; `Err` names what stops it.
pub fn move_aside_if_root_made(dir: &Path) -> Result<Option<PathBuf>, String> {
    let shown = dir.display().to_string();
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return Ok(None);
    };
    if !meta.is_dir() {
        return Ok(None);
    }
    let held = std::fs::File::open(dir.join("master.lock"))
        .ok()
        .is_some_and(|lock| {
            match nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(_unlocked_on_drop) => false,
                Err((_, errno)) => errno == nix::errno::Errno::EWOULDBLOCK,
            }
        });
    let euid = nix::unistd::geteuid().as_raw();
    match judge(
        meta.uid(),
        euid,
        dir.join("postgres").is_dir(),
        held,
        &shown,
    ) {
        Legacy::Leave => Ok(None),
        Legacy::Refuse(why) => Err(why),
        Legacy::MoveAside => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let mut aside = dir.as_os_str().to_owned();
            aside.push(format!(".root-owned-{stamp}"));
            let aside = PathBuf::from(aside);
            std::fs::rename(dir, &aside).map_err(|e| {
                format!("the state directory {shown} belongs to root (a root master of an earlier drover made it) and could not be moved aside ({e}): as root, remove it (`rm -r {shown}`)")
            })?;
            Ok(Some(aside))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_root_made_directory_is_moved_aside_and_anything_else_left_or_named() {
        assert_eq!(judge(0, 33, false, false, "/s"), Legacy::MoveAside);
        assert_eq!(judge(33, 33, false, false, "/s"), Legacy::Leave);
        assert_eq!(
            judge(0, 0, false, false, "/s"),
            Legacy::Leave,
            "root moves nothing"
        );
        let Legacy::Refuse(why) = judge(0, 33, true, false, "/s") else {
            panic!("an embedded cluster is left be");
        };
        assert!(
            why.contains("embedded PostgreSQL") && why.contains("rm -r /s"),
            "{why}"
        );
        assert!(matches!(judge(0, 33, false, true, "/s"), Legacy::Refuse(_)));
    }
}
