//! What the Kafka tests share: the broker's address and a fresh topic per test.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;

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
