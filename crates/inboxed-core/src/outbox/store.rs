//! The outbox's store operations, implemented by each engine on the shared store layer
//! ([`crate::engine::outbox`]).

use std::future::Future;

use super::OutgoingMessage;
use crate::engine::Engine;
use crate::envelope::{ConsumerName, MessageId};
use crate::error::StoreError;

/// What [`OutboxStore::write_outbox`] writes.
#[derive(Debug, Clone, Copy)]
pub struct WriteParams<'a> {
    /// The id the message is published under.
    pub message_id: &'a MessageId,
    /// The message, validated.
    pub message: &'a OutgoingMessage,
    /// The consumer whose inbound message caused it, when known.
    pub caused_by_consumer: Option<&'a ConsumerName>,
    /// The inbound message that caused it, when there is one.
    pub caused_by_message_id: Option<&'a str>,
}

/// The outbox's operations on an engine.
pub trait OutboxStore: Engine {
    /// Inserts one outgoing message through `conn`, in the caller's transaction.
    fn write_outbox(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
        params: &WriteParams<'_>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        crate::engine::outbox::write(self, conn, params)
    }
}
