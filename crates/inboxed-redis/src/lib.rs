//! Redis Streams for inboxed, over redis-rs: a consumer group member whose entries are
//! `XACK`ed only after the database commit or the durable dead letter, because the consumer
//! loop (`inboxed_core::Consumer`) acks them only then. Entries left pending by a crash are
//! taken over with `XAUTOCLAIM` once idle for `claim_idle`; a requeued entry is taken over with
//! `XCLAIM` when the delay it was given has passed.
//!
//! ```no_run
//! # async fn run(processor: inboxed_core::Processor<inboxed_postgres::PgStore, impl inboxed_core::Handler<sqlx::Postgres>>) -> Result<(), Box<dyn std::error::Error>> {
//! use inboxed_core::{Consumer, ConsumerConfig};
//! use inboxed_redis::{RedisConfig, RedisSource};
//!
//! let config = RedisConfig::new("redis://127.0.0.1:6379", "orders", "billing");
//! let source = RedisSource::connect(config).await?;
//! Consumer::new(processor, ConsumerConfig::default().concurrency(32))
//!     .run(source, async { let _ = tokio::signal::ctrl_c().await; })
//!     .await?;
//! # Ok(()) }
//! ```

mod config;
mod delivery;
mod entry;
mod publisher;
mod schedule;
mod source;

pub use config::RedisConfig;
pub use delivery::RedisDelivery;
pub use publisher::{RedisPublisher, RedisPublisherConfig};
pub use source::{RedisError, RedisSource, client};
