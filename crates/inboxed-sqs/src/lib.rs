//! Amazon SQS for inboxed, over the AWS SDK: messages deleted only after the database commit
//! or the durable dead letter, because the consumer loop (`inboxed_core::Consumer`) acks them
//! only then. A requeue sets the message's visibility to the backoff delay; long handlers keep
//! theirs extended (`ConsumerConfig::extend_every`); `ApproximateReceiveCount` is the delivery
//! count; the queue's own redrive policy stays a second line behind inboxed's dead letters.
//!
//! ```no_run
//! # async fn run(processor: inboxed_core::Processor<inboxed_postgres::PgStore, impl inboxed_core::Handler<sqlx::Postgres>>) -> Result<(), Box<dyn std::error::Error>> {
//! use inboxed_core::{Consumer, ConsumerConfig};
//! use inboxed_sqs::{SqsConfig, SqsSource};
//!
//! let config = SqsConfig::new("https://sqs.eu-west-1.amazonaws.com/123456789012/orders");
//! let source = SqsSource::connect(config).await?;
//! Consumer::new(processor, ConsumerConfig::default().concurrency(10))
//!     .run(source, async { let _ = tokio::signal::ctrl_c().await; })
//!     .await?;
//! # Ok(()) }
//! ```

mod config;
mod delivery;
mod entry;
mod publisher;
mod source;

/// The SDK this adapter is built on, for sending with the same client.
pub use aws_sdk_sqs;
pub use config::SqsConfig;
pub use delivery::SqsDelivery;
pub use publisher::{SqsPublisher, SqsPublisherConfig};
pub use source::{SqsSetupError, SqsSource, client, https_client};
