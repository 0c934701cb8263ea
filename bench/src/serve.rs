//! The fixture application's console served by `php artisan serve`, to time its pages: the
//! server started on a free port of 127.0.0.1, and a page requested from it over HTTP/1.1.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A port of 127.0.0.1 free now.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `artisan` (`php artisan` with its environment, no arguments yet) started as `serve` on
/// 127.0.0.1:`port`, its output into `log`, in a process group of its own: `artisan serve` runs
/// PHP's server as its child, and the group goes as one.
pub fn spawn(mut artisan: Command, port: u16, log: File) -> std::io::Result<Child> {
    artisan
        .args([
            "serve",
            "--no-reload",
            "--host=127.0.0.1",
            &format!("--port={port}"),
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
}

/// GET `path` over HTTP/1.1, each read waiting at most `timeout`: (status, body).
pub fn get(port: u16, path: &str, timeout: Duration) -> anyhow::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(timeout))?;
    // One write: PHP's built-in server calls a request that arrives in pieces malformed.
    stream.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}
