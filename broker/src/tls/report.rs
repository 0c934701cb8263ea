//! What went wrong and what to say. The verifier notes why the server's certificate was
//! refused and the handshake notes that it failed, in a [`Report`] shared with the connect
//! call; [`Report::explain`] then says what to fix (which sslrootcert, which host names) rather
//! than TLS's bare error, and [`server_hint`] explains a refusal by the server that TLS
//! settings would fix.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rustls::pki_types::CertificateDer;
use rustls::{CertificateError, Error};

use super::settings::{RootCert, SslMode, TlsPolicy};
use super::x509::{self, Cert};

/// What kind of refusal, to choose the explanation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The chain does not reach a trusted CA (or a signature in it is wrong).
    Untrusted,
    /// The certificate does not name the host (`verify-full`).
    NameMismatch,
    /// A certificate of the chain has expired.
    Expired,
    /// A certificate of the chain is not valid yet.
    NotYetValid,
    /// An X.509 v1 server certificate that no trusted CA signed directly.
    Version,
    /// Anything else.
    Other,
}

/// Why a certificate did not verify, as the verifier saw it.
#[derive(Debug, Clone)]
struct VerifyFailure {
    /// The kind of refusal.
    failure: Failure,
    /// Its short name ("unable to get local issuer certificate", "hostname mismatch"), in
    /// OpenSSL's words where OpenSSL has them.
    reason: String,
    /// The host name or address the certificate was checked against.
    host: String,
    /// Subject of the certificate at fault (the server's, or the expired one of its chain).
    subject: String,
    /// Subject of the server's own certificate: the user knows the server by this one.
    server: String,
    /// The issuer at the top of the chain the server sent: the CA sslrootcert should hold.
    issuer: String,
    /// The DNS names and addresses the server's certificate is valid for (subject alternative
    /// names, else the CN).
    names: Vec<String>,
    /// The validity period of the certificate at fault, for an expired or not yet valid one.
    validity: (String, String),
}

/// What went wrong in a handshake, written by the verifier and the handshake and read after
/// a failed connect (the connector is moved into tokio-postgres, so this is shared).
#[derive(Debug, Default)]
pub struct Report {
    /// The TLS handshake itself failed (as opposed to TCP, the server's answer, or the login).
    handshake_failed: AtomicBool,
    /// The first certificate verification failure, if any.
    verify: Mutex<Option<VerifyFailure>>,
}

impl Report {
    /// Notes why the server's certificate (`end_entity`, sent with `intermediates`) was refused.
    pub(super) fn record(
        &self,
        error: &Error,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        host: &str,
    ) {
        let mut slot = self.verify.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return;
        }
        let server = Cert::parse(end_entity);
        let chain: Vec<Cert<'_>> = intermediates
            .iter()
            .filter_map(|c| Cert::parse(c))
            .collect();
        let (failure, reason) = classify(error, host.parse::<IpAddr>().is_ok(), server.as_ref());
        // The certificate at fault: the server's, unless a validity error names another's time.
        let at = |secs: u64| i64::try_from(secs).unwrap_or(i64::MAX);
        let mut certs = server.iter().chain(&chain);
        let at_fault = match error {
            Error::InvalidCertificate(CertificateError::ExpiredContext { not_after, .. }) => {
                certs.find(|c| c.not_after == at(not_after.as_secs()))
            }
            Error::InvalidCertificate(CertificateError::NotValidYetContext {
                not_before, ..
            }) => certs.find(|c| c.not_before == at(not_before.as_secs())),
            _ => None,
        }
        .or(server.as_ref());
        // Follow the chain up by issuer name, as far as the server sent it.
        let mut top = server.as_ref();
        for _ in 0..chain.len() {
            let Some(current) = top else { break };
            match chain
                .iter()
                .find(|c| c.subject == current.issuer && c.subject != current.subject)
            {
                Some(up) => top = Some(up),
                None => break,
            }
        }
        let unreadable = || "(a certificate drover cannot read)".to_string();
        *slot = Some(VerifyFailure {
            failure,
            reason,
            host: host.to_string(),
            subject: at_fault.map_or_else(unreadable, |c| x509::name_text(c.subject)),
            server: server
                .as_ref()
                .map_or_else(unreadable, |c| x509::name_text(c.subject)),
            issuer: top.map_or_else(unreadable, |c| x509::name_text(c.issuer)),
            names: server.as_ref().map(Cert::names).unwrap_or_default(),
            validity: at_fault
                .map(|c| (x509::time_text(c.not_before), x509::time_text(c.not_after)))
                .unwrap_or_default(),
        });
    }

    /// Notes that the TLS handshake failed.
    pub(super) fn note_handshake_failed(&self) {
        self.handshake_failed.store(true, Ordering::Relaxed);
    }

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
                "TLS handshake failed: {cause}; check that this is a PostgreSQL server with ssl = on that accepts TLS 1.2 or newer with an ECDHE key exchange and AES-GCM or ChaCha20 (what rustls offers){client}"
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
    match f.failure {
        Failure::Untrusted => {
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
        Failure::NameMismatch => format!(
            "certificate verify failed ({}): the server's certificate is for {}, not for {}; connect with a host name the certificate lists, or use sslmode=verify-ca to check only that a trusted CA signed it",
            f.reason,
            if f.names.is_empty() {
                "no host name".to_string()
            } else {
                f.names.join(", ")
            },
            f.host
        ),
        Failure::Expired => format!(
            "certificate verify failed ({}): the certificate {} expired on {}; renew the server's certificate (or check this machine's clock)",
            f.reason, f.subject, f.validity.1
        ),
        Failure::NotYetValid => format!(
            "certificate verify failed ({}): the certificate {} is valid only from {}; check this machine's clock",
            f.reason, f.subject, f.validity.0
        ),
        Failure::Version => format!(
            "certificate verify failed ({}): the server's certificate ({}, issued by {}) is X.509 v1, which drover (rustls) accepts only when it is itself in {root} or a CA in it signed it directly; point sslrootcert at that CA, or reissue the server's certificate as X.509 v3 (`openssl x509 -req … -extfile` with a line `subjectAltName=DNS:{}`)",
            f.reason, f.server, f.issuer, f.host
        ),
        Failure::Other => format!(
            "certificate verify failed ({}): the certificate {} (issued by {}) was refused; check the server's certificate chain against {root}",
            f.reason, f.subject, f.issuer
        ),
    }
}

/// The kind of refusal and its short name: OpenSSL's words for the ones OpenSSL reported, so
/// messages read as before.
fn classify(error: &Error, ip: bool, server: Option<&Cert<'_>>) -> (Failure, String) {
    use CertificateError as C;
    let e = match error {
        Error::InvalidCertificate(e) => e,
        other => return (Failure::Other, other.to_string()),
    };
    let (failure, reason) = match e {
        C::UnknownIssuer => (Failure::Untrusted, "unable to get local issuer certificate"),
        C::BadSignature => (Failure::Untrusted, "certificate signature failure"),
        C::NotValidForName | C::NotValidForNameContext { .. } if ip => {
            (Failure::NameMismatch, "IP address mismatch")
        }
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            (Failure::NameMismatch, "hostname mismatch")
        }
        C::Expired | C::ExpiredContext { .. } => (Failure::Expired, "certificate has expired"),
        C::NotValidYet | C::NotValidYetContext { .. } => {
            (Failure::NotYetValid, "certificate is not yet valid")
        }
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            (Failure::Other, "unsupported certificate purpose")
        }
        #[allow(deprecated)]
        C::UnsupportedSignatureAlgorithm
        | C::UnsupportedSignatureAlgorithmContext { .. }
        | C::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            (Failure::Other, "unsupported signature algorithm")
        }
        // Not in sslrootcert (beyond_webpki would have taken it), so nothing vouches for it.
        _ if server.is_some_and(|c| c.issuer == c.subject) => {
            (Failure::Untrusted, "self-signed certificate")
        }
        _ if server.is_some_and(|c| !c.v3) => (Failure::Version, "X.509 v1 certificate"),
        _ if server.is_some_and(|c| c.is_ca) => (
            Failure::Other,
            "a CA certificate (CA:TRUE) is the server's own certificate",
        ),
        C::BadEncoding => (Failure::Other, "the certificate cannot be decoded"),
        other => return (Failure::Other, format!("{other:?}")),
    };
    (failure, reason.to_string())
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
