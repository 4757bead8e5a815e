//! The seam between the outbox relay and a broker: a [`Publisher`] sends a claimed batch and
//! says, for each row, what the broker made of it. The relay does the rest (marking sent,
//! backoff, dead rows, handing back), so an adapter is its broker's publish and confirm only.

use std::future::Future;

use super::store::OutboxRow;

/// The header that carries a message's type on a broker with no field for it (NATS, Kafka,
/// Redis Streams, SQS): one name on every broker, so that a consumer reads it the same way
/// whichever broker it is behind.
pub const TYPE_HEADER: &str = "Inboxed-Type";
/// The header that carries the correlation id on a broker with no field for it.
pub const CORRELATION_HEADER: &str = "Inboxed-Correlation-Id";

/// What became of one row handed to [`Publisher::publish`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Confirmation {
    /// The broker confirmed it (stored, routed): the row is marked sent.
    Confirmed,
    /// The broker refused this message: unroutable, too large, no such destination. Retried
    /// after its backoff and dead past its attempts, or dead at once when `permanent` (a
    /// message too large for the broker does not shrink). `reason` is the broker's, kept in
    /// the row's `last_error`.
    Refused {
        /// The broker's reason.
        reason: String,
        /// Retrying cannot help.
        permanent: bool,
    },
    /// It was sent but no confirmation came (the connection died, the confirmation timed
    /// out): it may have reached the broker. Retried after its backoff under the same id,
    /// which the next service's inbox deduplicates; its attempt counts, so that a message
    /// that kills the connection every time ends dead instead of stalling the relay.
    Unconfirmed {
        /// What went wrong.
        reason: String,
    },
    /// It was not sent: the broker is unreachable. Handed back with its attempt given back
    /// (an outage does not use up rows' attempts), and the relay pauses with backoff.
    NotSent {
        /// What went wrong.
        reason: String,
    },
}

/// A broker client the outbox relay publishes through.
///
/// Implemented by each broker adapter. The id a row is published under is
/// [`OutboxRow::message_id`], put where the adapter's default key source reads it, so that an
/// inboxed consumer downstream deduplicates re-sends with no configuration.
pub trait Publisher: Send + Sync + 'static {
    /// Publishes `rows` (in insert order; at most one row of any ordering key) and waits for
    /// the broker's confirmation of each. Returns one confirmation per row, in the same order;
    /// rows without one count as [`Confirmation::Unconfirmed`]. Reconnecting after the broker
    /// went away is the publisher's own business: the relay only retries.
    fn publish(&self, rows: &[OutboxRow]) -> impl Future<Output = Vec<Confirmation>> + Send;

    /// The broker, as OpenTelemetry's `messaging.system` names it, for the relay's `send`
    /// spans. `None`, the default: not recorded.
    fn system(&self) -> Option<&'static str> {
        None
    }
}
