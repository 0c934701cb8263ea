//! Links the release `drover` binary with the code every master runs first and together.
//!
//! The kernel maps a binary's code into a process 64 KiB around each page it executes (fault-
//! around), so code laid out in the compiler's order — the claim loop beside the console's
//! renderer, the schedule's parser beside start-up — makes a master map most of its 3.4 MiB of
//! text to run the 1.2 MiB it uses. `link/hot-code.order` lists the functions a master runs, in
//! tiers (plain serving, then the Laravel package's launch and defaults, then each feature), as
//! `bench/hot-code.sh` recorded them under callgrind; lld places them first in that order, so a
//! host pays in resident memory only for the code of what it uses (bench/notes.md, "Issue 61: the
//! master's memory, feature by feature").
//!
//! Only for release builds on Linux, and only with lld (`ld.lld`, Debian's `lld`, installed by
//! scripts/setup); without it the binary links as usual and the build says so. A name the order
//! no longer matches is skipped: the binary is the same, laid out less well. `bench/hot-code.sh`
//! rewrites the order; `scripts/package` refuses a release whose order has gone stale.
//! `DROVER_HOT_CODE_ORDER=0` links without it (to measure what it saves).

use std::path::{Path, PathBuf};

fn main() {
    let order = Path::new(env("CARGO_MANIFEST_DIR").as_str()).join("link/hot-code.order");
    println!("cargo:rerun-if-changed={}", order.display());
    println!("cargo:rerun-if-env-changed=DROVER_HOT_CODE_ORDER");
    println!("cargo:rerun-if-env-changed=PATH");
    if env("PROFILE") != "release"
        || env("CARGO_CFG_TARGET_OS") != "linux"
        || std::env::var("DROVER_HOT_CODE_ORDER").as_deref() == Ok("0")
        || !order.is_file()
    {
        return;
    }
    if on_path("ld.lld").is_none() {
        println!(
            "cargo:warning=ld.lld not found: drover links without its hot-code order, and its master maps about 1 MiB more of code (apt-get install lld)"
        );
        return;
    }
    for arg in [
        "-fuse-ld=lld".to_string(),
        format!("-Wl,--symbol-ordering-file={}", order.display()),
        // Names of functions this build does not have (another dependency version) are skipped.
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ] {
        println!("cargo:rustc-link-arg-bin=drover={arg}");
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
