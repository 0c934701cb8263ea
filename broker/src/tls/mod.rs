//! TLS to PostgreSQL with libpq's options and rules: `sslmode` (`disable`, `allow`, `prefer`,
//! `require`, `verify-ca`, `verify-full`), `sslrootcert` (a PEM file, or `system` for the
//! system's CA store), `sslcert` + `sslkey` (a client certificate) and `sslsni`.
//!
//! TLS is rustls with its ring provider, linked into the binary: no TLS library is loaded, and
//! nothing is built until a connection asks for TLS (the system's OpenSSL, used before, cost
//! 0.59 MiB of PSS just by being loaded; docs/postgres-tls.md has what rustls costs). One file
//! per concern:
//!
//! - `settings.rs`: the options as written and libpq's rules, giving a [`TlsPolicy`];
//! - `config.rs`: [`TlsPolicy::connector`] reads the files and builds the rustls configuration
//!   of one connection attempt;
//! - `verify.rs`: the server's certificate judged as each sslmode asks;
//! - `report.rs`: why a handshake failed, explained ([`Report::explain`], [`server_hint`]);
//! - `stream.rs`: tokio-postgres's TLS hook, the handshake and the stream (with channel
//!   binding);
//! - `x509.rs`: the few certificate fields rustls does not expose (names, validity, version,
//!   signature algorithm).
//!
//! Nothing here builds TLS state when TLS is off.

mod config;
mod report;
mod settings;
mod stream;
mod verify;
mod x509;

pub use report::{server_hint, Report};
pub use settings::{home_dir, ClientCert, RootCert, SslMode, TlsOptions, TlsPolicy};
pub use stream::{Handshake, Tls, TlsStream};
