//! Files generated from Rust types for the PHP package and the docs (tests only): the status
//! document's schema and fixture (`status_document`), the master's pool defaults and limits
//! (`config::php_pool_options`) and its settings' defaults (`config::php_settings`). Each test
//! renders its file and fails when the checked-in copy differs, so the two sides cannot drift;
//! `DROVER_WRITE_CONTRACTS=1` rewrites them instead.

use std::path::{Path, PathBuf};

/// `file`, relative to the repository's root.
pub(crate) fn path(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(file)
}

/// The checked-in `file` must be `text`; `DROVER_WRITE_CONTRACTS=1` rewrites it instead.
/// `test` names the tests that write it, for the message.
pub(crate) fn check(file: &str, text: &str, test: &str) {
    let path = path(file);
    if std::env::var_os("DROVER_WRITE_CONTRACTS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "{file} is not what the Rust side says; run `DROVER_WRITE_CONTRACTS=1 cargo test -p drover-cli --lib {test}` and commit it"
    );
}
