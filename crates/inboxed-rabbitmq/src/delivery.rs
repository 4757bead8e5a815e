//! One RabbitMQ delivery, answered through its channel's acker.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicAckOptions, BasicRejectOptions};
use lapin::types::AMQPValue;

use crate::delay::DelayQueues;
use crate::screen::Unreadable;
use crate::unacked::Unacked;
use inboxed_core::{BoxError, Delivery, Envelope, EnvelopeError, KeyCarrier, KeySource};

/// A delivery from [`RabbitSource`](crate::RabbitSource).
#[derive(Debug)]
pub struct RabbitDelivery {
    pub(crate) inner: lapin::message::Delivery,
    /// What the screen took out of this delivery because lapin could not read it.
    pub(crate) unreadable: Option<Unreadable>,
    pub(crate) key: Arc<KeySource>,
    pub(crate) max_requeue_hold: Duration,
    /// Its source queue's delay queues, if it has any.
    pub(crate) delays: Option<Arc<DelayQueues>>,
    pub(crate) ack_timeout: Duration,
    /// Its channel's unanswered deliveries, for acks of many in one frame.
    pub(crate) unacked: Arc<Unacked>,
}

impl RabbitDelivery {
    /// The AMQP delivery as lapin gave it.
    #[must_use]
    pub fn amqp(&self) -> &lapin::message::Delivery {
        &self.inner
    }
}

/// An acker answers `false` when its channel is gone (the broker then redelivers the message
/// elsewhere): report that as a failure, never as an answered delivery. One issued on a
/// connection that died under it may never answer, so it is bounded by `within`.
async fn answered(
    what: &'static str,
    within: Duration,
    unacked: impl Future<Output = lapin::Result<bool>>,
) -> Result<(), BoxError> {
    match tokio::time::timeout(within, unacked).await {
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
    fn message_id_property(&self) -> Option<&[u8]> {
        self.inner
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.as_str().as_bytes())
    }

    fn message_id_property_name(&self) -> &'static str {
        "AMQP message_id property"
    }

    /// Long strings and byte arrays as their bytes (a byte array holding UTF-8 is a key like
    /// any other), integers in decimal; other types are no key.
    fn header(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        let headers = self.inner.properties.headers().as_ref()?;
        let (_, value) = headers.inner().iter().find(|(k, _)| k.as_str() == name)?;
        bytes_of(value)
    }

    /// The AMQP headers table, each value as [`KeyCarrier::header`] reads it.
    fn headers(&self) -> Vec<inboxed_core::key_source::RawHeader<'_>> {
        let Some(headers) = self.inner.properties.headers().as_ref() else {
            return Vec::new();
        };
        headers
            .inner()
            .iter()
            .filter_map(|(k, v)| Some((Cow::Borrowed(k.as_str().as_bytes()), bytes_of(v)?)))
            .collect()
    }

    /// The `timestamp_in_ms` header where a plugin or producer set one (milliseconds), else
    /// the `timestamp` property (seconds): the producer's clock, or the broker's with
    /// RabbitMQ's message timestamp plugin.
    fn sent_at(&self) -> Option<std::time::SystemTime> {
        let in_ms = self
            .header("timestamp_in_ms")
            .and_then(|v| std::str::from_utf8(&v).ok()?.parse::<u64>().ok());
        let since_epoch = match in_ms {
            Some(ms) => std::time::Duration::from_millis(ms),
            None => std::time::Duration::from_secs(*self.inner.properties.timestamp().as_ref()?),
        };
        std::time::UNIX_EPOCH.checked_add(since_epoch)
    }

    fn body(&self) -> &[u8] {
        &self.inner.data
    }
}

/// A header's value as bytes: long strings and byte arrays as they are, integers in decimal;
/// other types (tables, arrays, floats, timestamps) have none.
fn bytes_of(value: &AMQPValue) -> Option<Cow<'_, [u8]>> {
    let decimal = |n: i64| Some(Cow::Owned(n.to_string().into_bytes()));
    match value {
        AMQPValue::LongString(s) => Some(Cow::Borrowed(s.as_bytes())),
        AMQPValue::ShortString(s) => Some(Cow::Borrowed(s.as_str().as_bytes())),
        AMQPValue::ByteArray(b) => Some(Cow::Borrowed(b.as_slice())),
        AMQPValue::ShortShortInt(n) => decimal((*n).into()),
        AMQPValue::ShortShortUInt(n) => decimal((*n).into()),
        AMQPValue::ShortInt(n) => decimal((*n).into()),
        AMQPValue::ShortUInt(n) => decimal((*n).into()),
        AMQPValue::LongInt(n) => decimal((*n).into()),
        AMQPValue::LongUInt(n) => decimal((*n).into()),
        AMQPValue::LongLongInt(n) => decimal(*n),
        _ => None,
    }
}

impl Delivery for RabbitDelivery {
    fn system(&self) -> Option<&'static str> {
        Some("rabbitmq")
    }

    fn header_value(&self, name: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        KeyCarrier::header(self, name)
    }

    /// [`EnvelopeError::Unreadable`] for a delivery the client could not read (a property,
    /// a header name or the routing key that is not UTF-8, a header type it does not know, a
    /// header name given twice): the error names each field and keeps the raw properties, and
    /// the consumer loop dead-letters the delivery with it.
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        if let Some(unreadable) = &self.unreadable {
            return Err(EnvelopeError::Unreadable {
                detail: unreadable.detail(),
            });
        }
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

    /// 1 on a first delivery (`redelivered` unset): the store then counts nothing, and counts
    /// the attempts of later deliveries, to which it adds this one. On a redelivery, the earlier
    /// deliveries a quorum queue counted (`x-delivery-count`, and `x-acquired-count` on brokers
    /// whose delivery count skips some returns) plus one; a classic queue only flags a
    /// redelivery, which is 2 here: at least the second, and the store counts the rest. A
    /// message back from one of its source's delay queues (named in `x-death`) is a redelivery
    /// too, 2, whatever its flag and counts say: they started again with the copy.
    fn delivery_count(&self) -> Option<u32> {
        const REDELIVERED: u32 = 2;
        if self.moved() {
            return Some(REDELIVERED);
        }
        if !self.inner.redelivered {
            return Some(1);
        }
        let count = |name| {
            let value = self.header(name)?;
            std::str::from_utf8(&value).ok()?.parse::<u32>().ok()
        };
        let earlier = count("x-delivery-count").max(count("x-acquired-count"));
        Some(earlier.map_or(REDELIVERED, |n| n.saturating_add(1).max(REDELIVERED)))
    }

    async fn ack(self) -> Result<(), BoxError> {
        let ack = self.inner.acker.ack(BasicAckOptions::default());
        let acked = answered("ack", self.ack_timeout, ack).await;
        // Meant to be acked either way: a later ack of many may cover it.
        self.unacked.answered(self.inner.delivery_tag);
        acked
    }

    /// One `basic.ack` with `multiple` for as many of them as it may cover (`unacked.rs`),
    /// the rest one by one.
    async fn ack_all(deliveries: Vec<Self>) -> Result<(), BoxError> {
        let mut first_error = None;
        let mut rest = deliveries;
        while let Some(first) = rest.first() {
            let unacked = Arc::clone(&first.unacked);
            let (channel, others): (Vec<_>, Vec<_>) = rest
                .into_iter()
                .partition(|d| Arc::ptr_eq(&d.unacked, &unacked));
            rest = others;
            if let Err(e) = ack_on_channel(&unacked, channel).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// A delay of one of the source's delay steps or more parks a copy in that step's delay
    /// queue and acks this delivery (`delay.rs`); a shorter one, or one whose copy the broker
    /// did not confirm, is held in process (at most `max_requeue_hold`) and rejected back.
    async fn requeue(self, delay: Option<Duration>) -> Result<(), BoxError> {
        let delay = delay.unwrap_or_default();
        // A delivery the client could not read whole is never copied: the copy would lose
        // what the screen took out of it.
        if let (Some(delays), None) = (&self.delays, &self.unreadable)
            && let Some(step) = delays.step_for(delay)
        {
            match delays.park(step, &self.inner, self.ack_timeout).await {
                Ok(()) => return self.ack().await,
                Err(e) => tracing::warn!(
                    error = %e,
                    "could not park a delivery in its delay queue; holding it in process instead"
                ),
            }
        }
        tokio::time::sleep(delay.min(self.max_requeue_hold)).await;
        // reject, not nack: quorum queues count a rejected return in x-delivery-count on every
        // broker version.
        let options = BasicRejectOptions { requeue: true };
        let reject = self.inner.acker.reject(options);
        self.rejected(answered("reject", self.ack_timeout, reject).await)
    }

    /// `basic.reject` without requeue: the queue's dead-letter exchange gets it, if it has one.
    async fn reject(self) -> Result<(), BoxError> {
        let options = BasicRejectOptions { requeue: false };
        let reject = self.inner.acker.reject(options);
        self.rejected(answered("reject", self.ack_timeout, reject).await)
    }
}

impl RabbitDelivery {
    /// Back from one of its source's delay queues: the broker's `x-death` header names one.
    fn moved(&self) -> bool {
        let Some(delays) = &self.delays else {
            return false;
        };
        let Some(headers) = self.inner.properties.headers() else {
            return false;
        };
        let Some(AMQPValue::FieldArray(deaths)) = headers.inner().get("x-death") else {
            return false;
        };
        deaths.as_slice().iter().any(|death| match death {
            AMQPValue::FieldTable(death) => match death.inner().get("queue") {
                Some(AMQPValue::LongString(queue)) => {
                    std::str::from_utf8(queue.as_bytes()).is_ok_and(|q| delays.is_delay_queue(q))
                }
                _ => false,
            },
            _ => false,
        })
    }

    /// A reject that is not known to have gone out keeps the delivery unanswered: an ack of
    /// many must not answer what was to come back.
    fn rejected(&self, result: Result<(), BoxError>) -> Result<(), BoxError> {
        if result.is_ok() {
            self.unacked.answered(self.inner.delivery_tag);
        }
        result
    }
}

/// Acks `deliveries` of one channel: one frame up to the highest it may cover, sent in the
/// channel's turn, then each delivery above that on its own.
async fn ack_on_channel(
    unacked: &Unacked,
    mut deliveries: Vec<RabbitDelivery>,
) -> Result<(), BoxError> {
    deliveries.sort_unstable_by_key(|d| d.inner.delivery_tag);
    let tags: Vec<u64> = deliveries.iter().map(|d| d.inner.delivery_tag).collect();
    let mut result = Ok(());
    let turn = unacked.turn().await;
    if let Some(top) = unacked.covered(&tags) {
        let at = tags.partition_point(|&t| t <= top);
        let alone = deliveries.split_off(at);
        if let Some(last) = deliveries.pop() {
            let options = BasicAckOptions { multiple: true };
            let ack = last.inner.acker.ack(options);
            result = answered("ack", last.ack_timeout, ack).await;
        }
        unacked.answered_up_to(top);
        deliveries = alone;
    }
    drop(turn);
    let alone = inboxed_core::delivery::ack_each(deliveries).await;
    result.and(alone)
}
