//! The handshake and the stream: [`Tls`] is tokio-postgres's TLS hook for one connection
//! attempt (the rustls configuration built by [`TlsPolicy::connector`], or none when TLS is
//! off), [`Handshake`] runs one handshake over tokio-rustls and notes its failure in the
//! [`Report`], and [`TlsStream`] is the encrypted stream, with the channel binding SCRAM needs.
//!
//! [`TlsPolicy::connector`]: super::TlsPolicy::connector

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::Socket;
use tokio_rustls::TlsConnector;

use super::report::Report;
use super::x509;

/// An error of the TLS hook, as tokio-postgres takes it.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The TLS stream of a connection (plain connections use the same connection type:
/// tokio-postgres's `MaybeTlsStream` holds either).
#[derive(Debug)]
pub struct TlsStream(
    /// The rustls session over the socket.
    tokio_rustls::client::TlsStream<Socket>,
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
    /// session, as libpq and postgres-openssl do: the hash of the server's certificate, by the
    /// hash of its signature algorithm (SHA-256 for MD5 and SHA-1).
    fn channel_binding(&self) -> ChannelBinding {
        let (_, session) = self.0.get_ref();
        let end_point = session
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|cert| {
                let digest = x509::end_point_digest(x509::Cert::parse(cert)?.signature_algorithm)?;
                Some(ring::digest::digest(digest, cert).as_ref().to_vec())
            });
        match end_point {
            Some(hash) => ChannelBinding::tls_server_end_point(hash),
            None => ChannelBinding::none(),
        }
    }
}

/// tokio-postgres's TLS hook for one connection attempt: rustls with the policy's settings,
/// noting why a handshake failed.
pub struct Tls {
    /// The rustls configuration; `None` when TLS is off, so no TLS state is built.
    config: Option<Arc<ClientConfig>>,
    /// Shared with the verifier and the handshakes, read by [`Report::explain`].
    report: Arc<Report>,
}

impl Tls {
    pub(super) fn new(config: Option<Arc<ClientConfig>>, report: Arc<Report>) -> Tls {
        Tls { config, report }
    }

    /// The handle to read after the connector has been moved into a connect call.
    pub fn report(&self) -> Arc<Report> {
        self.report.clone()
    }

    /// The rustls configuration, if TLS is on.
    #[cfg(test)]
    pub(super) fn config(&self) -> Option<&Arc<ClientConfig>> {
        self.config.as_ref()
    }
}

impl MakeTlsConnect<Socket> for Tls {
    type Stream = TlsStream;
    type TlsConnect = Handshake;
    type Error = BoxError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Handshake, BoxError> {
        // The name the certificate is checked against, sent as SNI unless it is an address
        // (as libpq). One that is neither (a Unix socket's path among TCP hosts) fails only if
        // a handshake is attempted, which PostgreSQL never offers on a socket.
        let session = self.config.as_ref().map(|config| {
            ServerName::try_from(domain)
                .map(|name| (TlsConnector::from(config.clone()), name.to_owned()))
                .map_err(|_| {
                    format!("{domain:?} is neither a host name nor an address TLS can check")
                })
        });
        Ok(Handshake {
            session,
            report: self.report.clone(),
        })
    }
}

/// One TLS handshake, noting in the report when it fails.
pub struct Handshake {
    /// The connector and the server's name (or why the name cannot be checked); `None` when
    /// TLS is off (tokio-postgres then never asks for a handshake).
    session: Option<Result<(TlsConnector, ServerName<'static>), String>>,
    /// Where a failure is noted.
    report: Arc<Report>,
}

/// The future of one handshake.
type HandshakeFuture = Pin<Box<dyn Future<Output = Result<TlsStream, BoxError>> + Send>>;

impl TlsConnect<Socket> for Handshake {
    type Stream = TlsStream;
    type Error = BoxError;
    type Future = HandshakeFuture;

    fn connect(self, stream: Socket) -> HandshakeFuture {
        let report = self.report;
        let (connector, name) = match self.session {
            Some(Ok(session)) => session,
            Some(Err(why)) => return Box::pin(async move { Err(why.into()) }),
            None => return Box::pin(async { Err("TLS is disabled for this connection".into()) }),
        };
        Box::pin(async move {
            match connector.connect(name, stream).await {
                Ok(stream) => Ok(TlsStream(stream)),
                Err(e) => {
                    report.note_handshake_failed();
                    Err(e.into())
                }
            }
        })
    }
}
