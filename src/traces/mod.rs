//! OpenTelemetry traces of the jobs this master runs, by the messaging conventions, exported over
//! OTLP/HTTP (docs/traces.md). Off unless `traces.endpoint` is set: then, and only then, a
//! [`Tracer`] is registered with the job lifecycle (`crate::lifecycle`) and an exporter task
//! started.
//!
//! - [`config`]: the settings and the endpoint's address.
//! - [`ids`]: trace and span ids; the W3C `traceparent` the Laravel package puts in a payload.
//! - [`tracer`]: the lifecycle observer that makes the `send`, `process` and `settle` spans.
//! - [`span`]: a finished span; [`otlp`]: its protobuf encoding; [`export`]: the bounded queue
//!   and the task that sends batches.

pub mod config;
pub mod export;
pub mod ids;
pub mod otlp;
pub mod span;
pub mod tracer;

pub use config::TracesConfig;
pub use tracer::Tracer;

/// The tracer to register for `config`, with its exporter running; or what is wrong with the
/// settings.
pub fn start(config: &TracesConfig) -> Result<Tracer, String> {
    let endpoint = config.endpoint()?;
    tracing::info!(endpoint = %endpoint, "traces: exporting the jobs' spans over OTLP/HTTP");
    let queue = export::ExportQueue::start(config, endpoint);
    Ok(Tracer::new(
        Box::new(queue),
        ids::IdSource::random(),
        tracer::system_clock(),
    ))
}
