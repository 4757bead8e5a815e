//! A delivery's headers, as the broker carried them, for the handler to read: a trace's
//! `traceparent`, a tenant, a schema version. Values are bytes, since a producer in any
//! language can put any bytes there; names are text.
//!
//! Headers are bounded ([`Headers::MAX_BYTES`] of names and values together): what a delivery
//! carries beyond the bound is left out of the envelope, named in a warning, and never fails the
//! message, whose key and payload are all that deduplication and the handler's transaction
//! depend on.

use std::borrow::Cow;

use crate::envelope::escape_bytes;

/// The headers of one message: names in the order the broker delivered them, each with its
/// value as received (numbers in decimal). A name may repeat (Kafka allows it); [`Headers::get`]
/// returns the first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, Vec<u8>)>);

impl Headers {
    /// The most bytes of names and values an envelope keeps: generous for trace context,
    /// tenants and versions, and small beside a payload, since store-then-process stores them
    /// with every row.
    pub const MAX_BYTES: usize = 16 * 1024;

    /// No headers.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a header (after any of the same name).
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.0.push((name.into(), value.into()));
        self
    }

    /// Keeps `headers` (names and values as received) in their order while they fit in
    /// [`Headers::MAX_BYTES`]; returns the names of those left out. A name that is not text
    /// (Kafka and Redis allow it) is written with [`escape_bytes`].
    pub fn bounded<'a>(
        headers: impl IntoIterator<Item = crate::key_source::RawHeader<'a>>,
    ) -> (Self, Vec<String>) {
        let (mut kept, mut left, mut size) = (Vec::new(), Vec::new(), 0);
        for (name, value) in headers {
            let name = match std::str::from_utf8(&name) {
                Ok(text) => Cow::Borrowed(text),
                Err(_) => Cow::Owned(escape_bytes(&name)),
            };
            let len = name.len() + value.len();
            if size + len > Self::MAX_BYTES {
                left.push(name.into_owned());
                continue;
            }
            size += len;
            kept.push((name.into_owned(), value.into_owned()));
        }
        (Self(kept), left)
    }

    /// The first value of `name`, as received. Names match exactly, then ignoring ASCII case
    /// (NATS and HTTP-minded producers change a name's case on the way).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .or_else(|| self.0.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)))
            .map(|(_, v)| v.as_slice())
    }

    /// The first value of `name` when it is UTF-8 text; `None` when absent or not text.
    #[must_use]
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// Every header, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// How many headers.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The form stored with an inbox row (the `headers` column, docs/inbox-contract.md): a
    /// JSON array of `[name, value]` pairs in order, the value a string when it is UTF-8
    /// without NUL (which PostgreSQL's text cannot hold), else `{"hex": "…"}`; `None` when
    /// there are no headers, so rows without any store nothing.
    #[must_use]
    pub fn to_stored(&self) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let pairs: Vec<serde_json::Value> = self
            .0
            .iter()
            .map(|(name, value)| {
                let value = match std::str::from_utf8(value) {
                    Ok(text) if !text.contains('\0') => serde_json::Value::from(text),
                    _ => serde_json::json!({ "hex": hex::encode(value) }),
                };
                serde_json::json!([name, value])
            })
            .collect();
        Some(serde_json::Value::Array(pairs).to_string())
    }

    /// Reads [`Headers::to_stored`]'s form back; `None` is no headers.
    ///
    /// # Errors
    /// A description of what does not read, for a column something else wrote.
    pub fn from_stored(stored: Option<&str>) -> Result<Self, String> {
        let Some(text) = stored else {
            return Ok(Self::new());
        };
        let pairs: Vec<(String, serde_json::Value)> =
            serde_json::from_str(text).map_err(|e| format!("headers column: {e}"))?;
        let mut headers = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let bytes = match value {
                serde_json::Value::String(text) => text.into_bytes(),
                serde_json::Value::Object(map) => match map.get("hex") {
                    Some(serde_json::Value::String(h)) => {
                        hex::decode(h).map_err(|e| format!("headers column, {name}: {e}"))?
                    }
                    _ => return Err(format!("headers column, {name}: neither text nor hex")),
                },
                _ => return Err(format!("headers column, {name}: neither text nor hex")),
            };
            headers.push((name, bytes));
        }
        Ok(Self(headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_past_the_bound_are_left_out_by_name_and_the_rest_kept_in_order() {
        let big = vec![b'x'; Headers::MAX_BYTES - 10];
        let (kept, left) = Headers::bounded([
            (
                Cow::Borrowed(&b"traceparent"[..]),
                Cow::Borrowed(&b"00-ab"[..]),
            ),
            (Cow::Borrowed(&b"big"[..]), Cow::Owned(big)),
            (Cow::Borrowed(&b"tenant"[..]), Cow::Borrowed(&b"acme"[..])),
            (Cow::Borrowed(&b"k\xff"[..]), Cow::Borrowed(&b"v"[..])),
        ]);
        assert_eq!(left, ["big"]);
        let names: Vec<&str> = kept.iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            ["traceparent", "tenant", "k\\xff"],
            "a name not text, escaped"
        );
        assert_eq!(
            kept.get_str("Tenant"),
            Some("acme"),
            "case-insensitive second"
        );
        assert_eq!(kept.get("absent"), None);
    }

    #[test]
    fn the_stored_form_reads_back_byte_for_byte() {
        let headers = Headers::new()
            .with("traceparent", "00-ab")
            .with("bin", vec![0xff, 0x00, b'a'])
            .with("nul", "a\0b")
            .with("bin", "again");
        let stored = headers.to_stored().expect("some headers");
        assert!(stored.contains(r#"["traceparent","00-ab"]"#), "{stored}");
        assert!(stored.contains(r#"{"hex":"ff0061"}"#), "{stored}");
        assert_eq!(Headers::from_stored(Some(&stored)), Ok(headers));
        assert_eq!(Headers::new().to_stored(), None);
        assert_eq!(Headers::from_stored(None), Ok(Headers::new()));
        assert!(Headers::from_stored(Some("[[\"a\", 1]]")).is_err());
    }

    #[test]
    fn a_value_that_is_not_text_is_kept_as_bytes() {
        let headers = Headers::new().with("bin", vec![0xff, 0x00, b'a']);
        assert_eq!(headers.get("bin"), Some(&[0xff, 0x00, b'a'][..]));
        assert_eq!(headers.get_str("bin"), None);
    }
}
