//! The rustls configuration of one connection attempt, built from a [`TlsPolicy`]: the files
//! it names are read here (the CA certificates of `sslrootcert` or the system's store, the
//! client certificate and its key, with libpq's permission check), and what cannot be used is
//! a configuration error naming the option, the file and the fix. Nothing is built when TLS is
//! off.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rustls::client::danger::ServerCertVerifier;
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{ClientConfig, RootCertStore};
use tokio_postgres::config::SslNegotiation;

use super::report::Report;
use super::settings::{ClientCert, RootCert, SslMode, TlsPolicy};
use super::stream::Tls;
use super::verify::{Checked, Unchecked};
use super::x509;

/// rustls's ring provider (its cipher suites, key exchanges and signature algorithms), made
/// once, the first time TLS is used.
pub(super) fn provider() -> &'static Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
}

impl TlsPolicy {
    /// Reads the files and builds the connector for one connection attempt. `Err` is a
    /// configuration problem (a file that cannot be read or does not hold what it should).
    pub fn connector(&self, negotiation: SslNegotiation) -> Result<Tls, String> {
        let report = Arc::new(Report::default());
        if self.mode == SslMode::Disable {
            return Ok(Tls::new(None, report));
        }
        let provider = provider();
        let algorithms = provider.signature_verification_algorithms;
        let verifier: Arc<dyn ServerCertVerifier> = match &self.root_cert {
            None => Arc::new(Unchecked::new(algorithms)),
            Some(root) => {
                let (store, file_roots) = match root {
                    RootCert::System => (system_roots()?, Vec::new()),
                    RootCert::File(path) => file_roots(path, &self.root_description())?,
                };
                let checked = Checked::new(
                    store,
                    file_roots,
                    self.mode == SslMode::VerifyFull,
                    report.clone(),
                    provider.clone(),
                )
                .map_err(|e| format!("rustls could not set up TLS: {e}"))?;
                Arc::new(checked)
            }
        };
        // TLS 1.2 and 1.3: rustls has nothing older (libpq's ssl_min_protocol_version is 1.2).
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("rustls could not set up TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match &self.client {
            None => builder.with_no_client_auth(),
            Some(client) => {
                let key = client_key(client, provider)?;
                builder.with_client_cert_resolver(Arc::new(SingleCertAndKey::from(key)))
            }
        };
        config.enable_sni = self.sni;
        // One connection per configuration: a session cache would only hold memory.
        config.resumption = Resumption::disabled();
        if negotiation == SslNegotiation::Direct {
            // Direct TLS (PostgreSQL 17) wants the "postgresql" protocol name, as libpq sends.
            config.alpn_protocols = vec![b"postgresql".to_vec()];
        }
        Ok(Tls::new(Some(Arc::new(config)), report))
    }
}

/// The CAs of an `sslrootcert` file: the store webpki verifies with, and the certificates as
/// read (for a server certificate webpki does not take: [`Checked`]). Only these are trusted,
/// as in libpq.
fn file_roots(
    path: &Path,
    what: &str,
) -> Result<(Arc<RootCertStore>, Vec<CertificateDer<'static>>), String> {
    let pem = read(
        path,
        what,
        "the CA certificate (PEM) that signed the server's",
    )?;
    let certs = pem_certificates(&pem).map_err(|e| {
        format!("{what} cannot be read as PEM ({e}); point it at the CA certificate (-----BEGIN CERTIFICATE-----) that signed the server's")
    })?;
    if certs.is_empty() {
        return Err(format!("{what} holds no PEM certificate; point it at the CA certificate (-----BEGIN CERTIFICATE-----) that signed the server's"));
    }
    let mut store = RootCertStore::empty();
    let (_, unusable) = store.add_parsable_certificates(certs.iter().cloned());
    if store.is_empty() {
        return Err(format!(
            "{what} holds {unusable} certificate(s) and none can be read as a CA certificate (X.509 DER); point it at the CA certificate that signed the server's"
        ));
    }
    Ok((Arc::new(store), certs))
}

/// `sslrootcert=system`: the system's CA store as OpenSSL would find it (`SSL_CERT_FILE` and
/// `SSL_CERT_DIR` first, then the distribution's bundle, `/etc/ssl/certs/ca-certificates.crt`
/// on Debian). Read once and shared by the connections that use it, freed with the last one.
fn system_roots() -> Result<Arc<RootCertStore>, String> {
    static SHARED: Mutex<Weak<RootCertStore>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(store) = shared.upgrade() {
        return Ok(store);
    }
    let found = rustls_native_certs::load_native_certs();
    let mut store = RootCertStore::empty();
    store.add_parsable_certificates(found.certs);
    if store.is_empty() {
        let why = match found.errors.first() {
            Some(e) => format!(" ({e})"),
            None => String::new(),
        };
        return Err(format!(
            "sslrootcert=system: the system's CA store has no certificate{why}; install the ca-certificates package (or set SSL_CERT_FILE to a CA bundle), or point sslrootcert at the CA file"
        ));
    }
    let store = Arc::new(store);
    *shared = Arc::downgrade(&store);
    Ok(store)
}

/// The client certificate (with the rest of its file as its chain) and its private key,
/// checked as libpq and OpenSSL check them: the key's permissions, that it is not encrypted,
/// that it belongs to the certificate.
fn client_key(client: &ClientCert, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let what = format!("sslcert={}", client.cert.display());
    let pem = read(&client.cert, &what, "the client certificate (PEM)")?;
    let chain = pem_certificates(&pem)
        .ok()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("{what} holds no PEM certificate; point it at the client certificate (-----BEGIN CERTIFICATE-----)"))?;
    let key_what = format!("sslkey={}", client.key.display());
    check_key_permissions(&client.key, &key_what)?;
    let pem = read(
        &client.key,
        &key_what,
        "the client certificate's private key (PEM)",
    )?;
    let key = private_key(&pem).map_err(|why| {
        format!("{key_what} is not an unencrypted PEM private key ({why}); drover does not support sslpassword, so decrypt it (e.g. `openssl pkey -in KEY -out KEY.plain`)")
    })?;
    let key = provider.key_provider.load_private_key(key).map_err(|e| {
        format!("{key_what} holds a private key drover cannot sign with ({e}); use an RSA (2048 to 4096 bits), ECDSA P-256 or P-384, or Ed25519 key")
    })?;
    // OpenSSL's check_private_key: the key's public half is the certificate's.
    if let (Some(public), Some(cert)) = (key.public_key(), x509::Cert::parse(&chain[0])) {
        if public.as_ref() != cert.spki {
            return Err(format!("{key_what} is not the private key of {what}; give the key that belongs to that certificate"));
        }
    }
    Ok(CertifiedKey::new(chain, key))
}

/// The certificates of a PEM file, in order (other sections are skipped).
fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, pem::Error> {
    CertificateDer::pem_slice_iter(pem).collect()
}

/// The private key of a PEM file: PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) or SEC1
/// (`EC PRIVATE KEY`). Encrypted keys are named as such: rustls cannot decrypt them.
fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    let text = String::from_utf8_lossy(pem);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || text.contains("Proc-Type: 4,ENCRYPTED")
    {
        return Err("it is encrypted".into());
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        pem::Error::NoItemsFound => {
            "no PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block found".to_string()
        }
        other => other.to_string(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::TlsOptions;
    use std::os::unix::fs::PermissionsExt;

    fn options(pairs: &[(&str, &str)]) -> TlsOptions {
        let mut o = TlsOptions::default();
        for (k, v) in pairs {
            assert!(o.take(k, v).unwrap(), "{k} is a TLS key");
        }
        o
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
    fn disabled_tls_builds_no_tls_state() {
        let tls = TlsPolicy::disabled()
            .connector(SslNegotiation::Postgres)
            .unwrap();
        assert!(tls.config().is_none());
    }

    #[test]
    fn encrypted_keys_are_named_and_key_formats_read() {
        let err = private_key(
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap_err();
        assert_eq!(err, "it is encrypted");
        let err = private_key(b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nMIIB\n-----END RSA PRIVATE KEY-----\n").unwrap_err();
        assert_eq!(err, "it is encrypted");
        let err = private_key(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
            .unwrap_err();
        assert!(err.contains("no PRIVATE KEY"), "{err}");
    }

    /// A CA and a client certificate it signed, as PEM, and the client's key.
    fn pki(dir: &Path) -> (String, String, String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let client = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            path.display().to_string()
        };
        let other = rcgen::KeyPair::generate().unwrap();
        (
            write("ca.pem", &ca.pem()),
            write("client.pem", &client.pem()),
            write("client.key", &key.serialize_pem()),
            write("other.key", &other.serialize_pem()),
        )
    }

    #[test]
    fn a_client_certificate_with_its_key_builds_and_another_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key, other) = pki(dir.path());
        let policy = |key: &str| {
            options(&[
                ("sslmode", "verify-full"),
                ("sslrootcert", &ca),
                ("sslcert", &cert),
                ("sslkey", key),
            ])
            .resolve(None)
            .unwrap()
        };
        let tls = policy(&key).connector(SslNegotiation::Direct).unwrap();
        let config = tls.config().unwrap();
        assert!(config.client_auth_cert_resolver.has_certs());
        assert_eq!(config.alpn_protocols, [b"postgresql".to_vec()]);
        let err = policy(&other)
            .connector(SslNegotiation::Postgres)
            .err()
            .unwrap();
        assert!(
            err.contains(&format!(
                "sslkey={other} is not the private key of sslcert={cert}"
            )),
            "{err}"
        );
    }

    #[test]
    fn the_system_store_is_read_once_and_shared() {
        if !Path::new("/etc/ssl/certs/ca-certificates.crt").exists() {
            eprintln!("no system CA bundle here (Debian's ca-certificates): nothing to read");
            return;
        }
        let first = system_roots().unwrap();
        let second = system_roots().unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert!(first.len() > 10, "{} CAs", first.len());
        let tls = options(&[("sslrootcert", "system")])
            .resolve(None)
            .unwrap()
            .connector(SslNegotiation::Postgres)
            .unwrap();
        assert!(tls.config().unwrap().enable_sni);
    }
}
