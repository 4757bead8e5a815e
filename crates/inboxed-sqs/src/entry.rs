//! A claimed outbox row as an SQS batch entry: what SQS can carry (XML's characters, its
//! rules for attribute names and group ids, ten attributes), checked before the call so that a
//! row SQS would refuse is dead naming its field instead of failing the batch it is in.

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use tracing::warn;

use inboxed_core::outbox::{CORRELATION_HEADER, OutboxRow, TYPE_HEADER};
use inboxed_core::trace::{BAGGAGE, TRACEPARENT, TRACESTATE};

/// The attribute holding the outbox id: the one the consumer side reads by default.
const ID_ATTRIBUTE: &str = "message_id";
/// SQS's limits: attributes a message, characters of a group or deduplication id.
const ATTRIBUTES: usize = 10;
const GROUP_ID_CHARS: usize = 128;

/// Whether SQS takes `c` in a message body or a string attribute (XML's characters).
fn sqs_char(c: char) -> bool {
    matches!(c, '\u{9}' | '\u{a}' | '\u{d}' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

/// `text` as SQS can carry it, or why not, naming `field`.
fn sqs_text<'a>(text: &'a str, field: &str) -> Result<&'a str, String> {
    match text.char_indices().find(|(_, c)| !sqs_char(*c)) {
        Some((at, c)) => Err(format!(
            "{field}: character {c:?} at byte {at} is one SQS does not carry"
        )),
        None => Ok(text),
    }
}

/// SQS's rule for attribute names: up to 256 of `[A-Za-z0-9_.-]`, no leading or trailing
/// `.`, no `..`, no `AWS.` or `Amazon.` prefix (any case).
fn legal_attribute_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
        && !lower.starts_with("aws.")
        && !lower.starts_with("amazon.")
}

/// SQS's rule for group and deduplication ids: 1 to 128 visible ASCII characters.
fn legal_group_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= GROUP_ID_CHARS && id.bytes().all(|b| b.is_ascii_graphic())
}

/// The batch entry of `row` (entry id `at`, its place in the batch) and its size as SQS counts
/// it, or why SQS cannot take it, naming the field.
pub(crate) fn entry(
    row: &OutboxRow,
    fifo: bool,
    max_bytes: usize,
    at: usize,
) -> Result<(SendMessageBatchRequestEntry, usize), String> {
    let body = std::str::from_utf8(&row.payload).map_err(|e| {
        format!(
            "payload: not UTF-8 (at byte {}): an SQS body is text",
            e.valid_up_to()
        )
    })?;
    let body = sqs_text(body, "payload")?;
    let mut attributes: Vec<(&str, &str, &str)> =
        vec![(ID_ATTRIBUTE, &row.message_id, "message_id")];
    if let Some(kind) = &row.message_type {
        attributes.push((TYPE_HEADER, kind, "message_type"));
    }
    if let Some(id) = &row.correlation_id {
        attributes.push((CORRELATION_HEADER, id, "correlation_id"));
    }
    // The trace context rides in what attributes are left: a message the caller could send
    // before turning tracing on still goes, its trace cut short (baggage first), and a
    // warning says so.
    let is_trace = |name: &str| [TRACEPARENT, TRACESTATE, BAGGAGE].contains(&name);
    let (trace, own): (Vec<_>, Vec<_>) = row.headers.iter().partition(|(n, _)| is_trace(n));
    for (name, value) in own {
        if attributes.iter().any(|(n, _, _)| n == name) {
            return Err(format!(
                "headers: header {name:?} is an attribute the publisher sets itself"
            ));
        }
        if !legal_attribute_name(name) {
            return Err(format!(
                "headers: header name {name:?} is not an SQS attribute name (up to 256 of \
                 A-Z a-z 0-9 _ . -, no AWS. or Amazon. prefix)"
            ));
        }
        attributes.push((name, value, "headers"));
    }
    let room = ATTRIBUTES.saturating_sub(attributes.len());
    let mut trace: Vec<_> = trace.into_iter().collect();
    // traceparent, tracestate, baggage: what is cut is the least needed.
    trace.sort_by_key(|(name, _)| {
        [TRACEPARENT, TRACESTATE, BAGGAGE]
            .iter()
            .position(|t| t == name)
    });
    if trace.len() > room {
        let left: Vec<&str> = trace[room..].iter().map(|(n, _)| n.as_str()).collect();
        warn!(
            message_id = %row.message_id,
            ?left,
            "SQS carries {ATTRIBUTES} message attributes: trace context left out"
        );
        trace.truncate(room);
    }
    for (name, value) in trace {
        attributes.push((name, value, "headers"));
    }
    if attributes.len() > ATTRIBUTES {
        return Err(format!(
            "headers: {} message attributes, more than SQS's {ATTRIBUTES} (message_id, type and \
             correlation id count)",
            attributes.len()
        ));
    }
    let mut size = body.len();
    let mut entry = SendMessageBatchRequestEntry::builder()
        .id(at.to_string())
        .message_body(body);
    for (name, value, field) in attributes {
        if value.is_empty() {
            return Err(format!(
                "{field}: attribute {name:?} is empty, which SQS refuses"
            ));
        }
        let value = sqs_text(value, field)?;
        size += name.len() + "String".len() + value.len();
        entry = entry.message_attributes(
            name,
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .map_err(|e| format!("{field}: {e}"))?,
        );
    }
    if size > max_bytes {
        return Err(format!(
            "payload: the message is {size} bytes with its attributes, more than \
             max_message_bytes ({max_bytes})"
        ));
    }
    if fifo {
        let group = row.ordering_key.as_deref().unwrap_or(&row.message_id);
        if !legal_group_id(group) {
            return Err(format!(
                "ordering_key: {group:?} is not an SQS MessageGroupId (1 to 128 visible ASCII \
                 characters)"
            ));
        }
        entry = entry
            .message_group_id(group)
            .message_deduplication_id(&row.message_id);
    }
    entry
        .build()
        .map(|e| (e, size))
        .map_err(|e| format!("message: {e}"))
}
