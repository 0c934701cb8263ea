//! Judging the server's certificate, as libpq's sslmodes ask: [`Unchecked`] for `prefer` and
//! `require` without a root certificate (only the handshake's signature is checked, proving the
//! server holds the certificate's key), [`Checked`] for `verify-ca` (the chain must reach a
//! trusted CA) and `verify-full` (and name the host). The chain is rustls's
//! `WebPkiServerVerifier`'s work; `Checked` wraps it for what OpenSSL did differently: under
//! `verify-ca` it accepts webpki's name mismatch (and nothing else), under `verify-full` it
//! takes the subject's CN when the certificate lists no DNS name, and it accepts a server
//! certificate that is itself in the `sslrootcert` file or is X.509 v1 signed directly by a
//! CA in it (webpki refuses both; PostgreSQL's documentation makes such certificates). Every
//! refusal is noted in the [`Report`], for the message.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{VerifierBuilderError, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, SubjectPublicKeyInfoDer, UnixTime};
use rustls::{
    CertificateError, DigitallySignedStruct, Error, PeerMisbehaved, RootCertStore, SignatureScheme,
};

use super::report::Report;
use super::x509::Cert;

/// No check of the certificate (`prefer`, `require` without a root certificate, as libpq).
#[derive(Debug)]
pub(super) struct Unchecked {
    /// The provider's signature algorithms, for the handshake's signature.
    algorithms: WebPkiSupportedAlgorithms,
}

impl Unchecked {
    pub(super) fn new(algorithms: WebPkiSupportedAlgorithms) -> Unchecked {
        Unchecked { algorithms }
    }
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The chain (`verify-ca`), and the host name too (`verify-full`).
#[derive(Debug)]
pub(super) struct Checked {
    /// rustls's verifier over the trusted CAs.
    webpki: Arc<WebPkiServerVerifier>,
    /// The certificates of the `sslrootcert` file (empty for the system's store), for the
    /// server certificates webpki refuses and OpenSSL accepted.
    roots: Vec<CertificateDer<'static>>,
    /// `verify-full`: the certificate must name the host.
    check_host: bool,
    /// Where a refusal is noted.
    report: Arc<Report>,
    /// The provider's signature algorithms.
    algorithms: WebPkiSupportedAlgorithms,
}

impl Checked {
    pub(super) fn new(
        store: Arc<RootCertStore>,
        roots: Vec<CertificateDer<'static>>,
        check_host: bool,
        report: Arc<Report>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Checked, VerifierBuilderError> {
        let algorithms = provider.signature_verification_algorithms;
        let webpki = WebPkiServerVerifier::builder_with_provider(store, provider).build()?;
        Ok(Checked {
            webpki,
            roots,
            check_host,
            report,
            algorithms,
        })
    }

    /// The verdict on the server's certificate.
    fn judge(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), Error> {
        let verdict =
            self.webpki
                .verify_server_cert(end_entity, intermediates, server_name, &[], now);
        match verdict {
            Ok(_) => Ok(()),
            // webpki checks the name last, once the chain is trusted: verify-ca is satisfied.
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_host => Ok(()),
            // OpenSSL takes the subject's CN when no DNS name is listed; webpki never does.
            Err(
                e @ Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                ),
            ) => match Cert::parse(end_entity) {
                Some(cert)
                    if cert.dns_names.is_empty() && cert.names_host(&server_name.to_str()) =>
                {
                    Ok(())
                }
                _ => Err(e),
            },
            Err(e) => self
                .beyond_webpki(end_entity, server_name, now)
                .unwrap_or(Err(e)),
        }
    }

    /// What webpki refuses and OpenSSL accepted: a server certificate that is itself one of
    /// the trusted certificates (a self-signed one, even with CA:TRUE, copied into sslrootcert),
    /// or an X.509 v1 one signed directly by one of them. Then its validity and (verify-full)
    /// its names are checked here, as OpenSSL checks them. `None`: neither; webpki's verdict
    /// stands.
    fn beyond_webpki(
        &self,
        end_entity: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Option<Result<(), Error>> {
        let cert = Cert::parse(end_entity)?;
        let pinned = self.roots.iter().any(|r| r.as_ref() == end_entity.as_ref());
        let signed = || {
            !cert.v3
                && self.roots.iter().any(|root| {
                    Cert::parse(root)
                        .is_some_and(|ca| ca.subject == cert.issuer && self.signed_by(&cert, &ca))
                })
        };
        if !pinned && !signed() {
            return None;
        }
        let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let time =
            |t: i64| UnixTime::since_unix_epoch(Duration::from_secs(t.max(0).unsigned_abs()));
        let refusal = if secs > cert.not_after {
            CertificateError::ExpiredContext {
                time: now,
                not_after: time(cert.not_after),
            }
        } else if secs < cert.not_before {
            CertificateError::NotValidYetContext {
                time: now,
                not_before: time(cert.not_before),
            }
        } else if self.check_host && !cert.names_host(&server_name.to_str()) {
            CertificateError::NotValidForNameContext {
                expected: server_name.to_owned(),
                presented: cert.names(),
            }
        } else {
            return Some(Ok(()));
        };
        Some(Err(refusal.into()))
    }

    /// `ca`'s key verifies `cert`'s signature, with an algorithm the provider has for both.
    fn signed_by(&self, cert: &Cert<'_>, ca: &Cert<'_>) -> bool {
        self.algorithms.all.iter().any(|alg| {
            alg.signature_alg_id().as_ref() == cert.signature_algorithm
                && alg.public_key_alg_id().as_ref() == ca.key_algorithm
                && alg
                    .verify_signature(ca.key, cert.tbs, cert.signature)
                    .is_ok()
        })
    }
}

impl ServerCertVerifier for Checked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.judge(end_entity, intermediates, server_name, now) {
            Ok(()) => Ok(ServerCertVerified::assertion()),
            Err(e) => {
                self.report
                    .record(&e, end_entity, intermediates, &server_name.to_str());
                Err(e)
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The TLS 1.2 handshake's signature, by the key of the server's certificate. As rustls's
/// `verify_tls12_signature`, except that the key is read from the certificate here, so an
/// X.509 v1 certificate (which webpki does not read) works as with OpenSSL.
fn tls12_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algorithms: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, Error> {
    let cert = Cert::parse(cert).ok_or(CertificateError::BadEncoding)?;
    let candidates = algorithms
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map(|(_, algs)| *algs)
        .ok_or(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme)?;
    let alg = candidates
        .iter()
        .find(|alg| alg.public_key_alg_id().as_ref() == cert.key_algorithm)
        .ok_or_else(
            || CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext {
                signature_algorithm_id: candidates
                    .first()
                    .map(|a| a.signature_alg_id().as_ref().to_vec())
                    .unwrap_or_default(),
                public_key_algorithm_id: cert.key_algorithm.to_vec(),
            },
        )?;
    alg.verify_signature(cert.key, message, dss.signature())
        .map_err(|_| CertificateError::BadSignature)?;
    Ok(HandshakeSignatureValid::assertion())
}

/// The TLS 1.3 handshake's signature: rustls's check with the certificate's public key (its
/// raw-key form, which takes any certificate version).
fn tls13_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algorithms: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, Error> {
    let cert = Cert::parse(cert).ok_or(CertificateError::BadEncoding)?;
    rustls::crypto::verify_tls13_signature_with_raw_key(
        message,
        &SubjectPublicKeyInfoDer::from(cert.spki),
        dss,
        algorithms,
    )
}
