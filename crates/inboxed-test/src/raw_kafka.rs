//! A Kafka producer outside Rust for the wire-level tests: `scripts/raw_kafka_producer.py`
//! (kafka-python) sends header names as raw bytes, which no Rust client would.

use serde_json::{Value, json};

use crate::raw_amqp::run_script;

/// Publishes `messages` (each as the script's header describes) to `topic` at `brokers`, every
/// one acknowledged by the broker when it returns.
///
/// # Panics
/// When the broker refuses one, or python3 or kafka-python is missing (scripts/test.sh
/// installs kafka-python).
pub async fn produce(brokers: &str, topic: &str, messages: Vec<Value>) {
    let spec = json!({"bootstrap": brokers, "topic": topic, "messages": messages});
    let status = run_script("raw_kafka_producer.py", &spec).await;
    assert!(status.success(), "the raw Kafka producer failed: {status}");
}
