//! The message as the inbox sees it: a producer-assigned key, who consumes it, and the payload.
//!
//! Key derivation and the payload hash follow the versioned format in `docs/key-format.md`, so a
//! relay or a service written in another language derives byte-identical keys.

use std::fmt;

use crate::hash::PayloadHash;
use crate::headers::Headers;

/// Longest accepted message id, in bytes. Long enough for any UUID, URI-ish CloudEvents key or
/// business idempotency key; short enough that the primary key stays a narrow B-tree entry.
pub const MAX_MESSAGE_ID_BYTES: usize = 512;

/// Longest accepted consumer name, in bytes.
pub const MAX_CONSUMER_NAME_BYTES: usize = 128;

/// Why a message id, consumer name or envelope was refused. Nothing is written for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The id was empty: an empty key would make every keyless message a duplicate of the first.
    #[error("message id is empty")]
    EmptyId,
    /// The id is longer than [`MAX_MESSAGE_ID_BYTES`].
    #[error("message id is {len} bytes, longer than the limit of {max}")]
    IdTooLong {
        /// Length of the refused id in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The id contains a NUL byte, which PostgreSQL `text` cannot store.
    #[error("message id contains a NUL byte at offset {offset}")]
    IdContainsNul {
        /// Byte offset of the first NUL.
        offset: usize,
    },
    /// The id bytes are not valid UTF-8.
    #[error("message id is not valid UTF-8")]
    IdNotUtf8,
    /// The consumer name is not `[A-Za-z0-9._:-]{1,128}`.
    #[error("consumer name {name:?} is invalid: {reason}")]
    InvalidConsumer {
        /// The refused name (debug-escaped when printed).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The payload is not JSON, or the requested field is missing or not a string or integer.
    #[error("cannot derive a message id from the JSON payload: {reason}")]
    JsonKey {
        /// What was wrong.
        reason: String,
    },
    /// The delivery carried no usable key at all (no header, no field).
    #[error("the delivery carries no message id")]
    MissingId,
    /// The place the key is read from holds bytes that are not UTF-8: any producer outside
    /// Rust can send them, and a key that is not text cannot be compared byte for byte with
    /// the same key sent as text by another producer.
    #[error("{field} is not valid UTF-8 (bytes {bytes})")]
    NotUtf8 {
        /// Where the key was read from (`header x-id`, `AMQP message_id property`).
        field: String,
        /// The bytes as received, escaped as [`escape_bytes`] does, so that nothing of them is
        /// lost in the error.
        bytes: String,
    },
    /// The broker client could not read part of the delivery (a property, a header name): the
    /// adapter kept the raw bytes and says which field, and the delivery is dead-lettered with
    /// this as its error rather than stopping the consumer.
    #[error("the delivery could not be read: {detail}")]
    Unreadable {
        /// Which field could not be read and why, with the raw bytes it held.
        detail: String,
    },
}

/// `bytes` with every byte outside printable ASCII, and the backslash, written as `\xNN`:
/// lossless, and safe to print in a log line or store in a text column.
#[must_use]
pub fn escape_bytes(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'\\' || b == b' ' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// The producer-assigned deduplication key.
///
/// Never build it from a broker offset, receipt handle or delivery counter: those describe one
/// *delivery*, not the message, and change on redelivery or replay, so every redelivery would
/// look new and be processed again.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(String);

impl MessageId {
    /// Validates a producer-assigned id and keeps it byte for byte (no case folding, no trimming).
    ///
    /// # Errors
    /// [`EnvelopeError`] when the id is empty, longer than [`MAX_MESSAGE_ID_BYTES`], or has a NUL.
    pub fn new(id: impl Into<String>) -> Result<Self, EnvelopeError> {
        let id = id.into();
        if id.is_empty() {
            return Err(EnvelopeError::EmptyId);
        }
        if id.len() > MAX_MESSAGE_ID_BYTES {
            return Err(EnvelopeError::IdTooLong {
                len: id.len(),
                max: MAX_MESSAGE_ID_BYTES,
            });
        }
        if let Some(offset) = id.bytes().position(|b| b == 0) {
            return Err(EnvelopeError::IdContainsNul { offset });
        }
        Ok(Self(id))
    }

    /// Validates an id that arrived as raw bytes (a header value, say).
    ///
    /// # Errors
    /// [`EnvelopeError::IdNotUtf8`] for invalid UTF-8, otherwise as [`MessageId::new`].
    pub fn from_bytes(id: &[u8]) -> Result<Self, EnvelopeError> {
        let id = std::str::from_utf8(id).map_err(|_| EnvelopeError::IdNotUtf8)?;
        Self::new(id)
    }

    /// A UUID in its canonical form: lowercase, hyphenated (key format v1).
    #[must_use]
    pub fn from_uuid(id: uuid::Uuid) -> Self {
        Self(id.hyphenated().to_string())
    }

    /// The key of a CloudEvents event: `source` and `id` together identify it (the spec says
    /// producers must make the pair unique), so both are part of the key.
    ///
    /// Format v1: `ce|` + escape(source) + `|` + escape(id), where escape replaces `%` with `%25`
    /// and `|` with `%7C`. The escaping makes the split point unambiguous.
    ///
    /// # Errors
    /// As [`MessageId::new`], for the combined key or an empty part.
    pub fn from_cloudevent(source: &str, id: &str) -> Result<Self, EnvelopeError> {
        if source.is_empty() || id.is_empty() {
            return Err(EnvelopeError::EmptyId);
        }
        Self::new(format!("ce|{}|{}", escape(source), escape(id)))
    }

    /// The key held in one field of a JSON payload, addressed by a JSON pointer (`/order/id`).
    ///
    /// Strings are used verbatim; integers in their decimal form. Anything else is refused
    /// rather than guessed at, because a key that two producers render differently dedups nothing.
    ///
    /// # Errors
    /// [`EnvelopeError::JsonKey`] when the payload is not JSON or the field is absent or of
    /// another type, otherwise as [`MessageId::new`].
    pub fn from_json_field(payload: &[u8], pointer: &str) -> Result<Self, EnvelopeError> {
        let value: serde_json::Value =
            serde_json::from_slice(payload).map_err(|e| EnvelopeError::JsonKey {
                reason: format!("payload is not JSON ({e})"),
            })?;
        match value.pointer(pointer) {
            Some(serde_json::Value::String(s)) => Self::new(s.clone()),
            Some(serde_json::Value::Number(n)) if n.is_i64() || n.is_u64() => {
                Self::new(n.to_string())
            }
            Some(_) => Err(EnvelopeError::JsonKey {
                reason: format!("field {pointer} is neither a string nor an integer"),
            }),
            None => Err(EnvelopeError::JsonKey {
                reason: format!("field {pointer} is missing"),
            }),
        }
    }

    /// The key as stored.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn escape(part: &str) -> String {
    part.replace('%', "%25").replace('|', "%7C")
}

impl fmt::Debug for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which handler processed a message. Part of the dedup key, so that several handlers of one
/// event (billing, notifications) each record their own row. Renaming a consumer makes every
/// past message look new to it.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConsumerName(String);

impl ConsumerName {
    /// Validates a consumer name: 1 to 128 bytes of ASCII letters, digits, `.`, `_`, `:` or `-`.
    ///
    /// # Errors
    /// [`EnvelopeError::InvalidConsumer`] naming the rule that was broken.
    pub fn new(name: impl Into<String>) -> Result<Self, EnvelopeError> {
        let name = name.into();
        let reason = if name.is_empty() {
            Some("it is empty")
        } else if name.len() > MAX_CONSUMER_NAME_BYTES {
            Some("it is longer than 128 bytes")
        } else if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
        {
            Some("only ASCII letters, digits, '.', '_', ':' and '-' are allowed")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(EnvelopeError::InvalidConsumer { name, reason }),
            None => Ok(Self(name)),
        }
    }

    /// The name as stored.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ConsumerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ConsumerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One message, ready for the processor: key, optional metadata and the payload.
#[derive(Clone, Debug)]
pub struct Envelope {
    id: MessageId,
    aggregate_id: Option<String>,
    message_type: Option<String>,
    correlation_id: Option<String>,
    payload: Vec<u8>,
    hash: PayloadHash,
    redrive_for: Option<String>,
    headers: Headers,
    sent_at: Option<std::time::SystemTime>,
}

impl Envelope {
    /// Builds an envelope and hashes its payload.
    #[must_use]
    pub fn new(id: MessageId, payload: impl Into<Vec<u8>>) -> Self {
        let payload = payload.into();
        let hash = PayloadHash::of(&payload);
        Self {
            id,
            aggregate_id: None,
            message_type: None,
            correlation_id: None,
            payload,
            hash,
            redrive_for: None,
            headers: Headers::new(),
            sent_at: None,
        }
    }

    /// Attaches the delivery's headers (adapters do, from what the broker carried). They are
    /// not part of the message's identity: its key and its payload's hash are.
    #[must_use]
    pub fn with_headers(mut self, headers: Headers) -> Self {
        self.headers = headers;
        self
    }

    /// The headers the message arrived with: a trace's `traceparent`, a tenant, a version.
    #[must_use]
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// Sets when the message was sent: the broker's timestamp of it, or its producer's
    /// (adapters do, where the broker carries one). What
    /// [`LAG_SECONDS`](crate::metrics::LAG_SECONDS) measures from.
    #[must_use]
    pub fn with_sent_at(mut self, sent_at: std::time::SystemTime) -> Self {
        self.sent_at = Some(sent_at);
        self
    }

    /// When the message was sent, if its broker said; see [`Envelope::with_sent_at`].
    #[must_use]
    pub fn sent_at(&self) -> Option<std::time::SystemTime> {
        self.sent_at
    }

    /// The W3C trace context the message arrived with, from its headers (`traceparent`, or
    /// where CloudEvents, MassTransit or Wolverine put one); see
    /// [`TraceContext::from_headers`](crate::trace::TraceContext::from_headers).
    #[must_use]
    pub fn trace_context(&self) -> Option<crate::trace::TraceContext> {
        crate::trace::TraceContext::from_headers(&self.headers)
    }

    /// Marks the message as an operator's retry of `consumer`'s dead letter, sent back through
    /// the broker (`inboxed dead-letters retry --to-broker`, which sets the
    /// [`REDRIVE_HEADER`](crate::REDRIVE_HEADER) to the consumer's name; adapters read it). That
    /// consumer's processor then deletes the key's dead letter in the same transaction as the
    /// claim and the handler, so the letter goes only if the retry commits. Without the mark, or
    /// for another consumer (a stream fans the copy out to every consumer group), a delivery of a
    /// dead-lettered key is settled as `AlreadyDeadLettered` and never reaches the handler.
    #[must_use]
    pub fn with_redrive_for(mut self, consumer: impl Into<String>) -> Self {
        self.redrive_for = Some(consumer.into());
        self
    }

    /// The consumer whose dead letter this message retries; see
    /// [`Envelope::with_redrive_for`].
    #[must_use]
    pub fn redrive_for(&self) -> Option<&str> {
        self.redrive_for.as_deref()
    }

    /// Sets the aggregate the message belongs to (an order, an account). The store-then-process
    /// worker in ordered mode processes one aggregate's messages one at a time, in arrival
    /// order. Not part of dedup.
    #[must_use]
    pub fn with_aggregate(mut self, aggregate_id: impl Into<String>) -> Self {
        self.aggregate_id = Some(aggregate_id.into());
        self
    }

    /// Sets the message type (debugging metadata, not part of dedup).
    #[must_use]
    pub fn with_type(mut self, message_type: impl Into<String>) -> Self {
        self.message_type = Some(message_type.into());
        self
    }

    /// Sets the correlation id (debugging metadata, carried on log spans, not part of dedup).
    #[must_use]
    pub fn with_correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    /// The dedup key.
    #[must_use]
    pub fn id(&self) -> &MessageId {
        &self.id
    }

    /// The aggregate, if one was set.
    #[must_use]
    pub fn aggregate_id(&self) -> Option<&str> {
        self.aggregate_id.as_deref()
    }

    /// The message type, if the producer set one.
    #[must_use]
    pub fn message_type(&self) -> Option<&str> {
        self.message_type.as_deref()
    }

    /// The correlation id, if the producer set one.
    #[must_use]
    pub fn correlation_id(&self) -> Option<&str> {
        self.correlation_id.as_deref()
    }

    /// The raw payload bytes.
    #[must_use]
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The payload hash computed when the envelope was built.
    #[must_use]
    pub fn hash(&self) -> PayloadHash {
        self.hash
    }

    /// Decodes the payload as JSON. Pair it with `.permanent()?` in a handler: a payload that
    /// does not decode now never will, so it belongs on the dead-letter path.
    ///
    /// # Errors
    /// The `serde_json` error when the payload does not decode into `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated() {
        assert_eq!(MessageId::new(""), Err(EnvelopeError::EmptyId));
        assert!(matches!(
            MessageId::new("a".repeat(513)),
            Err(EnvelopeError::IdTooLong { len: 513, .. })
        ));
        assert!(MessageId::new("a".repeat(512)).is_ok());
        assert_eq!(
            MessageId::new("ab\0c"),
            Err(EnvelopeError::IdContainsNul { offset: 2 })
        );
        assert_eq!(
            MessageId::from_bytes(&[0xff, 0x00]),
            Err(EnvelopeError::IdNotUtf8)
        );
    }

    #[test]
    fn cloudevent_keys_escape_the_separator() {
        let a = MessageId::from_cloudevent("a|b", "c").unwrap();
        let b = MessageId::from_cloudevent("a", "b|c").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str(), "ce|a%7Cb|c");
        assert_eq!(
            MessageId::from_cloudevent("/orders", "100%")
                .unwrap()
                .as_str(),
            "ce|/orders|100%25"
        );
    }

    #[test]
    fn uuid_keys_are_canonical() {
        let u = uuid::Uuid::parse_str("3F6C2A9E-8B1D-4E7A-9C55-0D2F1B7E4A10").unwrap();
        assert_eq!(
            MessageId::from_uuid(u).as_str(),
            "3f6c2a9e-8b1d-4e7a-9c55-0d2f1b7e4a10"
        );
    }

    #[test]
    fn json_field_keys() {
        let p = br#"{"order":{"id":"o-1","n":42,"f":1.5}}"#;
        assert_eq!(
            MessageId::from_json_field(p, "/order/id").unwrap().as_str(),
            "o-1"
        );
        assert_eq!(
            MessageId::from_json_field(p, "/order/n").unwrap().as_str(),
            "42"
        );
        assert!(MessageId::from_json_field(p, "/order/f").is_err());
        assert!(MessageId::from_json_field(p, "/nope").is_err());
        assert!(MessageId::from_json_field(b"not json", "/id").is_err());
    }

    #[test]
    fn consumer_names_are_validated() {
        assert!(ConsumerName::new("billing-v2.eu:1_a").is_ok());
        for bad in ["", "x'; DROP TABLE t; --", "a b", "é"] {
            assert!(ConsumerName::new(bad).is_err(), "{bad:?} accepted");
        }
    }
}
