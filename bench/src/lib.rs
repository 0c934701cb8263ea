//! What the bench's binaries share: the Laravel fixture application each one runs
//! ([`laravel_fixture`]), the releases recorded in `RELEASES` ([`releases`]) and its console
//! served to time the pages ([`serve`]). The main benchmark (`src/main.rs`) keeps its own
//! modules.

pub mod releases;
pub mod serve;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// The fixture application for `laravel` (8 or 12): Laravel 8.83 runs `tests/laravel-app` in
/// place (Debian's framework under /usr/share/php); Laravel 12.67 is built by
/// `tests/laravel12-app/build` into `target/<build>` (offline, from the shared reference tree).
pub fn laravel_fixture(root: &Path, laravel: u8, build: &str) -> anyhow::Result<PathBuf> {
    match laravel {
        8 => Ok(root.join("tests/laravel-app")),
        12 => {
            let dir = root.join("target").join(build);
            let out = Command::new("bash")
                .arg(root.join("tests/laravel12-app/build"))
                .arg(&dir)
                .output()
                .context("building the Laravel 12 fixture")?;
            if !out.status.success() {
                bail!(
                    "building the Laravel 12 fixture: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Ok(dir)
        }
        other => bail!("--laravel {other}: 8 or 12"),
    }
}
