#![doc = include_str!("../README.md")]
//!
//! ## What this crate exports
//! The names a service uses, chosen one by one: [`prelude`] for a consumer's handful, the
//! top level for the processor's settings, and a module per concern ([`inbox`], [`outbox`],
//! [`retention`], [`delivery`], [`error`], [`metrics`], [`trace`]), beside one module per engine and
//! broker behind its feature. The store seams the engines implement stay inside
//! `inboxed-core`: their bounds appear in signatures here, but nothing here lets a caller
//! name or implement them, so they can change without breaking a service. The list of every
//! public item is checked in (`crates/inboxed/public-api.txt`) and compared in CI.

/// What a consumer's code names: `use inboxed::prelude::*;`.
pub mod prelude {
    pub use inboxed_core::{
        Consumer, ConsumerConfig, ConsumerName, Envelope, Handler, HandlerError, MessageId, Outbox,
        Outcome, OutgoingMessage, Processor, ProcessorConfig, ResultExt,
    };
}

pub use inboxed_core::{
    AttemptCounting, Backoff, ConflictPolicy, Consumer, ConsumerConfig, ConsumerName,
    CrashAttribution, DeadLetterReason, DurabilityReport, Envelope, EnvelopeError, Error, Handler,
    HandlerError, Headers, Isolation, KillSwitch, Ladder, MessageId, Namespace, Outbox, Outcome,
    OutgoingMessage, PayloadHash, Processor, ProcessorConfig, RateLimit, ResultExt, StoreError,
    StoredHash, Tenants,
};

/// Errors, each keeping its source: what the library returns and what a handler returns.
pub mod error {
    pub use inboxed_core::envelope::EnvelopeError;
    pub use inboxed_core::error::{
        BoxError, Error, HandlerError, ResultExt, StoreError, error_chain,
    };
    pub use inboxed_core::outbox::{OutgoingError, WriteError};
    pub use inboxed_core::retention::RetentionError;
}

/// A broker's side of the consumer loop: implement [`Delivery`](delivery::Delivery) and
/// [`DeliverySource`](delivery::DeliverySource) for a broker without an adapter here, or run
/// a loop of your own with [`settle`](delivery::settle).
pub mod delivery {
    pub use inboxed_core::consumer::{Settled, settle};
    pub use inboxed_core::delivery::{AckOrdering, Delivery, DeliverySource};
    pub use inboxed_core::key_source::{KeyCarrier, KeyPlace, KeySource, REDRIVE_HEADER};
}

/// Store, then process: receipt stores and commits before the ack, workers process the rows.
pub mod inbox {
    pub use inboxed_core::inbox::{
        BatchReport, ClaimMode, Enqueued, Inbox, InboxRelay, InboxRelayConfig, OnDead, Reaper,
        ReaperConfig, Relayed, Replayed, Selector, Worker, WorkerConfig,
    };
}

/// W3C trace context carried from the service that writes a message to the one that
/// processes it: read from an inbound message's headers, stored with an outbox row, published
/// by the relay. The `otel` feature captures the current span's context at the write and
/// continues a message's trace when processing it.
pub mod trace {
    pub use inboxed_core::trace::{
        BAGGAGE, InvalidTraceparent, TRACEPARENT, TRACESTATE, TraceContext,
    };
}

/// Outgoing messages written in the business transaction, published after its commit.
pub mod outbox {
    pub use inboxed_core::outbox::{
        CORRELATION_HEADER, Confirmation, MAX_DESTINATION_BYTES, MAX_ORDERING_KEY_BYTES, Outbox,
        OutboxRelay, OutboxRelayConfig, OutboxRelayReport, OutgoingError, OutgoingMessage,
        Publisher, TYPE_HEADER, WriteError,
    };
}

/// How long processed keys are kept, and the purger that removes them.
pub mod retention {
    pub use inboxed_core::retention::{
        DEFAULT_MARGIN, PartitionConfig, PartitionReport, PassReport, Purger, PurgerConfig,
        Retention, RetentionError,
    };
}

/// The metric names the library records through the `metrics` crate (docs/metrics.md).
pub mod metrics {
    pub use inboxed_core::metrics::{
        ALONE_SECONDS, BATCH_FALLBACKS_TOTAL, CLAIM_BATCH_SIZE, CLAIM_WAIT_SECONDS,
        DEAD_LETTERS_TOTAL, DEAD_WORKERS_TOTAL, FAILURES_TOTAL, HANDLER_DURATION_SECONDS,
        HISTOGRAM_BUCKETS, KEYS_ESTIMATED, KEYS_GROWTH_PER_HOUR, KILL_SWITCH_OPEN,
        KILL_SWITCH_TRIPS_TOTAL, LAG_SECONDS, LEASES_EXPIRED_TOTAL, MESSAGES_TOTAL,
        OLDEST_KEY_AGE_SECONDS, OUTBOX_LEASES_EXPIRED_TOTAL, OUTBOX_PURGED_ROWS_TOTAL,
        OUTBOX_ROWS_TOTAL, PARTITION_DROP_SECONDS, PROCESSED_TABLE_BYTES, PURGE_FAILURES_TOTAL,
        PURGE_LAST_SUCCESS_SECONDS, PURGE_PASS_SECONDS, PURGED_ROWS_TOTAL, RATE_LIMITED_TOTAL,
        RECEIPTS_TOTAL, REDELIVERY_HORIZON_SECONDS, RELAY_REQUEUES_TOTAL, RETENTION_WINDOW_SECONDS,
        RETRIES_TOTAL, ROWS_TOTAL, SUSPECTS_WAITING, WORKER_LOOPS,
    };
}

/// PostgreSQL store; [`failover`](postgres::failover) for a pool of your own that follows the
/// primary of a multi-host URL; `tokio_pg` (feature `tokio-postgres`) for handlers on
/// tokio-postgres, `diesel_pg` (feature `diesel-async`) for handlers on diesel-async,
/// `sea_orm_pg` (feature `sea-orm`) for handlers on SeaORM.
#[cfg(feature = "postgres")]
pub mod postgres {
    #[cfg(feature = "diesel-async")]
    pub use inboxed_postgres::diesel_pg;
    #[cfg(feature = "sea-orm")]
    pub use inboxed_postgres::sea_orm_pg;
    #[cfg(feature = "tokio-postgres")]
    pub use inboxed_postgres::tokio_pg;
    pub use inboxed_postgres::{ExpiryPlan, PartitionInfo, PgStore, default_namespace, failover};
}

/// SQLite store.
#[cfg(feature = "sqlite")]
pub mod sqlite {
    pub use inboxed_sqlite::{SqliteStore, default_namespace};
}

/// MySQL 8.0.16+ and MariaDB 10.6+ store.
#[cfg(feature = "mysql")]
pub mod mysql {
    pub use inboxed_mysql::{MySqlStore, Partition};
}

/// RabbitMQ deliveries, acked only after the commit; and the outbox's publisher.
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq {
    pub use inboxed_rabbitmq::{
        QueueKind, RabbitConfig, RabbitDelivery, RabbitError, RabbitPublisher,
        RabbitPublisherConfig, RabbitSource, Route,
    };
}

/// NATS JetStream messages, acked only after the commit; and the outbox's publisher.
#[cfg(feature = "nats")]
pub mod nats {
    pub use inboxed_nats::{
        NatsConfig, NatsDelivery, NatsError, NatsPublisher, NatsPublisherConfig, NatsSource,
    };
}

/// Redis Streams entries, acked only after the commit; and the outbox's publisher.
#[cfg(feature = "redis")]
pub mod redis {
    pub use inboxed_redis::{
        RedisConfig, RedisDelivery, RedisError, RedisPublisher, RedisPublisherConfig, RedisSource,
    };
}

/// Kafka records, their offsets committed only after the database commit; and the outbox's
/// publisher. `rdkafka` is re-exported for its client settings.
#[cfg(feature = "kafka")]
pub mod kafka {
    pub use inboxed_kafka::{
        KafkaConfig, KafkaDelivery, KafkaPublisher, KafkaPublisherConfig, KafkaSetupError,
        KafkaSource, rdkafka,
    };
}

/// Amazon SQS messages, deleted only after the database commit; and the outbox's publisher.
/// `aws_sdk_sqs` is re-exported for its client.
#[cfg(feature = "sqs")]
pub mod sqs {
    pub use inboxed_sqs::{
        SqsConfig, SqsDelivery, SqsPublisher, SqsPublisherConfig, SqsSetupError, SqsSource,
        aws_sdk_sqs, client, https_client,
    };
}
