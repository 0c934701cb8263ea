//! The exporter: spans queued (bounded: past its room a span is dropped and counted, never
//! waited for — the loop does not stop for a collector), sent in batches by a task of its own as
//! OTLP/HTTP protobuf requests over one kept-alive connection, and what is queued sent once more
//! at exit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::config::{Endpoint, TracesConfig};
use super::otlp::export_request;
use super::span::Span;
use super::tracer::SpanSink;

/// How long one request may take, connecting included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a span waits in a batch that is not full.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// The loop's side: the queue's sender, and the task.
pub struct ExportQueue {
    tx: mpsc::Sender<Span>,
    /// Spans dropped for room since start (warned about as they start, then every 10,000).
    dropped: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl ExportQueue {
    /// Starts the task sending to `config.endpoint`.
    pub fn start(config: &TracesConfig, endpoint: Endpoint) -> ExportQueue {
        let (tx, rx) = mpsc::channel(config.max_queue);
        let resource = vec![
            ("service.name".to_string(), config.service_name.clone()),
            (
                "service.version".to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            ),
        ];
        let task = tokio::spawn(send_batches(rx, endpoint, resource, config.batch));
        ExportQueue {
            tx,
            dropped: Arc::default(),
            task,
        }
    }
}

impl SpanSink for ExportQueue {
    fn push(&mut self, span: Span) {
        if self.tx.try_send(span).is_err() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped == 1 || dropped % 10_000 == 0 {
                tracing::warn!(
                    dropped,
                    "traces: the export queue is full (the collector is slow or away): spans are dropped, not waited for"
                );
            }
        }
    }

    fn close(self: Box<Self>) -> Option<tokio::task::JoinHandle<()>> {
        drop(self.tx);
        Some(self.task)
    }
}

/// Sends what arrives in batches of up to `batch`, a span waiting at most [`FLUSH_EVERY`] for its
/// batch to fill; once the sender is gone, sends what is left and ends.
async fn send_batches(
    mut rx: mpsc::Receiver<Span>,
    endpoint: Endpoint,
    resource: Vec<(String, String)>,
    batch: usize,
) {
    let resource: Vec<(&str, &str)> = resource
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut connection = None;
    let mut spans = Vec::with_capacity(batch);
    let mut failing = false;
    loop {
        if rx.recv_many(&mut spans, batch).await == 0 {
            return;
        }
        let deadline = tokio::time::Instant::now() + FLUSH_EVERY;
        let mut closed = false;
        while spans.len() < batch {
            let room = batch - spans.len();
            match tokio::time::timeout_at(deadline, rx.recv_many(&mut spans, room)).await {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let body = export_request(&resource, env!("CARGO_PKG_VERSION"), &spans);
        let sent = spans.len();
        spans.clear();
        match tokio::time::timeout(REQUEST_TIMEOUT, post(&mut connection, &endpoint, &body)).await {
            Ok(Ok(())) => {
                if std::mem::take(&mut failing) {
                    tracing::info!(endpoint = %endpoint, "traces: the collector takes spans again");
                }
            }
            outcome => {
                connection = None;
                let why = match outcome {
                    Ok(Err(e)) => e,
                    _ => format!("no answer within {REQUEST_TIMEOUT:?}"),
                };
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(endpoint = %endpoint, "traces: cannot export {sent} span(s): {why}; spans are dropped until the collector answers (check drover.traces.endpoint)");
                }
            }
        }
        if closed {
            return;
        }
    }
}

/// POSTs `body` to the endpoint's traces path over `connection` (opened if there is none), and
/// reads the answer; an answer other than 2xx is an error naming its status.
async fn post(
    connection: &mut Option<TcpStream>,
    endpoint: &Endpoint,
    body: &[u8],
) -> Result<(), String> {
    if connection.is_none() {
        let stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(|e| format!("cannot connect to {endpoint}: {e}"))?;
        *connection = Some(stream);
    }
    let stream = connection.as_mut().expect("just opened");
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
        endpoint.path,
        endpoint.host_header(),
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| format!("sending to {endpoint}: {e}"))?;
    stream
        .write_all(body)
        .await
        .map_err(|e| format!("sending to {endpoint}: {e}"))?;
    let answer = read_answer(stream).await?;
    if answer.close {
        *connection = None;
    }
    match answer.status {
        200..=299 => Ok(()),
        status => Err(format!("{endpoint} answered HTTP {status}")),
    }
}

/// An HTTP answer, as far as the exporter needs it.
struct Answer {
    status: u16,
    /// The server closes the connection after it (`Connection: close`, or no length given).
    close: bool,
}

/// Reads one answer's head and its body (by `Content-Length`).
async fn read_answer(stream: &mut TcpStream) -> Result<Answer, String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > 16 * 1024 {
            return Err("the collector's answer has no end to its head".into());
        }
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the collector's answer: {e}"))?;
        if n == 0 {
            return Err("the collector closed the connection without answering".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP answer: {:?}", head.lines().next()))?;
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let length = header("content-length").and_then(|v| v.parse::<usize>().ok());
    let close =
        header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) || length.is_none();
    let mut body = buf.len() - head_end;
    while length.is_some_and(|l| body < l) {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the collector's answer: {e}"))?;
        if n == 0 {
            break;
        }
        body += n;
    }
    Ok(Answer { status, close })
}
