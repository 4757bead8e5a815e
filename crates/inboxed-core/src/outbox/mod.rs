//! The transactional outbox: a message a service sends is written in the same transaction as
//! the business change that caused it, so it exists exactly when that change commits, never
//! for a change rolled back and never twice for a redelivered one. A relay publishes it after
//! the commit, under an id minted once at the write, which the next service's inbox
//! deduplicates; so a chain of services is exactly-once end to end.
//!
//! Writing is one insert on the caller's connection ([`Outbox::write`]): from a
//! [`Handler`](crate::Handler) (the processor's and the store-then-process workers' alike,
//! through the connection they hand it) or from application code with no inbox at all.
//! Publishing is an [`OutboxRelay`]'s, through a broker adapter's [`Publisher`].

mod config;
mod locked;
mod marks;
mod message;
mod operate;
mod publish;
mod relay;
pub mod store;
mod write_error;

pub use config::OutboxRelayConfig;
pub use message::{MAX_DESTINATION_BYTES, MAX_ORDERING_KEY_BYTES, OutgoingError, OutgoingMessage};
pub use operate::{
    DeadAction, DeadParams, OutboxBrowse, OutboxEntry, OutboxFilter, OutboxStatus, UnknownStatus,
};
pub use publish::{CORRELATION_HEADER, Confirmation, Publisher, TYPE_HEADER};
pub use relay::{OutboxRelay, OutboxRelayReport};
pub use store::{OutboxFate, OutboxRow};
pub use write_error::WriteError;

use tracing::Instrument;

use crate::driver::Driver;
use crate::envelope::{ConsumerName, MessageId};
use crate::trace::TraceContext;
use store::{OutboxStore, WriteParams};

/// Writes outgoing messages into the outbox tables of `store`'s namespace.
///
/// Cheap to clone; keep one beside the handler that uses it.
#[derive(Debug, Clone)]
pub struct Outbox<S> {
    store: S,
    consumer: Option<ConsumerName>,
    notify: bool,
}

impl<S: OutboxStore> Outbox<S> {
    /// An outbox in `store`'s namespace (its schema and prefix).
    pub fn new(store: S) -> Self {
        Self {
            store,
            consumer: None,
            notify: true,
        }
    }

    /// Writes without waking idle relays at the commit: they find the messages at their next
    /// poll ([`OutboxRelayConfig::poll_interval`], 250 ms by default) instead of at once.
    ///
    /// On PostgreSQL a transaction that notifies holds a cluster-wide lock through its
    /// commit, so notifying transactions commit one at a time: for a writer of many small
    /// transactions that costs throughput (docs/bench/runs.md, "The outbox", measures how much),
    /// and a shorter poll interval is the cheaper way to keep latency low. Transactions that
    /// write many messages notify once, and [`Outbox::write_many`] once per call, so batch
    /// handlers pay little for the wake-ups. Other engines never notify.
    #[must_use]
    pub fn quiet(mut self) -> Self {
        self.notify = false;
        self
    }

    /// Records `consumer` as the consumer that caused the messages written with a cause
    /// ([`OutgoingMessage::caused_by`]): a handler's outbox names its own consumer, so that
    /// an operator sees which inbound message of which consumer a message came from.
    #[must_use]
    pub fn for_consumer(mut self, consumer: ConsumerName) -> Self {
        self.consumer = Some(consumer);
        self
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Writes `message` through `conn`, inside the caller's transaction: it is sent only if
    /// that transaction commits. Returns the id it will be published under, minted here (a
    /// time-ordered UUID) and kept across every re-send.
    ///
    /// # Errors
    /// [`WriteError::Refused`] when a field cannot be stored, [`WriteError::NotInTransaction`]
    /// when `conn` is not inside a transaction begun through the store's driver (sqlx's
    /// `begin`, `TokioPgStore::transaction`, `DieselPgStore::transaction`; nothing is written
    /// then);
    /// [`WriteError::Store`] when the insert failed: the caller's transaction should be rolled
    /// back, as after any failed statement. In a handler, `?` makes the first two permanent
    /// and the last transient or not as the database error is.
    pub async fn write(
        &self,
        conn: &mut <S::Db as Driver>::Connection,
        message: &OutgoingMessage,
    ) -> Result<MessageId, WriteError> {
        message.validate()?;
        in_transaction::<S::Db>(conn)?;
        let id = mint();
        let span = crate::trace::spans::create(std::slice::from_ref(message));
        // The context stored is the `create` span's, current inside it.
        let trace = message.trace_at_write(span.in_scope(crate::trace::ambient).as_ref());
        self.store
            .write_outbox(conn, &self.params(&id, message, trace.as_ref()))
            .instrument(span)
            .await?;
        Ok(id)
    }

    /// Writes `messages` through `conn`, inside the caller's transaction, in their order (one
    /// ordering key's messages are published in it): one statement on PostgreSQL, however many
    /// messages, and on MySQL one per 4 MiB of payload, so that a batch handler pays one round
    /// trip for its outgoing messages rather than one each. Returns their ids, in the same
    /// order.
    ///
    /// # Errors
    /// As [`Outbox::write`]; a refusal names the first message a field of which cannot be
    /// stored, and nothing is written then.
    pub async fn write_many(
        &self,
        conn: &mut <S::Db as Driver>::Connection,
        messages: &[OutgoingMessage],
    ) -> Result<Vec<MessageId>, WriteError> {
        for m in messages {
            m.validate()?;
        }
        in_transaction::<S::Db>(conn)?;
        let ids: Vec<MessageId> = messages.iter().map(|_| mint()).collect();
        let span = crate::trace::spans::create(messages);
        let ambient = span.in_scope(crate::trace::ambient);
        let traces: Vec<_> = messages
            .iter()
            .map(|m| m.trace_at_write(ambient.as_ref()))
            .collect();
        let params: Vec<WriteParams<'_>> = ids
            .iter()
            .zip(messages)
            .zip(&traces)
            .map(|((id, m), trace)| self.params(id, m, trace.as_ref()))
            .collect();
        if !params.is_empty() {
            self.store
                .write_outbox_many(conn, &params)
                .instrument(span)
                .await?;
        }
        Ok(ids)
    }

    fn params<'a>(
        &'a self,
        id: &'a MessageId,
        message: &'a OutgoingMessage,
        trace: Option<&'a TraceContext>,
    ) -> WriteParams<'a> {
        let caused_by = message.cause();
        WriteParams {
            message_id: id,
            message,
            caused_by_consumer: caused_by.and(self.consumer.as_ref()),
            caused_by_message_id: caused_by,
            notify: self.notify,
            trace,
        }
    }
}

/// A fresh outbox id: a time-ordered UUID, so that ids sort roughly as they were written.
fn mint() -> MessageId {
    MessageId::from_uuid(uuid::Uuid::now_v7())
}

/// Refuses a connection outside a transaction: its insert would commit at once, whatever
/// becomes of the business change. sqlx counts the transactions it began on the connection;
/// a `BEGIN` sent as a plain statement is not counted, and is refused too.
fn in_transaction<DB: Driver>(conn: &DB::Connection) -> Result<(), WriteError> {
    if DB::in_transaction(conn) {
        Ok(())
    } else {
        Err(WriteError::NotInTransaction)
    }
}
