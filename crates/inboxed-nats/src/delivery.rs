//! One JetStream message, settled with acks the server confirms.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;

use inboxed_core::{BoxError, Delivery, Envelope, EnvelopeError, KeyCarrier, KeySource};

/// A message from [`NatsSource`](crate::NatsSource).
#[derive(Debug)]
pub struct NatsDelivery {
    pub(crate) inner: async_nats::jetstream::Message,
    pub(crate) key: Arc<KeySource>,
    /// What the screen took out of this message because async-nats could not read it.
    pub(crate) unreadable: Option<String>,
}

impl NatsDelivery {
    /// The JetStream message as async-nats gave it.
    #[must_use]
    pub fn message(&self) -> &async_nats::jetstream::Message {
        &self.inner
    }
}

impl KeyCarrier for NatsDelivery {
    fn message_id_property(&self) -> Option<&[u8]> {
        let headers = self.inner.message.headers.as_ref()?;
        headers.get("Nats-Msg-Id").map(|v| v.as_str().as_bytes())
    }

    fn message_id_property_name(&self) -> &'static str {
        "NATS Nats-Msg-Id header"
    }

    fn header(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        let headers = self.inner.message.headers.as_ref()?;
        headers
            .get(name)
            .map(|v| Cow::Borrowed(v.as_str().as_bytes()))
    }

    /// The message's NATS headers, each value of a repeated name in turn, sorted by name
    /// (the client keeps them in a hash map, so the wire's order is gone).
    fn headers(&self) -> Vec<inboxed_core::key_source::RawHeader<'_>> {
        let Some(headers) = self.inner.message.headers.as_ref() else {
            return Vec::new();
        };
        let mut all: Vec<inboxed_core::key_source::RawHeader<'_>> = headers
            .iter()
            .flat_map(|(name, values)| {
                let name: &str = name.as_ref();
                values.iter().map(move |v| {
                    (
                        Cow::Borrowed(name.as_bytes()),
                        Cow::Borrowed(v.as_str().as_bytes()),
                    )
                })
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// When JetStream stored the message (its `published` time, by the server's clock).
    fn sent_at(&self) -> Option<std::time::SystemTime> {
        let nanos = self.inner.info().ok()?.published.unix_timestamp_nanos();
        let nanos = u64::try_from(nanos).ok()?;
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_nanos(nanos))
    }

    fn body(&self) -> &[u8] {
        &self.inner.message.payload
    }
}

impl Delivery for NatsDelivery {
    fn system(&self) -> Option<&'static str> {
        Some("nats")
    }

    fn header_value(&self, name: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        KeyCarrier::header(self, name)
    }

    /// [`EnvelopeError::Unreadable`] for a message async-nats could not read (a header block
    /// that is not UTF-8, a header name outside visible ASCII, a line without a colon, a subject
    /// that is not UTF-8): the error names each field and keeps the header block as sent.
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        if let Some(detail) = &self.unreadable {
            return Err(EnvelopeError::Unreadable {
                detail: detail.clone(),
            });
        }
        self.key.envelope(self)
    }

    fn payload(&self) -> &[u8] {
        &self.inner.message.payload
    }

    /// The server's count of deliveries of this message, this one included.
    fn delivery_count(&self) -> Option<u32> {
        let info = self.inner.info().ok()?;
        u32::try_from(info.delivered).ok().filter(|n| *n > 0)
    }

    /// A double ack: it waits for the server's reply, so a lost connection is an error. Should
    /// an ack still go missing, the server redelivers after `ack_wait` and the inbox settles the
    /// message as a duplicate.
    async fn ack(self) -> Result<(), BoxError> {
        self.inner.double_ack().await
    }

    /// `Nak` with the delay: the server redelivers after it.
    async fn requeue(self, delay: Option<Duration>) -> Result<(), BoxError> {
        self.inner.ack_with(AckKind::Nak(delay)).await
    }

    /// `Term`: the server stops redelivering it.
    async fn reject(self) -> Result<(), BoxError> {
        self.inner.ack_with(AckKind::Term).await
    }

    /// `Progress`: the server restarts this message's `ack_wait`.
    async fn extend_deadline(&self, _by: Duration) -> Result<(), BoxError> {
        self.inner.ack_with(AckKind::Progress).await
    }
}
