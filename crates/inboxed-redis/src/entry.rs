//! Stream entries read from Redis's replies as bytes.
//!
//! redis-rs decodes an entry's fields into a map keyed by `String`: one field name that is not
//! UTF-8 (any producer can `XADD` one; Redis keeps it byte for byte) failed the decoding of the
//! whole reply. The entries of that read were then pending for this consumer but never handed
//! out, and every `XAUTOCLAIM` that took them over failed the same way: one entry stalled
//! itself and every entry read with it, for ever. The map also kept one of two fields of the
//! same name. Entries are therefore read here from the raw reply, names and values as bytes, in
//! the order Redis gives them.

use redis::Value;

/// One stream entry: its id and its fields, in order, as Redis sent them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Entry {
    /// The value of field `name`, if the entry has it (the first, if it has it twice: the
    /// delivery refuses such an entry before reading a key from it).
    pub(crate) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The first field name given more than once, and how often.
    pub(crate) fn repeated(&self) -> Option<(&[u8], usize)> {
        self.fields.iter().find_map(|(name, _)| {
            let n = self
                .fields
                .iter()
                .filter(|(other, _)| other == name)
                .count();
            (n > 1).then_some((name.as_slice(), n))
        })
    }
}

/// Why a reply did not have the shape of a stream reply.
fn shape(what: &str) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected stream reply",
        what.to_owned(),
    ))
}

/// The items of an array reply (RESP2 and RESP3 alike).
fn items(value: Value, what: &str) -> redis::RedisResult<Vec<Value>> {
    match value {
        Value::Array(items) | Value::Set(items) => Ok(items),
        _ => Err(shape(what)),
    }
}

/// The bytes of a string or integer reply.
fn bytes(value: Value, what: &str) -> redis::RedisResult<Vec<u8>> {
    match value {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        Value::VerbatimString { text, .. } => Ok(text.into_bytes()),
        Value::Int(n) => Ok(n.to_string().into_bytes()),
        _ => Err(shape(what)),
    }
}

/// An entry: `[id, [name, value, …]]`; the fields are nil for an entry deleted since it was
/// delivered.
fn entry(value: Value) -> redis::RedisResult<Entry> {
    let mut parts = items(value, "an entry")?.into_iter();
    let id = bytes(
        parts.next().ok_or_else(|| shape("an entry's id"))?,
        "an entry's id",
    )?;
    let id = String::from_utf8(id).map_err(|_| shape("an entry id that is not text"))?;
    let fields = match parts.next() {
        None | Some(Value::Nil) => Vec::new(),
        Some(Value::Map(pairs)) => pairs
            .into_iter()
            .map(|(n, v)| Ok((bytes(n, "a field name")?, bytes(v, "a field value")?)))
            .collect::<redis::RedisResult<_>>()?,
        Some(list) => {
            let mut flat = items(list, "an entry's fields")?.into_iter();
            let mut fields = Vec::new();
            while let Some(name) = flat.next() {
                let value = flat
                    .next()
                    .ok_or_else(|| shape("a field without a value"))?;
                fields.push((bytes(name, "a field name")?, bytes(value, "a field value")?));
            }
            fields
        }
    };
    Ok(Entry { id, fields })
}

/// The entries of a list of entries (an `XCLAIM` reply).
pub(crate) fn entries(value: Value) -> redis::RedisResult<Vec<Entry>> {
    items(value, "a list of entries")?
        .into_iter()
        .map(entry)
        .collect()
}

/// The entries of an `XREADGROUP` reply: nil when nothing arrived within the block, else one
/// `[stream, entries]` per stream (a map of them in RESP3).
pub(crate) fn read_reply(value: Value) -> redis::RedisResult<Vec<Entry>> {
    let streams = match value {
        Value::Nil => return Ok(Vec::new()),
        Value::Map(pairs) => pairs.into_iter().map(|(_, e)| e).collect(),
        other => items(other, "a read reply")?
            .into_iter()
            .map(|stream| {
                let mut parts = items(stream, "a stream of a read reply")?.into_iter();
                parts
                    .nth(1)
                    .ok_or_else(|| shape("a stream without entries"))
            })
            .collect::<redis::RedisResult<Vec<_>>>()?,
    };
    let mut out = Vec::new();
    for list in streams {
        out.extend(entries(list)?);
    }
    Ok(out)
}

/// An `XAUTOCLAIM … JUSTID` reply: the cursor for the next call and the ids taken over.
pub(crate) fn claimed_ids(value: Value) -> redis::RedisResult<(String, Vec<String>)> {
    let mut parts = items(value, "a claim reply")?.into_iter();
    let text = |value, what| {
        String::from_utf8(bytes(value, what)?).map_err(|_| shape("an id that is not text"))
    };
    let cursor = text(
        parts.next().ok_or_else(|| shape("a claim cursor"))?,
        "a claim cursor",
    )?;
    let ids = items(
        parts.next().ok_or_else(|| shape("claimed ids"))?,
        "claimed ids",
    )?
    .into_iter()
    .map(|id| text(id, "a claimed id"))
    .collect::<redis::RedisResult<_>>()?;
    Ok((cursor, ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(b: &[u8]) -> Value {
        Value::BulkString(b.to_vec())
    }

    #[test]
    fn names_and_values_stay_bytes_and_repeats_are_kept() {
        let reply = Value::Array(vec![Value::Array(vec![
            bulk(b"orders"),
            Value::Array(vec![
                Value::Array(vec![
                    bulk(b"1-0"),
                    Value::Array(vec![
                        bulk(b"n\xff"),
                        bulk(b"v"),
                        bulk(b"message_id"),
                        bulk(b"m-\xff"),
                    ]),
                ]),
                Value::Array(vec![
                    bulk(b"2-0"),
                    Value::Array(vec![bulk(b"k"), bulk(b"a"), bulk(b"k"), Value::Int(7)]),
                ]),
                Value::Array(vec![bulk(b"3-0"), Value::Nil]),
            ]),
        ])]);
        let read = read_reply(reply).unwrap();
        assert_eq!(read[0].get(b"message_id"), Some(&b"m-\xff"[..]));
        assert_eq!(read[0].fields[0].0, b"n\xff");
        assert_eq!(read[0].repeated(), None);
        assert_eq!(read[1].repeated(), Some((&b"k"[..], 2)));
        assert_eq!(read[1].fields[1].1, b"7");
        assert_eq!(read[2].fields, []);
        assert_eq!(read_reply(Value::Nil).unwrap(), []);
    }

    #[test]
    fn claim_replies_give_their_cursor_ids_and_entries() {
        let reply = Value::Array(vec![
            bulk(b"0-0"),
            Value::Array(vec![bulk(b"5-1"), bulk(b"6-0")]),
            Value::Array(vec![]),
        ]);
        let (cursor, ids) = claimed_ids(reply).unwrap();
        assert_eq!(
            (cursor.as_str(), ids),
            ("0-0", vec!["5-1".to_owned(), "6-0".to_owned()])
        );
        let claimed = Value::Array(vec![Value::Array(vec![bulk(b"5-1"), Value::Array(vec![])])]);
        assert_eq!(entries(claimed).unwrap()[0].id, "5-1");
    }
}
