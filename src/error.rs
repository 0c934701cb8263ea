//! The master's error type: what the wiring between broker and supervisor can fail with.

#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    #[error(transparent)]
    Broker(#[from] drover_broker::BrokerError),
    #[error(transparent)]
    Supervisor(#[from] drover_supervisor::SupervisorError),
    #[error("{about}: {source}")]
    Io {
        about: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid configuration in {source_name}:\n  - {}", .problems.join("\n  - "))]
    Config {
        source_name: String,
        problems: Vec<String>,
    },
    /// Another master owns this state directory.
    #[error("another drover master is already running with state directory {state_dir} (its control socket answers); stop it first (`drover terminate --state-dir {state_dir}`)")]
    AlreadyRunning { state_dir: String },
    /// The control socket exists but this user may not use it: a master may well be running.
    #[error("permission denied on the drover control socket {socket}: {who}")]
    ControlDenied { socket: String, who: String },
    /// The control socket did not answer.
    #[error("no drover master is running with state directory {state_dir}: {reason}")]
    NotRunning { state_dir: String, reason: String },
}

impl MasterError {
    /// True when starting again unchanged would be refused the same way, so only an operator can
    /// make a start succeed: a configuration (or contract, or user) it refuses, or a broker error
    /// that needs one ([`drover_broker::BrokerError::needs_operator`]: the schema, the database
    /// URL). `drover` exits 78 for it (`rules::exit_code`).
    pub fn needs_operator(&self) -> bool {
        match self {
            MasterError::Config { .. } => true,
            MasterError::Broker(e) => e.needs_operator(),
            MasterError::Supervisor(_)
            | MasterError::Io { .. }
            | MasterError::AlreadyRunning { .. }
            | MasterError::ControlDenied { .. }
            | MasterError::NotRunning { .. } => false,
        }
    }
}
