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
}
