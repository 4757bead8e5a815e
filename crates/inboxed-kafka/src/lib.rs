//! Kafka for inboxed, over rdkafka (librdkafka): a consumer group member whose offsets are
//! stored only after the database commit or the durable dead letter, and committed to the
//! group from there. Offsets are positions, never the dedup key: the key is a header the
//! producer set (`message_id` by default), a JSON field, or CloudEvents `source` + `id`.
//!
//! Committing an offset commits everything before it in its partition, so records are
//! settled one at a time in arrival order ([`inboxed_core::AckOrdering::InOrder`]): a record
//! that fails is retried in place, never skipped, and partition order is kept. Kafka keeps no
//! delivery count; the inbox's own attempt count moves a poison record to the dead-letter path.
//!
//! ```no_run
//! # async fn run(processor: inboxed_core::Processor<inboxed_postgres::PgStore, impl inboxed_core::Handler<sqlx::Postgres>>) -> Result<(), Box<dyn std::error::Error>> {
//! use inboxed_core::{Consumer, ConsumerConfig};
//! use inboxed_kafka::{KafkaConfig, KafkaSource};
//!
//! let config = KafkaConfig::new("127.0.0.1:9092", "billing", ["orders"]);
//! let source = KafkaSource::connect(config).await?;
//! Consumer::new(processor, ConsumerConfig::default())
//!     .run(source, async { let _ = tokio::signal::ctrl_c().await; })
//!     .await?;
//! # Ok(()) }
//! ```

mod config;
mod delivery;
mod headers;
mod publisher;
mod source;

pub use config::KafkaConfig;
pub use delivery::KafkaDelivery;
pub use publisher::{KafkaPublisher, KafkaPublisherConfig};
/// The client this adapter is built on, for producing with the same build (no second
/// librdkafka).
pub use rdkafka;
pub use source::{KafkaSetupError, KafkaSource};
