//! NATS JetStream for inboxed, over async-nats: a durable pull consumer whose messages are acked
//! (with the server's confirmation) only after the database commit or the durable dead letter,
//! because the consumer loop (`inboxed_core::Consumer`) acks them only then.
//!
//! ```no_run
//! # async fn run(processor: inboxed_core::Processor<inboxed_postgres::PgStore, impl inboxed_core::Handler<sqlx::Postgres>>) -> Result<(), Box<dyn std::error::Error>> {
//! use inboxed_core::{Consumer, ConsumerConfig};
//! use inboxed_nats::{NatsConfig, NatsSource};
//!
//! let config = NatsConfig::new("nats://127.0.0.1:4222", "ORDERS", "billing").prefetch(32);
//! let source = NatsSource::connect(config).await?;
//! Consumer::new(processor, ConsumerConfig::default().concurrency(32))
//!     .run(source, async { let _ = tokio::signal::ctrl_c().await; })
//!     .await?;
//! # Ok(()) }
//! ```

mod config;
mod delivery;
mod publisher;
mod screen;
mod source;
mod upstream;

pub use config::NatsConfig;
pub use delivery::NatsDelivery;
pub use publisher::{CORRELATION_HEADER, NatsPublisher, NatsPublisherConfig, TYPE_HEADER};
pub use source::{NatsError, NatsSource};

/// The servers of a URL: one, or a cluster's separated by commas, which async-nats takes as a
/// list (it parses a string as one server).
fn servers(url: &str) -> Vec<&str> {
    url.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}
