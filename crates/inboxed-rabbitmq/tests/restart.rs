//! A RabbitMQ node of the test's own (its own node name, port, data directory), killed with
//! SIGKILL and restarted in the middle of 4,000 persistent messages: the consumer reconnects
//! by itself, unacked messages come back, and a ledger audit finds every message applied
//! exactly once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use lapin::{Connection, ConnectionProperties};

use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::{declare, publish_keyed};
use inboxed_test::rabbit_node::Node;
use inboxed_test::restart::{MESSAGES, audit_through};
use inboxed_test::{Backend, Pg};

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
