//! The tracing section of the configuration (`traces` in the JSON contract, `drover.traces` in
//! the Laravel package's config): off unless an endpoint is given.

use std::fmt;

use serde::Deserialize;

/// Where and how spans are exported. Absent: no tracer is registered, no span is made, no
/// connection opened.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TracesConfig {
    /// The collector's OTLP/HTTP base URL, e.g. `http://127.0.0.1:4318` (spans are posted to
    /// `{endpoint}/v1/traces`, protobuf), as `OTEL_EXPORTER_OTLP_ENDPOINT` is read. `http` only.
    pub endpoint: String,
    /// `service.name` of the spans' resource. Default `drover`.
    #[serde(default = "default_service")]
    pub service_name: String,
    /// Spans per request. Default 512.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Spans waiting to be sent at most; past it spans are dropped, counted and warned about.
    /// Default 4096.
    #[serde(default = "default_max_queue")]
    pub max_queue: usize,
}

fn default_service() -> String {
    "drover".into()
}

fn default_batch() -> usize {
    512
}

fn default_max_queue() -> usize {
    4096
}

/// The collector's address, read from [`TracesConfig::endpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    /// The traces path: the URL's path with `/v1/traces` appended.
    pub path: String,
}

impl Endpoint {
    /// `Host:` as HTTP writes it (an IPv6 address in brackets).
    pub fn host_header(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}{}", self.host_header(), self.path)
    }
}

impl TracesConfig {
    /// The endpoint, or what is wrong with the settings, naming each key.
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let Some(rest) = self.endpoint.strip_prefix("http://") else {
            return Err(format!(
                "traces.endpoint {:?}: give the collector's OTLP/HTTP address as http://HOST:PORT (e.g. http://127.0.0.1:4318; https is not supported: export to a collector on the host or network, which forwards over TLS)",
                self.endpoint
            ));
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']').unwrap_or((v6, ""));
                (host, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        let port = match port {
            None => 4318,
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                format!(
                    "traces.endpoint {:?}: the port {p:?} is not a port number",
                    self.endpoint
                )
            })?,
        };
        if host.is_empty() {
            return Err(format!("traces.endpoint {:?}: no host", self.endpoint));
        }
        if self.batch == 0 || self.batch > 10_000 {
            return Err(format!(
                "traces.batch {}: give 1 to 10000 spans per request",
                self.batch
            ));
        }
        if self.max_queue < self.batch || self.max_queue > 1_000_000 {
            return Err(format!(
                "traces.max_queue {}: give from traces.batch ({}) to 1000000 spans",
                self.max_queue, self.batch
            ));
        }
        Ok(Endpoint {
            host: host.to_string(),
            port,
            path: format!("{}/v1/traces", path.trim_end_matches('/')),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: &str) -> TracesConfig {
        serde_json::from_str(&format!(r#"{{"endpoint":"{endpoint}"}}"#)).unwrap()
    }

    #[test]
    fn an_endpoint_is_a_base_url_whose_traces_path_is_appended() {
        let e = config("http://collector:4318").endpoint().unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("collector", 4318, "/v1/traces")
        );
        let e = config("http://127.0.0.1/otlp/").endpoint().unwrap();
        assert_eq!((e.port, e.path.as_str()), (4318, "/otlp/v1/traces"));
        let e = config("http://[::1]:4319").endpoint().unwrap();
        assert_eq!(
            (e.host.as_str(), e.host_header().as_str()),
            ("::1", "[::1]:4319")
        );
        assert_eq!(e.to_string(), "http://[::1]:4319/v1/traces");
    }

    #[test]
    fn a_wrong_endpoint_or_size_is_named_with_the_fix() {
        for (endpoint, says) in [
            ("https://c:4318", "https is not supported"),
            ("c:4318", "http://HOST:PORT"),
            ("http://c:0", "not a port number"),
            ("http://c:x", "not a port number"),
            ("http://:4318", "no host"),
        ] {
            let e = config(endpoint).endpoint().unwrap_err();
            assert!(
                e.contains("traces.endpoint") && e.contains(says),
                "{endpoint}: {e}"
            );
        }
        let mut c = config("http://c");
        c.batch = 0;
        assert!(c.endpoint().unwrap_err().contains("traces.batch"));
        c.batch = 100;
        c.max_queue = 10;
        assert!(c.endpoint().unwrap_err().contains("traces.max_queue"));
        assert!(
            serde_json::from_str::<TracesConfig>(r#"{"endpoint":"http://c","bogus":1}"#).is_err()
        );
    }
}
