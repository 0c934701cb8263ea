//! The metrics listener's two settings (docs/metrics.md, "The listener"): where it binds
//! (`metrics_listen`; a bare port means loopback) and the bearer token that guards `/metrics`
//! (`metrics_token`), a secret that no message, log line or `Debug` output ever shows.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};

use serde::{Deserialize, Deserializer};

/// The shortest `metrics_token` accepted: a shorter one can be guessed.
pub const MIN_TOKEN_LEN: usize = 16;
/// The longest `metrics_token` accepted (a request head is read up to 8 KiB).
pub const MAX_TOKEN_LEN: usize = 1024;

/// What `metrics_token` is called where an operator sets it, for messages.
const TOKEN_KEY: &str =
    "metrics_token (metrics.token in config/drover.php, DROVER_METRICS_TOKEN or --metrics-token)";

/// The bearer token `GET /metrics` asks for (`metrics_token`). A secret: `Debug` prints
/// `MetricsToken(..)`, and a value of the wrong type is refused without being quoted.
#[derive(Clone, PartialEq, Eq)]
pub struct MetricsToken(String);

impl MetricsToken {
    /// A token as given (checked by [`token_problem`] with the rest of the configuration).
    pub fn new(token: String) -> MetricsToken {
        MetricsToken(token)
    }

    /// The token itself, to compare a request's credentials with.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MetricsToken(..)")
    }
}

impl<'de> Deserialize<'de> for MetricsToken {
    /// A string; anything else is refused with a message that does not quote it (serde's own
    /// would: `invalid type: integer 1234…`).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer) {
            Ok(serde_json::Value::String(token)) => Ok(MetricsToken(token)),
            _ => Err(serde::de::Error::custom(
                "must be a string (the bearer token /metrics asks for), or null for none",
            )),
        }
    }
}

/// The address `metrics_listen` names: `ADDRESS:PORT` as written (an IP address, `[…]` around
/// an IPv6 one), or a port alone (`9187` or `:9187`), which binds the loopback address
/// `127.0.0.1`. Port 0 (any free port, unknown to a scraper) is refused.
pub fn listen_address(value: &str) -> Result<SocketAddr, String> {
    let refused = || {
        format!(
            "metrics_listen must be a port (9187: on 127.0.0.1 only) or an address and port such as 127.0.0.1:9187, 10.0.0.5:9187 or [::1]:9187 (or null for none), got {value:?}"
        )
    };
    let port_alone = value.strip_prefix(':').unwrap_or(value);
    let addr = if !port_alone.is_empty() && port_alone.bytes().all(|b| b.is_ascii_digit()) {
        let port: u16 = port_alone.parse().map_err(|_| refused())?;
        SocketAddr::from((Ipv4Addr::LOCALHOST, port))
    } else {
        value.parse::<SocketAddr>().map_err(|_| refused())?
    };
    if addr.port() == 0 {
        return Err(format!(
            "metrics_listen must name a port from 1 to 65535 for Prometheus to scrape, got {value:?}"
        ));
    }
    Ok(addr)
}

/// What is wrong with `token` as a `metrics_token`, if anything: it must be [`MIN_TOKEN_LEN`]
/// to [`MAX_TOKEN_LEN`] visible ASCII characters (no space, tab, newline or other control
/// character, as a header's credentials are sent). The message never quotes the token.
pub fn token_problem(token: &str) -> Option<String> {
    let fix = "e.g. the output of `openssl rand -hex 32`";
    if token.is_empty() {
        return Some(format!(
            "{TOKEN_KEY} is empty: leave it unset for no token, or set one of at least {MIN_TOKEN_LEN} characters, {fix}"
        ));
    }
    if let Some(at) = token.chars().position(|c| !c.is_ascii_graphic()) {
        return Some(format!(
            "{TOKEN_KEY} has a space, a control character or a character that is not ASCII (character {} of {}): a bearer token is visible ASCII only, {fix} (a value read from a file may carry its final newline)",
            at + 1,
            token.chars().count()
        ));
    }
    if token.len() < MIN_TOKEN_LEN || token.len() > MAX_TOKEN_LEN {
        return Some(format!(
            "{TOKEN_KEY} must be {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} characters long, got {}: {fix}",
            token.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_binds_loopback_and_an_address_is_taken_as_written() {
        for (value, want) in [
            ("9187", "127.0.0.1:9187"),
            (":9187", "127.0.0.1:9187"),
            ("127.0.0.1:9187", "127.0.0.1:9187"),
            ("0.0.0.0:9187", "0.0.0.0:9187"),
            ("10.0.0.5:80", "10.0.0.5:80"),
            ("[::1]:9187", "[::1]:9187"),
            ("[::]:9187", "[::]:9187"),
        ] {
            assert_eq!(listen_address(value), Ok(want.parse().unwrap()), "{value}");
        }
        assert!(listen_address("9187").unwrap().ip().is_loopback());
    }

    #[test]
    fn listen_values_that_are_no_address_or_port_are_refused_by_key_with_the_fix() {
        for bad in [
            "",
            ":",
            "localhost:9187",
            "65536",
            ":99999999999999999999",
            "9187 ",
            "+9187",
            "127.0.0.1",
            "::1:9187",
            "http://127.0.0.1:9187",
        ] {
            let problem = listen_address(bad).unwrap_err();
            assert!(
                problem.starts_with("metrics_listen must be a port (9187: on 127.0.0.1 only)"),
                "{bad:?}: {problem}"
            );
        }
        for zero in ["0", ":0", "127.0.0.1:0"] {
            let problem = listen_address(zero).unwrap_err();
            assert!(problem.contains("a port from 1 to 65535"), "{problem}");
        }
    }

    #[test]
    fn tokens_are_visible_ascii_of_a_guessable_length_or_refused_without_being_quoted() {
        assert_eq!(token_problem("0123456789abcdef"), None);
        assert_eq!(token_problem(&"Z".repeat(MAX_TOKEN_LEN)), None);
        assert_eq!(token_problem("a-b.c_d~e+f/g=h=!#$%"), None);
        for (bad, says) in [
            ("", "is empty"),
            ("secret-secret-secret\n", "character 21 of 21"),
            ("secret secret secret", "a space, a control character"),
            ("secret\tsecret\tsecret", "a space, a control character"),
            ("sécret-sécret-sécret", "not ASCII"),
            ("short-secret", "16 to 1024 characters long, got 12"),
            (&"Z".repeat(MAX_TOKEN_LEN + 1), "got 1025"),
        ] {
            let problem = token_problem(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(problem.starts_with("metrics_token (metrics.token in config/drover.php"));
            assert!(problem.contains(says), "{bad:?}: {problem}");
            assert!(problem.contains("openssl rand -hex 32"), "{problem}");
            if !bad.is_empty() {
                assert!(
                    !problem.contains("secret"),
                    "the token is quoted: {problem}"
                );
            }
        }
    }

    #[test]
    fn a_token_is_never_shown_by_debug_nor_quoted_when_of_the_wrong_type() {
        let token: Option<MetricsToken> =
            serde_json::from_str("\"hunter2-hunter2-hunter2\"").unwrap();
        assert_eq!(token.as_ref().unwrap().expose(), "hunter2-hunter2-hunter2");
        assert_eq!(format!("{token:?}"), "Some(MetricsToken(..))");
        let none: Option<MetricsToken> = serde_json::from_str("null").unwrap();
        assert_eq!(none, None);
        for wrong in [
            "123456789012345678",
            "[\"hunter2\"]",
            "{\"t\": \"hunter2\"}",
        ] {
            let e = serde_json::from_str::<Option<MetricsToken>>(wrong)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("must be a string"), "{e}");
            assert!(!e.contains("hunter2") && !e.contains("12345"), "{e}");
        }
    }
}

#[cfg(test)]
mod contract {
    use crate::config::RunConfig;

    #[test]
    fn contracts_with_and_without_a_token_are_read_and_a_bad_token_is_refused_by_its_key() {
        // The previous release's contract: no token.
        let old =
            RunConfig::from_json(r#"{"version":1,"metrics_listen":"9187","pools":[]}"#).unwrap();
        assert_eq!(old.metrics_token, None);
        let new = RunConfig::from_json(
            r#"{"version":1,"metrics_listen":"10.0.0.5:9187","metrics_token":"0123456789abcdef-xyz","pools":[]}"#,
        )
        .unwrap();
        assert_eq!(
            new.metrics_token.as_ref().map(|t| t.expose()),
            Some("0123456789abcdef-xyz")
        );
        assert!(!format!("{new:?}").contains("0123456789abcdef-xyz"));
        assert_eq!(
            old.changes_needing_a_restart(&new)[..],
            ["metrics_listen", "metrics_token"]
        );

        let problems = RunConfig::from_json(
            r#"{"version":1,"metrics_listen":"host:9187","metrics_token":"my secret","pools":[]}"#,
        )
        .unwrap_err()
        .join("\n");
        assert!(
            problems.contains("metrics_listen must be a port"),
            "{problems}"
        );
        assert!(
            problems.contains("metrics_token (metrics.token in config/drover.php"),
            "{problems}"
        );
        assert!(!problems.contains("my secret"), "{problems}");
        let problems = RunConfig::from_json(
            r#"{"version":1,"metrics_token":12345678901234567890,"pools":[]}"#,
        )
        .unwrap_err();
        assert!(
            problems[0].starts_with("metrics_token: must be a string"),
            "{problems:?}"
        );
        assert!(!problems[0].contains("1234567890"), "{problems:?}");
    }
}
