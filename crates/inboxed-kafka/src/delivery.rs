//! One record, acked by storing its offset for the group's next commit.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use tracing::info;

use inboxed_core::{
    AckOrdering, BoxError, Delivery, Envelope, EnvelopeError, KeyCarrier, KeySource,
};

/// What every delivery of one source shares.
pub(crate) struct Shared {
    pub(crate) consumer: StreamConsumer,
    pub(crate) key: KeySource,
}

/// A record from [`KafkaSource`](crate::KafkaSource). Its position (topic, partition, offset)
/// is only ever used to ack it. Deliveries share the source's group member, which leaves the
/// group (committing what was acked) only when the source and every delivery are dropped.
pub struct KafkaDelivery {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub(crate) payload: Vec<u8>,
    /// The record's timestamp (create time, the producer's clock, unless the topic appends
    /// the broker's), in milliseconds since the epoch.
    pub(crate) timestamp_ms: Option<i64>,
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for KafkaDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaDelivery")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl KafkaDelivery {
    /// The record's topic, partition and offset.
    #[must_use]
    pub fn position(&self) -> (&str, i32, i64) {
        (&self.topic, self.partition, self.offset)
    }

    /// Marks the record done: its offset + 1 is committed with the group's next commit. A
    /// partition taken away by a rebalance cannot store offsets any more; its new owner
    /// delivers the record again and the inbox settles it as a duplicate, so that is not an
    /// error.
    fn store(&self) -> Result<(), BoxError> {
        let stored = self
            .shared
            .consumer
            .store_offset(&self.topic, self.partition, self.offset);
        match stored {
            Err(KafkaError::StoreOffset(RDKafkaErrorCode::State)) => {
                info!(topic = %self.topic, partition = self.partition, offset = self.offset,
                    "partition no longer assigned; its new owner redelivers the record");
                Ok(())
            }
            other => Ok(other?),
        }
    }
}

impl KeyCarrier for KafkaDelivery {
    /// Kafka has no producer message-id field: the header `message_id` stands for it.
    fn message_id_property(&self) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(name, _)| name == b"message_id")
            .map(|(_, value)| value.as_slice())
    }

    fn message_id_property_name(&self) -> &'static str {
        "Kafka message_id header"
    }

    fn header(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        self.headers
            .iter()
            .find(|(n, _)| n == name.as_bytes())
            .map(|(_, value)| Cow::Borrowed(value.as_slice()))
    }

    /// The record's headers in order, repeated names included.
    fn headers(&self) -> Vec<inboxed_core::key_source::RawHeader<'_>> {
        self.headers
            .iter()
            .map(|(name, value)| {
                (
                    Cow::Borrowed(name.as_slice()),
                    Cow::Borrowed(value.as_slice()),
                )
            })
            .collect()
    }

    /// The record's timestamp.
    fn sent_at(&self) -> Option<std::time::SystemTime> {
        let ms = u64::try_from(self.timestamp_ms?).ok()?;
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(ms))
    }

    fn body(&self) -> &[u8] {
        &self.payload
    }
}

impl Delivery for KafkaDelivery {
    fn system(&self) -> Option<&'static str> {
        Some("kafka")
    }

    fn header_value(&self, name: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        KeyCarrier::header(self, name)
    }

    /// [`EnvelopeError::Unreadable`] when the header the key is read from is given twice with
    /// different values (Kafka keeps both): which one is the key would be a guess.
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        let key_header = match &self.shared.key {
            KeySource::MessageIdProperty => Some("message_id"),
            KeySource::Header(name) => Some(name.as_str()),
            _ => None,
        };
        if let Some(name) = key_header {
            let mut values = self
                .headers
                .iter()
                .filter(|(n, _)| n == name.as_bytes())
                .map(|(_, v)| v);
            if let Some(first) = values.next()
                && values.any(|v| v != first)
            {
                return Err(EnvelopeError::Unreadable {
                    detail: format!(
                        "Kafka record {}/{}@{}: header {name} is given more than once, with \
                         different values",
                        self.topic, self.partition, self.offset
                    ),
                });
            }
        }
        self.shared.key.envelope(self)
    }

    fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Committing an offset commits everything before it in the partition, so records are
    /// settled one at a time in arrival order.
    fn ack_ordering(&self) -> AckOrdering {
        AckOrdering::InOrder
    }

    async fn ack(self) -> Result<(), BoxError> {
        self.store()
    }

    /// Leaves the offset unstored. The consumer loop never requeues an in-order delivery (it
    /// retries in place), so this only happens when a caller settles records by hand; the
    /// record then comes back after a restart or rebalance, unless a later one is acked.
    async fn requeue(self, _delay: Option<Duration>) -> Result<(), BoxError> {
        Ok(())
    }

    /// Skips the record: Kafka has no dead-letter route of its own, and inboxed keeps the dead
    /// letter in the database.
    async fn reject(self) -> Result<(), BoxError> {
        self.store()
    }
}
