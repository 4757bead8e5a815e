//! RabbitMQ for inboxed, over lapin: a [`DeliverySource`](inboxed_core::DeliverySource) whose
//! deliveries are acked manually and only after the database commit (or the durable dead
//! letter), never before, because the consumer loop (`inboxed_core::Consumer`) acks them only
//! then.
//!
//! ```no_run
//! # async fn run(processor: inboxed_core::Processor<inboxed_postgres::PgStore, impl inboxed_core::Handler<sqlx::Postgres>>) -> Result<(), Box<dyn std::error::Error>> {
//! use inboxed_core::{Consumer, ConsumerConfig, KeySource};
//! use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
//!
//! let config = RabbitConfig::new("amqp://guest:guest@127.0.0.1:5672/%2f", "billing")
//!     .prefetch(32)
//!     .key(KeySource::MessageIdProperty);
//! let source = RabbitSource::connect(config).await?;
//! Consumer::new(processor, ConsumerConfig::default().concurrency(32))
//!     .run(source, async { let _ = tokio::signal::ctrl_c().await; })
//!     .await?;
//! # Ok(()) }
//! ```

mod config;
mod delay;
mod delivery;
mod nodes;
mod publisher;
mod runtime;
mod screen;
mod source;
mod unacked;
mod wire;

pub use config::{QueueKind, RabbitConfig};
pub use delivery::RabbitDelivery;
pub use publisher::{RabbitPublisher, RabbitPublisherConfig, Route};
pub use source::{RabbitError, RabbitSource, connection};
