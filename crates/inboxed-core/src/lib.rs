//! Engine of [inboxed](https://docs.rs/inboxed): exactly-once processing on top of
//! at-least-once delivery. Use the `inboxed` crate; this one holds the types, the processor,
//! the consumer loop and the store seam, and contains no SQL and no broker client.
//!
//! # Layout
//! - [`envelope`]: message id, consumer name, payload hash (key format v1).
//! - [`handler`]: the trait your business code implements.
//! - [`processor`]: begin → claim → handle → commit, with retries and dead letters.
//! - [`consumer`] and [`delivery`]: ack only after commit, for any broker.
//! - [`store`]: the internal seam the database backends implement, and [`engine`]: the store
//!   operations written once for every backend over the little each one provides;
//!   [`driver`]: the client library a store talks through (what a handler's connection is).
//! - [`outbox`]: outgoing messages written in the caller's transaction, sent after its commit.
//! - [`retention`]: how long processed keys are kept, and the purger.
//! - [`error`], [`config`], [`metrics`], [`backoff`].

pub mod backoff;
pub mod config;
pub mod consumer;
pub mod crash;
pub mod delivery;
mod drive;
pub mod driver;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod handler;
pub mod hash;
pub mod headers;
pub mod inbox;
pub mod key_source;
pub mod kill_switch;
mod ladder;
pub mod metrics;
pub mod migration;
pub mod namespace;
pub mod observe;
pub mod outbox;
pub mod processor;
pub mod rate_limit;
pub mod retention;
pub mod sql;
pub mod store;
pub mod tls;
pub mod trace;

pub use backoff::{Backoff, FailureStreak};
pub use config::{AttemptCounting, ConflictPolicy, ProcessorConfig};
pub use consumer::{Consumer, ConsumerConfig, Settled, Tenants, settle};
pub use crash::CrashAttribution;
pub use delivery::{AckOrdering, Delivery, DeliverySource};
pub use envelope::{ConsumerName, Envelope, EnvelopeError, MessageId, escape_bytes};
pub use error::{BoxError, Error, HandlerError, ResultExt, StoreError, error_chain};
pub use handler::Handler;
pub use hash::{PayloadHash, StoredHash};
pub use headers::Headers;
pub use key_source::{KeyCarrier, KeyPlace, KeySource, REDRIVE_HEADER};
pub use kill_switch::KillSwitch;
pub use ladder::Ladder;
pub use namespace::Namespace;
pub use outbox::{Outbox, OutgoingMessage};
pub use processor::{Outcome, Processor};
pub use rate_limit::RateLimit;
pub use store::{DeadLetterReason, DurabilityReport, Isolation, Store};
