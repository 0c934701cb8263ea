//! The supervisor's one error type.

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// A worker process could not be started.
    #[error("{about}: {source}")]
    Spawn {
        about: String,
        #[source]
        source: std::io::Error,
    },
    /// A file or socket operation failed.
    #[error("{about}: {source}")]
    Io {
        about: String,
        #[source]
        source: std::io::Error,
    },
    /// The pool configuration is wrong; every problem is listed.
    #[error("invalid pool configuration:\n  - {}", .0.join("\n  - "))]
    Config(Vec<String>),
}
