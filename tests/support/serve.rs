//! The dashboard served by `php artisan serve` from a fixture application, for the tests that
//! request its pages.

use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, http_get as get, LaravelApp};

/// A process started in its own process group, ended with its group (`artisan serve` runs the
/// PHP server as a child).
pub struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// `php artisan serve --no-reload` in `APP_ENV` `app_env` on a free port; returns the server and
/// its port once it answers HTTP there. Another test may take the port between the probe and the
/// bind (artisan then serves on the next one): the log names the port it serves on, and a server
/// that is not on ours is stopped and started again on another.
pub fn serve(app: &LaravelApp, app_env: &str, gate_open: bool) -> (Group, u16) {
    for _attempt in 0..5 {
        let port = free_port();
        let log_name = format!("serve-{port}.log");
        let log = std::fs::File::create(app.storage_dir().join(&log_name)).unwrap();
        let mut command = app.command(&[
            "serve",
            "--no-reload",
            "--host=127.0.0.1",
            &format!("--port={port}"),
        ]);
        command
            .env("APP_ENV", app_env)
            .env("DROVER_TEST_GATE_OPEN", if gate_open { "1" } else { "" })
            // A page that fails shows why in the test's output (never in production).
            .env(
                "APP_DEBUG",
                if app_env == "local" { "true" } else { "false" },
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
        let server = Group(command.spawn().unwrap());
        let ours = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let answered = loop {
            let said = app.log(&log_name);
            if said.contains("127.0.0.1:") && !said.contains(&ours) {
                break false; // serving on another port: ours was taken
            }
            if said.contains(&ours) && get(port, "/drover").0 != 0 {
                break true;
            }
            assert!(
                Instant::now() < deadline,
                "artisan serve did not answer on {port}:\n{said}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        if answered {
            return (server, port);
        }
    }
    panic!("artisan serve found no free port in 5 tries");
}

/// A `GET` that got an HTTP answer: retried (up to 5 times, 200 ms apart) while the connection
/// fails or closes without one.
pub fn get_answered(port: u16, path: &str) -> (u16, String) {
    let mut last = (0, String::new());
    for _ in 0..5 {
        last = get(port, path);
        if last.0 != 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    last
}

/// A browser's session of the dashboard at `port`, from its answer to `GET path`: the cookies
/// and the CSRF token (the `XSRF-TOKEN` cookie's value) it sends with a form.
pub fn session(port: u16, path: &str) -> (String, String) {
    let (cookies, xsrf, _page) = session_and_page(port, path);
    (cookies, xsrf)
}

/// [`session`], and the page `GET path` answered.
pub fn session_and_page(port: u16, path: &str) -> (String, String, String) {
    let (status, head, answer) = super::http_exchange(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(status, 200, "GET {path}: {answer}");
    let mut cookies = Vec::new();
    let mut xsrf = String::new();
    for line in head.lines() {
        if let Some(cookie) = line
            .strip_prefix("Set-Cookie: ")
            .or_else(|| line.strip_prefix("set-cookie: "))
        {
            let pair = cookie.split(';').next().unwrap_or_default().to_string();
            if let Some(value) = pair.strip_prefix("XSRF-TOKEN=") {
                xsrf = value
                    .replace("%3D", "=")
                    .replace("%2F", "/")
                    .replace("%2B", "+");
            }
            cookies.push(pair);
        }
    }
    assert!(!xsrf.is_empty(), "no XSRF-TOKEN cookie: {head}");
    (cookies.join("; "), xsrf, answer)
}

/// `POST path` with `body` (a form) in session `(cookies, xsrf)`: (status, head, body).
pub fn post_form(
    port: u16,
    path: &str,
    body: &str,
    (cookies, xsrf): &(String, String),
) -> (u16, String, String) {
    super::http_exchange(
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies}\r\nX-XSRF-TOKEN: {xsrf}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}
