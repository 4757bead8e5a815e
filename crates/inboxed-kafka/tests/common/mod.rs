//! What the Kafka tests share: the broker's address, a fresh topic per test, and publishing
//! envelopes the way a producer keyed by the `message_id` header does.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

/// Publishes `messages` to `topic` in order, each with its id in the `message_id` header and
/// its own headers after it, waiting for each to be acknowledged.
pub(crate) async fn publish(topic: &str, messages: &[inboxed_core::Envelope]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    for message in messages {
        let mut headers = OwnedHeaders::new().insert(Header {
            key: "message_id",
            value: Some(message.id().as_str()),
        });
        for (key, value) in message.headers().iter() {
            headers = headers.insert(Header {
                key,
                value: Some(value),
            });
        }
        let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(topic)
            .payload(message.payload())
            .headers(headers);
        producer
            .send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}

/// `INBOXED_KAFKA_BROKERS`, default the local Kafka-API broker on port 19092 that
/// scripts/test.sh starts.
pub(crate) fn brokers() -> String {
    std::env::var("INBOXED_KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:19092".to_owned())
}

/// A fresh topic of `partitions` partitions for one test.
pub(crate) async fn topic_with(partitions: i32) -> String {
    let name = format!("inboxed-test-{}", uuid::Uuid::new_v4());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    let created = admin
        .create_topics(
            &[NewTopic::new(&name, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().request_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("a Kafka-API broker must be running: scripts/test.sh starts one");
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    name
}

/// A fresh one-partition topic.
pub(crate) async fn topic() -> String {
    topic_with(1).await
}
