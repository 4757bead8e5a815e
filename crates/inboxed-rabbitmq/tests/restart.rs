//! A RabbitMQ node of the test's own (its own node name, port, data directory), killed with
//! SIGKILL and restarted in the middle of 10,000 persistent messages: the consumer reconnects
//! by itself, unacked messages come back, and a ledger audit finds every message applied
//! exactly once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor};
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::restart::{MESSAGES, amount};
use inboxed_test::{Backend, Ledger, Pg, credit};

/// A RabbitMQ node in a temporary directory; killed when dropped.
struct Node {
    dir: tempfile::TempDir,
    port: u16,
    dist_port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
        let (port, dist_port) = (free_port(), free_port());
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

    fn kill(&self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("pid")) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
    }

    fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
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
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        channel
            .queue_declare(
                "restart".into(),
                QueueDeclareOptions::durable(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        let mut confirms = Vec::new();
        for i in 0..MESSAGES {
            let id = format!("b-{i}");
            let props = BasicProperties::default()
                .with_delivery_mode(2)
                .with_message_id(id.as_str().into());
            let body = credit(&id, amount(i)).payload().to_vec();
            confirms.push(
                channel
                    .basic_publish(
                        "".into(),
                        "restart".into(),
                        BasicPublishOptions::default(),
                        &body,
                        props,
                    )
                    .await
                    .unwrap(),
            );
        }
        for confirm in confirms {
            confirm.await.unwrap();
        }
    }

    let source = RabbitSource::connect(RabbitConfig::new(node.url(), "restart").prefetch(64))
        .await
        .unwrap();
    let processor = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let consuming = tokio::spawn(async move {
        Consumer::new(processor, ConsumerConfig::default().concurrency(16))
            .run(source, async {
                let _ = stopped.await;
            })
            .await
    });
    let rows = || db.scalar("SELECT count(*) FROM ledger");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(200);
    while rows().await < MESSAGES / 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress before the kill"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    node.kill();
    let at_kill = rows().await;
    node.boot().await;
    eprintln!("broker restart: {at_kill} rows when the node was killed");
    while rows().await < MESSAGES {
        assert!(
            tokio::time::Instant::now() < deadline,
            "stuck at {} of {MESSAGES} after the restart (killed at {at_kill})",
            rows().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.send(()).unwrap();
    consuming.await.unwrap().unwrap();

    let (count, distinct, sum): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT message_id), coalesce(sum(amount), 0)::bigint FROM ledger",
    )
    .fetch_one(db.store.pool())
    .await
    .unwrap();
    let expected: i64 = (0..MESSAGES).map(amount).sum();
    assert!(at_kill < MESSAGES, "the kill came mid-stream ({at_kill})");
    assert_eq!(
        (count, distinct, sum),
        (MESSAGES, MESSAGES, expected),
        "ledger audit"
    );
    db.finish().await;
}
