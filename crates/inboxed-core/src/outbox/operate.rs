//! What an operator does with the outbox: look at its rows, and retry or discard the dead
//! ones, each change audited in the same transaction as the change itself (the record the
//! inbox's replays keep, `<prefix>redrive_audit`, with its `action`).

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::SystemTime;

/// A row's state in the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum OutboxStatus {
    /// Waiting for a relay (a retry's backoff included).
    Pending,
    /// Claimed by a relay, under its lease.
    Sending,
    /// The broker confirmed it.
    Sent,
    /// Refused for good or out of attempts: waits for an operator, and parks its ordering
    /// key's later rows.
    Dead,
}

impl OutboxStatus {
    /// The name stored in the `status` column.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Sent => "sent",
            Self::Dead => "dead",
        }
    }
}

impl std::fmt::Display for OutboxStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status name that is none of the four.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown outbox status {0:?} (pending, sending, sent, dead)")]
pub struct UnknownStatus(pub String);

impl FromStr for OutboxStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(Self::Pending),
            "sending" => Ok(Self::Sending),
            "sent" => Ok(Self::Sent),
            "dead" => Ok(Self::Dead),
            other => Err(UnknownStatus(other.to_owned())),
        }
    }
}

/// Which rows: every field narrows, `None` (or empty) leaves it open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxFilter {
    /// Only these row ids.
    pub ids: Vec<i64>,
    /// Only the row published under this id.
    pub message_id: Option<String>,
    /// Only rows in this state. Retry and discard take dead rows only, whatever this says.
    pub status: Option<OutboxStatus>,
    /// Only rows to this destination.
    pub destination: Option<String>,
    /// Only rows of this ordering key.
    pub ordering_key: Option<String>,
}

impl OutboxFilter {
    /// Every row.
    #[must_use]
    pub fn all() -> Self {
        Self::default()
    }

    /// Only the rows of `ids`.
    #[must_use]
    pub fn ids(ids: impl Into<Vec<i64>>) -> Self {
        Self {
            ids: ids.into(),
            ..Self::default()
        }
    }

    /// Sets [`OutboxFilter::status`].
    #[must_use]
    pub fn status(mut self, status: OutboxStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets [`OutboxFilter::destination`].
    #[must_use]
    pub fn destination(mut self, destination: impl Into<String>) -> Self {
        self.destination = Some(destination.into());
        self
    }

    /// Sets [`OutboxFilter::ordering_key`].
    #[must_use]
    pub fn ordering_key(mut self, key: impl Into<String>) -> Self {
        self.ordering_key = Some(key.into());
        self
    }

    /// Sets [`OutboxFilter::message_id`].
    #[must_use]
    pub fn message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// The id list bound to a statement: `None` for "any".
    pub(crate) fn id_list(&self) -> Option<&[i64]> {
        (!self.ids.is_empty()).then_some(self.ids.as_slice())
    }
}

/// How the audit trail records the filter: `destination="orders" ids=[3, 4]`, or `all`.
impl std::fmt::Display for OutboxFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (name, value) in [
            ("message_id", &self.message_id),
            ("destination", &self.destination),
            ("ordering_key", &self.ordering_key),
        ] {
            if let Some(v) = value {
                parts.push(format!("{name}={v:?}"));
            }
        }
        if let Some(status) = self.status {
            parts.push(format!("status={status}"));
        }
        if !self.ids.is_empty() {
            parts.push(format!("ids={:?}", self.ids));
        }
        if parts.is_empty() {
            f.write_str("all")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

/// Which rows [`OutboxStore::browse_outbox`](super::store::OutboxStore::browse_outbox) returns,
/// newest first: what an operator searches, bounded however large the table grows. Every
/// field narrows; `None` leaves it open.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct OutboxBrowse<'a> {
    /// In this state.
    pub status: Option<OutboxStatus>,
    /// To this destination.
    pub destination: Option<&'a str>,
    /// Of this ordering key.
    pub ordering_key: Option<&'a str>,
    /// Published under this id: a unique key, looked up wherever the row is (outside the
    /// window); the other fields still narrow it.
    pub message_id: Option<&'a str>,
    /// Written at or after.
    pub created_from: Option<SystemTime>,
    /// Whose payload contains these bytes.
    pub payload_contains: Option<&'a [u8]>,
    /// Whose payload is JSON with this value (compared as text) at this path of object keys
    /// joined by `.`, as [`RowFilter::payload_json`](crate::observe::RowFilter::payload_json).
    pub payload_json: Option<(&'a str, &'a str)>,
    /// At most this many. Defaults to 100.
    pub limit: u32,
    /// Only the newest this many ids are searched (unless `message_id` is given).
    /// Defaults to [`SEARCH_WINDOW`](crate::observe::SEARCH_WINDOW).
    pub window: u64,
}

impl Default for OutboxBrowse<'_> {
    fn default() -> Self {
        Self {
            status: None,
            destination: None,
            ordering_key: None,
            message_id: None,
            created_from: None,
            payload_contains: None,
            payload_json: None,
            limit: 100,
            window: crate::observe::SEARCH_WINDOW,
        }
    }
}

/// One outbox row as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxEntry {
    /// The row id: insert order.
    pub id: i64,
    /// The id it is published under.
    pub message_id: String,
    /// The logical route.
    pub destination: String,
    /// Its ordering key.
    pub ordering_key: Option<String>,
    /// Its type.
    pub message_type: Option<String>,
    /// Its correlation id.
    pub correlation_id: Option<String>,
    /// Its headers.
    pub headers: BTreeMap<String, String>,
    /// Its size in bytes.
    pub payload_bytes: u64,
    /// The body: loaded by [`OutboxStore::load_outbox`](super::store::OutboxStore::load_outbox)
    /// only, empty in a list.
    pub payload: Vec<u8>,
    /// Its state.
    pub status: OutboxStatus,
    /// Claims so far.
    pub attempts: u32,
    /// When it was written.
    pub created_at: Option<SystemTime>,
    /// Not claimed before this (a retry's backoff).
    pub available_at: Option<SystemTime>,
    /// When the broker confirmed it.
    pub sent_at: Option<SystemTime>,
    /// The broker's reason for the last failed publish.
    pub last_error: Option<String>,
    /// The relay that claimed it last.
    pub claimed_by: Option<String>,
    /// The consumer whose inbound message caused it.
    pub caused_by_consumer: Option<String>,
    /// The inbound message that caused it.
    pub caused_by_message_id: Option<String>,
}

/// What to do with dead rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadAction {
    /// Pending again, as new: attempts 0, no backoff, published by the next relay pass
    /// under the same id.
    Retry,
    /// Deleted: never published. A dead row with an ordering key parks the key's later
    /// rows; discarding it lets them go.
    Discard,
}

impl DeadAction {
    /// How the audit record names it.
    #[must_use]
    pub const fn audit_name(self) -> &'static str {
        match self {
            Self::Retry => "outbox retry",
            Self::Discard => "outbox discard",
        }
    }
}

/// Parameters of [`OutboxStore::act_on_dead`](super::store::OutboxStore::act_on_dead).
#[derive(Debug, Clone, Copy)]
pub struct DeadParams<'a> {
    /// Which dead rows (its `status` is ignored: only dead rows are touched).
    pub filter: &'a OutboxFilter,
    /// What to do.
    pub action: DeadAction,
    /// Who, for the audit record.
    pub actor: &'a str,
    /// Why, for the audit record.
    pub reason: &'a str,
    /// `false`: only find the rows (a dry run); nothing changes and nothing is audited.
    pub apply: bool,
}
