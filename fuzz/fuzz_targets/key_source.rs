//! Envelope construction from an adapter's raw parts, as every adapter does it: any property,
//! headers and body, under each key rule, yield a valid key or a typed error, never a panic.
#![no_main]

use std::borrow::Cow;

use arbitrary::Arbitrary;
use inboxed_core::{KeyCarrier, KeySource, envelope::MAX_MESSAGE_ID_BYTES};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Delivery {
    property: Option<Vec<u8>>,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    rule: u8,
    name: String,
}

impl KeyCarrier for Delivery {
    fn message_id_property(&self) -> Option<&[u8]> {
        self.property.as_deref()
    }
    fn header(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| Cow::Borrowed(v.as_slice()))
    }
    fn body(&self) -> &[u8] {
        &self.body
    }
}

fuzz_target!(|d: Delivery| {
    let rule = match d.rule % 4 {
        0 => KeySource::MessageIdProperty,
        1 => KeySource::Header(d.name.clone()),
        2 => KeySource::JsonField(format!("/{}", d.name)),
        _ => KeySource::CloudEvents,
    };
    if let Ok(envelope) = rule.envelope(&d) {
        let id = envelope.id().as_str();
        assert!(!id.is_empty() && id.len() <= MAX_MESSAGE_ID_BYTES && !id.contains('\0'));
        assert_eq!(
            envelope.payload(),
            d.body.as_slice(),
            "the body kept byte for byte"
        );
    }
});
