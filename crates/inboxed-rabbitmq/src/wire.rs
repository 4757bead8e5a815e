//! Reading the parts of an AMQP delivery a producer controls, leniently: every property, every
//! header name at any depth, the exchange and the routing key, with the rule lapin applies
//! (short strings are UTF-8), but noting what breaks the rule instead of failing on it.
//!
//! lapin fails the whole connection on one short string that is not UTF-8, and reconnecting
//! receives the same message first again: one producer outside Rust could stop a queue. The
//! [`screen`](crate::screen) runs this reader on each delivery before lapin sees it.

use std::fmt;

use amq_protocol::types::AMQPType;

use inboxed_core::escape_bytes;

/// One thing in a delivery that the client cannot read, with the bytes it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Flaw {
    /// The field: `message_id property`, `header x-id`, `a header name in headers`,
    /// `routing key`.
    pub(crate) field: String,
    /// What is wrong with it.
    pub(crate) what: String,
}

impl fmt::Display for Flaw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.what)
    }
}

/// A cursor over a frame's payload. Every read is bounds-checked: the bytes come from the
/// network.
pub(crate) struct Bytes<'a> {
    rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(rest: &'a [u8]) -> Self {
        Self { rest }
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(head)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| {
            let mut n = [0; 8];
            n.copy_from_slice(b);
            u64::from_be_bytes(n)
        })
    }

    /// A short string's bytes (length octet, then the bytes).
    pub(crate) fn short(&mut self) -> Option<&'a [u8]> {
        let len = self.u8()?;
        self.take(usize::from(len))
    }

    fn long(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u32()?).ok()?;
        self.take(len)
    }

    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }
}

/// A short string's bytes, checked the way the client checks them.
pub(crate) fn check_text(bytes: &[u8], field: impl FnOnce() -> String, flaws: &mut Vec<Flaw>) {
    if std::str::from_utf8(bytes).is_err() {
        flaws.push(Flaw {
            field: field(),
            what: format!("not valid UTF-8 (bytes {})", escape_bytes(bytes)),
        });
    }
}

/// The basic properties in flag order, with the type of each: what `basic.publish` lets a
/// producer set.
const PROPERTIES: [(&str, Kind); 14] = [
    ("content_type", Kind::Short),
    ("content_encoding", Kind::Short),
    ("headers", Kind::Table),
    ("delivery_mode", Kind::Octet),
    ("priority", Kind::Octet),
    ("correlation_id", Kind::Short),
    ("reply_to", Kind::Short),
    ("expiration", Kind::Short),
    ("message_id", Kind::Short),
    ("timestamp", Kind::Timestamp),
    ("type", Kind::Short),
    ("user_id", Kind::Short),
    ("app_id", Kind::Short),
    ("cluster_id", Kind::Short),
];

#[derive(Clone, Copy)]
enum Kind {
    Short,
    Table,
    Octet,
    Timestamp,
}

/// What the lenient reader found in a content header's properties.
#[derive(Debug, Default)]
pub(crate) struct Properties {
    /// Everything the client would fail on (empty when it reads them all).
    pub(crate) flaws: Vec<Flaw>,
    /// The `message_id` property's bytes, when it was there, to name the message in errors.
    pub(crate) message_id: Option<Vec<u8>>,
}

/// Reads `props` (the property flags and the property list of a content header) as the client
/// would, recording each flaw and going on past it where the length says where the next field
/// starts.
pub(crate) fn read_properties(props: &[u8]) -> Properties {
    let mut found = Properties::default();
    let mut at = Bytes::new(props);
    let Some(flags) = at.u16() else {
        found.flaws.push(truncated("property flags"));
        return found;
    };
    if flags & 1 != 0 {
        found.flaws.push(Flaw {
            field: "property flags".to_owned(),
            what: "the continuation bit is set (more than 15 properties), which the client \
                   cannot read"
                .to_owned(),
        });
        return found;
    }
    for (i, (name, kind)) in PROPERTIES.iter().enumerate() {
        if flags & (1 << (15 - i)) == 0 {
            continue;
        }
        let field = || format!("{name} property");
        let read = match kind {
            Kind::Short => at.short().map(|bytes| {
                check_text(bytes, field, &mut found.flaws);
                if *name == "message_id" {
                    found.message_id = Some(bytes.to_vec());
                }
            }),
            Kind::Table => at.long().map(|table| {
                read_table(table, "headers", &mut found.flaws);
            }),
            Kind::Octet => at.u8().map(drop),
            Kind::Timestamp => at.u64().map(drop),
        };
        if read.is_none() {
            found.flaws.push(truncated(&field()));
            return found;
        }
    }
    if at.remaining() > 0 {
        found.flaws.push(Flaw {
            field: "properties".to_owned(),
            what: format!("{} bytes past the last property flagged", at.remaining()),
        });
    }
    found
}

fn truncated(field: &str) -> Flaw {
    Flaw {
        field: field.to_owned(),
        what: "the frame ends inside it".to_owned(),
    }
}

/// Reads a field table's bytes (without their length): names must be UTF-8 and unique, and
/// values of a type the client knows. `path` names the table (`headers`, `header x-info`).
fn read_table(table: &[u8], path: &str, flaws: &mut Vec<Flaw>) {
    let mut at = Bytes::new(table);
    let mut names: Vec<&[u8]> = Vec::new();
    while at.remaining() > 0 {
        let Some(name) = at.short() else {
            flaws.push(truncated(&format!("a header name in {path}")));
            return;
        };
        let shown = String::from_utf8_lossy(name);
        let field = if path == "headers" {
            format!("header {shown}")
        } else {
            format!("{path}.{shown}")
        };
        if std::str::from_utf8(name).is_err() {
            flaws.push(Flaw {
                field: format!("a header name in {path}"),
                what: format!("not valid UTF-8 (bytes {})", escape_bytes(name)),
            });
        } else if names.contains(&name) {
            // The client keeps one of the two: a key read from it would be a guess.
            flaws.push(Flaw {
                field: field.clone(),
                what: "appears more than once".to_owned(),
            });
        }
        names.push(name);
        if !read_value(&mut at, &field, flaws) {
            return;
        }
    }
}

/// Reads one typed value; `false` when the rest of its table cannot be found after it.
fn read_value(at: &mut Bytes<'_>, field: &str, flaws: &mut Vec<Flaw>) -> bool {
    let Some(tag) = at.u8() else {
        flaws.push(truncated(field));
        return false;
    };
    let Some(kind) = AMQPType::from_id(char::from(tag)) else {
        flaws.push(Flaw {
            field: field.to_owned(),
            what: format!(
                "field type {} is one the client does not know",
                escape_bytes(&[tag])
            ),
        });
        return false;
    };
    let size = match kind {
        AMQPType::Void => Some(0),
        AMQPType::Boolean | AMQPType::ShortShortInt | AMQPType::ShortShortUInt => Some(1),
        AMQPType::ShortInt | AMQPType::ShortUInt => Some(2),
        AMQPType::LongInt | AMQPType::LongUInt | AMQPType::Float => Some(4),
        AMQPType::DecimalValue => Some(5),
        AMQPType::LongLongInt | AMQPType::LongLongUInt | AMQPType::Double | AMQPType::Timestamp => {
            Some(8)
        }
        AMQPType::ShortString => {
            return match at.short() {
                Some(bytes) => {
                    check_text(bytes, || field.to_owned(), flaws);
                    true
                }
                None => {
                    flaws.push(truncated(field));
                    false
                }
            };
        }
        AMQPType::LongString | AMQPType::ByteArray => None,
        AMQPType::FieldTable => {
            return match at.long() {
                Some(table) => {
                    read_table(table, field, flaws);
                    true
                }
                None => {
                    flaws.push(truncated(field));
                    false
                }
            };
        }
        AMQPType::FieldArray => {
            let Some(array) = at.long() else {
                flaws.push(truncated(field));
                return false;
            };
            let mut items = Bytes::new(array);
            let mut i = 0;
            while items.remaining() > 0 {
                if !read_value(&mut items, &format!("{field}[{i}]"), flaws) {
                    break;
                }
                i += 1;
            }
            return true;
        }
    };
    let read = match size {
        Some(n) => at.take(n).map(drop),
        None => at.long().map(drop),
    };
    if read.is_none() {
        flaws.push(truncated(field));
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Property flags and list for `message_id` and `headers`.
    fn props(message_id: &[u8], headers: &[u8]) -> Vec<u8> {
        let flags: u16 = (1 << 13) | (1 << 7);
        let mut out = flags.to_be_bytes().to_vec();
        out.extend_from_slice(&u32::try_from(headers.len()).unwrap().to_be_bytes());
        out.extend_from_slice(headers);
        out.push(u8::try_from(message_id.len()).unwrap());
        out.extend_from_slice(message_id);
        out
    }

    fn entry(name: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![u8::try_from(name.len()).unwrap()];
        out.extend_from_slice(name);
        out.push(tag);
        out.extend_from_slice(value);
        out
    }

    fn long(bytes: &[u8]) -> Vec<u8> {
        let mut out = u32::try_from(bytes.len()).unwrap().to_be_bytes().to_vec();
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn valid_properties_have_no_flaw() {
        let headers = [
            entry(b"x-id", b'S', &long(b"\xff raw bytes are fine here")),
            entry(b"n", b'I', &[0, 0, 0, 7]),
        ]
        .concat();
        let found = read_properties(&props(b"m-1", &headers));
        assert_eq!(found.flaws, []);
        assert_eq!(found.message_id.as_deref(), Some(&b"m-1"[..]));
    }

    #[test]
    fn each_flaw_names_its_field_and_keeps_its_bytes() {
        let nested = [entry(b"ok", b't', &[1]), entry(b"in\xfe", b'V', &[])].concat();
        let headers = [
            entry(b"k\xff", b'S', &long(b"v")),
            entry(b"dup", b'b', &[1]),
            entry(b"dup", b'b', &[2]),
            entry(b"x-info", b'F', &long(&nested)),
            entry(b"x-list", b'A', &long(&[b'F', 0, 0, 0, 0, b'?'])),
        ]
        .concat();
        let found = read_properties(&props(b"m-\xff", &headers));
        let shown: Vec<String> = found.flaws.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "a header name in headers: not valid UTF-8 (bytes k\\xff)",
                "header dup: appears more than once",
                "a header name in header x-info: not valid UTF-8 (bytes in\\xfe)",
                "header x-list[1]: field type ? is one the client does not know",
                "message_id property: not valid UTF-8 (bytes m-\\xff)",
            ]
        );
        assert_eq!(found.message_id.as_deref(), Some(&b"m-\xff"[..]));
    }

    #[test]
    fn a_truncated_list_and_trailing_bytes_are_flaws_too() {
        let mut cut = props(b"m-1", &[]);
        cut.truncate(cut.len() - 1);
        assert_eq!(
            read_properties(&cut).flaws[0].to_string(),
            "message_id property: the frame ends inside it"
        );
        let mut long_list = props(b"m-1", &[]);
        long_list.push(0);
        assert_eq!(
            read_properties(&long_list).flaws[0].to_string(),
            "properties: 1 bytes past the last property flagged"
        );
    }
}
