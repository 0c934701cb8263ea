//! `<state_dir>/master.json`: what a running master tells of itself — its PID and node, and in
//! the embedded default the PDO DSN and URL that producers use. A master removes it when it
//! exits cleanly, so one left there names a master that did not ([`read_predecessor`]).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use drover_broker::EmbeddedPostgres;

use crate::MasterError;

/// The node and PID a previous master of `state_dir` recorded in its `master.json`, which a
/// master removes when it exits cleanly: left there, it names a master that did not.
pub fn read_predecessor(state_dir: &Path) -> Option<(i64, i32)> {
    let text = std::fs::read_to_string(state_dir.join("master.json")).ok()?;
    let state: serde_json::Value = serde_json::from_str(&text).ok()?;
    let node = state.get("node")?.as_i64()?;
    let pid = i32::try_from(state.get("pid")?.as_u64()?).ok()?;
    Some((node, pid))
}

/// `<state_dir>/master.json`: the master's PID and node, and in the embedded default the PDO DSN
/// that producers use (mode 0640: it may hold the embedded cluster's password). Removed on exit.
pub fn write(
    state_dir: &Path,
    node: i64,
    pg: Option<&EmbeddedPostgres>,
) -> Result<PathBuf, MasterError> {
    let path = state_dir.join("master.json");
    let state = serde_json::json!({
        "pid": std::process::id(),
        "node": node,
        "pdo_dsn": pg.map(|p| p.pdo_dsn()),
        "database_url": pg.map(|p| p.url()),
    });
    let tmp = path.with_extension("json.tmp");
    // The embedded cluster's URL and DSN may carry its password (loopback TCP): readable by the
    // master's user and group (the app's producers), never by others.
    let _ = std::fs::remove_file(&tmp);
    let writing = |at: &Path| {
        let about = format!("writing {}", at.display());
        move |source| MasterError::Io { about, source }
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .open(&tmp)
        .map_err(writing(&tmp))?;
    // A JSON value of strings and numbers always serializes.
    let text = serde_json::to_vec_pretty(&state).unwrap_or_default();
    file.write_all(&text).map_err(writing(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(writing(&path))?;
    Ok(path)
}
