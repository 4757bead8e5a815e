//! One stream entry, acked with `XACK` on the group.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionManager;

use inboxed_core::{
    BoxError, Delivery, Envelope, EnvelopeError, KeyCarrier, KeySource, escape_bytes,
};

use crate::entry::Entry;

/// What every delivery of one source shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) stream: String,
    pub(crate) group: String,
    /// The key of the group's schedule of requeued entries (`schedule.rs`).
    pub(crate) schedule: String,
    pub(crate) key: KeySource,
    /// The field that holds the payload, which is no header.
    pub(crate) payload_field: String,
}

/// An entry from [`RedisSource`](crate::RedisSource).
#[derive(Debug)]
pub struct RedisDelivery {
    pub(crate) entry: Entry,
    pub(crate) payload: Vec<u8>,
    pub(crate) count: u32,
    pub(crate) conn: ConnectionManager,
    pub(crate) shared: Arc<Shared>,
}

impl RedisDelivery {
    /// The entry's id in the stream.
    #[must_use]
    pub fn entry_id(&self) -> &str {
        &self.entry.id
    }
}

impl KeyCarrier for RedisDelivery {
    fn message_id_property(&self) -> Option<&[u8]> {
        self.entry.get(b"message_id")
    }

    fn message_id_property_name(&self) -> &'static str {
        "Redis message_id field"
    }

    fn header(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        self.entry.get(name.as_bytes()).map(Cow::Borrowed)
    }

    /// Every field of the entry but the payload's, in order.
    fn headers(&self) -> Vec<inboxed_core::key_source::RawHeader<'_>> {
        self.entry
            .fields
            .iter()
            .filter(|(name, _)| name.as_slice() != self.shared.payload_field.as_bytes())
            .map(|(name, value)| {
                (
                    Cow::Borrowed(name.as_slice()),
                    Cow::Borrowed(value.as_slice()),
                )
            })
            .collect()
    }

    /// The entry id's milliseconds: when Redis added the entry (by its clock).
    fn sent_at(&self) -> Option<std::time::SystemTime> {
        let (ms, _) = self.entry.id.split_once('-')?;
        let ms = ms.parse().ok()?;
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(ms))
    }

    fn body(&self) -> &[u8] {
        &self.payload
    }
}

impl Delivery for RedisDelivery {
    fn system(&self) -> Option<&'static str> {
        Some("redis")
    }

    fn header_value(&self, name: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        KeyCarrier::header(self, name)
    }

    /// [`EnvelopeError::Unreadable`] for an entry with a field name given twice (`XADD` keeps
    /// both): which of the two holds the key or the payload would be a guess.
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        if let Some((name, times)) = self.entry.repeated() {
            return Err(EnvelopeError::Unreadable {
                detail: format!(
                    "Redis entry {}: field {} appears {times} times",
                    self.entry.id,
                    escape_bytes(name)
                ),
            });
        }
        self.shared.key.envelope(self)
    }

    fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Deliveries to the group so far, this one included: 1 for a new entry, the group's
    /// pending count for one taken over by `XAUTOCLAIM`.
    fn delivery_count(&self) -> Option<u32> {
        Some(self.count)
    }

    async fn ack(mut self) -> Result<(), BoxError> {
        let s = &self.shared;
        let acked: i64 = self
            .conn
            .xack(&s.stream, &s.group, &[&self.entry.id])
            .await?;
        if acked == 1 {
            Ok(())
        } else {
            Err(format!("XACK of {} found it no longer pending", self.entry.id).into())
        }
    }

    /// One `XACK` for the lot when they come from one stream and group (a batch of one
    /// source), so a batch costs one round trip to Redis instead of one per entry.
    async fn ack_all(deliveries: Vec<Self>) -> Result<(), BoxError> {
        let Some(first) = deliveries.first() else {
            return Ok(());
        };
        if deliveries
            .iter()
            .any(|d| !Arc::ptr_eq(&d.shared, &first.shared))
        {
            return inboxed_core::delivery::ack_each(deliveries).await;
        }
        let (s, mut conn) = (Arc::clone(&first.shared), first.conn.clone());
        // An entry can be held twice (taken over by XAUTOCLAIM while its first delivery waited
        // in the batch); Redis counts it once.
        let mut ids: Vec<&str> = deliveries.iter().map(|d| d.entry.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let acked: usize = conn.xack(&s.stream, &s.group, &ids).await?;
        if acked == ids.len() {
            Ok(())
        } else {
            Err(format!(
                "XACK of {} entries found {} no longer pending",
                ids.len(),
                ids.len() - acked
            )
            .into())
        }
    }

    /// The entry stays pending and is scheduled to come back after `delay` (`schedule.rs`):
    /// a member of the group takes it over then, and not before.
    async fn requeue(mut self, delay: Option<Duration>) -> Result<(), BoxError> {
        let due = crate::schedule::unix_ms(delay.unwrap_or_default());
        let _: i64 = self
            .conn
            .zadd(&self.shared.schedule, &self.entry.id, due)
            .await?;
        Ok(())
    }

    /// Acks without processing: the group never delivers it again (it stays in the stream).
    async fn reject(self) -> Result<(), BoxError> {
        self.ack().await
    }
}
