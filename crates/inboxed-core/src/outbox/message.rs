//! An outgoing message, as the caller builds it, and what the outbox refuses to store.

use std::collections::BTreeMap;

use crate::envelope::Envelope;

/// The longest destination, in bytes: a logical route name, not a payload.
pub const MAX_DESTINATION_BYTES: usize = 255;

/// The longest ordering key, in bytes: as long as a message id may be (a key is an entity's
/// id, and MySQL's column for it, as for ids, is `VARBINARY(512)`), the same on every engine.
pub const MAX_ORDERING_KEY_BYTES: usize = crate::envelope::MAX_MESSAGE_ID_BYTES;

/// A message to send once the caller's transaction commits.
///
/// ```
/// # use inboxed_core::outbox::OutgoingMessage;
/// let event = OutgoingMessage::new("billing.charged", br#"{"account":"a-1","cents":500}"#.to_vec())
///     .with_key("a-1")
///     .with_type("Charged")
///     .with_header("schema", "v2");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    destination: String,
    payload: Vec<u8>,
    ordering_key: Option<String>,
    message_type: Option<String>,
    correlation_id: Option<String>,
    headers: BTreeMap<String, String>,
    caused_by: Option<String>,
}

impl OutgoingMessage {
    /// A message for `destination`, a logical route that the relay's configuration maps to a
    /// broker target (an exchange and routing key, a subject, a topic, a stream, a queue), so
    /// that code does not name brokers.
    pub fn new(destination: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            destination: destination.into(),
            payload: payload.into(),
            ordering_key: None,
            message_type: None,
            correlation_id: None,
            headers: BTreeMap::new(),
            caused_by: None,
        }
    }

    /// Messages of one key are published one at a time, in the order they were written (the
    /// key of a Kafka record, too). Without a key a message has no order with the others.
    #[must_use]
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.ordering_key = Some(key.into());
        self
    }

    /// The message's type, for the consumer's routing.
    #[must_use]
    pub fn with_type(mut self, message_type: impl Into<String>) -> Self {
        self.message_type = Some(message_type.into());
        self
    }

    /// The correlation id; by default the one of the message given to
    /// [`OutgoingMessage::caused_by`].
    #[must_use]
    pub fn with_correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    /// A header, published with the message (a later value for the same name replaces the
    /// earlier one).
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Records `inbound` as the message whose handling wrote this one, and carries its
    /// correlation id over unless one is set.
    #[must_use]
    pub fn caused_by(mut self, inbound: &Envelope) -> Self {
        self.caused_by = Some(inbound.id().as_str().to_owned());
        if self.correlation_id.is_none() {
            self.correlation_id = inbound.correlation_id().map(str::to_owned);
        }
        self
    }

    /// The logical route.
    #[must_use]
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// The body.
    #[must_use]
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The ordering key.
    #[must_use]
    pub fn ordering_key(&self) -> Option<&str> {
        self.ordering_key.as_deref()
    }

    /// The type.
    #[must_use]
    pub fn message_type(&self) -> Option<&str> {
        self.message_type.as_deref()
    }

    /// The correlation id.
    #[must_use]
    pub fn correlation_id(&self) -> Option<&str> {
        self.correlation_id.as_deref()
    }

    /// The headers, by name.
    #[must_use]
    pub fn headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }

    /// The id of the inbound message that caused it.
    #[must_use]
    pub fn cause(&self) -> Option<&str> {
        self.caused_by.as_deref()
    }

    /// The headers as the JSON object the outbox stores: what an engine's own write
    /// statement binds.
    #[must_use]
    pub fn headers_json(&self) -> String {
        serde_json::to_string(&self.headers).unwrap_or_else(|_| "{}".to_owned())
    }

    /// Refuses what a column could not hold, or a broker could not carry, before anything is
    /// written: the caller learns at the write, in its own transaction, not at a relay later.
    pub(crate) fn validate(&self) -> Result<(), OutgoingError> {
        if self.destination.is_empty() {
            return Err(OutgoingError::EmptyDestination);
        }
        if self.destination.len() > MAX_DESTINATION_BYTES {
            return Err(OutgoingError::DestinationTooLong {
                len: self.destination.len(),
                max: MAX_DESTINATION_BYTES,
            });
        }
        if let Some(key) = &self.ordering_key
            && key.len() > MAX_ORDERING_KEY_BYTES
        {
            return Err(OutgoingError::OrderingKeyTooLong {
                len: key.len(),
                max: MAX_ORDERING_KEY_BYTES,
            });
        }
        let texts = [
            ("destination", Some(self.destination.as_str())),
            ("ordering key", self.ordering_key.as_deref()),
            ("message type", self.message_type.as_deref()),
            ("correlation id", self.correlation_id.as_deref()),
        ];
        for (field, value) in texts {
            if value.is_some_and(|v| v.contains('\0')) {
                return Err(OutgoingError::Nul { field });
            }
        }
        for (name, value) in &self.headers {
            if name.is_empty() {
                return Err(OutgoingError::EmptyHeaderName);
            }
            if name.contains('\0') || value.contains('\0') {
                return Err(OutgoingError::Nul { field: "header" });
            }
        }
        Ok(())
    }
}

/// Why the outbox refused a message: nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutgoingError {
    /// The destination was empty: the relay could not route it.
    #[error("outgoing message has an empty destination")]
    EmptyDestination,
    /// The destination is longer than [`MAX_DESTINATION_BYTES`].
    #[error("outgoing message's destination is {len} bytes, longer than the limit of {max}")]
    DestinationTooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The ordering key is longer than [`MAX_ORDERING_KEY_BYTES`].
    #[error("outgoing message's ordering key is {len} bytes, longer than the limit of {max}")]
    OrderingKeyTooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A header had an empty name, which no broker carries.
    #[error("outgoing message has a header with an empty name")]
    EmptyHeaderName,
    /// A text field holds a NUL byte, which PostgreSQL `text` cannot store and brokers'
    /// clients in other languages often cut at.
    #[error("outgoing message's {field} contains a NUL byte")]
    Nul {
        /// Which field.
        field: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::MessageId;

    #[test]
    fn a_cause_carries_its_correlation_id_unless_one_is_set() {
        let inbound = Envelope::new(MessageId::new("m-1").unwrap(), b"{}".to_vec())
            .with_correlation_id("c-1");
        let carried = OutgoingMessage::new("d", b"x".to_vec()).caused_by(&inbound);
        assert_eq!(carried.cause(), Some("m-1"));
        assert_eq!(carried.correlation_id(), Some("c-1"));
        let own = OutgoingMessage::new("d", b"x".to_vec())
            .with_correlation_id("mine")
            .caused_by(&inbound);
        assert_eq!(own.correlation_id(), Some("mine"));
    }

    #[test]
    fn what_a_column_or_broker_cannot_hold_is_refused_with_its_field() {
        let ok = OutgoingMessage::new("d", b"\0 any bytes \xff".to_vec());
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            OutgoingMessage::new("", b"x".to_vec()).validate(),
            Err(OutgoingError::EmptyDestination)
        );
        assert_eq!(
            OutgoingMessage::new("d".repeat(256), b"x".to_vec()).validate(),
            Err(OutgoingError::DestinationTooLong { len: 256, max: 255 })
        );
        assert_eq!(
            OutgoingMessage::new("d", b"x".to_vec())
                .with_key("k".repeat(513))
                .validate(),
            Err(OutgoingError::OrderingKeyTooLong { len: 513, max: 512 })
        );
        assert_eq!(
            OutgoingMessage::new("d", b"x".to_vec())
                .with_key("k".repeat(512))
                .validate(),
            Ok(())
        );
        assert_eq!(
            OutgoingMessage::new("d", b"x".to_vec())
                .with_key("a\0b")
                .validate(),
            Err(OutgoingError::Nul {
                field: "ordering key"
            })
        );
        assert_eq!(
            OutgoingMessage::new("d", b"x".to_vec())
                .with_header("", "v")
                .validate(),
            Err(OutgoingError::EmptyHeaderName)
        );
        assert_eq!(
            OutgoingMessage::new("d", b"x".to_vec())
                .with_header("h", "\0")
                .validate(),
            Err(OutgoingError::Nul { field: "header" })
        );
    }

    #[test]
    fn headers_are_stored_as_a_json_object() {
        let m = OutgoingMessage::new("d", b"x".to_vec())
            .with_header("b", "2")
            .with_header("a", "1\"");
        assert_eq!(m.headers_json(), r#"{"a":"1\"","b":"2"}"#);
    }
}
