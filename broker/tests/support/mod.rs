//! A throwaway PostgreSQL for the broker's tests.

use std::os::unix::fs::PermissionsExt;

use drover_broker::{EmbeddedConfig, EmbeddedPostgres};

/// A private cluster, removed with its directory when dropped.
pub struct Db {
    pub pg: EmbeddedPostgres,
    _dir: tempfile::TempDir,
}

/// Starts a private cluster under /tmp (fsync off: these tests prove behaviour, not durability).
pub async fn db() -> Db {
    let dir = tempfile::Builder::new()
        .prefix("drover-broker-test-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = EmbeddedConfig::new(dir.path().join("db"));
    config.settings.push(("fsync".into(), "off".into()));
    let pg = EmbeddedPostgres::start(&config).await.unwrap();
    Db { pg, _dir: dir }
}
