//! An OTLP/HTTP trace receiver inside the test process: the master under test exports to
//! `endpoint()`, and the test reads back what arrived. Bodies are decoded with the OpenTelemetry
//! project's own generated types (`opentelemetry-proto`, through `prost`), so the master's
//! hand-written encoder is checked by a decoder it shares no code with. It speaks just enough
//! HTTP/1.1 for an exporter: `POST /v1/traces` with a Content-Length, keep-alive, no chunking,
//! no gzip.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, status::StatusCode, Span};
use prost::Message;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One span as received, flattened out of its resource and scope, with ids as lowercase hex and
/// enums as words so a test compares plain strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedSpan {
    /// The trace id, 32 lowercase hex digits.
    pub trace_id: String,
    /// The span id, 16 lowercase hex digits.
    pub span_id: String,
    /// The parent's span id, 16 lowercase hex digits, or empty for a root span.
    pub parent_span_id: String,
    /// The span's name.
    pub name: String,
    /// "internal", "server", "client", "producer", "consumer" or "unspecified".
    pub kind: String,
    /// When the span started, in nanoseconds since the Unix epoch.
    pub start_unix_nano: u64,
    /// When the span ended, in nanoseconds since the Unix epoch.
    pub end_unix_nano: u64,
    /// The attributes: strings as they are, numbers and booleans through `to_string`, arrays and
    /// key-value lists in their Debug form.
    pub attributes: BTreeMap<String, String>,
    /// "unset", "ok" or "error".
    pub status: String,
    /// The status's message, empty when none.
    pub status_message: String,
    /// The linked spans, as (trace id, span id) in hex.
    pub links: Vec<(String, String)>,
}

/// What the serving tasks recorded, read by the test.
#[derive(Default)]
struct Received {
    /// TCP connections ever accepted: a test with export off asserts none.
    connections: usize,
    /// Every span of every accepted request, in arrival order.
    spans: Vec<ReceivedSpan>,
    /// The resource attributes of every ResourceSpans, in arrival order.
    resources: Vec<BTreeMap<String, String>>,
    /// Why bodies that did not decode were refused (answered 400).
    errors: Vec<String>,
}

/// The receiver; it stops listening when dropped.
pub struct OtlpReceiver {
    /// The loopback port it listens on.
    port: u16,
    /// Shared with the serving tasks, which record into it.
    received: Arc<Mutex<Received>>,
    /// The accept loop, aborted on drop so a test leaves no listener behind.
    accepting: tokio::task::JoinHandle<()>,
}

impl OtlpReceiver {
    pub async fn start() -> OtlpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Received::default()));
        let shared = received.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                shared.lock().unwrap().connections += 1;
                tokio::spawn(serve_connection(stream, shared.clone()));
            }
        });
        OtlpReceiver {
            port,
            received,
            accepting,
        }
    }

    /// The base URL; the exporter posts to `{endpoint}/v1/traces`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn connections(&self) -> usize {
        self.received.lock().unwrap().connections
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.lock().unwrap().spans.clone()
    }

    pub fn resources(&self) -> Vec<BTreeMap<String, String>> {
        self.received.lock().unwrap().resources.clone()
    }

    pub fn errors(&self) -> Vec<String> {
        self.received.lock().unwrap().errors.clone()
    }

    /// The spans once `what` holds of them, checked every 50 ms; panics with the spans seen when
    /// it still does not after `timeout`.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        what: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if what(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the expected spans did not arrive within {timeout:?}; received: {spans:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Answers requests on one connection until the client closes it (or sends what we cannot frame).
async fn serve_connection(stream: TcpStream, received: Arc<Mutex<Received>>) {
    let mut stream = BufReader::new(stream);
    while let Some((request_line, headers)) = read_head(&mut stream).await {
        // Without a Content-Length only a bodiless request (not a POST) can be framed.
        let length = headers.get("content-length").and_then(|v| v.parse().ok());
        let length = length.or((!request_line.starts_with("POST ")).then_some(0));
        let Some(length) = length.filter(|_| !headers.contains_key("transfer-encoding")) else {
            let _ = respond(stream.get_mut(), "411 Length Required", b"").await;
            return;
        };
        let mut body = vec![0; length];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        let gzip = headers
            .get("content-encoding")
            .map(|e| e.to_ascii_lowercase());
        let (status, reply) = if !request_line.starts_with("POST /v1/traces ") {
            ("404 Not Found", Vec::new())
        } else if gzip.as_deref() == Some("gzip") {
            ("415 Unsupported Media Type", Vec::new())
        } else {
            match ExportTraceServiceRequest::decode(body.as_slice()) {
                Ok(request) => {
                    record(&mut received.lock().unwrap(), request);
                    let reply = ExportTraceServiceResponse::default().encode_to_vec();
                    ("200 OK", reply)
                }
                Err(error) => {
                    received.lock().unwrap().errors.push(error.to_string());
                    ("400 Bad Request", error.to_string().into_bytes())
                }
            }
        };
        let closing = headers.get("connection").is_some_and(|c| c == "close");
        if respond(stream.get_mut(), status, &reply).await.is_err() || closing {
            return;
        }
    }
}

/// The next request's line and headers (names lowercased); None at the end of the stream.
async fn read_head(
    stream: &mut BufReader<TcpStream>,
) -> Option<(String, BTreeMap<String, String>)> {
    let mut request_line = String::new();
    stream
        .read_line(&mut request_line)
        .await
        .ok()
        .filter(|&n| n > 0)?;
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).await.ok().filter(|&n| n > 0)?;
        let Some((name, value)) = line.split_once(':') else {
            return Some((request_line, headers));
        };
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
}

/// Writes one response: a protobuf body for 200, the reason as text otherwise.
async fn respond(stream: &mut TcpStream, status: &str, body: &[u8]) -> std::io::Result<()> {
    let content_type = match status {
        "200 OK" => "application/x-protobuf",
        _ => "text/plain",
    };
    let length = body.len();
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(&[head.as_bytes(), body].concat()).await
}

fn record(received: &mut Received, request: ExportTraceServiceRequest) {
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.unwrap_or_default();
        received.resources.push(attributes(&resource.attributes));
        for scope_spans in resource_spans.scope_spans {
            received.spans.extend(scope_spans.spans.iter().map(flatten));
        }
    }
}

fn flatten(span: &Span) -> ReceivedSpan {
    let kind = SpanKind::try_from(span.kind).map_or("INVALID", |k| k.as_str_name());
    let status = span.status.clone().unwrap_or_default();
    let code = StatusCode::try_from(status.code).map_or("INVALID", |c| c.as_str_name());
    ReceivedSpan {
        trace_id: hex(&span.trace_id),
        span_id: hex(&span.span_id),
        parent_span_id: hex(&span.parent_span_id),
        name: span.name.clone(),
        kind: kind.trim_start_matches("SPAN_KIND_").to_ascii_lowercase(),
        start_unix_nano: span.start_time_unix_nano,
        end_unix_nano: span.end_time_unix_nano,
        attributes: attributes(&span.attributes),
        status: code.trim_start_matches("STATUS_CODE_").to_ascii_lowercase(),
        status_message: status.message,
        links: span
            .links
            .iter()
            .map(|link| (hex(&link.trace_id), hex(&link.span_id)))
            .collect(),
    }
}

fn attributes(pairs: &[KeyValue]) -> BTreeMap<String, String> {
    let rendered = |pair: &KeyValue| match pair.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(text)) => text.clone(),
        Some(Value::BoolValue(flag)) => flag.to_string(),
        Some(Value::IntValue(number)) => number.to_string(),
        Some(Value::DoubleValue(number)) => number.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    };
    pairs.iter().map(|p| (p.key.clone(), rendered(p))).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
