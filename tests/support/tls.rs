//! A PostgreSQL that accepts only TLS, for the tests that need one: a throwaway CA (and an
//! unrelated one) made with the `openssl` command, a server certificate for localhost and
//! 127.0.0.1, `hostnossl all all all reject`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{shared_tempdir, Cluster};

/// The throwaway CAs and the server's certificate, in a directory the cluster's user can read.
pub struct Pki {
    /// The CA that signed the server's certificate.
    pub ca: PathBuf,
    /// An unrelated CA: the wrong sslrootcert.
    pub other_ca: PathBuf,
    /// `ssl_cert_file`: CN and SAN localhost, IP SAN 127.0.0.1.
    pub server_cert: PathBuf,
    /// 0600, owned by the user PostgreSQL runs as (it refuses the key otherwise).
    pub server_key: PathBuf,
    /// pg_hba.conf: TLS only.
    pub hba: PathBuf,
    /// Holds the files; removed when the test drops it (after the cluster stopped).
    pub dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command runs (Debian package openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn make_pki() -> Pki {
    let dir = shared_tempdir();
    let d = dir.path();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for (name, cn) in [
        ("ca", "/CN=drover e2e CA"),
        ("other-ca", "/CN=unrelated CA"),
    ] {
        let (key, pem) = (format!("{name}.key"), format!("{name}.pem"));
        let mut args = vec!["req", "-x509", "-days", "2", "-subj", cn];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &pem]);
        openssl(d, &args);
    }
    let mut args = vec![
        "req",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ];
    args.extend(ec);
    openssl(d, &args);
    std::fs::write(
        d.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    );
    std::fs::write(
        d.join("pg_hba.conf"),
        "hostnossl all all all reject\nhostssl all drover 127.0.0.1/32 trust\n",
    )
    .unwrap();
    for file in ["ca.pem", "other-ca.pem", "server.pem", "pg_hba.conf"] {
        std::fs::set_permissions(d.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let server_key = d.join("server.key");
    std::fs::set_permissions(&server_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    if nix::unistd::geteuid().is_root() {
        let user = nix::unistd::User::from_name("postgres")
            .unwrap()
            .expect("the postgres OS user exists");
        nix::unistd::chown(&server_key, Some(user.uid), Some(user.gid)).unwrap();
    }
    Pki {
        ca: d.join("ca.pem"),
        other_ca: d.join("other-ca.pem"),
        server_cert: d.join("server.pem"),
        server_key,
        hba: d.join("pg_hba.conf"),
        dir,
    }
}

/// A migrated PostgreSQL on 127.0.0.1 that accepts only TLS, and its port.
pub async fn tls_cluster(pki: &Pki) -> (Cluster, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = |p: &Path| p.display().to_string();
    let cluster = Cluster::start_with(|config| {
        config.tcp_port = Some(port);
        for (name, value) in [
            ("ssl", "on".to_string()),
            ("ssl_cert_file", path(&pki.server_cert)),
            ("ssl_key_file", path(&pki.server_key)),
            ("hba_file", path(&pki.hba)),
        ] {
            config.settings.push((name.into(), value));
        }
    })
    .await;
    (cluster, port)
}
