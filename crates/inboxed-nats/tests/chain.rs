//! Three services A → B → C through a real NATS JetStream, each its own process with its own
//! PostgreSQL database, inbox and outbox, SIGKILLed at random and restarted for several
//! seconds: every service applies every message once, and nothing is left unsent.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use async_nats::jetstream;

use inboxed_nats::{NatsConfig, NatsPublisher, NatsPublisherConfig, NatsSource};
use inboxed_test::chain::{Chain, Service, run_traced, service_main};
use inboxed_test::nats::{create_stream, publish_keyed};
use inboxed_test::restart::amount;

const TEST: &str = "a_chain_of_three_services_is_exactly_once_under_random_sigkills";
const TRACED: &str = "one_trace_runs_from_the_first_service_to_the_last";
const MESSAGES: i64 = 300;

fn nats_url() -> String {
    std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// A service of the chain, when this process is one.
async fn serve(service: &Service) {
    let mut config = NatsConfig::new(nats_url(), &service.input, "chain").prefetch(16);
    // A killed service's unacked messages come back within a second.
    config.ack_wait = Duration::from_secs(1);
    let source = NatsSource::connect(config).await.expect("consume");
    let publisher = NatsPublisher::connect(NatsPublisherConfig::new(nats_url()))
        .await
        .expect("publish");
    service_main(service, source, publisher).await;
}

/// Three fresh streams, A's first, each on the subject of its name in lower case.
async fn streams(js: &jetstream::Context) -> Vec<String> {
    let tag = uuid::Uuid::new_v4().simple().to_string().to_uppercase();
    let streams: Vec<String> = ["A", "B", "C"]
        .iter()
        .map(|s| format!("CHAIN_{tag}_{s}"))
        .collect();
    for stream in &streams {
        create_stream(js, stream, &stream.to_lowercase()).await;
    }
    streams
}

#[tokio::test]
async fn a_chain_of_three_services_is_exactly_once_under_random_sigkills() {
    if let Some(service) = Service::from_env() {
        serve(&service).await;
        return;
    }
    let js = jetstream::new(async_nats::connect(nats_url()).await.unwrap());
    let streams = streams(&js).await;
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

/// Three services, each its own process exporting its spans over OTLP to a receiver in this
/// test: each message is one trace from A to C, through both outboxes, relays and streams.
#[tokio::test]
async fn one_trace_runs_from_the_first_service_to_the_last() {
    if let Some(service) = Service::from_env() {
        serve(&service).await;
        return;
    }
    let js = jetstream::new(async_nats::connect(nats_url()).await.unwrap());
    let streams = streams(&js).await;
    let subjects: Vec<String> = streams.iter().map(|s| s.to_lowercase()).collect();
    let tree = run_traced(
        &inboxed_test::test_name!(TRACED),
        [&streams[0], &streams[1], &streams[2]],
        [&subjects[1], &subjects[2]],
        |messages| inboxed_test::nats::publish_all(&js, &subjects[0], messages),
    )
    .await;
    eprintln!("one trace through NATS JetStream:\n{tree}");
    for stream in &streams {
        js.delete_stream(stream).await.unwrap();
    }
}
