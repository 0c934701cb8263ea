//! Orphans the master inherits as a subreaper, and reaps.
//!
//! Once the master is a subreaper (fork mode, [`crate::subreaper`]), every orphaned
//! descendant becomes its child, not init's: besides the forked workers it waits for, the
//! processes a job started whose parent died (the worker killed with its process group at a
//! timeout leaves them, already killed, as zombies; GNU `timeout` or a shell's job control puts a
//! child in a group of its own, which survives its worker), or a daemon a job spawned. Nobody else
//! waits for those; left alone they would stay zombies for the master's life.
//!
//! A sweep ([`sweep`]) finds the zombie children (`waitid(WNOWAIT)` first: none, no scan) and
//! reaps those [`is_stray`] calls strays: never a process the supervisor or the master waits for
//! itself ([`waited_for`]), nor one in a zygote's process group (a worker killed before it took a
//! group of its own, which the master adopts by its PID); then any that is plainly not the
//! master's own (in another session, or in a group it does not lead and that is not the master's),
//! or that has stayed a zombie for [`UNCLAIMED_AFTER`] — whoever started a child waits for it
//! within milliseconds. [`start_once`] sweeps after each SIGCHLD (at most every 250 ms) and every
//! 30 s.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::proc_stat::Stat;

/// A zombie child nobody reaped for this long is nobody's: reaped by the sweep.
pub const UNCLAIMED_AFTER: Duration = Duration::from_secs(30);

/// What the sweep must leave alone.
#[derive(Default)]
struct Registry {
    /// PIDs something in this process waits for (workers, zygotes, the lease guard, PostgreSQL).
    waited: HashSet<u32>,
    /// Zygotes' PIDs, which are also their process groups.
    zygote_groups: HashSet<u32>,
    /// Zombies seen by a sweep, and when first.
    seen: HashMap<u32, Instant>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    f(REGISTRY
        .lock()
        .expect("not poisoned")
        .get_or_insert_with(Registry::default))
}

/// `pid` is waited for by its starter (until [`reaped`]): a sweep never reaps it.
pub fn waited_for(pid: u32) {
    registry(|r| r.waited.insert(pid));
}

/// `pid` was reaped by its starter.
pub fn reaped(pid: u32) {
    registry(|r| {
        r.waited.remove(&pid);
        r.zygote_groups.remove(&pid);
    });
}

/// `pid` is a zygote, waited for, whose group holds workers before they lead their own.
pub(crate) fn zygote(pid: u32) {
    registry(|r| {
        r.waited.insert(pid);
        r.zygote_groups.insert(pid)
    });
}

/// What the sweep knows of a zombie child beside its `/proc` line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Standing {
    /// Its starter waits for it.
    pub waited: bool,
    /// It is in a zygote's process group.
    pub in_zygote_group: bool,
    /// It has been a zombie for at least [`UNCLAIMED_AFTER`].
    pub unclaimed: bool,
}

/// The one rule: `child` is a stray of `me` to be reaped.
pub fn is_stray(child: &Stat, me: &Stat, standing: Standing) -> bool {
    if child.state != 'Z' || child.ppid != me.pid || standing.waited || standing.in_zygote_group {
        return false;
    }
    let not_ours =
        child.session != me.session || (child.pgrp != child.pid && child.pgrp != me.pgrp);
    not_ours || standing.unclaimed
}

/// Whether this process has a child to reap at all (`waitid(WNOWAIT)`: nothing is reaped).
fn has_zombie_child() -> bool {
    // SAFETY: a zeroed siginfo_t is valid for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with P_ALL, WNOHANG and WNOWAIT only reports; the pointer is to a local.
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: filled by waitid (si_pid 0: no child has exited).
    r == 0 && unsafe { info.si_pid() } != 0
}

/// Reaps every stray zombie child now; returns how many.
pub fn sweep() -> usize {
    if !has_zombie_child() {
        registry(|r| r.seen.clear());
        return 0;
    }
    let Some(me) = Stat::read("self") else {
        return 0;
    };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let now = Instant::now();
    let mut zombies = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Some(child) = Stat::read(name).filter(|c| c.state == 'Z' && c.ppid == me.pid) {
            zombies.push(child);
        }
    }
    let strays: Vec<u32> = registry(|r| {
        r.seen
            .retain(|pid, _| zombies.iter().any(|z| z.pid == *pid));
        zombies
            .iter()
            .filter(|child| {
                let first = *r.seen.entry(child.pid).or_insert(now);
                let standing = Standing {
                    waited: r.waited.contains(&child.pid),
                    in_zygote_group: r.zygote_groups.contains(&child.pgrp),
                    unclaimed: now.saturating_duration_since(first) >= UNCLAIMED_AFTER,
                };
                is_stray(child, &me, standing)
            })
            .map(|c| c.pid)
            .collect()
    });
    let mut reaped = 0;
    for pid in strays {
        let mut status = 0;
        // SAFETY: waitpid on one PID, WNOHANG, with a pointer to a local int.
        if unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) }
            == pid as libc::pid_t
        {
            reaped += 1;
        }
    }
    registry(|r| r.seen.retain(|pid, _| !r.waited.contains(pid)));
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
            start_ticks: 0,
        }
    }

    #[test]
    fn only_zombie_children_nobody_waits_for_are_strays() {
        let me = stat(100, 'S', 1, 90, 90);
        let free = Standing::default();
        // A job's child left in its dead worker's group.
        assert!(is_stray(&stat(4001, 'Z', 100, 4000, 90), &me, free));
        // A daemon a job started in a session of its own.
        assert!(is_stray(&stat(4002, 'Z', 100, 4002, 4002), &me, free));
        // Not a zombie; not ours; waited for by its starter; a worker killed in its zygote's
        // group before it took its own (adopted by its PID).
        assert!(!is_stray(&stat(4001, 'S', 100, 4000, 90), &me, free));
        assert!(!is_stray(&stat(4001, 'Z', 7, 4000, 90), &me, free));
        let waited = Standing {
            waited: true,
            unclaimed: true,
            ..free
        };
        assert!(!is_stray(&stat(4001, 'Z', 100, 4000, 90), &me, waited));
        let zygote = Standing {
            in_zygote_group: true,
            unclaimed: true,
            ..free
        };
        assert!(!is_stray(&stat(4001, 'Z', 100, 4000, 90), &me, zygote));
        // Like a process the master started — a group leader in its session (a `timeout` that
        // took a group of its own), or in the master's group — only once nobody claimed it.
        assert!(!is_stray(&stat(4003, 'Z', 100, 4003, 90), &me, free));
        assert!(!is_stray(&stat(4004, 'Z', 100, 90, 90), &me, free));
        let unclaimed = Standing {
            unclaimed: true,
            ..free
        };
        assert!(is_stray(&stat(4003, 'Z', 100, 4003, 90), &me, unclaimed));
    }

    #[test]
    fn a_sweep_reaps_an_orphan_and_leaves_a_started_child_to_its_waiter() {
        // This test process plays the master: a subreaper with a child of its own (a group
        // leader, as the master's are) and an orphan re-parented to it.
        crate::subreaper::become_subreaper().unwrap();
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
