//! A RabbitMQ node of a test's own (its own node name, ports and data directory), so that a
//! test can kill and restart it, or give it a TLS listener, without touching the machine's.

use std::process::Command;
use std::time::Duration;

use crate::tls::TestCa;

/// A RabbitMQ node in a temporary directory; killed when dropped.
#[derive(Debug)]
pub struct Node {
    dir: tempfile::TempDir,
    port: u16,
    dist_port: u16,
    tls_port: Option<u16>,
}

impl Node {
    /// A node listening with plain AMQP.
    ///
    /// # Panics
    /// When the node does not start.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// A node that also listens with `amqps` on a port of its own ([`Node::tls_url`]),
    /// presenting `ca`'s server certificate (for `localhost`) and asking no client certificate.
    ///
    /// # Panics
    /// When the node does not start.
    pub async fn start_tls(ca: &TestCa) -> Self {
        Self::start_with(Some(ca)).await
    }

    async fn start_with(ca: Option<&TestCa>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Debian's rabbitmq-server runs the node as the rabbitmq user.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let (port, dist_port) = (crate::free_port(), crate::free_port());
        let mut conf = format!("listeners.tcp.default = 127.0.0.1:{port}\nloopback_users = none\n");
        let tls_port = ca.map(|ca| {
            let tls_port = crate::free_port();
            conf.push_str(&format!(
                "listeners.ssl.default = 127.0.0.1:{tls_port}\n\
                 ssl_options.cacertfile = {}\n\
                 ssl_options.certfile = {}\n\
                 ssl_options.keyfile = {}\n\
                 ssl_options.verify = verify_none\n\
                 ssl_options.fail_if_no_peer_cert = false\n",
                ca.ca_file().display(),
                ca.cert_file().display(),
                ca.key_file().display()
            ));
            tls_port
        });
        std::fs::write(dir.path().join("rabbitmq.conf"), conf).unwrap();
        let node = Self {
            dir,
            port,
            dist_port,
            tls_port,
        };
        node.boot().await;
        node
    }

    /// Starts the node on its directory (again) and waits for its port.
    ///
    /// # Panics
    /// When the node does not listen within 60 s.
    pub async fn boot(&self) {
        let d = self.dir.path();
        let status = Command::new("rabbitmq-server")
            .arg("-detached")
            .env(
                "RABBITMQ_NODENAME",
                format!("inboxedtest{}@localhost", self.port),
            )
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq.conf"))
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("plugins"))
            .env("RABBITMQ_PID_FILE", d.join("pid"))
            .status()
            .expect("rabbitmq-server must be installed: scripts/test.sh installs it");
        assert!(status.success(), "rabbitmq-server -detached failed");
        for _ in 0..240 {
            let mut up = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok();
            if let Some(tls) = self.tls_port {
                up = up
                    && tokio::net::TcpStream::connect(("127.0.0.1", tls))
                        .await
                        .is_ok();
            }
            if up {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("RabbitMQ node did not listen on {} within 60 s", self.port);
    }

    /// SIGKILL to the node's VM, and waits until its port is closed.
    ///
    /// # Panics
    /// When the node's pid file is missing or it still listens after 10 s.
    pub async fn kill(&self) {
        let pid = std::fs::read_to_string(self.dir.path().join("pid"))
            .expect("the node's pid file: without it no fault would be injected");
        let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the RabbitMQ node (pid {}) still listens after SIGKILL",
            pid.trim()
        );
    }

    /// The plain AMQP URL.
    #[must_use]
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    /// The `amqps` URL at `host` (`localhost`, the certificate's name, or another), for a node
    /// started with [`Node::start_tls`].
    ///
    /// # Panics
    /// For a node without TLS.
    #[must_use]
    pub fn tls_url(&self, host: &str) -> String {
        let port = self.tls_port.expect("a node started with start_tls");
        format!("amqps://guest:guest@{host}:{port}/%2f")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the node said of its queues' recovery tells broker loss from ours.
            let log = self
                .dir
                .path()
                .join("log")
                .join(format!("inboxedtest{}@localhost.log", self.port));
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            for line in text.lines().filter(|l| {
                ["dropped", "unclean", "crash", "error", "Restarting"]
                    .iter()
                    .any(|w| l.contains(w))
            }) {
                eprintln!("node log: {line}");
            }
        }
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("pid")) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
    }
}
