//! A headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`), for the
//! dashboard's tests: a real browser loading real pages, clicking real buttons. The WebDriver
//! wire protocol is JSON over HTTP; this speaks the handful of commands the tests need over a
//! plain TCP stream.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;

/// chromedriver and one browser session; both end when dropped.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

/// The key WebDriver names element references by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One HTTP/1.1 exchange with chromedriver: (status, JSON body).
fn call(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("chromedriver");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read the head, then exactly Content-Length bytes (chromedriver may keep the connection).
    let mut response = Vec::new();
    let mut buf = [0u8; 65536];
    let (head_end, length) = loop {
        let n = stream.read(&mut buf).expect("chromedriver's answer");
        assert!(
            n > 0,
            "chromedriver closed the connection before answering {method} {path}"
        );
        response.extend_from_slice(&buf[..n]);
        if let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&response[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .expect("a Content-Length");
            break (end + 4, length);
        }
    };
    while response.len() < head_end + length {
        let n = stream.read(&mut buf).expect("chromedriver's answer");
        assert!(
            n > 0,
            "chromedriver's answer to {method} {path} was cut short"
        );
        response.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&response[..head_end]).to_string();
    let body = String::from_utf8_lossy(&response[head_end..head_end + length]).to_string();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let json = serde_json::from_str(&body).unwrap_or_else(|e| {
        panic!("chromedriver answered {status} with a body that is not JSON ({e}): {body}")
    });
    (status, json)
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session (1280×1000).
    pub fn start() -> Browser {
        let port = super::free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (scripts/setup installs chromium-driver)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let (status, answer) = call(
            port,
            "POST",
            "/session",
            Some(&serde_json::json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": "/usr/bin/chromium",
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"],
                },
            }}})),
        );
        assert_eq!(status, 200, "no browser session: {answer}");
        let session = answer["value"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        Browser {
            driver,
            port,
            session,
        }
    }

    fn command(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let (status, answer) = call(
            self.port,
            method,
            &format!("/session/{}{path}", self.session),
            body.as_ref(),
        );
        assert_eq!(status, 200, "WebDriver {method} {path}: {answer}");
        answer["value"].clone()
    }

    pub fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(serde_json::json!({ "url": url })));
    }

    /// The address of the page the browser is on.
    pub fn url(&self) -> String {
        self.command("GET", "/url", None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub fn title(&self) -> String {
        self.command("GET", "/title", None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The page as the browser has it now.
    pub fn source(&self) -> String {
        self.command("GET", "/source", None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The visible text of the first element matching `css`, if any.
    /// None too when the page was replaced between finding the element and reading it (a page
    /// that reloads itself): the caller asks again.
    pub fn text(&self, css: &str) -> Option<String> {
        let id = self.find(css)?;
        let (status, answer) = call(
            self.port,
            "GET",
            &format!("/session/{}/element/{id}/text", self.session),
            None,
        );
        // Chrome says the page moved on in two ways: the standard stale reference, or (when the
        // node went between its lookup and the read) an inspector error naming the node.
        let replaced = (status == 404 && answer["value"]["error"] == "stale element reference")
            || answer["value"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("does not belong to the document"));
        if replaced {
            return None;
        }
        assert_eq!(status, 200, "WebDriver GET text of {css}: {answer}");
        Some(answer["value"].as_str().unwrap_or_default().to_string())
    }

    /// How many elements match `css`.
    pub fn count(&self, css: &str) -> usize {
        self.command(
            "POST",
            "/elements",
            Some(serde_json::json!({"using": "css selector", "value": css})),
        )
        .as_array()
        .map(Vec::len)
        .unwrap_or(0)
    }

    fn find(&self, css: &str) -> Option<String> {
        let (status, answer) = call(
            self.port,
            "POST",
            &format!("/session/{}/element", self.session),
            Some(&serde_json::json!({"using": "css selector", "value": css})),
        );
        (status == 200).then(|| {
            answer["value"][ELEMENT]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
    }

    /// Waits up to 30 s for an element matching `css` (after a click that loads a page) and
    /// returns its text.
    pub fn wait_for(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(text) = self.text(css) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "nothing matched {css} within 30 s:\n{}",
                self.source()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Types `text` into the first element matching `css` (panics if there is none), after
    /// clearing what it held.
    pub fn type_into(&self, css: &str, text: &str) {
        let id = self
            .find(css)
            .unwrap_or_else(|| panic!("no element matches {css}:\n{}", self.source()));
        self.command(
            "POST",
            &format!("/element/{id}/clear"),
            Some(serde_json::json!({})),
        );
        self.command(
            "POST",
            &format!("/element/{id}/value"),
            Some(serde_json::json!({ "text": text })),
        );
    }

    /// Clicks the first element matching `css` (panics if there is none).
    pub fn click(&self, css: &str) {
        let id = self
            .find(css)
            .unwrap_or_else(|| panic!("no element matches {css}:\n{}", self.source()));
        self.command(
            "POST",
            &format!("/element/{id}/click"),
            Some(serde_json::json!({})),
        );
    }

    /// A PNG of the viewport, written to `path`.
    pub fn screenshot(&self, path: &std::path::Path) {
        let b64 = self.command("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = call(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
