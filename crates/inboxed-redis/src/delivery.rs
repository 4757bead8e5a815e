//! One stream entry, acked with `XACK` on the group.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use redis::streams::StreamId;

use inboxed_core::{BoxError, Delivery, Envelope, EnvelopeError, KeyCarrier, KeySource};

/// What every delivery of one source shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) stream: String,
    pub(crate) group: String,
    pub(crate) key: KeySource,
}

/// An entry from [`RedisSource`](crate::RedisSource).
#[derive(Debug)]
pub struct RedisDelivery {
    pub(crate) entry: StreamId,
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
        match self.entry.map.get("message_id")? {
            redis::Value::BulkString(bytes) => Some(bytes),
            redis::Value::SimpleString(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    fn message_id_property_name(&self) -> &'static str {
        "Redis message_id field"
    }

    fn header(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        match self.entry.map.get(name)? {
            redis::Value::BulkString(bytes) => Some(Cow::Borrowed(bytes)),
            redis::Value::SimpleString(s) => Some(Cow::Borrowed(s.as_bytes())),
            redis::Value::Int(n) => Some(Cow::Owned(n.to_string().into_bytes())),
            _ => None,
        }
    }

    fn body(&self) -> &[u8] {
        &self.payload
    }
}

impl Delivery for RedisDelivery {
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
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

    /// Redis cannot hand an entry back: it stays pending and is delivered again once idle for
    /// `claim_idle`, whatever `delay` asks.
    async fn requeue(self, _delay: Option<Duration>) -> Result<(), BoxError> {
        Ok(())
    }

    /// Acks without processing: the group never delivers it again (it stays in the stream).
    async fn reject(self) -> Result<(), BoxError> {
        self.ack().await
    }
}
