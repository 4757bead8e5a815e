//! One RabbitMQ delivery, settled through its channel's acker.

use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicAckOptions, BasicRejectOptions};
use lapin::types::AMQPValue;

use inboxed_core::{BoxError, Delivery, Envelope, EnvelopeError, KeyCarrier, KeySource};

/// A delivery from [`RabbitSource`](crate::RabbitSource).
#[derive(Debug)]
pub struct RabbitDelivery {
    pub(crate) inner: lapin::message::Delivery,
    pub(crate) key: Arc<KeySource>,
    pub(crate) max_requeue_hold: Duration,
    pub(crate) settle_timeout: Duration,
}

impl RabbitDelivery {
    /// The AMQP delivery as lapin gave it.
    #[must_use]
    pub fn amqp(&self) -> &lapin::message::Delivery {
        &self.inner
    }
}

/// An acker answers `false` when its channel is gone (the broker then redelivers the message
/// elsewhere): report that as a failure, never as a settled delivery. One issued on a
/// connection that died under it may never answer, so it is bounded by `within`.
async fn settled(
    what: &'static str,
    within: Duration,
    settling: impl Future<Output = lapin::Result<bool>>,
) -> Result<(), BoxError> {
    match tokio::time::timeout(within, settling).await {
        Ok(Ok(true)) => Ok(()),
        Ok(Ok(false)) => Err(format!("{what}: the channel closed; the broker redelivers").into()),
        Ok(Err(e)) => Err(Box::new(e)),
        Err(_) => Err(format!(
            "{what}: no answer within {within:?} (the connection is likely gone); the broker \
             redelivers"
        )
        .into()),
    }
}

impl KeyCarrier for RabbitDelivery {
    fn message_id_property(&self) -> Option<&str> {
        self.inner
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.as_str())
    }

    fn header(&self, name: &str) -> Option<String> {
        let headers = self.inner.properties.headers().as_ref()?;
        let (_, value) = headers.inner().iter().find(|(k, _)| k.as_str() == name)?;
        match value {
            AMQPValue::LongString(s) => String::from_utf8(s.as_bytes().to_vec()).ok(),
            AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
            AMQPValue::ByteArray(b) => String::from_utf8(b.as_slice().to_vec()).ok(),
            AMQPValue::ShortShortInt(n) => Some(n.to_string()),
            AMQPValue::ShortShortUInt(n) => Some(n.to_string()),
            AMQPValue::ShortInt(n) => Some(n.to_string()),
            AMQPValue::ShortUInt(n) => Some(n.to_string()),
            AMQPValue::LongInt(n) => Some(n.to_string()),
            AMQPValue::LongUInt(n) => Some(n.to_string()),
            AMQPValue::LongLongInt(n) => Some(n.to_string()),
            _ => None,
        }
    }

    fn body(&self) -> &[u8] {
        &self.inner.data
    }
}

impl Delivery for RabbitDelivery {
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        let props = &self.inner.properties;
        let mut envelope = self.key.envelope(self)?;
        if let Some(kind) = props.kind() {
            envelope = envelope.with_type(kind.as_str());
        }
        if let Some(correlation) = props.correlation_id() {
            envelope = envelope.with_correlation_id(correlation.as_str());
        }
        Ok(envelope)
    }

    fn payload(&self) -> &[u8] {
        &self.inner.data
    }

    /// Quorum queues count a redelivered message's earlier deliveries (`x-delivery-count`, and
    /// `x-acquired-count` on brokers whose delivery count skips some returns); this is that plus
    /// one. `None` otherwise, and the store counts attempts itself: always on classic queues,
    /// which only flag a redelivery, and on a first delivery, whose headers may still carry the
    /// count of a queue it was moved from.
    fn delivery_count(&self) -> Option<u32> {
        if !self.inner.redelivered {
            return None;
        }
        let count = |name| self.header(name).and_then(|n| n.parse::<u32>().ok());
        let earlier = count("x-delivery-count").max(count("x-acquired-count"))?;
        Some(earlier.saturating_add(1))
    }

    /// RabbitMQ flags every message that may have been delivered before, on every queue type.
    fn is_first_delivery(&self) -> bool {
        !self.inner.redelivered
    }

    async fn ack(self) -> Result<(), BoxError> {
        let ack = self.inner.acker.ack(BasicAckOptions::default());
        settled("ack", self.settle_timeout, ack).await
    }

    async fn requeue(self, delay: Option<Duration>) -> Result<(), BoxError> {
        if let Some(delay) = delay {
            tokio::time::sleep(delay.min(self.max_requeue_hold)).await;
        }
        // reject, not nack: quorum queues count a rejected return in x-delivery-count on every
        // broker version.
        let options = BasicRejectOptions { requeue: true };
        let reject = self.inner.acker.reject(options);
        settled("reject", self.settle_timeout, reject).await
    }

    /// `basic.reject` without requeue: the queue's dead-letter exchange gets it, if it has one.
    async fn reject(self) -> Result<(), BoxError> {
        let options = BasicRejectOptions { requeue: false };
        let reject = self.inner.acker.reject(options);
        settled("reject", self.settle_timeout, reject).await
    }
}
