//! Orphans the master inherits as a subreaper, and reaps.
//!
//! Once the master is a subreaper (fork mode, [`crate::adopted::become_subreaper`]), every orphaned
//! descendant becomes its child, not init's: besides the forked workers it waits for, the
//! processes a job started whose parent died (the worker killed with its process group at a
//! timeout leaves them, already killed, as zombies), or a daemon a job spawned. Nobody else waits
//! for those; left alone they would stay zombies for the master's life.
//!
//! A sweep ([`sweep`]) reads `/proc` for zombies whose parent is this process and reaps those
//! that are strays by one rule, [`is_stray`]: not a process the supervisor waits for itself, and
//! not a process the master started — every one of those is either the leader of its own process
//! group (workers, zygotes, the lease guard, PostgreSQL) or in the master's own group (commands it
//! runs), and in the master's session. [`start_once`] sweeps after each SIGCHLD (at most every 250 ms)
//! and every 30 s.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// PIDs the supervisor itself waits for (workers, forked or started, and zygotes), never swept.
static KNOWN: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// `pid` is waited for by the supervisor until [`release`].
pub(crate) fn adopt(pid: u32) {
    KNOWN
        .lock()
        .expect("not poisoned")
        .get_or_insert_with(HashSet::new)
        .insert(pid);
}

/// `pid` was reaped by the supervisor.
pub(crate) fn release(pid: u32) {
    if let Some(known) = KNOWN.lock().expect("not poisoned").as_mut() {
        known.remove(&pid);
    }
}

fn known(pid: u32) -> bool {
    KNOWN
        .lock()
        .expect("not poisoned")
        .as_ref()
        .is_some_and(|k| k.contains(&pid))
}

/// A process as `/proc/<pid>/stat` describes it (the fields the rule reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
}

impl Stat {
    /// Parses a stat line; the command name (in parentheses, possibly with spaces and parentheses)
    /// is skipped up to its last `)`.
    pub fn parse(line: &str) -> Option<Stat> {
        let (head, rest) = line.rsplit_once(')')?;
        let pid = head.split_whitespace().next()?.parse().ok()?;
        let mut fields = rest.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        let pgrp = fields.next()?.parse().ok()?;
        let session = fields.next()?.parse().ok()?;
        Some(Stat {
            pid,
            state,
            ppid,
            pgrp,
            session,
        })
    }
}

/// The one rule: `child` is a stray of `me` to be reaped — a zombie child of the master that the
/// supervisor does not wait for (`known`) and that the master did not start (those lead their own
/// group or are in the master's, and share its session).
pub fn is_stray(child: &Stat, me: &Stat, known: bool) -> bool {
    child.state == 'Z'
        && child.ppid == me.pid
        && !known
        && (child.session != me.session || (child.pgrp != child.pid && child.pgrp != me.pgrp))
}

fn read_stat(pid: &str) -> Option<Stat> {
    Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Reaps every stray zombie child now; returns how many.
pub fn sweep() -> usize {
    let Some(me) = read_stat("self") else {
        return 0;
    };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut reaped = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Some(child) = read_stat(name) else {
            continue;
        };
        if is_stray(&child, &me, known(child.pid)) {
            let mut status = 0;
            // SAFETY: waitpid on one PID, WNOHANG, with a pointer to a local int.
            if unsafe { libc::waitpid(child.pid as libc::pid_t, &mut status, libc::WNOHANG) }
                == child.pid as libc::pid_t
            {
                reaped += 1;
            }
        }
    }
    reaped
}

/// Sweeps after SIGCHLD (at most every 250 ms) and every 30 s, for the master's life; the first
/// call starts the sweeper, later ones do nothing.
pub fn start_once() {
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if STARTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    tokio::spawn(async move {
        let Ok(mut children) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
        else {
            tracing::warn!("cannot watch SIGCHLD; orphaned processes are reaped every 30 s");
            loop {
                tokio::time::sleep(Duration::from_secs(30)).await;
                sweep();
            }
        };
        loop {
            tokio::select! {
                _ = children.recv() => tokio::time::sleep(Duration::from_millis(250)).await,
                _ = tokio::time::sleep(Duration::from_secs(30)) => {}
            }
            let n = sweep();
            if n > 0 {
                tracing::debug!("reaped {n} orphaned process(es) a job left behind");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: u32, state: char, ppid: u32, pgrp: u32, session: u32) -> Stat {
        Stat {
            pid,
            state,
            ppid,
            pgrp,
            session,
        }
    }

    #[test]
    fn parses_a_stat_line_whose_command_has_spaces_and_parentheses() {
        let line = "4242 (php (worker) x) Z 100 4000 90 0 -1 4194560 0 0 0 0";
        assert_eq!(Stat::parse(line), Some(stat(4242, 'Z', 100, 4000, 90)));
        assert_eq!(Stat::parse("garbage"), None);
    }

    #[test]
    fn only_zombie_children_the_master_did_not_start_and_does_not_wait_for_are_strays() {
        let me = stat(100, 'S', 1, 90, 90);
        // A job's child left in its dead worker's group.
        assert!(is_stray(&stat(4001, 'Z', 100, 4000, 90), &me, false));
        // A daemon a job started in a session of its own.
        assert!(is_stray(&stat(4002, 'Z', 100, 4002, 4002), &me, false));
        // Not a zombie; not ours; waited for by the supervisor.
        assert!(!is_stray(&stat(4001, 'S', 100, 4000, 90), &me, false));
        assert!(!is_stray(&stat(4001, 'Z', 7, 4000, 90), &me, false));
        assert!(!is_stray(&stat(4001, 'Z', 100, 4000, 90), &me, true));
        // Started by the master: a group leader (workers, the guard, PostgreSQL) or in its group
        // (the reload command): tokio waits for those.
        assert!(!is_stray(&stat(4003, 'Z', 100, 4003, 90), &me, false));
        assert!(!is_stray(&stat(4004, 'Z', 100, 90, 90), &me, false));
    }

    #[test]
    fn a_sweep_reaps_an_orphan_and_leaves_a_started_child_to_its_waiter() {
        // This test process plays the master: a subreaper with a child of its own (a group
        // leader, as the master's are) and an orphan re-parented to it.
        crate::adopted::become_subreaper().unwrap();
        let mut own = std::process::Command::new("true");
        std::os::unix::process::CommandExt::process_group(&mut own, 0);
        let mut own = own.spawn().unwrap();
        // sh, a group leader, starts `sleep` in the background and exits: sleep, left in sh's
        // group, is re-parented to us.
        let mut sh = std::process::Command::new("sh");
        sh.args(["-c", "sleep 0.2 & echo $!"]);
        std::os::unix::process::CommandExt::process_group(&mut sh, 0);
        let out = sh.output().unwrap();
        let orphan: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut reaped = 0;
        while std::time::Instant::now() < deadline
            && std::path::Path::new(&format!("/proc/{orphan}")).exists()
        {
            reaped += sweep();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(reaped >= 1, "the orphan was reaped");
        assert!(!std::path::Path::new(&format!("/proc/{orphan}")).exists());
        // Our own child is still ours to wait for.
        assert!(own.wait().unwrap().success());
    }
}
