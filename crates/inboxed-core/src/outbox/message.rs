//! An outgoing message, as the caller builds it, and what the outbox refuses to store.

use std::collections::BTreeMap;

use crate::envelope::Envelope;
use crate::trace::{TRACEPARENT, TraceContext};

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
    trace: Trace,
}

/// Where a message's trace context came from, which decides what the write stores.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Trace {
    #[default]
    None,
    /// Set by the caller: stored as it is.
    Set(TraceContext),
    /// The inbound message's: stored unless the write finds a current span (`otel`), which is
    /// its child and so the closer parent.
    Forwarded(TraceContext),
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
            trace: Trace::None,
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
    /// correlation id over unless one is set, and its trace context unless one is set: the
    /// next service's processing joins the same trace, with or without OpenTelemetry here.
    #[must_use]
    pub fn caused_by(mut self, inbound: &Envelope) -> Self {
        self.caused_by = Some(inbound.id().as_str().to_owned());
        if self.correlation_id.is_none() {
            self.correlation_id = inbound.correlation_id().map(str::to_owned);
        }
        if self.trace == Trace::None
            && let Some(trace) = inbound.trace_context()
        {
            self.trace = Trace::Forwarded(trace);
        }
        self
    }

    /// The trace context to send the message under, as the caller has it (from an HTTP
    /// request's `traceparent`, say): stored as it is, before any current span's or an
    /// inbound message's. Without it, the write stores the current span's context (the
    /// `otel` feature) or the one [`OutgoingMessage::caused_by`] carried over.
    #[must_use]
    pub fn with_trace_context(mut self, trace: TraceContext) -> Self {
        self.trace = Trace::Set(trace);
        self
    }

    /// The trace context set or carried over so far (not a current span's, which the write
    /// captures).
    #[must_use]
    pub fn trace_context(&self) -> Option<&TraceContext> {
        match &self.trace {
            Trace::None => None,
            Trace::Set(trace) | Trace::Forwarded(trace) => Some(trace),
        }
    }

    /// What the write stores of `ambient`, the context current at the write: the caller's
    /// own, else the current span's, else the inbound message's.
    pub(crate) fn trace_at_write(&self, ambient: Option<&TraceContext>) -> Option<TraceContext> {
        match &self.trace {
            Trace::Set(trace) => Some(trace.clone()),
            Trace::Forwarded(trace) => Some(ambient.unwrap_or(trace).clone()),
            Trace::None => ambient.cloned(),
        }
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

    /// The headers as the JSON object the outbox stores, with `trace`'s headers beside them
    /// unless the caller set a `traceparent` header of its own (which then travels alone, as
    /// the caller wrote it).
    pub(crate) fn headers_json(&self, trace: Option<&TraceContext>) -> String {
        let own_trace = self
            .headers
            .keys()
            .any(|name| name.eq_ignore_ascii_case(TRACEPARENT));
        let stored = match trace {
            Some(trace) if !own_trace => {
                let mut all: BTreeMap<&str, &str> = self
                    .headers
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                for (name, value) in trace.headers() {
                    all.insert(name, value);
                }
                serde_json::to_string(&all)
            }
            _ => serde_json::to_string(&self.headers),
        };
        stored.unwrap_or_else(|_| "{}".to_owned())
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
        assert_eq!(m.headers_json(None), r#"{"a":"1\"","b":"2"}"#);
    }

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const CURRENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01";

    #[test]
    fn the_write_stores_the_callers_trace_then_the_current_span_then_the_inbound() {
        let inbound = Envelope::new(MessageId::new("m-1").unwrap(), b"{}".to_vec())
            .with_headers(crate::Headers::new().with("traceparent", PARENT));
        let current = TraceContext::parse(CURRENT).unwrap();
        let forwarded = OutgoingMessage::new("d", b"x".to_vec()).caused_by(&inbound);
        assert_eq!(
            forwarded.trace_at_write(None).unwrap().traceparent(),
            PARENT
        );
        assert_eq!(
            forwarded
                .trace_at_write(Some(&current))
                .unwrap()
                .traceparent(),
            CURRENT
        );
        let own = TraceContext::parse(&PARENT.replace("-01", "-00")).unwrap();
        let set = OutgoingMessage::new("d", b"x".to_vec())
            .with_trace_context(own.clone())
            .caused_by(&inbound);
        assert_eq!(set.trace_at_write(Some(&current)), Some(own));
        assert_eq!(
            OutgoingMessage::new("d", b"x".to_vec()).trace_at_write(None),
            None
        );
    }

    #[test]
    fn trace_headers_are_stored_beside_the_callers_unless_it_wrote_its_own() {
        let trace = TraceContext::parse(PARENT).unwrap().with_baggage("k=v");
        let m = OutgoingMessage::new("d", b"x".to_vec()).with_header("a", "1");
        assert_eq!(
            m.headers_json(Some(&trace)),
            format!(r#"{{"a":"1","baggage":"k=v","traceparent":"{PARENT}"}}"#)
        );
        let own = m.with_header("Traceparent", CURRENT);
        assert_eq!(
            own.headers_json(Some(&trace)),
            format!(r#"{{"Traceparent":"{CURRENT}","a":"1"}}"#)
        );
    }
}
