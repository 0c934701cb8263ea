//! `<state_dir>/master.json`: what a running master tells of itself — its PID and node, and in
//! the embedded default the PDO DSN and URL that producers use. A master removes it when it
//! exits cleanly, so one left there names a master that did not ([`read_predecessor`]). Read and
//! written through the checked state directory ([`StateDir`]): never through a planted link.

use drover_broker::EmbeddedPostgres;

use crate::state_dir::StateDir;
use crate::MasterError;

/// The file's name in the state directory.
const NAME: &str = "master.json";

/// The node and PID a previous master of `state_dir` recorded in its `master.json`, which a
/// master removes when it exits cleanly: left there, it names a master that did not. A file that
/// is not drover's (a link, a FIFO, another user's) is named in a warning and ignored.
pub fn read_predecessor(state_dir: &StateDir) -> Option<(i64, i32)> {
    let text = match state_dir.read(NAME) {
        Ok(text) => text?,
        Err(e) => {
            tracing::warn!("{e}");
            return None;
        }
    };
    let state: serde_json::Value = serde_json::from_str(&text).ok()?;
    let node = state.get("node")?.as_i64()?;
    let pid = i32::try_from(state.get("pid")?.as_u64()?).ok()?;
    Some((node, pid))
}

/// `<state_dir>/master.json`: the master's PID and node, and in the embedded default the PDO DSN
/// that producers use (mode 0640: it may hold the embedded cluster's password, readable by the
/// master's user and group — the application's producers —, never by others). Removed on exit
/// ([`remove`]).
pub fn write(
    state_dir: &StateDir,
    node: i64,
    pg: Option<&EmbeddedPostgres>,
) -> Result<(), MasterError> {
    let state = serde_json::json!({
        "pid": std::process::id(),
        "node": node,
        "pdo_dsn": pg.map(|p| p.pdo_dsn()),
        "database_url": pg.map(|p| p.url()),
    });
    // A JSON value of strings and numbers always serializes.
    let text = serde_json::to_vec_pretty(&state).unwrap_or_default();
    state_dir.write_new(NAME, &text, 0o640)
}

/// Removes `master.json` as a master that exits cleanly does.
pub fn remove(state_dir: &StateDir) {
    let _ = state_dir.remove(NAME);
}
