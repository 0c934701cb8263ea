//! The metrics listener (`--metrics-listen`, `metrics_listen`): a deliberately small HTTP/1.1
//! server on the master's runtime, one request per connection, for `GET /metrics` (OpenMetrics
//! text) and `GET /healthz` (200 while serving or paused by an operator, 503 when degraded or
//! not ready, with the verdict and its reasons as JSON). It asks the master's loop for its
//! status through the same channel as the control socket, so a scrape sees what `drover status`
//! sees. No framework: the master's memory budget is a few MiB (docs/metrics.md).

use crate::rules::health::Health;
use crate::status_document::Status;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::metrics::Exposition;
use crate::process::control::{Command, Request};

/// The longest request head read; anything longer is refused.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the master's loop may take to answer before the scrape is answered 503.
const STATUS_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest a connection is served, reading, answering and writing included.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(15);
/// Connections served at once; more wait for a turn.
const MAX_CONNECTIONS: usize = 16;

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    Health,
    NotFound,
    /// Not a GET (or HEAD).
    MethodNotAllowed,
    /// Not an HTTP request line.
    Bad,
}

/// Reads the request line of `head` (everything up to the blank line).
fn route(head: &[u8]) -> Route {
    let Some(line) = head.split(|b| *b == b'\n').next() else {
        return Route::Bad;
    };
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Route::Bad;
    };
    if !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return Route::Bad;
    }
    if method != "GET" && method != "HEAD" {
        return Route::MethodNotAllowed;
    }
    match target.split('?').next().unwrap_or_default() {
        "/metrics" => Route::Metrics,
        "/healthz" => Route::Health,
        _ => Route::NotFound,
    }
}

/// Serves until aborted.
pub fn serve(
    listener: TcpListener,
    master: mpsc::UnboundedSender<Request>,
    exposition: Arc<Exposition>,
) -> tokio::task::JoinHandle<()> {
    let turns = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("metrics listener: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(turn) = turns.clone().acquire_owned().await else {
                return;
            };
            let master = master.clone();
            let exposition = exposition.clone();
            tokio::spawn(async move {
                // The whole exchange is bounded: a client that sends a request and never reads
                // the answer gives its turn back after CONNECTION_TIMEOUT.
                let _ =
                    tokio::time::timeout(CONNECTION_TIMEOUT, answer(stream, &master, &exposition))
                        .await;
                drop(turn);
            });
        }
    })
}

/// A response: its status code, content type and body.
type Reply = (u16, &'static str, String);

/// Reads one request from `stream` and answers it.
async fn answer(
    mut stream: TcpStream,
    master: &mpsc::UnboundedSender<Request>,
    exposition: &Exposition,
) -> std::io::Result<()> {
    let (head, complete) = read_head(&mut stream).await;
    let head_only = head.starts_with(b"HEAD ");
    let reply = if !complete {
        (400, "text/plain", "bad request\n".to_string())
    } else {
        reply(route(&head), master, exposition).await
    };
    write_reply(&mut stream, reply, head_only).await
}

/// The request head, read until its blank line within [`READ_TIMEOUT`] and [`MAX_HEAD`]; with
/// whether it was complete.
async fn read_head(stream: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut head = Vec::with_capacity(512);
    let read = tokio::time::timeout(READ_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&buf[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
                return Ok(true);
            }
            if head.len() > MAX_HEAD {
                return Ok(false);
            }
        }
    })
    .await;
    let complete = matches!(read, Ok(Ok(true)));
    (head, complete)
}

/// What a request for `route` is answered.
async fn reply(
    route: Route,
    master: &mpsc::UnboundedSender<Request>,
    exposition: &Exposition,
) -> Reply {
    match route {
        Route::Metrics => match ask(master, Command::Status).await {
            Some(status) => (
                200,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                exposition.render(&status, crate::master::read_pss_kib(std::process::id())),
            ),
            None => (
                503,
                "text/plain",
                "the master is not answering (starting, or its loop is stalled)\n".to_string(),
            ),
        },
        Route::Health => health(ask(master, Command::Health).await),
        Route::NotFound => (
            404,
            "text/plain",
            "not found: try /metrics or /healthz\n".to_string(),
        ),
        Route::MethodNotAllowed => (405, "text/plain", "only GET\n".to_string()),
        Route::Bad => (400, "text/plain", "bad request\n".to_string()),
    }
}

/// `/healthz`: the verdict and its reasons, 200 while serving or paused and 503 otherwise; 503
/// "not ready" when the master did not answer (`None`).
fn health(status: Option<Status>) -> Reply {
    match status {
        Some(status) => {
            let code = match status.health {
                Health::Serving | Health::Paused => 200,
                Health::Degraded => 503,
            };
            let body = serde_json::json!({
                "health": status.health,
                "problems": status.problems,
                "phase": status.phase,
            });
            (code, "application/json", format!("{body}\n"))
        }
        None => (
            503,
            "application/json",
            format!(
                "{}\n",
                serde_json::json!({"health": "not ready", "problems": ["the master is not answering (starting, or its loop is stalled)"]})
            ),
        ),
    }
}

/// Writes `reply` (its head alone for a HEAD request) and closes the connection.
async fn write_reply(
    stream: &mut TcpStream,
    (code, content_type, body): Reply,
    head_only: bool,
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut response = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\nCache-Control: no-store\r\n\r\n",
        body.len()
    );
    if !head_only {
        response.push_str(&body);
    }
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// The loop's answer to `command` (the status with backlog and oldest waits, or the health
/// verdict alone), or `None` if the loop does not answer within [`STATUS_TIMEOUT`].
/// The master's status document (`Status` or `Health`); `None` when it does not answer in time.
async fn ask(master: &mpsc::UnboundedSender<Request>, command: Command) -> Option<Status> {
    let (reply, answer) = oneshot::channel();
    master
        .send(Request {
            command,
            pool: None,
            reply,
        })
        .ok()?;
    let answer = tokio::time::timeout(STATUS_TIMEOUT, answer)
        .await
        .ok()?
        .ok()?;
    // The same binary's document: it reads back unless the master answered with an error.
    serde_json::from_value(answer).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_are_routed_and_anything_else_is_refused() {
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Route::Metrics
        );
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Route::Metrics);
        assert_eq!(route(b"HEAD /healthz HTTP/1.1\r\n\r\n"), Route::Health);
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Route::MethodNotAllowed
        );
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        for bad in [
            &b""[..],
            b"GET\r\n\r\n",
            b"GET /metrics SPDY/3\r\n\r\n",
            b"\xff\xfe /x HTTP/1.1 extra\r\n",
        ] {
            assert_eq!(route(bad), Route::Bad, "{bad:?}");
        }
    }
}
