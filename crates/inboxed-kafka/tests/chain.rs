//! One trace through three services A → B → C over a real Kafka-API broker, each its own
//! process with its own PostgreSQL database, inbox and outbox, exporting its spans over OTLP
//! to a receiver in the test.

use inboxed_kafka::{KafkaConfig, KafkaPublisher, KafkaPublisherConfig, KafkaSource};
use inboxed_test::chain::{Service, run_traced, service_main};

use crate::common::{brokers, publish, topic};

const TRACED: &str = "one_trace_runs_from_the_first_service_to_the_last";

/// Each message, started under a root span in the test, is one trace from A's processing to
/// C's, through both outboxes, relays and topics.
#[tokio::test]
async fn one_trace_runs_from_the_first_service_to_the_last() {
    if let Some(service) = Service::from_env() {
        let config = KafkaConfig::new(brokers(), "chain", [service.input.as_str()]);
        let source = KafkaSource::connect(config).await.expect("consume");
        let publisher = KafkaPublisher::connect(KafkaPublisherConfig::new(brokers()))
            .await
            .expect("publish");
        service_main(&service, source, publisher).await;
        return;
    }
    let (a, b, c) = (topic().await, topic().await, topic().await);
    let first = a.clone();
    let tree = run_traced(
        &inboxed_test::test_name!(TRACED),
        [&a, &b, &c],
        [&b, &c],
        |messages| async move { publish(&first, &messages).await },
    )
    .await;
    eprintln!("one trace through Kafka:\n{tree}");
}
