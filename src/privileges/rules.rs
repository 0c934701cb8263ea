//! Who a drover process runs as, decided from user ids alone (pure, unit-tested): a master never
//! changes users while it serves, and nothing of the application ever starts as root when a user
//! is named.

/// What `drover run`, started as `euid`, does about the configured `user` (`None`: not set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtRun {
    /// Serve as this user: it is the configured one, or none is configured and it is not root.
    AsIs,
    /// Root, and no user (or root itself) configured: everything runs as root — a laptop's
    /// `sudo`, warned at start.
    Root,
    /// Root with an unprivileged user: become that user before reading or writing anything
    /// else, so the master, its workers and every command it runs are that user's.
    Become,
    /// Not root, and another user is configured: it cannot switch.
    Refuse(String),
}

/// [`AtRun`] for a master started as `euid` with `user` (its name and uid) configured.
pub fn at_run(euid: u32, user: Option<(&str, u32)>) -> AtRun {
    match user {
        None => {
            if euid == 0 {
                AtRun::Root
            } else {
                AtRun::AsIs
            }
        }
        Some((_, 0)) if euid == 0 => AtRun::Root,
        Some((_, uid)) if uid == euid => AtRun::AsIs,
        Some(_) if euid == 0 => AtRun::Become,
        Some((name, _)) => AtRun::Refuse(format!(
            "user is {name:?}, but this master runs as uid {euid} and cannot switch users: start it as {name:?} (User= in the unit), or from root with `drover launch --user {name}` (docs/security.md)"
        )),
    }
}

/// What `drover launch --user USER`, started as `euid`, does before it starts PHP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtLaunch {
    /// Already that user: exec PHP.
    Exec,
    /// Root: become the user (its groups, gid and uid, for good), then exec PHP.
    BecomeThenExec,
    /// Refused, with why.
    Refuse(String),
}

/// [`AtLaunch`] for a process of `euid` asked to start the application as `name` (uid `uid`).
pub fn at_launch(euid: u32, name: &str, uid: u32) -> AtLaunch {
    if uid == 0 {
        return AtLaunch::Refuse(format!(
            "--user {name:?} is root: drover starts the application as its own user, never as root; name the user that owns the application's storage/ (DROVER_USER in /etc/drover/APP.env, e.g. www-data)"
        ));
    }
    if euid == uid {
        AtLaunch::Exec
    } else if euid == 0 {
        AtLaunch::BecomeThenExec
    } else {
        AtLaunch::Refuse(format!(
            "this process runs as uid {euid} and cannot become {name:?}: run `drover launch` as root (the unit does) or as {name:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_master_with_a_user_becomes_it_and_one_without_stays_root_with_a_warning() {
        assert_eq!(at_run(0, Some(("www-data", 33))), AtRun::Become);
        assert_eq!(at_run(0, None), AtRun::Root);
        assert_eq!(at_run(0, Some(("root", 0))), AtRun::Root);
    }

    #[test]
    fn an_unprivileged_master_serves_as_itself_and_refuses_another_user() {
        assert_eq!(at_run(33, None), AtRun::AsIs);
        assert_eq!(at_run(33, Some(("www-data", 33))), AtRun::AsIs);
        let AtRun::Refuse(why) = at_run(33, Some(("forge", 1000))) else {
            panic!("an unprivileged master cannot switch users");
        };
        assert!(why.contains("\"forge\"") && why.contains("uid 33"), "{why}");
    }

    #[test]
    fn launch_becomes_the_user_from_root_execs_as_itself_and_never_starts_php_as_root() {
        assert_eq!(at_launch(0, "www-data", 33), AtLaunch::BecomeThenExec);
        assert_eq!(at_launch(33, "www-data", 33), AtLaunch::Exec);
        let AtLaunch::Refuse(why) = at_launch(0, "root", 0) else {
            panic!("root is refused");
        };
        assert!(why.contains("never as root"), "{why}");
        // Even a root process asked for a second name of uid 0 refuses.
        assert!(matches!(at_launch(0, "toor", 0), AtLaunch::Refuse(_)));
        assert!(matches!(
            at_launch(1000, "www-data", 33),
            AtLaunch::Refuse(_)
        ));
    }
}
