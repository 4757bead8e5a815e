//! `amqps` to a RabbitMQ node of the test's own, whose TLS listener presents a certificate for
//! `localhost` signed by a CA the test makes. Through `amqps://localhost` and the CA the source
//! consumes every valid message once, and the screen (below lapin, above TLS) still
//! dead-letters a `message_id` that is not UTF-8 (put on the queue by the raw producer over the
//! node's plain listener). An untrusted CA, the system's roots alone, and a host name the
//! certificate does not carry are refused at connect with errors that say so, and an `amqps`
//! URI at a plaintext listener never connects.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use serde_json::json;

use inboxed_core::error_chain;
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::{declare, publish_keyed};
use inboxed_test::rabbit_node::Node;
use inboxed_test::raw_amqp::{hex, produce};
use inboxed_test::restart::amount;
use inboxed_test::tls::TestCa;
use inboxed_test::wire::{assert_dead_letters, drain_and_check_ledger};
use inboxed_test::{Backend, Pg};

async fn connect_error(config: RabbitConfig) -> String {
    match RabbitSource::connect(config).await {
        Ok(_) => panic!("connected where TLS must refuse"),
        Err(e) => error_chain(&e),
    }
}

#[tokio::test]
async fn consumes_through_amqps_with_the_screen_and_refuses_what_it_must() {
    let ca = TestCa::new();
    let node = Node::start_tls(&ca).await;
    let db = Pg::create().await;
    let url = node.tls_url("localhost");
    let conn = inboxed_rabbitmq::connection(&url, Some(&ca.ca_file()))
        .await
        .unwrap();
    let channel = conn.create_channel().await.unwrap();
    declare(&channel, "tls").await;
    publish_keyed(&channel, "tls", "t", 0..50).await;
    let bad = json!({"routing_key": hex(b"tls"), "props": {"message_id": hex(b"m-\xff")},
                     "body": hex(br#"{"amount": 1000000}"#)});
    produce(&node.url(), vec![bad]).await;

    let source =
        RabbitSource::connect(RabbitConfig::new(url.as_str(), "tls").tls_ca_file(ca.ca_file()))
            .await
            .unwrap();
    let sum = (0..50).map(amount).sum();
    drain_and_check_ledger(&db, source, (50, sum), 1).await;
    assert_dead_letters(&db, 1, &["message_id property: not valid UTF-8"]).await;

    let wrong = RabbitConfig::new(url.as_str(), "tls").tls_ca_file(ca.wrong_ca_file());
    let err = connect_error(wrong).await;
    assert!(err.contains("UnknownIssuer"), "{err}");
    let err = connect_error(RabbitConfig::new(url.as_str(), "tls")).await;
    assert!(err.contains("UnknownIssuer"), "{err}");
    let ip = RabbitConfig::new(node.tls_url("127.0.0.1"), "tls").tls_ca_file(ca.ca_file());
    let err = connect_error(ip).await;
    assert!(err.contains("not valid for name"), "{err}");
    // An amqps URI at the plain listener: a TLS handshake that fails, never plaintext (lapin
    // without its TLS feature dialled amqps in plaintext and this connected).
    let plain = node
        .url()
        .replace("amqp://", "amqps://")
        .replace("127.0.0.1", "localhost");
    let err = connect_error(RabbitConfig::new(plain, "tls").tls_ca_file(ca.ca_file())).await;
    assert!(!err.is_empty(), "amqps to a plaintext listener is refused");
    conn.close(0, "done".into()).await.unwrap();
    db.finish().await;
}
