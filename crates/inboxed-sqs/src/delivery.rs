//! One SQS message, acked by deleting it with its receipt handle.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageAttributeValue};

use inboxed_core::{BoxError, Delivery, Envelope, EnvelopeError, KeyCarrier, KeySource};

use crate::config::seconds;

/// What every delivery of one source shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) queue_url: String,
    pub(crate) key: KeySource,
}

/// A message from [`SqsSource`](crate::SqsSource). Its receipt handle is only ever used to
/// settle it: it changes on every receive.
#[derive(Debug)]
pub struct SqsDelivery {
    pub(crate) message_id: Option<String>,
    pub(crate) receipt_handle: String,
    pub(crate) body: Vec<u8>,
    pub(crate) attributes: HashMap<String, MessageAttributeValue>,
    pub(crate) receive_count: Option<u32>,
    /// `SentTimestamp`: when SQS accepted the message, in milliseconds since the epoch.
    pub(crate) sent_ms: Option<u64>,
    pub(crate) shared: Arc<Shared>,
}

impl SqsDelivery {
    /// SQS's own id of the message (assigned per send; not the dedup key).
    #[must_use]
    pub fn sqs_message_id(&self) -> Option<&str> {
        self.message_id.as_deref()
    }

    /// Hides the message for `timeout` from now (0: visible at once).
    async fn set_visibility(&self, timeout: Duration) -> Result<(), BoxError> {
        self.shared
            .client
            .change_message_visibility()
            .queue_url(&self.shared.queue_url)
            .receipt_handle(&self.receipt_handle)
            .visibility_timeout(seconds(timeout))
            .send()
            .await?;
        Ok(())
    }
}

impl KeyCarrier for SqsDelivery {
    /// SQS has no producer message-id field: the message attribute `message_id` stands for it.
    fn message_id_property(&self) -> Option<&[u8]> {
        self.attributes
            .get("message_id")?
            .string_value()
            .map(str::as_bytes)
    }

    fn message_id_property_name(&self) -> &'static str {
        "SQS message_id attribute"
    }

    /// A message attribute of type String or Number, or the bytes of a Binary one.
    fn header(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        let attribute = self.attributes.get(name)?;
        match attribute.string_value() {
            Some(text) => Some(Cow::Borrowed(text.as_bytes())),
            None => attribute
                .binary_value()
                .map(|blob| Cow::Borrowed(blob.as_ref())),
        }
    }

    /// The message attributes, sorted by name (SQS returns them in no order), each valued as
    /// `header` values it.
    fn headers(&self) -> Vec<inboxed_core::key_source::RawHeader<'_>> {
        let mut all: Vec<inboxed_core::key_source::RawHeader<'_>> = self
            .attributes
            .keys()
            .filter_map(|name| Some((Cow::Borrowed(name.as_bytes()), self.header(name)?)))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// `SentTimestamp`: when SQS accepted the message.
    fn sent_at(&self) -> Option<std::time::SystemTime> {
        let ms = self.sent_ms?;
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(ms))
    }

    fn body(&self) -> &[u8] {
        &self.body
    }
}

impl Delivery for SqsDelivery {
    fn system(&self) -> Option<&'static str> {
        Some("aws_sqs")
    }

    fn header_value(&self, name: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        KeyCarrier::header(self, name)
    }

    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        self.shared.key.envelope(self)
    }

    fn payload(&self) -> &[u8] {
        &self.body
    }

    /// `ApproximateReceiveCount`: receives so far, this one included.
    fn delivery_count(&self) -> Option<u32> {
        self.receive_count
    }

    /// Deletes the message. If its visibility ran out first, SQS may already have delivered it
    /// again; the delete of the old receipt handle may then fail, or succeed, or remove the
    /// message anyway. Either way the inbox settles any redelivery as a duplicate: it is the
    /// dedup, not the delete, that makes this safe.
    async fn ack(self) -> Result<(), BoxError> {
        self.shared
            .client
            .delete_message()
            .queue_url(&self.shared.queue_url)
            .receipt_handle(&self.receipt_handle)
            .send()
            .await?;
        Ok(())
    }

    /// `DeleteMessageBatch`, ten messages a call (SQS's limit), when they come from one queue
    /// (a batch of one source): a batch of 50 costs 5 requests instead of 50. Every chunk is
    /// sent; the entries SQS reports as failed, and chunks that failed whole, are then one
    /// error naming them.
    async fn ack_all(deliveries: Vec<Self>) -> Result<(), BoxError> {
        let Some(first) = deliveries.first() else {
            return Ok(());
        };
        let shared = Arc::clone(&first.shared);
        if deliveries.iter().any(|d| !Arc::ptr_eq(&d.shared, &shared)) {
            return inboxed_core::delivery::ack_each(deliveries).await;
        }
        let mut failed = Vec::new();
        for chunk in deliveries.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(&d.receipt_handle)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let sent = shared
                .client
                .delete_message_batch()
                .queue_url(&shared.queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
            // A chunk that failed whole is reported with the rest; the next chunks still go.
            let out = match sent {
                Ok(out) => out,
                Err(e) => {
                    failed.push(format!("a chunk of {} ({e})", chunk.len()));
                    continue;
                }
            };
            for entry in out.failed() {
                let at: usize = entry.id().parse().unwrap_or(usize::MAX);
                let id = chunk.get(at).and_then(|d| d.message_id.as_deref());
                failed.push(format!(
                    "{} ({})",
                    id.unwrap_or("?"),
                    entry.message().unwrap_or(entry.code())
                ));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(format!("DeleteMessageBatch failed for {}", failed.join(", ")).into())
        }
    }

    /// Makes the message visible again after `delay` (at once for `None`; at most 12 h).
    async fn requeue(self, delay: Option<Duration>) -> Result<(), BoxError> {
        self.set_visibility(delay.unwrap_or_default()).await
    }

    /// Makes the message visible again at once: the queue's redrive policy moves it to its
    /// dead-letter queue after `maxReceiveCount` receives. (The consumer loop deletes it
    /// instead once inboxed has written its own dead letter.)
    async fn reject(self) -> Result<(), BoxError> {
        self.set_visibility(Duration::ZERO).await
    }

    /// Sets the visibility timeout to `by` from now: SQS counts it from the call, not from the
    /// receive.
    async fn extend_deadline(&self, by: Duration) -> Result<(), BoxError> {
        self.set_visibility(by).await
    }
}
