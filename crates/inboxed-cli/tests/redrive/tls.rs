//! TLS with a private CA, for each broker that has it: the consumer and the binary's publisher
//! trust the test's CA (`tls_ca_file`, `--tls-ca-file`), and the redrive is applied once.

use super::*;

use inboxed_test::tls::{TestCa, TlsServer};

/// `--to-broker URL --<flag> <name> --tls-ca-file <the CA>`, then the scenario.
async fn redrive_through<S, F, Fut>(source: S, publish: F, url: &str, to: (&str, &str), ca: &TestCa)
where
    S: DeliverySource + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let ca_file = ca.ca_file().display().to_string();
    let flags = ["--to-broker", url, to.0, to.1, "--tls-ca-file", &ca_file];
    scenario(source, publish, &flags, &[], &[]).await;
}

#[tokio::test]
async fn rediss_redrive_is_applied_once() {
    let ca = TestCa::new();
    let server = TlsServer::redis(&ca);
    let url = format!("rediss://localhost:{}", server.port);
    let stream = "orders";
    let conn = inboxed_redis::client(&url, Some(&ca.ca_file()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let config = inboxed_redis::RedisConfig::new(&url, stream, "ledger").tls_ca_file(ca.ca_file());
    let source = inboxed_redis::RedisSource::connect(config).await.unwrap();
    let publish = || {
        let mut conn = conn.clone();
        async move {
            let fields: [(&str, &[u8]); 2] = [("payload", &payload()), ("message_id", b"r-1")];
            let _: String = conn.xadd(stream, "*", &fields).await.unwrap();
        }
    };
    redrive_through(source, publish, &url, ("--stream", stream), &ca).await;
}

#[tokio::test]
async fn amqps_redrive_is_applied_once() {
    let ca = TestCa::new();
    let node = inboxed_test::rabbit_node::Node::start_tls(&ca).await;
    let url = node.tls_url("localhost");
    let conn = inboxed_rabbitmq::connection(&url, Some(&ca.ca_file()))
        .await
        .unwrap();
    let channel = conn.create_channel().await.unwrap();
    inboxed_test::amqp::declare(&channel, "orders").await;
    let config = inboxed_rabbitmq::RabbitConfig::new(&url, "orders").tls_ca_file(ca.ca_file());
    let source = inboxed_rabbitmq::RabbitSource::connect(config)
        .await
        .unwrap();
    let publish = || publish_amqp(&channel, "orders");
    redrive_through(source, publish, &url, ("--queue", "orders"), &ca).await;
}

#[tokio::test]
async fn nats_tls_redrive_is_applied_once() {
    let ca = TestCa::new();
    let server = TlsServer::nats(&ca);
    let url = format!("tls://localhost:{}", server.port);
    let client = async_nats::ConnectOptions::new()
        .add_root_certificates(ca.ca_file())
        .connect(&url)
        .await
        .unwrap();
    let js = jetstream::new(client);
    js.create_stream(jetstream::stream::Config {
        name: "REDRIVE".to_owned(),
        subjects: vec!["orders".to_owned()],
        duplicate_window: Duration::from_secs(1),
        ..jetstream::stream::Config::default()
    })
    .await
    .unwrap();
    let config = inboxed_nats::NatsConfig::new(&url, "REDRIVE", "ledger").tls_ca_file(ca.ca_file());
    let source = inboxed_nats::NatsSource::connect(config).await.unwrap();
    let publish = || async {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", "r-1");
        js.publish_with_headers("orders", headers, payload().into())
            .await
            .unwrap()
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
    };
    redrive_through(source, publish, &url, ("--subject", "orders"), &ca).await;
}
