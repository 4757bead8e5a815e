//! A RabbitMQ node of the test's own (its own node name, port, data directory), killed with
//! SIGKILL and restarted in the middle of 10,000 persistent messages: the consumer reconnects
//! by itself, unacked messages come back, and a ledger audit finds every message applied
//! exactly once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use lapin::{Connection, ConnectionProperties};

use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::{declare, publish_keyed};
use inboxed_test::restart::{MESSAGES, audit_through};
use inboxed_test::{Backend, Pg};

/// A RabbitMQ node in a temporary directory; killed when dropped.
struct Node {
    dir: tempfile::TempDir,
    port: u16,
    dist_port: u16,
}

impl Node {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Debian's rabbitmq-server runs the node as the rabbitmq user.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let (port, dist_port) = (inboxed_test::free_port(), inboxed_test::free_port());
        std::fs::write(
            dir.path().join("rabbitmq.conf"),
            format!("listeners.tcp.default = 127.0.0.1:{port}\nloopback_users = none\n"),
        )
        .unwrap();
        let node = Self {
            dir,
            port,
            dist_port,
        };
        node.boot().await;
        node
    }

    /// Starts the node on its directory (again) and waits for its port.
    async fn boot(&self) {
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
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("RabbitMQ node did not listen on {} within 60 s", self.port);
    }

    /// SIGKILL to the node's VM, and waits until its port is closed.
    async fn kill(&self) {
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

    fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
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

#[tokio::test]
async fn broker_killed_and_restarted_mid_stream_loses_and_repeats_nothing() {
    let db = Pg::create().await;
    let node = Node::start().await;
    {
        let conn = Connection::connect(&node.url(), ConnectionProperties::default())
            .await
            .unwrap();
        let channel = conn.create_channel().await.unwrap();
        declare(&channel, "restart").await;
        publish_keyed(&channel, "restart", "b", 0..MESSAGES).await;
        conn.close(0, "published".into()).await.unwrap();
    }
    eprintln!("restart test: {MESSAGES} messages published and confirmed");
    let source = RabbitSource::connect(RabbitConfig::new(node.url(), "restart").prefetch(64))
        .await
        .unwrap();
    // Mid-stream: SIGKILL the node, then boot it again on the same data directory.
    let (at_kill, ()) = audit_through(&db.locator, db.store.clone(), source, || async {
        node.kill().await;
        eprintln!("restart test: node killed");
        node.boot().await;
        eprintln!("restart test: node listening again");
    })
    .await;
    eprintln!("restart test: {at_kill} rows when the node was killed");
    db.finish().await;
}
