//! TLS servers of a test's own: a certificate authority made by the test, a server certificate
//! it signs for `localhost` only (so that `127.0.0.1` is a wrong host name), an unrelated CA (a
//! wrong CA), and NATS and Redis servers that present that certificate. PostgreSQL and RabbitMQ
//! with TLS are [`crate::throwaway::ThrowawayPg::start_tls`] and [`crate::rabbit_node::Node`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A test CA, the server certificate it signed, and a CA that signed nothing, as PEM files in a
/// temporary directory readable by the servers' users (`postgres`, `rabbitmq`).
#[derive(Debug)]
pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// Makes both CAs and the server certificate (for `localhost`, valid for a day).
    ///
    /// # Panics
    /// When a key or certificate cannot be made or written.
    #[must_use]
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let (ca_pem, issuer) = authority("inboxed test CA");
        let (other_pem, _) = authority("inboxed unrelated CA");

        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.use_authority_key_identifier_extension = true;
        params.key_usages.push(KeyUsagePurpose::DigitalSignature);
        params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();

        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
                .unwrap();
        };
        write("ca.pem", &ca_pem);
        write("wrong-ca.pem", &other_pem);
        write("server.pem", &cert.pem());
        write("server.key", &key.serialize_pem());
        Self { dir }
    }

    /// The CA that signed the servers' certificate.
    #[must_use]
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A CA that signed nothing the servers present.
    #[must_use]
    pub fn wrong_ca_file(&self) -> PathBuf {
        self.dir.path().join("wrong-ca.pem")
    }

    /// The servers' certificate (`localhost`).
    #[must_use]
    pub fn cert_file(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The servers' private key (PKCS #8, PEM).
    #[must_use]
    pub fn key_file(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }

    /// The directory holding the files.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

/// A self-signed CA: its certificate (PEM) and the issuer that signs with it.
fn authority(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages.push(KeyUsagePurpose::KeyCertSign);
    params.key_usages.push(KeyUsagePurpose::DigitalSignature);
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    (pem, Issuer::new(params, key))
}

/// A server process of the test's own, killed when dropped (TLS, or plain with settings of
/// the test's choosing).
#[derive(Debug)]
pub struct TlsServer {
    child: Child,
    /// The port it listens on with TLS, on 127.0.0.1.
    pub port: u16,
    _data: tempfile::TempDir,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsServer {
    /// A NATS server with JetStream that requires TLS, presenting `ca`'s server certificate.
    ///
    /// # Panics
    /// When `nats-server` is missing or does not listen within 30 s.
    #[must_use]
    pub fn nats(ca: &TestCa) -> Self {
        let (data, port) = (tempfile::tempdir().unwrap(), crate::free_port());
        let mut cmd = Command::new("nats-server");
        cmd.args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(data.path())
            .arg("--tls")
            .arg("--tlscert")
            .arg(ca.cert_file())
            .arg("--tlskey")
            .arg(ca.key_file());
        Self::spawn(cmd, port, data, "nats-server")
    }

    /// A Redis server that listens with TLS only, presenting `ca`'s server certificate and
    /// asking no client certificate.
    ///
    /// # Panics
    /// When `redis-server` is missing or does not listen within 30 s.
    #[must_use]
    pub fn redis(ca: &TestCa) -> Self {
        let (data, port) = (tempfile::tempdir().unwrap(), crate::free_port());
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--tls-port",
            &port.to_string(),
        ])
        .arg("--tls-cert-file")
        .arg(ca.cert_file())
        .arg("--tls-key-file")
        .arg(ca.key_file())
        .arg("--tls-ca-cert-file")
        .arg(ca.ca_file())
        .args([
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(data.path());
        Self::spawn(cmd, port, data, "redis-server")
    }

    /// A plain Redis server with `extra` settings (a lower `proto-max-bulk-len`, say).
    ///
    /// # Panics
    /// As [`TlsServer::redis`].
    #[must_use]
    pub fn redis_plain(extra: &[&str]) -> Self {
        let (data, port) = (tempfile::tempdir().unwrap(), crate::free_port());
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .arg("--dir")
            .arg(data.path());
        Self::spawn(cmd, port, data, "redis-server")
    }

    fn spawn(mut cmd: Command, port: u16, data: tempfile::TempDir, name: &str) -> Self {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} must be installed (scripts/test.sh does): {e}"));
        let server = Self {
            child,
            port,
            _data: data,
        };
        wait_for_port(port, name);
        server
    }
}

/// Waits until something listens on `127.0.0.1:port`.
///
/// # Panics
/// After 30 s.
pub fn wait_for_port(port: u16, what: &str) {
    for _ in 0..600 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not listen on port {port} within 30 s");
}
