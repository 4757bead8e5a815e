//! What a broker adapter gives the consumer loop: one delivery and the ways to settle it.

use std::future::Future;
use std::time::Duration;

use crate::envelope::{Envelope, EnvelopeError};
use crate::error::BoxError;

/// How a broker acknowledges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AckOrdering {
    /// Each delivery is acked on its own (RabbitMQ, NATS, Redis Streams, SQS). The default.
    #[default]
    Individual,
    /// Acking a position acks everything before it in its partition (Kafka offsets). The
    /// consumer loop settles such deliveries one at a time, in arrival order, so a later ack can
    /// never cover an earlier message that is not committed yet.
    InOrder,
}

/// One delivery from a broker. Settling consumes it: exactly one of `ack`, `requeue` or
/// `reject` is called, and only after the database commit (or the dead letter) is durable.
pub trait Delivery: Send + Sync + 'static {
    /// Builds the envelope. The adapter decides where the key comes from (a message-id
    /// property, a header, a JSON field, CloudEvents `source`+`id`); never from an offset,
    /// receipt handle or delivery counter.
    ///
    /// # Errors
    /// [`EnvelopeError`] when the delivery has no usable key; it is then dead-lettered.
    fn envelope(&self) -> Result<Envelope, EnvelopeError>;

    /// The raw body, kept on the dead-letter path when no envelope can be built.
    fn payload(&self) -> &[u8];

    /// A header's value as the producer set it (numbers in decimal), if present: what
    /// [`Tenants`](crate::Tenants) routes a delivery by, before its envelope is processed. The
    /// default has none; each adapter answers from the headers it reads keys from
    /// ([`KeyCarrier::header`](crate::KeyCarrier::header)).
    fn header_value(&self, name: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        let _ = name;
        None
    }

    /// The broker's count of deliveries of this message including this one, when it has one
    /// (RabbitMQ quorum `x-delivery-count` + 1, NATS `delivered`, SQS `ApproximateReceiveCount`).
    fn delivery_count(&self) -> Option<u32> {
        None
    }

    /// Whether the broker has certainly not delivered this message before. A batch of first
    /// deliveries cannot follow a crash of its own, so it skips the store's attempt counting
    /// ([`Processor::process_batch_with_counts`](crate::Processor::process_batch_with_counts)).
    /// The default trusts a delivery count of 1.
    fn is_first_delivery(&self) -> bool {
        self.delivery_count() == Some(1)
    }

    /// The broker, as OpenTelemetry's `messaging.system` names it (`rabbitmq`, `kafka`,
    /// `aws_sqs`; `nats` and `redis`), for the processing spans. `None`, the default: not
    /// recorded.
    fn system(&self) -> Option<&'static str> {
        None
    }

    /// How this broker acknowledges.
    fn ack_ordering(&self) -> AckOrdering {
        AckOrdering::Individual
    }

    /// Acknowledges: the broker forgets the message.
    fn ack(self) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Acknowledges several deliveries of one source, each committed, for a consumer that
    /// settles batches. The default acks them concurrently; an adapter whose broker acks many
    /// in one call (Redis `XACK`, SQS `DeleteMessageBatch`) overrides it. Every delivery is
    /// tried; the first failure is returned.
    fn ack_all(deliveries: Vec<Self>) -> impl Future<Output = Result<(), BoxError>> + Send
    where
        Self: Sized,
    {
        ack_each(deliveries)
    }

    /// Returns the message to the broker, to be redelivered now (`None`) or after `delay`.
    fn requeue(self, delay: Option<Duration>) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Rejects terminally (the broker's own dead-letter route, NATS `Term`). The consumer loop
    /// acks instead once inboxed has written its own dead letter, so this is for adapters.
    fn reject(self) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Extends the broker's in-progress deadline (visibility timeout, NATS `Progress`) while a
    /// long handler runs. The default does nothing.
    fn extend_deadline(&self, by: Duration) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = by;
        async { Ok(()) }
    }
}

/// A stream of deliveries.
pub trait DeliverySource: Send {
    /// The delivery type.
    type Delivery: Delivery;

    /// The next delivery; `None` when the source is closed.
    fn next(&mut self) -> impl Future<Output = Option<Result<Self::Delivery, BoxError>>> + Send;

    /// Keeps the source's session with its broker alive while the consumer takes no delivery
    /// (the one before waits to be retried in place, or the kill switch is open), without
    /// handing out more. It is dropped as soon as the consumer takes deliveries again, and the
    /// next [`DeliverySource::next`] goes on from where the source was. A broker that drops a
    /// member which stops reading (Kafka's `max.poll.interval.ms`) needs it; by default it
    /// waits for ever, as most brokers keep a quiet consumer.
    fn idle(&mut self) -> impl Future<Output = ()> + Send {
        std::future::pending::<()>()
    }

    /// Ends the source's session with its broker once every delivery it handed out is settled,
    /// so that the broker has taken every answer sent before it: an AMQP connection merely
    /// dropped as the process exits can lose the last acks, and the broker then delivers
    /// again what is already stored. By default it drops the source.
    fn close(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// Acks each of `deliveries` on its own, concurrently: [`Delivery::ack_all`]'s default, for an
/// override to fall back on. Every delivery is tried; the first failure is returned.
///
/// # Errors
/// The first ack that failed.
pub async fn ack_each<D: Delivery>(deliveries: Vec<D>) -> Result<(), BoxError> {
    let acks = deliveries.into_iter().map(D::ack);
    let results = futures_util::future::join_all(acks).await;
    results.into_iter().find(Result::is_err).unwrap_or(Ok(()))
}
