//! Three services A → B → C through a real NATS JetStream, each its own process with its own
//! PostgreSQL database, inbox and outbox, SIGKILLed at random and restarted for several
//! seconds: every service applies every message once, and nothing is left unsent.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use async_nats::jetstream;

use inboxed_nats::{NatsConfig, NatsPublisher, NatsPublisherConfig, NatsSource};
use inboxed_test::chain::{Chain, Service, service_main};
use inboxed_test::nats::{create_stream, publish_keyed};
use inboxed_test::restart::amount;

const TEST: &str = "a_chain_of_three_services_is_exactly_once_under_random_sigkills";
const MESSAGES: i64 = 300;

fn nats_url() -> String {
    std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

#[tokio::test]
async fn a_chain_of_three_services_is_exactly_once_under_random_sigkills() {
    if let Some(service) = Service::from_env() {
        let mut config = NatsConfig::new(nats_url(), &service.input, "chain").prefetch(16);
        // A killed service's unacked messages come back within a second.
        config.ack_wait = Duration::from_secs(1);
        let source = NatsSource::connect(config).await.expect("consume");
        let publisher = NatsPublisher::connect(NatsPublisherConfig::new(nats_url()))
            .await
            .expect("publish");
        service_main(&service, source, publisher).await;
        return;
    }
    let js = jetstream::new(async_nats::connect(nats_url()).await.unwrap());
    let tag = uuid::Uuid::new_v4().simple().to_string().to_uppercase();
    let streams: Vec<String> = ["A", "B", "C"]
        .iter()
        .map(|s| format!("CHAIN_{tag}_{s}"))
        .collect();
    for stream in &streams {
        create_stream(&js, stream, &stream.to_lowercase()).await;
    }
    publish_keyed(&js, &streams[0].to_lowercase(), "m", MESSAGES).await;
    // A service writes on to the next one's subject; it consumes its own stream.
    let chain = Chain::create().await;
    let report = chain
        .run_with_destinations(
            &inboxed_test::test_name!(TEST),
            [&streams[0], &streams[1], &streams[2]],
            [&streams[1].to_lowercase(), &streams[2].to_lowercase()],
            &[],
            MESSAGES,
            Duration::from_secs(8),
        )
        .await;
    eprintln!("chain through NATS JetStream: {report:?}");
    assert!(report.kills >= 8, "{report:?}");
    chain
        .assert_exact(MESSAGES, (0..MESSAGES).map(amount).sum())
        .await;
    for stream in &streams {
        js.delete_stream(stream).await.unwrap();
    }
    chain.finish().await;
}
