//! TLS to PostgreSQL with libpq's options and rules: `sslmode` (`disable`, `allow`, `prefer`,
//! `require`, `verify-ca`, `verify-full`), `sslrootcert` (a PEM file, or `system` for the system's
//! CA store), `sslcert` + `sslkey` (a client certificate) and `sslsni`.
//!
//! [`TlsOptions`] collects what a connection string says (the parser in [`crate::connect`] hands
//! it every key; it keeps the TLS ones), [`TlsOptions::resolve`] applies libpq's rules and gives a
//! [`TlsPolicy`], and [`TlsPolicy::connector`] reads the files and builds the OpenSSL context
//! for one connection attempt. Its handshakes record why a server certificate did not verify, so
//! [`Report::explain`] can say what to fix instead of OpenSSL's bare "certificate verify failed".
//! Nothing here touches OpenSSL when TLS is off.
//!
//! The context is built with `SslContextBuilder` and the hardening of openssl's `SslConnector`
//! (the same options, modes and cipher list), not with `SslConnector` itself (nor
//! postgres-openssl, which needs one): `SslConnector::builder` always parses the system's whole
//! CA bundle (144 certificates on Debian 12), on every connection, even when only `sslrootcert`'s
//! CA is trusted, and that left the master 0.8 MiB larger for good (measured:
//! docs/postgres-tls.md). The stream and channel binding below are postgres-openssl's, over
//! tokio-openssl.

use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use openssl::error::ErrorStack;
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::PKey;
use openssl::ssl::{
    Ssl, SslContext, SslContextBuilder, SslMethod, SslMode as OpensslMode, SslOptions,
    SslVerifyMode, SslVersion,
};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509CheckFlags;
use openssl::x509::{X509NameRef, X509Ref, X509StoreContextRef, X509};
use tokio::io::{AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio_postgres::config::SslNegotiation;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::Socket;

/// The TLS stream of a connection (plain connections use the same connection type:
/// tokio-postgres's `MaybeTlsStream` holds either). Buffered below OpenSSL, as postgres-openssl
/// does, so a record is not read with two system calls.
#[derive(Debug)]
pub struct TlsStream(
    /// The OpenSSL session over the buffered socket.
    tokio_openssl::SslStream<BufReader<Socket>>,
);

impl AsyncRead for TlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl tokio_postgres::tls::TlsStream for TlsStream {
    /// `tls-server-end-point` (RFC 5929), so SCRAM-SHA-256-PLUS binds the login to this TLS
    /// session, as postgres-openssl and libpq do.
    fn channel_binding(&self) -> ChannelBinding {
        let end_point = self.0.ssl().peer_certificate().and_then(|cert| {
            let algorithms = cert
                .signature_algorithm()
                .object()
                .nid()
                .signature_algorithms()?;
            let digest = match algorithms.digest {
                Nid::MD5 | Nid::SHA1 => MessageDigest::sha256(),
                nid => MessageDigest::from_nid(nid)?,
            };
            cert.digest(digest).ok().map(|d| d.to_vec())
        });
        match end_point {
            Some(hash) => ChannelBinding::tls_server_end_point(hash),
            None => ChannelBinding::none(),
        }
    }
}

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
    /// `sslrootcert=system`: OpenSSL's default store (`/etc/ssl/certs` on Debian; `SSL_CERT_FILE`
    /// and `SSL_CERT_DIR` override it).
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
    fn root_description(&self) -> String {
        match (&self.root_cert, self.root_cert_is_default) {
            (Some(RootCert::File(path)), true) => {
                format!("{} (libpq's default sslrootcert)", path.display())
            }
            (Some(root), _) => root.to_string(),
            (None, _) => "no sslrootcert".into(),
        }
    }

    /// Reads the files and builds the connector for one connection attempt. `Err` is a
    /// configuration problem (a file that cannot be read or does not hold what it should).
    pub fn connector(&self, negotiation: SslNegotiation) -> Result<Tls, String> {
        let report = Arc::new(Report::default());
        if self.mode == SslMode::Disable {
            return Ok(Tls {
                context: None,
                verify_chain: false,
                verify_host: false,
                sni: self.sni,
                report,
            });
        }
        let openssl = |e: ErrorStack| format!("OpenSSL could not set up TLS: {e}");
        let mut builder = SslContextBuilder::new(SslMethod::tls_client()).map_err(openssl)?;
        // openssl's SslConnector hardening: no compression, no SSLv2/3, fresh (EC)DH keys, the
        // empty-fragment CBC countermeasure on; buffers released while idle; no weak ciphers.
        let mut options = SslOptions::ALL
            | SslOptions::NO_COMPRESSION
            | SslOptions::NO_SSLV2
            | SslOptions::NO_SSLV3
            | SslOptions::SINGLE_DH_USE
            | SslOptions::SINGLE_ECDH_USE;
        options &= !SslOptions::DONT_INSERT_EMPTY_FRAGMENTS;
        builder.set_options(options);
        builder.set_mode(
            OpensslMode::AUTO_RETRY
                | OpensslMode::ACCEPT_MOVING_WRITE_BUFFER
                | OpensslMode::ENABLE_PARTIAL_WRITE
                | OpensslMode::RELEASE_BUFFERS,
        );
        builder
            .set_cipher_list(
                "DEFAULT:!aNULL:!eNULL:!MD5:!3DES:!DES:!RC4:!IDEA:!SEED:!aDSS:!SRP:!PSK",
            )
            .map_err(openssl)?;
        // libpq's default ssl_min_protocol_version.
        builder
            .set_min_proto_version(Some(SslVersion::TLS1_2))
            .map_err(openssl)?;
        match &self.root_cert {
            Some(RootCert::System) => builder.set_default_verify_paths().map_err(openssl)?,
            Some(RootCert::File(path)) => {
                let what = self.root_description();
                let pem = read(
                    path,
                    &what,
                    "the CA certificate (PEM) that signed the server's",
                )?;
                let certs = X509::stack_from_pem(&pem)
                    .ok()
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| {
                        format!("{what} holds no PEM certificate; point it at the CA certificate (-----BEGIN CERTIFICATE-----) that signed the server's")
                    })?;
                // Only these CAs, as libpq.
                let mut store = X509StoreBuilder::new().map_err(openssl)?;
                for cert in certs {
                    store.add_cert(cert).map_err(openssl)?;
                }
                builder.set_cert_store(store.build());
            }
            None => {}
        }
        let verify_chain = self.root_cert.is_some();
        builder.set_verify(if verify_chain {
            SslVerifyMode::PEER
        } else {
            SslVerifyMode::NONE
        });
        if let Some(client) = &self.client {
            let what = format!("sslcert={}", client.cert.display());
            let pem = read(&client.cert, &what, "the client certificate (PEM)")?;
            let mut chain = X509::stack_from_pem(&pem)
                .ok()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("{what} holds no PEM certificate; point it at the client certificate (-----BEGIN CERTIFICATE-----)"))?
                .into_iter();
            if let Some(leaf) = chain.next() {
                builder.set_certificate(&leaf).map_err(openssl)?;
            }
            for extra in chain {
                builder.add_extra_chain_cert(extra).map_err(openssl)?;
            }
            let key_what = format!("sslkey={}", client.key.display());
            check_key_permissions(&client.key, &key_what)?;
            let pem = read(
                &client.key,
                &key_what,
                "the client certificate's private key (PEM)",
            )?;
            let key = PKey::private_key_from_pem(&pem).map_err(|e| {
                format!("{key_what} is not an unencrypted PEM private key ({e}); drover does not support sslpassword, so decrypt it (e.g. `openssl pkey -in KEY -out KEY.plain`)")
            })?;
            builder.set_private_key(&key).map_err(openssl)?;
            builder.check_private_key().map_err(|_| {
                format!("{key_what} is not the private key of {what}; give the key that belongs to that certificate")
            })?;
        }
        if negotiation == SslNegotiation::Direct {
            // Direct TLS (PostgreSQL 17) wants the "postgresql" protocol name, as libpq sends.
            builder
                .set_alpn_protos(b"\x0apostgresql")
                .map_err(openssl)?;
        }
        Ok(Tls {
            context: Some(builder.build()),
            verify_chain,
            verify_host: self.mode == SslMode::VerifyFull,
            sni: self.sni,
            report,
        })
    }
}

/// Reads a file named by a TLS option; the error names the option, the path and the OS error.
fn read(path: &Path, what: &str, should_hold: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        format!("{what} cannot be read: {e}; point it at a readable file holding {should_hold}")
    })
}

/// libpq refuses a private key others may read: at most 0600, or 0640 when owned by root.
fn check_key_permissions(path: &Path, what: &str) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| {
        format!("{what} cannot be read: {e}; point it at a readable file holding the client certificate's private key (PEM)")
    })?;
    if !meta.is_file() {
        return Err(format!("{what} is not a regular file"));
    }
    let mode = meta.mode();
    let too_open = if meta.uid() == 0 {
        mode & 0o037 != 0
    } else {
        mode & 0o077 != 0
    };
    if too_open {
        return Err(format!(
            "{what} has group or world access (mode {:o}); as libpq, drover wants u=rw (0600) or less, or u=rw,g=r (0640) or less if owned by root: chmod 600 it",
            mode & 0o777
        ));
    }
    Ok(())
}

/// Why a certificate did not verify, as OpenSSL's verify callback saw it.
#[derive(Debug, Clone)]
struct VerifyFailure {
    /// OpenSSL's X509_V_ERR_* code, to choose the explanation.
    code: i32,
    /// OpenSSL's text for it ("unable to get local issuer certificate").
    reason: &'static str,
    /// The host name or address the certificate was checked against.
    host: String,
    /// Subject of the certificate at fault, so the message names which one.
    subject: String,
    /// Subject of the server's own certificate (the chain's first): an untrusted chain is
    /// reported at its top, but the user knows the server by this one.
    server: String,
    /// Its issuer: for an untrusted chain, the CA the user should point sslrootcert at.
    issuer: String,
    /// The DNS names and addresses it is valid for (subject alternative names, else the CN).
    names: Vec<String>,
    /// Its validity period, for an expired or not yet valid certificate.
    validity: (String, String),
}

/// What went wrong in a handshake, written by the connector's callbacks and read after a failed
/// connect (the connector is moved into tokio-postgres, so this is shared).
#[derive(Debug, Default)]
pub struct Report {
    /// The TLS handshake itself failed (as opposed to TCP, the server's answer, or the login).
    handshake_failed: AtomicBool,
    /// The first certificate verification failure, if any.
    verify: Mutex<Option<VerifyFailure>>,
}

// OpenSSL's X509_V_ERR_* codes (stable ABI numbers, include/openssl/x509_vfy.h).
const UNABLE_TO_GET_ISSUER_CERT: i32 = 2;
const CERT_SIGNATURE_FAILURE: i32 = 7;
const CERT_NOT_YET_VALID: i32 = 9;
const CERT_HAS_EXPIRED: i32 = 10;
const DEPTH_ZERO_SELF_SIGNED_CERT: i32 = 18;
const SELF_SIGNED_CERT_IN_CHAIN: i32 = 19;
const UNABLE_TO_GET_ISSUER_CERT_LOCALLY: i32 = 20;
const UNABLE_TO_VERIFY_LEAF_SIGNATURE: i32 = 21;
const HOSTNAME_MISMATCH: i32 = 62;
const IP_ADDRESS_MISMATCH: i32 = 64;

impl Report {
    fn record(&self, host: &str, ctx: &X509StoreContextRef) {
        let mut slot = self.verify.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return;
        }
        let cert = ctx.current_cert();
        *slot = Some(VerifyFailure {
            code: ctx.error().as_raw(),
            reason: ctx.error().error_string(),
            host: host.to_string(),
            subject: cert
                .map(|c| name_text(c.subject_name()))
                .unwrap_or_default(),
            server: ctx
                .chain()
                .and_then(|chain| chain.iter().next())
                .or(cert)
                .map(|c| name_text(c.subject_name()))
                .unwrap_or_default(),
            issuer: cert.map(|c| name_text(c.issuer_name())).unwrap_or_default(),
            names: cert.map(cert_names).unwrap_or_default(),
            validity: cert
                .map(|c| (c.not_before().to_string(), c.not_after().to_string()))
                .unwrap_or_default(),
        });
    }
}

/// "CN=localhost, O=Example" (the entries drover can print; others are skipped).
fn name_text(name: &X509NameRef) -> String {
    let parts: Vec<String> = name
        .entries()
        .filter_map(|e| {
            let key = e.object().nid().short_name().ok()?;
            let value = e.data().to_string().ok()?;
            Some(format!("{key}={value}"))
        })
        .collect();
    if parts.is_empty() {
        "(no subject)".into()
    } else {
        parts.join(", ")
    }
}

/// The names a certificate is valid for: its subject alternative names, else its CN.
fn cert_names(cert: &X509Ref) -> Vec<String> {
    let mut names = Vec::new();
    for name in cert.subject_alt_names().into_iter().flatten() {
        if let Some(dns) = name.dnsname() {
            names.push(dns.to_string());
        } else if let Some(ip) = name.ipaddress() {
            let ip = match ip.len() {
                4 => <[u8; 4]>::try_from(ip).ok().map(IpAddr::from),
                16 => <[u8; 16]>::try_from(ip).ok().map(IpAddr::from),
                _ => None,
            };
            names.extend(ip.map(|ip| ip.to_string()));
        }
    }
    if names.is_empty() {
        for cn in cert.subject_name().entries_by_nid(Nid::COMMONNAME) {
            if let Ok(cn) = cn.data().to_string() {
                names.push(cn);
            }
        }
    }
    names
}

/// tokio-postgres's TLS hook for one connection attempt: OpenSSL with the policy's settings,
/// recording why a handshake failed.
pub struct Tls {
    /// The configured OpenSSL context; `None` when TLS is off, so no OpenSSL state is built.
    context: Option<SslContext>,
    /// Check the certificate chain (a root certificate is configured).
    verify_chain: bool,
    /// Check the host name too (`verify-full`); `verify-ca` checks only the chain.
    verify_host: bool,
    /// Send SNI (`sslsni`).
    sni: bool,
    /// Shared with the handshakes this makes, read by [`Tls::explain`].
    report: Arc<Report>,
}

impl Tls {
    /// The handle to read after the connector has been moved into a connect call.
    pub fn report(&self) -> Arc<Report> {
        self.report.clone()
    }
}

impl MakeTlsConnect<Socket> for Tls {
    type Stream = TlsStream;
    type TlsConnect = Handshake;
    type Error = ErrorStack;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Handshake, ErrorStack> {
        let Some(context) = &self.context else {
            return Ok(Handshake {
                ssl: None,
                report: self.report.clone(),
            });
        };
        let mut ssl = Ssl::new(context)?;
        let ip = domain.parse::<IpAddr>().ok();
        if self.sni && ip.is_none() {
            ssl.set_hostname(domain)?;
        }
        if self.verify_host {
            // As openssl's SslConnector: the name (or the address) must be in the certificate.
            let param = ssl.param_mut();
            param.set_hostflags(X509CheckFlags::NO_PARTIAL_WILDCARDS);
            match ip {
                Some(ip) => param.set_ip(ip)?,
                None => param.set_host(domain)?,
            }
        }
        if self.verify_chain {
            let report = self.report.clone();
            let host = domain.to_string();
            ssl.set_verify_callback(SslVerifyMode::PEER, move |ok, ctx| {
                if !ok {
                    report.record(&host, ctx);
                }
                ok
            });
        }
        Ok(Handshake {
            ssl: Some(ssl),
            report: self.report.clone(),
        })
    }
}

/// One TLS handshake, noting in the report when it fails.
pub struct Handshake {
    /// The session, set up for this host; `None` when TLS is off (tokio-postgres then never
    /// asks for a handshake).
    ssl: Option<Ssl>,
    /// Where a failure is noted.
    report: Arc<Report>,
}

/// The future of one handshake.
type HandshakeFuture = Pin<
    Box<dyn Future<Output = Result<TlsStream, Box<dyn std::error::Error + Send + Sync>>> + Send>,
>;

impl TlsConnect<Socket> for Handshake {
    type Stream = TlsStream;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = HandshakeFuture;

    fn connect(self, stream: Socket) -> HandshakeFuture {
        let report = self.report;
        let Some(ssl) = self.ssl else {
            return Box::pin(async { Err("TLS is disabled for this connection".into()) });
        };
        Box::pin(async move {
            let mut stream =
                tokio_openssl::SslStream::new(ssl, BufReader::with_capacity(8192, stream))?;
            match Pin::new(&mut stream).connect().await {
                Ok(()) => Ok(TlsStream(stream)),
                Err(e) => {
                    report.handshake_failed.store(true, Ordering::Relaxed);
                    Err(e.into())
                }
            }
        })
    }
}

impl Report {
    /// True when the TLS handshake failed (so `prefer` may retry without TLS).
    pub fn handshake_failed(&self) -> bool {
        self.handshake_failed.load(Ordering::Relaxed)
    }

    /// If TLS is why `error` happened, what went wrong and what to change; `None` otherwise.
    pub fn explain(&self, error: &tokio_postgres::Error, policy: &TlsPolicy) -> Option<String> {
        let failure = self
            .verify
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(f) = failure {
            return Some(explain_verify(&f, policy));
        }
        let cause = std::error::Error::source(error).map(|c| c.to_string());
        if self.handshake_failed() {
            let cause = cause.unwrap_or_else(|| error.to_string());
            let client = match &policy.client {
                Some(c) if cause.contains("alert") => format!(
                    "; if the server rejected the client certificate, check that its ssl_ca_file trusts the CA that signed sslcert={}",
                    c.cert.display()
                ),
                _ => String::new(),
            };
            return Some(format!(
                "TLS handshake failed: {cause}; check that this is a PostgreSQL server with ssl = on that accepts TLS 1.2 or newer{client}"
            ));
        }
        // tokio-postgres's text when the server answers the SSLRequest with "no".
        if cause.as_deref() == Some("server does not support TLS") {
            return Some(format!(
                "the server does not accept TLS (its ssl setting is off) and sslmode={} requires it; turn ssl on in the server, or use sslmode=prefer or disable only on a network you trust",
                policy.mode.as_str()
            ));
        }
        None
    }
}

/// The message for a certificate that did not verify.
fn explain_verify(f: &VerifyFailure, policy: &TlsPolicy) -> String {
    let root = policy.root_description();
    match f.code {
        UNABLE_TO_GET_ISSUER_CERT
        | UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        | UNABLE_TO_VERIFY_LEAF_SIGNATURE
        | DEPTH_ZERO_SELF_SIGNED_CERT
        | SELF_SIGNED_CERT_IN_CHAIN
        | CERT_SIGNATURE_FAILURE => {
            let trusted = match &policy.root_cert {
                Some(RootCert::System) => {
                    "by any CA in the system's store (sslrootcert=system)".to_string()
                }
                _ => format!("by the CA in {root}"),
            };
            format!(
                "certificate verify failed ({}): the server's certificate ({}, issued by {}) is not signed {trusted}; point sslrootcert at the CA that signed it",
                f.reason, f.server, f.issuer
            )
        }
        HOSTNAME_MISMATCH | IP_ADDRESS_MISMATCH => format!(
            "certificate verify failed ({}): the server's certificate is for {}, not for {}; connect with a host name the certificate lists, or use sslmode=verify-ca to check only that a trusted CA signed it",
            f.reason,
            if f.names.is_empty() {
                "no host name".to_string()
            } else {
                f.names.join(", ")
            },
            f.host
        ),
        CERT_HAS_EXPIRED => format!(
            "certificate verify failed ({}): the certificate {} expired on {}; renew the server's certificate (or check this machine's clock)",
            f.reason, f.subject, f.validity.1
        ),
        CERT_NOT_YET_VALID => format!(
            "certificate verify failed ({}): the certificate {} is valid only from {}; check this machine's clock",
            f.reason, f.subject, f.validity.0
        ),
        _ => format!(
            "certificate verify failed ({}): the certificate {} (issued by {}) was refused; check the server's certificate chain against {root}",
            f.reason, f.subject, f.issuer
        ),
    }
}

/// A hint for a connection the server refused after TLS was settled (a `pg_hba.conf` rule or
/// certificate authentication), when TLS settings are the likely fix.
pub fn server_hint(error: &tokio_postgres::Error, policy: &TlsPolicy) -> Option<String> {
    let message = error.as_db_error()?.message();
    if message.contains("no encryption") && policy.mode == SslMode::Disable {
        return Some(
            "the server accepts only TLS connections from here (pg_hba.conf); use sslmode=require or verify-full instead of sslmode=disable".into(),
        );
    }
    if message.contains("requires a valid client certificate") {
        return Some(match &policy.client {
            None => "the server wants a client certificate (cert authentication); set sslcert and sslkey to a certificate signed by a CA in the server's ssl_ca_file, whose CN is the user name".into(),
            Some(c) => format!("the server did not accept sslcert={}; check that a CA in its ssl_ca_file signed it", c.cert.display()),
        });
    }
    if message.contains("certificate authentication failed") {
        return Some(
            "the client certificate's CN does not match the user name (nor a pg_ident.conf mapping); connect as the user the certificate names".into(),
        );
    }
    None
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
    use std::os::unix::fs::PermissionsExt;

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

    #[test]
    fn unreadable_or_wrong_files_are_named_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let policy = |pairs: &[(&str, &str)]| options(pairs).resolve(None).unwrap();
        let err = policy(&[
            ("sslmode", "verify-full"),
            ("sslrootcert", missing.to_str().unwrap()),
        ])
        .connector(SslNegotiation::Postgres)
        .err()
        .unwrap();
        assert!(
            err.contains(&format!("sslrootcert={}", missing.display())),
            "{err}"
        );
        assert!(err.contains("No such file or directory"), "{err}");

        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let err = policy(&[("sslrootcert", junk.to_str().unwrap())])
            .connector(SslNegotiation::Postgres)
            .err()
            .unwrap();
        assert!(err.contains("holds no PEM certificate"), "{err}");

        std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = policy(&[
            ("sslcert", junk.to_str().unwrap()),
            ("sslkey", junk.to_str().unwrap()),
        ])
        .connector(SslNegotiation::Postgres)
        .err()
        .unwrap();
        assert!(err.contains("holds no PEM certificate"), "{err}");
    }

    #[test]
    fn a_private_key_others_can_read_is_refused_as_libpq_does() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(&key, "k").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = check_key_permissions(&key, "sslkey=k").unwrap_err();
        assert!(
            err.contains("group or world access") && err.contains("644"),
            "{err}"
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        check_key_permissions(&key, "sslkey=k").unwrap();
    }

    #[test]
    fn disabled_tls_builds_no_openssl_state() {
        let tls = TlsPolicy::disabled()
            .connector(SslNegotiation::Postgres)
            .unwrap();
        assert!(tls.context.is_none());
    }
}
