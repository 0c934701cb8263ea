//! The journey's short form in the test command: docs/guide.md walked on three hosts
//! (`bench/src/bin/journey.rs --short`) with smaller numbers — Horizon on redis and h1's cron line
//! first; steps 1 and 2 committed and deployed; the masters started host by host with one
//! minute's due time while h1's cron and the masters both run the schedule (the `onOneServer()`
//! task must run once); producers switched, redis drained, Horizon stopped; two deploys with
//! Forge's script; step 8 as a restart onto the same binary, host by host (the previous release's
//! binary is left out: building it takes minutes, and the full run does it); a 10 s database
//! outage (`drover:status` exits 5 naming the database on every host, then 0); the rollback to
//! Horizon. Every job once, every due time once, every job after a deploy on its code.
//!
//! It runs `target/debug/drover`, the workspace's build, and takes 1.5 to 2.5 minutes here (2
//! cores): up to a minute of it waits for the next minute's due time. It fails, as it should,
//! with the deploy script's `queue:restart` line removed (the masters stay on the release before,
//! and the jobs after the deploy run its code).

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn the_guide_walked_on_three_hosts_in_its_short_form() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository's root");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let drover = target.join("debug/drover");
    assert!(
        drover.exists(),
        "{} is missing: the workspace's build makes it (cargo build)",
        drover.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_journey"))
        .arg("--short")
        .arg("--binary")
        .arg(&drover)
        .output()
        .expect("the journey binary runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the journey's short form failed ({}):\n{said}",
        out.status
    );
    assert!(said.contains("journey: every check held"), "{said}");
}
