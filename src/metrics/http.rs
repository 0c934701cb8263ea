//! The metrics listener (`--metrics-listen`, `metrics_listen`): a deliberately small HTTP/1.1
//! server on the master's runtime, one request per connection, for `GET /metrics` (OpenMetrics
//! text) and `GET /healthz` (200 while serving or paused by an operator, 503 when degraded — the
//! database unreachable among the reasons — or not ready, with the verdict and its reasons as
//! JSON). It asks the master's loop for its
//! status through the same channel as the control socket, so a scrape sees what `drover status`
//! sees. No framework: the master's memory budget is a few MiB (docs/metrics.md).
//!
//! Its doors (docs/metrics.md, "The listener"): every connection is accepted at once and must
//! send its request head within [`HEAD_TIMEOUT`]; `/healthz` is answered as soon as it is read
//! (the loop answers it without a query), while `/metrics` waits for one of [`METRICS_TURNS`];
//! at most [`MAX_OPEN`] connections are open, and at that cap the one that has waited longest
//! without being answered is closed for the newcomer, so idle connections can neither starve a
//! liveness probe nor take the master's descriptors. With `metrics_token`, `/metrics` asks for
//! `Authorization: Bearer <token>` and `/healthz` shows only its verdict without it.

use crate::config::{listen_address, MetricsToken, RunConfig};
use crate::rules::health::Health;
use crate::status_document::Status;
use crate::MasterError;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::AbortHandle;

use crate::metrics::Exposition;
use crate::process::control::{Command, Request};

/// The longest request head read; anything longer is refused.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head, from its connection's accept.
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the master's loop may take to answer before the scrape is answered 503.
const STATUS_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest a connection is open, reading, waiting, answering and writing included.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(15);
/// `/metrics` requests answered at once (each costs the side connection a few queries and a
/// PSS read per worker); more wait for a turn.
const METRICS_TURNS: usize = 16;
/// Connections open at once, whatever they do: the most descriptors the listener holds.
const MAX_OPEN: usize = 128;
/// How long a connection accepted at the cap waits for the descriptor of the one closed for it.
const EVICTION_WAIT: Duration = Duration::from_millis(100);

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

/// The value of the request's `Authorization` header (the name in any case, the value trimmed);
/// `None` without one, or with more than one (which one would count is ambiguous).
fn authorization(head: &[u8]) -> Option<&[u8]> {
    let mut found = None;
    for line in head.split(|b| *b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        if line[..colon].eq_ignore_ascii_case(b"authorization") {
            if found.is_some() {
                return None;
            }
            found = Some(line[colon + 1..].trim_ascii());
        }
    }
    found
}

/// Whether a request whose `Authorization` header is `header` may read what `token` guards:
/// always when there is no token; else only with `Bearer <token>` (the scheme in any case, as
/// RFC 7235 has it), the credentials compared in constant time.
fn authorized(header: Option<&[u8]>, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    let Some(header) = header else {
        return false;
    };
    let Some(space) = header.iter().position(|b| *b == b' ') else {
        return false;
    };
    let (scheme, credentials) = header.split_at(space);
    scheme.eq_ignore_ascii_case(b"bearer")
        && constant_time_eq(credentials.trim_ascii_start(), token.as_bytes())
}

/// `a == b`, in a time that depends on their lengths only, never on where they differ: a wrong
/// token's answer does not tell how much of it was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    std::hint::black_box(diff) == 0
}

/// The connections not yet being answered — reading their head, or waiting for a turn at
/// `/metrics` — by the order they were accepted: the oldest is closed first when the listener
/// is full.
#[derive(Default)]
struct Waiting {
    /// The number the next connection gets.
    next: u64,
    /// Each waiting connection's task, by its number.
    tasks: BTreeMap<u64, AbortHandle>,
}

/// What every connection of the listener shares.
struct Shared {
    /// Where `/metrics` and `/healthz` ask the master's loop.
    master: mpsc::UnboundedSender<Request>,
    /// The job series.
    exposition: Arc<Exposition>,
    /// `metrics_token`, if set.
    token: Option<MetricsToken>,
    /// The turns of `/metrics` ([`METRICS_TURNS`]).
    turns: Arc<Semaphore>,
    /// The connections that may be closed for a newcomer.
    waiting: Mutex<Waiting>,
}

impl Shared {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // A panic while held leaves the map usable: it holds handles, no invariant.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A connection's place among the waiting ones; it leaves it when answered, or when it ends.
struct Place {
    /// Its number in [`Waiting::tasks`].
    id: u64,
    /// The listener's shared state.
    shared: Arc<Shared>,
}

impl Place {
    /// Leaves the waiting ones to be answered: `false` if the connection was already picked to
    /// be closed for a newcomer (it then ends without an answer).
    fn answer(&self) -> bool {
        self.shared.waiting().tasks.remove(&self.id).is_some()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.shared.waiting().tasks.remove(&self.id);
    }
}

/// Binds `metrics_listen` (a port alone: on loopback) and serves it until aborted, with the job
/// series it renders (the master feeds them); `None` when it is not set, and then no series are
/// kept. Warns when the address is not a loopback one and there is no token.
pub async fn listen(
    config: &RunConfig,
    master: mpsc::UnboundedSender<Request>,
) -> Result<Option<(tokio::task::JoinHandle<()>, Arc<Exposition>)>, MasterError> {
    let Some(value) = &config.metrics_listen else {
        return Ok(None);
    };
    let addr = listen_address(value).map_err(|problem| MasterError::Config {
        source_name: "metrics_listen".into(),
        problems: vec![problem],
    })?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| MasterError::Io {
            about: format!("listening for /metrics on {addr} (metrics_listen): is another process using that port?"),
            source,
        })?;
    let guarded = if config.metrics_token.is_some() {
        " (/metrics asks for the bearer token of metrics_token)"
    } else {
        ""
    };
    tracing::info!("serving /metrics and /healthz on http://{addr}{guarded}");
    if !addr.ip().is_loopback() && config.metrics_token.is_none() {
        tracing::warn!("the metrics listener on {addr} is not on loopback and has no token: whoever reaches it reads /metrics (queue, pool and job class names) and /healthz's problems; set metrics.token in config/drover.php (DROVER_METRICS_TOKEN) and have Prometheus send it (authorization: credentials), or listen on 127.0.0.1 (docs/metrics.md, \"The listener\")");
    }
    let exposition = Arc::new(Exposition::new());
    let task = serve(
        listener,
        master,
        exposition.clone(),
        config.metrics_token.clone(),
    );
    Ok(Some((task, exposition)))
}

/// Serves until aborted.
pub fn serve(
    listener: TcpListener,
    master: mpsc::UnboundedSender<Request>,
    exposition: Arc<Exposition>,
    token: Option<MetricsToken>,
) -> tokio::task::JoinHandle<()> {
    let shared = Arc::new(Shared {
        master,
        exposition,
        token,
        turns: Arc::new(Semaphore::new(METRICS_TURNS)),
        waiting: Mutex::new(Waiting::default()),
    });
    let open = Arc::new(Semaphore::new(MAX_OPEN));
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
            let permit = match open.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    // Full: close the connection that has waited longest without an answer
                    // and take its descriptor; when every open one is being answered, this one
                    // is closed at once (dropped).
                    let Some((_, oldest)) = shared.waiting().tasks.pop_first() else {
                        continue;
                    };
                    oldest.abort();
                    match tokio::time::timeout(EVICTION_WAIT, open.clone().acquire_owned()).await {
                        Ok(Ok(permit)) => permit,
                        _ => continue,
                    }
                }
            };
            // Registered under the lock its task takes to leave: it cannot leave before it is in.
            let mut waiting = shared.waiting();
            let id = waiting.next;
            waiting.next += 1;
            let place = Place {
                id,
                shared: shared.clone(),
            };
            let task = tokio::spawn(async move {
                // The whole exchange is bounded: a client that sends a request and never reads
                // the answer gives its descriptor (and its turn) back after CONNECTION_TIMEOUT.
                let _ = tokio::time::timeout(CONNECTION_TIMEOUT, answer(stream, place)).await;
                drop(permit);
            });
            waiting.tasks.insert(id, task.abort_handle());
        }
    })
}

/// A response: its status code, content type and body.
type Reply = (u16, &'static str, String);

/// Reads one request from `stream` and answers it, unless closed for a newcomer meanwhile.
async fn answer(mut stream: TcpStream, place: Place) -> std::io::Result<()> {
    let shared = place.shared.clone();
    let (head, complete) = read_head(&mut stream).await;
    let head_only = head.starts_with(b"HEAD ");
    let route = if complete { route(&head) } else { Route::Bad };
    let token = shared.token.as_ref().map(MetricsToken::expose);
    let authorized = authorized(authorization(&head), token);
    // Waiting for a turn still counts as waiting: a flood of scrapes cannot hold the
    // descriptors a probe needs.
    let _turn = match route {
        Route::Metrics if authorized => shared.turns.clone().acquire_owned().await.ok(),
        _ => None,
    };
    if !place.answer() {
        return Ok(());
    }
    let reply = reply(route, authorized, &shared).await;
    write_reply(&mut stream, reply, head_only).await
}

/// The request head, read until its blank line within [`HEAD_TIMEOUT`] and [`MAX_HEAD`]; with
/// whether it was complete.
async fn read_head(stream: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut head = Vec::with_capacity(512);
    let read = tokio::time::timeout(HEAD_TIMEOUT, async {
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

/// What a request for `route` is answered; `authorized`: it carried the token, or none is set.
async fn reply(route: Route, authorized: bool, shared: &Shared) -> Reply {
    match route {
        Route::Metrics if !authorized => (
            401,
            "text/plain",
            "/metrics asks for the bearer token of metrics_token: Authorization: Bearer <token>\n"
                .to_string(),
        ),
        Route::Metrics => match ask(&shared.master, Command::Status).await {
            Some(status) => (
                200,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                shared
                    .exposition
                    .render(&status, crate::master::read_pss_kib(std::process::id())),
            ),
            None => (
                503,
                "text/plain",
                "the master is not answering (starting, or its loop is stalled)\n".to_string(),
            ),
        },
        Route::Health => health(ask(&shared.master, Command::Health).await, authorized),
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
/// "not ready" when the master did not answer (`None`). `full`: with its problems and phase
/// (they name queues and pools) — without a token, or with it; else the verdict alone.
fn health(status: Option<Status>, full: bool) -> Reply {
    let not_ready = "the master is not answering (starting, or its loop is stalled)";
    let (code, body) = match status {
        Some(status) => {
            let code = match status.health {
                Health::Serving | Health::Paused => 200,
                Health::Degraded => 503,
            };
            let body = if full {
                serde_json::json!({
                    "health": status.health,
                    "problems": status.problems,
                    "phase": status.phase,
                })
            } else {
                serde_json::json!({"health": status.health})
            };
            (code, body)
        }
        None if full => (
            503,
            serde_json::json!({"health": "not ready", "problems": [not_ready]}),
        ),
        None => (503, serde_json::json!({"health": "not ready"})),
    };
    (code, "application/json", format!("{body}\n"))
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
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let extra = match code {
        401 => "WWW-Authenticate: Bearer realm=\"drover\"\r\n",
        405 => "Allow: GET, HEAD\r\n",
        _ => "",
    };
    let mut response = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\nCache-Control: no-store\r\n\r\n",
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

    #[test]
    fn the_authorization_header_is_found_by_name_in_any_case_and_once_only() {
        let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nauthorization:   Bearer abc  \r\n\r\n";
        assert_eq!(authorization(head), Some(&b"Bearer abc"[..]));
        assert_eq!(
            authorization(b"GET /metrics HTTP/1.1\nAUTHORIZATION: Bearer abc\n\n"),
            Some(&b"Bearer abc"[..])
        );
        assert_eq!(
            authorization(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            None
        );
        assert_eq!(
            authorization(
                b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n"
            ),
            None,
            "two are ambiguous"
        );
        assert_eq!(
            authorization(b"GET /metrics HTTP/1.1\r\n\r\nAuthorization: Bearer a\r\n"),
            None,
            "past the head is the body"
        );
        assert_eq!(
            authorization(b"GET /Authorization:x HTTP/1.1\r\n\r\n"),
            None,
            "the request line is no header"
        );
    }

    #[test]
    fn only_the_bearer_token_itself_is_authorized_and_anything_is_without_a_token() {
        let token = Some("0123456789abcdef");
        assert!(authorized(None, None));
        assert!(authorized(Some(b"Bearer wrong"), None));
        assert!(authorized(Some(b"Bearer 0123456789abcdef"), token));
        assert!(authorized(Some(b"bearer  0123456789abcdef"), token));
        assert!(authorized(Some(b"BEARER 0123456789abcdef"), token));
        for refused in [
            &b""[..],
            b"Bearer",
            b"Bearer ",
            b"0123456789abcdef",
            b"Basic 0123456789abcdef",
            b"Bearer 0123456789abcde",
            b"Bearer 0123456789abcdefg",
            b"Bearer 0123456789abcdeF",
            b"Bearer 0123456789abcdef extra",
            b"Bearer\t0123456789abcdef",
        ] {
            assert!(
                !authorized(Some(refused), token),
                "{}",
                String::from_utf8_lossy(refused)
            );
        }
        assert!(!authorized(None, token));
    }

    #[test]
    fn equal_bytes_compare_equal_and_any_difference_or_length_does_not() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"ab\0", b"ab"), "a NUL is no padding");
    }

    #[test]
    fn healthz_shows_its_problems_only_to_whoever_may_read_them() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "pid": 1, "master_pss_kib": null, "node": 1, "health": "degraded", "exit_code": 3,
            "problems": ["pool \"billing\": its circuit is open"], "phase": "running",
            "paused": false, "paused_queues": {}, "reloading": false, "pools": [],
            "totals": crate::status_document::Totals::default(),
        }))
        .unwrap();
        let (code, _, body) = health(Some(status.clone()), true);
        assert_eq!(code, 503);
        assert!(
            body.contains("billing") && body.contains("\"phase\""),
            "{body}"
        );
        let (code, _, body) = health(Some(status), false);
        assert_eq!(code, 503);
        assert_eq!(body, "{\"health\":\"degraded\"}\n");
        assert_eq!(health(None, false).2, "{\"health\":\"not ready\"}\n");
        assert!(health(None, true).2.contains("not answering"));
    }

    #[test]
    fn healthz_is_503_naming_the_database_while_it_is_unreachable() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "pid": 1, "master_pss_kib": null, "node": 1, "health": "degraded", "exit_code": 5,
            "problems": ["database unreachable for 7 s: no job is claimed ..."],
            "database_unreachable_secs": 7.2, "phase": "running", "paused": false,
            "paused_queues": {}, "reloading": false, "pools": [],
            "totals": crate::status_document::Totals::default(),
        }))
        .unwrap();
        let (code, _, body) = health(Some(status), true);
        assert_eq!(code, 503);
        assert!(body.contains("database unreachable for 7 s"), "{body}");
    }
}
