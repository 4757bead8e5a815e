//! Where a broker adapter finds a delivery's message id: one rule for every adapter, so that
//! the same producer's messages get the same key whichever broker carries them.

use std::borrow::Cow;

use crate::envelope::{Envelope, EnvelopeError, MessageId, escape_bytes};
use crate::headers::Headers;

/// The header that marks a delivery as an operator's retry of a dead letter; its value names
/// the consumer whose dead letter it lifts: see [`Envelope::with_redrive_for`]. Whoever can
/// publish to the queue can set it, and so lift that consumer's dead letter for the key, which
/// is what an operator republishing a fixed message wants; the consumer still applies the
/// message at most once.
pub const REDRIVE_HEADER: &str = "inboxed-redrive";

/// Where the message id of a delivery comes from. Always something the producer set when it
/// created the message; never an offset, a receipt handle or a delivery counter, which change
/// on redelivery or replay.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeySource {
    /// The broker's message-id field set by the producer: AMQP `message_id`, NATS
    /// `Nats-Msg-Id`. Adapters whose broker has no such producer field document what they read.
    /// The default.
    #[default]
    MessageIdProperty,
    /// A header (AMQP header, NATS or Kafka header, SQS message attribute) holding the id.
    Header(String),
    /// A field of the JSON body, by JSON pointer (`/order/id`): see
    /// [`MessageId::from_json_field`].
    JsonField(String),
    /// CloudEvents `source` + `id` (see [`MessageId::from_cloudevent`]): from headers in
    /// binary mode (`ce-source`/`ce-id`, `Ce-Source`/`Ce-Id`, `ce_source`/`ce_id`, `cloudEvents:source`/
    /// `cloudEvents:id`, `cloudEvents_source`/`cloudEvents_id`), otherwise from the body's
    /// `source` and `id` fields in structured mode.
    CloudEvents,
}

/// A header's name and value as a broker delivered them (see [`KeyCarrier::headers`]).
pub type RawHeader<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// What a delivery offers to find its key in; implemented by each adapter's delivery. Values
/// are the bytes as the broker delivered them: whether they are text is decided here, once for
/// every adapter, so that a producer's non-UTF-8 bytes are reported as such and never taken for
/// a missing key.
pub trait KeyCarrier {
    /// The broker's producer-set message-id field, if any, as received.
    fn message_id_property(&self) -> Option<&[u8]>;
    /// How errors name [`KeyCarrier::message_id_property`] (`AMQP message_id property`).
    fn message_id_property_name(&self) -> &'static str {
        "message id property"
    }
    /// A header's value as received (numbers in decimal), if present.
    fn header(&self, name: &str) -> Option<Cow<'_, [u8]>>;
    /// Every header, name and value as received, in the order received, each valued as
    /// [`KeyCarrier::header`] values it (headers of a type that has no bytes, a nested table
    /// say, are left out). Whether a name is text is decided by [`Headers`], once for every
    /// adapter. None by default.
    fn headers(&self) -> Vec<RawHeader<'_>> {
        Vec::new()
    }

    /// When the broker says the message was sent: its own timestamp, or the one its
    /// producer set (AMQP's `timestamp`, a Kafka record's create time: the producer's clock).
    /// `None`, the default: the broker carries none.
    fn sent_at(&self) -> Option<std::time::SystemTime> {
        None
    }

    /// The raw body.
    fn body(&self) -> &[u8];
}

/// `value` as text, or [`EnvelopeError::NotUtf8`] naming `field`.
fn text(
    value: Option<Cow<'_, [u8]>>,
    field: impl FnOnce() -> String,
) -> Result<Option<String>, EnvelopeError> {
    let Some(value) = value else { return Ok(None) };
    match String::from_utf8(value.into_owned()) {
        Ok(text) => Ok(Some(text)),
        Err(e) => Err(EnvelopeError::NotUtf8 {
            field: field(),
            bytes: escape_bytes(e.as_bytes()),
        }),
    }
}

/// The text of header `name` of `delivery`.
fn header_text(delivery: &impl KeyCarrier, name: &str) -> Result<Option<String>, EnvelopeError> {
    text(delivery.header(name), || format!("header {name}"))
}

/// CloudEvents header names of attribute `name` in the protocol bindings: HTTP and Kafka `ce-`
/// (and `Ce-Name`, as HTTP bridges that canonicalise header case write it), `ce_`, AMQP
/// `cloudEvents:` and its JMS-safe `cloudEvents_`.
fn ce_headers(name: &str) -> [String; 5] {
    let mut title = name.to_owned();
    title[..1].make_ascii_uppercase();
    [
        format!("ce-{name}"),
        format!("Ce-{title}"),
        format!("ce_{name}"),
        format!("cloudEvents:{name}"),
        format!("cloudEvents_{name}"),
    ]
}

impl KeySource {
    /// The envelope of `delivery`: its id by this rule, its body, its headers (up to
    /// [`Headers::MAX_BYTES`]; those past it are named in a warning and left out), and the
    /// redrive mark when it carries [`REDRIVE_HEADER`] (naming a consumer).
    ///
    /// # Errors
    /// Those of [`KeySource::message_id`].
    pub fn envelope(&self, delivery: &impl KeyCarrier) -> Result<Envelope, EnvelopeError> {
        let id = self.message_id(delivery)?;
        let (headers, left) = Headers::bounded(delivery.headers());
        if !left.is_empty() {
            tracing::warn!(
                message_id = %id,
                left_out = ?left,
                "a delivery's headers exceed {} bytes: these are left out of its envelope",
                Headers::MAX_BYTES
            );
        }
        let mut envelope = Envelope::new(id, delivery.body().to_vec()).with_headers(headers);
        if let Some(sent_at) = delivery.sent_at() {
            envelope = envelope.with_sent_at(sent_at);
        }
        // A redrive mark that is not text names no consumer: an ordinary delivery.
        Ok(match header_text(delivery, REDRIVE_HEADER).ok().flatten() {
            Some(consumer) if !consumer.is_empty() => envelope.with_redrive_for(consumer),
            _ => envelope,
        })
    }

    /// The id of `delivery` by this rule.
    ///
    /// # Errors
    /// [`EnvelopeError::MissingId`] when the place is empty or absent,
    /// [`EnvelopeError::NotUtf8`] naming the place when its bytes are not text, and the errors of
    /// [`MessageId::new`] and [`MessageId::from_json_field`] for a value that cannot be a key.
    /// The consumer loop dead-letters such a delivery; it is never processed without a key.
    pub fn message_id(&self, delivery: &impl KeyCarrier) -> Result<MessageId, EnvelopeError> {
        match self {
            Self::MessageIdProperty => {
                text(delivery.message_id_property().map(Cow::Borrowed), || {
                    delivery.message_id_property_name().to_owned()
                })?
                .filter(|id| !id.is_empty())
                .ok_or(EnvelopeError::MissingId)
                .and_then(MessageId::new)
            }
            Self::Header(name) => header_text(delivery, name)?
                .filter(|id| !id.is_empty())
                .ok_or(EnvelopeError::MissingId)
                .and_then(MessageId::new),
            Self::JsonField(pointer) => MessageId::from_json_field(delivery.body(), pointer),
            Self::CloudEvents => {
                let attribute = |name: &str| -> Result<Option<String>, EnvelopeError> {
                    for header in ce_headers(name) {
                        if let Some(value) = header_text(delivery, &header)? {
                            return Ok(Some(value));
                        }
                    }
                    Ok(None)
                };
                match (attribute("source")?, attribute("id")?) {
                    (Some(source), Some(id)) => MessageId::from_cloudevent(&source, &id),
                    (None, None) => structured(delivery.body()),
                    _ => Err(EnvelopeError::MissingId),
                }
            }
        }
    }
}

/// Where a message sent again must carry its key for a [`KeySource`] to find it: what an
/// operator's republish (`inboxed dead-letters retry --to-broker`) needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyPlace<'a> {
    /// The broker's message-id field.
    Property,
    /// This header.
    Header(&'a str),
    /// Already in the body (a JSON field, a structured CloudEvent).
    Body,
}

/// A body alone, with no property and no header.
struct BodyOnly<'a>(&'a [u8]);

impl KeyCarrier for BodyOnly<'_> {
    fn message_id_property(&self) -> Option<&[u8]> {
        None
    }
    fn header(&self, _: &str) -> Option<Cow<'_, [u8]>> {
        None
    }
    fn body(&self) -> &[u8] {
        self.0
    }
}

impl KeySource {
    /// Where a message with `payload` must carry `id` for this rule to read it back, or `None`
    /// when the rule reads the body and the body does not yield `id`: a binary-mode
    /// CloudEvent, whose key lived in headers that a dead letter does not keep.
    #[must_use]
    pub fn place_of(&self, id: &MessageId, payload: &[u8]) -> Option<KeyPlace<'_>> {
        match self {
            Self::MessageIdProperty => Some(KeyPlace::Property),
            Self::Header(name) => Some(KeyPlace::Header(name)),
            Self::JsonField(_) | Self::CloudEvents => {
                let found = self.message_id(&BodyOnly(payload)).ok()?;
                (found == *id).then_some(KeyPlace::Body)
            }
        }
    }
}

/// Structured-mode CloudEvents: the event is the JSON body, with `source` and `id` strings.
fn structured(body: &[u8]) -> Result<MessageId, EnvelopeError> {
    let event: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| EnvelopeError::MissingId)?;
    match (event.get("source"), event.get("id")) {
        (Some(serde_json::Value::String(source)), Some(serde_json::Value::String(id))) => {
            MessageId::from_cloudevent(source, id)
        }
        _ => Err(EnvelopeError::MissingId),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Fake {
        property: Option<&'static str>,
        headers: HashMap<&'static str, &'static str>,
        body: &'static [u8],
    }

    impl KeyCarrier for Fake {
        fn message_id_property(&self) -> Option<&[u8]> {
            self.property.map(str::as_bytes)
        }
        fn header(&self, name: &str) -> Option<Cow<'_, [u8]>> {
            self.headers.get(name).map(|v| Cow::Borrowed(v.as_bytes()))
        }
        fn body(&self) -> &[u8] {
            self.body
        }
    }

    fn fake(property: Option<&'static str>, headers: &[(&'static str, &'static str)]) -> Fake {
        Fake {
            property,
            headers: headers.iter().copied().collect(),
            body: br#"{"order":{"id":"o-7"},"source":"/orders","id":"e-1"}"#,
        }
    }

    #[test]
    fn each_place_gives_its_key() {
        let go = fake(None, &[("Ce-Source", "/g"), ("Ce-Id", "1")]);
        assert_eq!(
            KeySource::CloudEvents.message_id(&go).unwrap().as_str(),
            "ce|/g|1"
        );
        let d = fake(
            Some("m-1"),
            &[("x-id", "h-1"), ("ce_source", "/s"), ("ce_id", "9")],
        );
        let key = |k: KeySource| k.message_id(&d).map(|m| m.as_str().to_owned());
        assert_eq!(key(KeySource::MessageIdProperty).unwrap(), "m-1");
        assert_eq!(key(KeySource::Header("x-id".into())).unwrap(), "h-1");
        assert_eq!(
            key(KeySource::JsonField("/order/id".into())).unwrap(),
            "o-7"
        );
        assert_eq!(key(KeySource::CloudEvents).unwrap(), "ce|/s|9");
        let structured = fake(None, &[]);
        assert_eq!(
            KeySource::CloudEvents
                .message_id(&structured)
                .unwrap()
                .as_str(),
            "ce|/orders|e-1"
        );
    }

    #[test]
    fn a_republished_key_goes_where_the_rule_reads_it() {
        let id = MessageId::new("o-1").unwrap();
        let body = br#"{"order":{"id":"o-1"}}"#;
        assert_eq!(
            KeySource::MessageIdProperty.place_of(&id, body),
            Some(KeyPlace::Property)
        );
        let header = KeySource::Header("x-id".into());
        assert_eq!(header.place_of(&id, body), Some(KeyPlace::Header("x-id")));
        let json = KeySource::JsonField("/order/id".into());
        assert_eq!(json.place_of(&id, body), Some(KeyPlace::Body));
        let other = MessageId::new("o-2").unwrap();
        assert_eq!(
            json.place_of(&other, body),
            None,
            "the body holds another key"
        );
        // Binary-mode CloudEvents kept the key in headers: the body alone cannot carry it.
        assert_eq!(KeySource::CloudEvents.place_of(&id, body), None);
    }

    #[test]
    fn a_missing_or_empty_key_is_an_error_never_a_guess() {
        let d = fake(Some(""), &[("ce-id", "9")]);
        for rule in [
            KeySource::MessageIdProperty,
            KeySource::Header("x-id".into()),
            KeySource::CloudEvents,
        ] {
            assert_eq!(
                rule.message_id(&d),
                Err(EnvelopeError::MissingId),
                "{rule:?}"
            );
        }
        assert!(matches!(
            KeySource::JsonField("/nope".into()).message_id(&d),
            Err(EnvelopeError::JsonKey { .. })
        ));
    }

    /// Raw bytes, as a producer outside Rust can send them.
    struct Raw(&'static [u8]);

    impl KeyCarrier for Raw {
        fn message_id_property(&self) -> Option<&[u8]> {
            Some(self.0)
        }
        fn message_id_property_name(&self) -> &'static str {
            "AMQP message_id property"
        }
        fn header(&self, _: &str) -> Option<Cow<'_, [u8]>> {
            Some(Cow::Borrowed(self.0))
        }
        fn body(&self) -> &[u8] {
            b"{}"
        }
    }

    #[test]
    fn a_key_that_is_not_text_is_named_as_such_not_as_missing() {
        let d = Raw(b"m-\xff\\1");
        let not_utf8 = |field: &str| EnvelopeError::NotUtf8 {
            field: field.to_owned(),
            bytes: "m-\\xff\\x5c1".to_owned(),
        };
        assert_eq!(
            KeySource::MessageIdProperty.message_id(&d),
            Err(not_utf8("AMQP message_id property"))
        );
        assert_eq!(
            KeySource::Header("x-id".into()).message_id(&d),
            Err(not_utf8("header x-id"))
        );
        assert_eq!(
            KeySource::CloudEvents.message_id(&d),
            Err(not_utf8("header ce-source"))
        );
        let shown = not_utf8("header x-id").to_string();
        assert_eq!(
            shown,
            "header x-id is not valid UTF-8 (bytes m-\\xff\\x5c1)"
        );
    }
}
