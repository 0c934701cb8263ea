//! A finished span, as the master exports it: what OTLP carries of one, and no more.

use super::ids::{SpanId, TraceId};

/// What a span is to its trace (OTLP's `SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `send {queue}`: the dispatch, on the producer's side.
    Producer,
    /// `process {queue}`: one attempt run by a worker.
    Consumer,
    /// `settle {queue}`: the attempt's ending written to the database.
    Client,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
}

/// A span, finished.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace: TraceId,
    pub id: SpanId,
    /// The span it belongs under, if any (a root span has none).
    pub parent: Option<SpanId>,
    /// `{operation} {queue}`, as the messaging conventions name spans.
    pub name: String,
    pub kind: Kind,
    /// Unix nanoseconds.
    pub start: u64,
    pub end: u64,
    pub attributes: Vec<(&'static str, Value)>,
    /// An error's description; `None`: the span's status is unset.
    pub error: Option<String>,
    /// Spans it is linked to rather than under (trace, span).
    pub links: Vec<(TraceId, SpanId)>,
}
