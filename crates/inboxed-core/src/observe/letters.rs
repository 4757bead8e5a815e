//! Dead letters as an operator handles them: listed with filters, shown in full, discarded or
//! retried by id. Rows of the store's dead-letter table; internal like the store traits.

use std::time::SystemTime;

/// Which dead letters [`ObserveStore::list_dead_letters`](super::ObserveStore::list_dead_letters)
/// returns. Every `None` matches anything.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeadLetterFilter<'a> {
    /// Of this consumer.
    pub consumer: Option<&'a str>,
    /// For this reason (`permanent`, `attempts_exhausted`, `conflict`, `invalid_message`).
    pub reason: Option<&'a str>,
    /// Failed last at or after this time.
    pub since: Option<SystemTime>,
    /// Whose error contains this text (case-insensitive).
    pub error_contains: Option<&'a str>,
    /// Of this message type (exactly).
    pub message_type: Option<&'a str>,
    /// With this message id.
    pub message_id: Option<&'a str>,
    /// Whose payload contains these bytes.
    pub payload_contains: Option<&'a [u8]>,
    /// Whose payload is JSON with this value (compared as text) at this path of object keys
    /// joined by `.`, as [`RowFilter::payload_json`](super::RowFilter::payload_json).
    pub payload_json: Option<(&'a str, &'a str)>,
    /// At most this many, newest failure first.
    pub limit: u32,
    /// Only the newest this many ids are searched (a list's bound on a big table); `None`:
    /// all. Actions ignore it: they count what they touch.
    pub window: Option<u64>,
}

/// One dead letter in a listing: everything but the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterSummary {
    /// The row id, for `show`, `retry` and `discard`.
    pub id: i64,
    /// The consumer.
    pub consumer: String,
    /// The message id; `None` for a delivery that had no usable one.
    pub message_id: Option<String>,
    /// Type metadata.
    pub message_type: Option<String>,
    /// Why it was dead-lettered.
    pub reason: String,
    /// Attempts made.
    pub attempts: i64,
    /// When it last failed.
    pub last_failed: Option<SystemTime>,
    /// Size of the kept payload (0 when redacted).
    pub payload_bytes: u64,
    /// The first 200 characters of the error chain.
    pub error: String,
}

/// One dead letter in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterRecord {
    /// The row id.
    pub id: i64,
    /// The consumer.
    pub consumer: String,
    /// The message id; `None` for a delivery that had no usable one.
    pub message_id: Option<String>,
    /// Type metadata.
    pub message_type: Option<String>,
    /// Correlation metadata.
    pub correlation_id: Option<String>,
    /// The raw payload (empty when it was redacted).
    pub payload: Vec<u8>,
    /// Why it was dead-lettered.
    pub reason: String,
    /// The whole error chain.
    pub error: String,
    /// Attempts made.
    pub attempts: i64,
    /// When it first failed.
    pub first_failed: Option<SystemTime>,
    /// When it last failed.
    pub last_failed: Option<SystemTime>,
}
