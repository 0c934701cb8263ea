//! The TLS settings of a connection string and libpq's rules for them: [`TlsOptions`] collects
//! the keys as written (the parser in [`crate::connect`] hands it every key; it keeps the TLS
//! ones), and [`TlsOptions::resolve`] applies libpq's rules and gives the [`TlsPolicy`] a
//! connection follows. Nothing here reads a file but the test for `~/.postgresql/root.crt`.

use std::fmt;
use std::path::{Path, PathBuf};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// libpq tries plain first, then TLS; drover treats it as `prefer`.
    Allow,
    /// TLS if the server offers it, else plain (libpq's default).
    Prefer,
    /// TLS or nothing; the certificate is checked only if a root certificate is configured.
    Require,
    /// TLS, and the server's certificate must chain to `sslrootcert`.
    VerifyCa,
    /// As `verify-ca`, and the certificate must name the host connected to.
    VerifyFull,
}

impl SslMode {
    /// Every value, for messages.
    pub const VALUES: &'static str = "disable, allow, prefer, require, verify-ca, verify-full";

    /// Parses libpq's spelling (case-sensitive, as libpq).
    pub fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode={other:?} is not a valid sslmode; use one of {}",
                    SslMode::VALUES
                ))
            }
        })
    }

    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Where the CA certificates that verify the server come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// `sslrootcert=system`: the system's CA store, where OpenSSL finds it
    /// (`/etc/ssl/certs/ca-certificates.crt` on Debian; `SSL_CERT_FILE` and `SSL_CERT_DIR`
    /// override it).
    System,
    /// A PEM file with one or more CA certificates; only these are trusted, as in libpq.
    File(PathBuf),
}

impl fmt::Display for RootCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootCert::System => f.write_str("sslrootcert=system"),
            RootCert::File(path) => write!(f, "sslrootcert={}", path.display()),
        }
    }
}

/// The TLS keys of one connection string, as written (before libpq's rules).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// `sslmode`; `None` means libpq's default (`prefer`, or `verify-full` with
    /// `sslrootcert=system`).
    pub mode: Option<SslMode>,
    /// `sslrootcert`; `None` means libpq's default file `~/.postgresql/root.crt`, if it exists.
    pub root_cert: Option<RootCert>,
    /// `sslcert`: the client certificate (PEM, optionally followed by its chain). No default:
    /// drover does not read libpq's `~/.postgresql/postgresql.crt`.
    pub cert: Option<PathBuf>,
    /// `sslkey`: the client certificate's private key (PEM, unencrypted). No default.
    pub key: Option<PathBuf>,
    /// `sslsni`: `false` when set to 0, so the host name is not sent in the handshake.
    pub no_sni: bool,
}

/// libpq TLS keys drover refuses by name rather than letting tokio-postgres call them unknown.
const UNSUPPORTED: &[&str] = &[
    "sslpassword",
    "sslcrl",
    "sslcrldir",
    "sslcertmode",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "sslkeylogfile",
    "requiressl",
];

impl TlsOptions {
    /// Takes `key=value` if it is a TLS key: `Ok(true)` when taken (the caller drops it from the
    /// string handed to tokio-postgres), `Ok(false)` for every other key, `Err` for a bad value.
    pub fn take(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let path = || (!value.is_empty()).then(|| PathBuf::from(value));
        match key {
            "sslmode" => self.mode = Some(SslMode::parse(value)?),
            "sslrootcert" => {
                self.root_cert = match value {
                    "" => None,
                    "system" => Some(RootCert::System),
                    file => Some(RootCert::File(PathBuf::from(file))),
                }
            }
            "sslcert" => self.cert = path(),
            "sslkey" => self.key = path(),
            "sslsni" => {
                self.no_sni = match value {
                    "0" => true,
                    "1" => false,
                    other => return Err(format!("sslsni={other:?} must be 0 or 1")),
                }
            }
            // Ignored by libpq since PostgreSQL 14 too.
            "sslcompression" => {}
            other if UNSUPPORTED.contains(&other) => {
                return Err(format!(
                    "{other} is a libpq option drover does not support; remove it (drover reads sslmode, sslrootcert, sslcert, sslkey and sslsni)"
                ))
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Applies libpq's rules. `home` is where `~/.postgresql/root.crt` is looked for (`None`: no
    /// default file).
    pub fn resolve(&self, home: Option<&Path>) -> Result<TlsPolicy, String> {
        if let (Some(RootCert::System), Some(mode)) = (&self.root_cert, self.mode) {
            if mode != SslMode::VerifyFull {
                return Err(format!(
                    "sslmode={} may not be used with sslrootcert=system (as in libpq): a public CA signs certificates for anyone's host names, so only verify-full is safe; use sslmode=verify-full",
                    mode.as_str()
                ));
            }
        }
        let mode = match (self.mode, &self.root_cert) {
            (None, Some(RootCert::System)) => SslMode::VerifyFull,
            (None, _) | (Some(SslMode::Allow), _) => SslMode::Prefer,
            (Some(mode), _) => mode,
        };
        if mode == SslMode::Disable {
            return Ok(TlsPolicy::disabled());
        }
        let client = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(ClientCert {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, None) => None,
            (Some(cert), None) => {
                return Err(format!(
                    "sslcert={} is set without sslkey; give the client certificate's private key as sslkey too",
                    cert.display()
                ))
            }
            (None, Some(key)) => {
                return Err(format!(
                    "sslkey={} is set without sslcert; give the client certificate as sslcert too",
                    key.display()
                ))
            }
        };
        let verifying = matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull);
        let (root_cert, root_cert_is_default) = match &self.root_cert {
            Some(root) => (Some(root.clone()), false),
            None => match home.map(|h| h.join(".postgresql").join("root.crt")) {
                Some(default) if default.exists() => (Some(RootCert::File(default)), true),
                default if verifying => {
                    let looked = default
                        .map(|d| format!("no {} (libpq's default)", d.display()))
                        .unwrap_or_else(|| {
                            "no home directory for libpq's default ~/.postgresql/root.crt".into()
                        });
                    return Err(format!(
                        "sslmode={} needs the CA that signed the server's certificate, and none is configured (no sslrootcert, {looked}); set sslrootcert=/path/to/ca.pem, or sslrootcert=system for the system's CA store",
                        mode.as_str()
                    ));
                }
                _ => (None, false),
            },
        };
        // libpq: "if a root CA file exists, sslmode=require behaves as verify-ca".
        let mode = if mode == SslMode::Require && root_cert.is_some() {
            SslMode::VerifyCa
        } else {
            mode
        };
        Ok(TlsPolicy {
            mode,
            root_cert,
            root_cert_is_default,
            client,
            sni: !self.no_sni,
        })
    }
}

/// A client certificate and its key (`sslcert`, `sslkey`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The certificate file (PEM; further certificates in it are sent as its chain).
    pub cert: PathBuf,
    /// The private key file (PEM, unencrypted; 0600, or 0640 if owned by root, as libpq asks).
    pub key: PathBuf,
}

/// What a connection does about TLS once libpq's rules are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPolicy {
    /// The sslmode in effect: `allow` became `prefer`, an unset one `prefer` (or `verify-full`
    /// with `sslrootcert=system`), `require` with a root certificate `verify-ca`. It decides
    /// whether TLS is tried, required, and whether the host name is checked.
    pub mode: SslMode,
    /// The CAs the server's certificate must chain to; `None`: the certificate is not checked
    /// (`prefer`/`require` without a root certificate, as libpq).
    pub root_cert: Option<RootCert>,
    /// `root_cert` is libpq's default `~/.postgresql/root.crt`, not a configured `sslrootcert`;
    /// messages say so, since the user may not know the file is read.
    pub root_cert_is_default: bool,
    /// The client certificate presented to the server (for `cert` authentication).
    pub client: Option<ClientCert>,
    /// Send the host name in the handshake (SNI), as libpq does unless `sslsni=0`.
    pub sni: bool,
}

impl TlsPolicy {
    /// No TLS: `sslmode=disable`, or a Unix socket (PostgreSQL has no TLS there; libpq ignores
    /// sslmode for sockets too).
    pub fn disabled() -> TlsPolicy {
        TlsPolicy {
            mode: SslMode::Disable,
            root_cert: None,
            root_cert_is_default: false,
            client: None,
            sni: true,
        }
    }

    /// What tokio-postgres is told: never, try, or insist on TLS.
    pub fn negotiation(&self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Pg;
        match self.mode {
            SslMode::Disable => Pg::Disable,
            SslMode::Allow | SslMode::Prefer => Pg::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Pg::Require,
        }
    }

    /// With `prefer`, libpq retries without TLS when the handshake fails; so do we.
    pub fn falls_back_to_plain(&self) -> bool {
        matches!(self.mode, SslMode::Allow | SslMode::Prefer)
    }

    /// "sslrootcert=/path" or "/root/.postgresql/root.crt (libpq's default sslrootcert)".
    pub(super) fn root_description(&self) -> String {
        match (&self.root_cert, self.root_cert_is_default) {
            (Some(RootCert::File(path)), true) => {
                format!("{} (libpq's default sslrootcert)", path.display())
            }
            (Some(root), _) => root.to_string(),
            (None, _) => "no sslrootcert".into(),
        }
    }
}

/// The home directory libpq's default files are looked for in: `HOME`, else the passwd entry.
pub fn home_dir() -> Option<PathBuf> {
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Some(PathBuf::from(home)),
        _ => nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| u.dir),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> TlsOptions {
        let mut o = TlsOptions::default();
        for (k, v) in pairs {
            assert!(o.take(k, v).unwrap(), "{k} is a TLS key");
        }
        o
    }

    #[test]
    fn other_keys_are_left_for_tokio_postgres() {
        let mut o = TlsOptions::default();
        assert!(!o.take("host", "db").unwrap());
        assert!(!o.take("sslnegotiation", "direct").unwrap());
        assert_eq!(o, TlsOptions::default());
    }

    #[test]
    fn an_unknown_sslmode_is_named_with_the_valid_ones() {
        let err = TlsOptions::default()
            .take("sslmode", "verify_full")
            .unwrap_err();
        assert!(err.contains("\"verify_full\""), "{err}");
        assert!(err.contains(SslMode::VALUES), "{err}");
        let err = TlsOptions::default().take("sslcrl", "/x").unwrap_err();
        assert!(
            err.contains("sslcrl") && err.contains("does not support"),
            "{err}"
        );
    }

    #[test]
    fn the_default_is_prefer_without_verification_and_allow_is_prefer() {
        let home = tempfile::tempdir().unwrap();
        let p = TlsOptions::default().resolve(Some(home.path())).unwrap();
        assert_eq!(p.mode, SslMode::Prefer);
        assert_eq!(p.root_cert, None);
        assert!(p.falls_back_to_plain());
        let p = options(&[("sslmode", "allow")])
            .resolve(Some(home.path()))
            .unwrap();
        assert_eq!(p.mode, SslMode::Prefer);
        let p = options(&[("sslmode", "disable"), ("sslrootcert", "/x")])
            .resolve(Some(home.path()))
            .unwrap();
        assert_eq!(p, TlsPolicy::disabled());
    }

    #[test]
    fn require_with_a_root_certificate_is_verify_ca_as_in_libpq() {
        let home = tempfile::tempdir().unwrap();
        // Without any root certificate: TLS, nothing checked.
        let p = options(&[("sslmode", "require")])
            .resolve(Some(home.path()))
            .unwrap();
        assert_eq!((p.mode, p.root_cert), (SslMode::Require, None));
        // An explicit sslrootcert makes it verify-ca.
        let p = options(&[("sslmode", "require"), ("sslrootcert", "/etc/ca.pem")])
            .resolve(Some(home.path()))
            .unwrap();
        assert_eq!(p.mode, SslMode::VerifyCa);
        assert_eq!(p.root_cert, Some(RootCert::File("/etc/ca.pem".into())));
        assert!(!p.root_cert_is_default);
        // So does an existing ~/.postgresql/root.crt.
        std::fs::create_dir(home.path().join(".postgresql")).unwrap();
        let default = home.path().join(".postgresql/root.crt");
        std::fs::write(&default, "x").unwrap();
        let p = options(&[("sslmode", "require")])
            .resolve(Some(home.path()))
            .unwrap();
        assert_eq!(p.mode, SslMode::VerifyCa);
        assert_eq!(p.root_cert, Some(RootCert::File(default.clone())));
        assert!(p.root_cert_is_default);
        assert!(p.root_description().contains("libpq's default"));
        // verify-full keeps checking the host name.
        let p = options(&[("sslmode", "verify-full")])
            .resolve(Some(home.path()))
            .unwrap();
        assert_eq!(p.mode, SslMode::VerifyFull);
        assert_eq!(p.root_cert, Some(RootCert::File(default)));
    }

    #[test]
    fn verify_modes_without_any_root_certificate_say_what_to_set() {
        let home = tempfile::tempdir().unwrap();
        for mode in ["verify-ca", "verify-full"] {
            let err = options(&[("sslmode", mode)])
                .resolve(Some(home.path()))
                .unwrap_err();
            assert!(err.contains(&format!("sslmode={mode}")), "{err}");
            assert!(err.contains("set sslrootcert="), "{err}");
            assert!(err.contains("root.crt"), "{err}");
        }
    }

    #[test]
    fn sslrootcert_system_means_verify_full_and_refuses_weaker_modes() {
        let p = options(&[("sslrootcert", "system")]).resolve(None).unwrap();
        assert_eq!(p.mode, SslMode::VerifyFull);
        assert_eq!(p.root_cert, Some(RootCert::System));
        let err = options(&[("sslrootcert", "system"), ("sslmode", "require")])
            .resolve(None)
            .unwrap_err();
        assert!(err.contains("use sslmode=verify-full"), "{err}");
    }

    #[test]
    fn a_client_certificate_needs_both_files() {
        let err = options(&[("sslcert", "/c.pem")]).resolve(None).unwrap_err();
        assert!(err.contains("without sslkey"), "{err}");
        let err = options(&[("sslkey", "/k.pem")]).resolve(None).unwrap_err();
        assert!(err.contains("without sslcert"), "{err}");
        let p = options(&[("sslcert", "/c.pem"), ("sslkey", "/k.pem")])
            .resolve(None)
            .unwrap();
        assert_eq!(
            p.client,
            Some(ClientCert {
                cert: "/c.pem".into(),
                key: "/k.pem".into()
            })
        );
    }
}
