//! # inboxed
//!
//! Exactly-once *processing* on top of at-least-once *delivery*: the inbox pattern.
//!
//! Every delivery runs one database transaction in a fixed order: begin, insert
//! `(message_id, consumer_name)` into the processed-messages table with
//! `ON CONFLICT DO NOTHING`, run your handler on the same transaction's connection, commit, and
//! only then ack the broker. A redelivery finds the committed row and does nothing; a
//! concurrent duplicate waits on the uncommitted row and then finds it; a crash before commit
//! leaves nothing behind, and a crash after commit is caught by the next delivery's claim.
//!
//! ## What it does not cover
//! - Side effects outside the database transaction (HTTP calls, emails, a second database, a
//!   cache or search index): they run again on redelivery.
//! - Producers that mint a new id on every retry: the key must be assigned once, when the event
//!   is created. Broker offsets, receipt handles and delivery counters are never keys.
//!
//! ## Quick start
//! ```no_run
//! use inboxed::{ConsumerName, Envelope, Handler, HandlerError, MessageId, Outcome, Processor};
//! use inboxed::sqlite::SqliteStore;
//! use inboxed::Store;
//! use sqlx::{Sqlite, SqliteConnection};
//!
//! struct Ledger;
//!
//! impl Handler<Sqlite> for Ledger {
//!     async fn handle(&self, msg: &Envelope, conn: &mut SqliteConnection) -> Result<(), HandlerError> {
//!         sqlx::query("INSERT INTO ledger (message_id, amount) VALUES (?1, 10)")
//!             .bind(msg.id().as_str())
//!             .execute(&mut *conn)
//!             .await?;
//!         Ok(())
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteStore::open("app.db").await?;
//! store.migrate().await?;
//! let processor = Processor::new(store, ConsumerName::new("ledger")?, Ledger);
//! let msg = Envelope::new(MessageId::new("3f6c2a9e-8b1d-4e7a-9c55-0d2f1b7e4a10")?, br#"{"amount":10}"#.to_vec());
//! match processor.process(&msg, Some(1)).await {
//!     Ok(Outcome::Processed | Outcome::Duplicate) => { /* ack */ }
//!     Ok(other) => { /* dead-lettered or conflicting: settled, ack */ let _ = other; }
//!     Err(e) => { /* nothing committed: requeue */ let _ = e; }
//! }
//! # Ok(()) }
//! ```
//!
//! ## Layout
//! - [`inboxed_core`] (re-exported here): envelope, processor, consumer loop, errors.
//! - [`postgres`] (feature `postgres`) and [`sqlite`] (feature `sqlite`): the stores.
//! - [`rabbitmq`] (feature `rabbitmq`), [`nats`] (feature `nats`) and [`redis`] (feature
//!   `redis`): broker sources for [`Consumer`]. `kafka` and `sqs` are the same for Kafka and
//!   Amazon SQS; they build C and SDK code, so they are opt-in.

pub use inboxed_core::*;

/// Kafka records, their offsets committed only after the database commit.
#[cfg(feature = "kafka")]
pub mod kafka {
    pub use inboxed_kafka::*;
}

/// Amazon SQS messages, deleted only after the database commit.
#[cfg(feature = "sqs")]
pub mod sqs {
    pub use inboxed_sqs::*;
}

/// Redis Streams entries, acked only after the commit.
#[cfg(feature = "redis")]
pub mod redis {
    pub use inboxed_redis::*;
}

/// NATS JetStream messages, acked only after the commit.
#[cfg(feature = "nats")]
pub mod nats {
    pub use inboxed_nats::*;
}

/// RabbitMQ deliveries, acked only after the commit.
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq {
    pub use inboxed_rabbitmq::*;
}

/// PostgreSQL store.
#[cfg(feature = "postgres")]
pub mod postgres {
    pub use inboxed_postgres::*;
}

/// SQLite store.
#[cfg(feature = "sqlite")]
pub mod sqlite {
    pub use inboxed_sqlite::*;
}

/// MySQL and MariaDB store (the processor so far).
#[cfg(feature = "mysql")]
pub mod mysql {
    pub use inboxed_mysql::*;
}
