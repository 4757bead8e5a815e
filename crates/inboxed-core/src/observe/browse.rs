//! The store-then-process rows and the audit trail as an operator browses them: listed with
//! filters inside a bounded window, and one row in full.

use std::time::SystemTime;

/// How many of the newest row ids a search looks through at most, when it does not name a
/// consumer and a message id (a unique key): bounds what a filter that matches little reads,
/// however large the table grows.
pub const SEARCH_WINDOW: u64 = 100_000;

/// Which rows [`ObserveStore::list_rows`](super::ObserveStore::list_rows) returns. Every
/// `None` matches anything.
#[derive(Debug, Clone, Copy)]
pub struct RowFilter<'a> {
    /// Of this consumer.
    pub consumer: Option<&'a str>,
    /// In this status: `pending`, `processing`, `done` or `dead`.
    pub status: Option<&'a str>,
    /// Of this aggregate.
    pub aggregate_id: Option<&'a str>,
    /// With this message id.
    pub message_id: Option<&'a str>,
    /// Received at or after.
    pub received_from: Option<SystemTime>,
    /// Received before.
    pub received_before: Option<SystemTime>,
    /// Whose payload contains these bytes.
    pub payload_contains: Option<&'a [u8]>,
    /// Whose payload is JSON with this value (compared as text: `42`, `eur`, `true`) at this
    /// path of object keys joined by `.` (`order.id`); a payload that is not JSON never
    /// matches.
    pub payload_json: Option<(&'a str, &'a str)>,
    /// At most this many, newest first.
    pub limit: u32,
    /// Only the newest this many ids are searched (unless `consumer` and `message_id` are
    /// both given: a unique key, looked up wherever it is); [`SEARCH_WINDOW`] by default.
    pub window: u64,
}

impl RowFilter<'_> {
    /// Whether it names a consumer and a message id: a unique key, looked up wherever the row
    /// is, outside the window.
    #[must_use]
    pub fn is_keyed(&self) -> bool {
        self.consumer.is_some() && self.message_id.is_some()
    }
}

impl Default for RowFilter<'_> {
    fn default() -> Self {
        Self {
            consumer: None,
            status: None,
            aggregate_id: None,
            message_id: None,
            received_from: None,
            received_before: None,
            payload_contains: None,
            payload_json: None,
            limit: 100,
            window: SEARCH_WINDOW,
        }
    }
}

/// One store-then-process row.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InboxEntry {
    /// The row id: arrival order.
    pub id: i64,
    /// The consumer.
    pub consumer: String,
    /// The producer's message id.
    pub message_id: String,
    /// Its aggregate, for ordered workers.
    pub aggregate_id: Option<String>,
    /// Type metadata.
    pub message_type: Option<String>,
    /// `pending`, `processing`, `done` or `dead`.
    pub status: String,
    /// Claims so far.
    pub attempts: i64,
    /// When it was stored.
    pub received: Option<SystemTime>,
    /// Not claimed before this (a retry's backoff).
    pub available: Option<SystemTime>,
    /// When the current claim's lease runs out.
    pub lease_expires: Option<SystemTime>,
    /// The worker that claimed it last.
    pub claimed_by: Option<String>,
    /// The last failure (the first 200 characters in a list).
    pub last_error: Option<String>,
    /// When it was done.
    pub done: Option<SystemTime>,
    /// The payload's size.
    pub payload_bytes: u64,
    /// Correlation metadata (loaded with the row only).
    pub correlation_id: Option<String>,
    /// The payload (loaded with the row only; empty in a list).
    pub payload: Vec<u8>,
}

/// One record of the audit trail: a replay or re-drive, or an operator's action on dead
/// letters or outbox rows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditRecord {
    /// Its id: the order they were written.
    pub id: i64,
    /// When.
    pub at: Option<SystemTime>,
    /// Who.
    pub actor: String,
    /// Why, as they said.
    pub reason: String,
    /// What: `replay`, `letter retry`, `letter discard`, `outbox retry`, `outbox discard`.
    pub action: String,
    /// Whose rows (empty for the outbox, or letters of several consumers).
    pub consumer: String,
    /// The filter or selector, as given.
    pub selector: String,
    /// How many rows it touched.
    pub rows: i64,
    /// How many of them had been done (a re-drive).
    pub done_rows: i64,
    /// The ids it touched (the first 400 characters of the list).
    pub ids: String,
}
