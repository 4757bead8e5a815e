//! What a replay asks of the store: which rows to reset ([`Selector`]), who asks and why
//! (the audit record), and what it reset.

use std::time::SystemTime;

use crate::envelope::ConsumerName;

/// Which rows a replay resets. Fields combine with AND; `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Selector {
    /// These row ids only.
    pub ids: Option<Vec<i64>>,
    /// This aggregate only.
    pub aggregate_id: Option<String>,
    /// Received at or after.
    pub received_from: Option<SystemTime>,
    /// Received before.
    pub received_before: Option<SystemTime>,
}

impl Selector {
    /// Every row the statuses allow.
    #[must_use]
    pub fn all() -> Self {
        Self::default()
    }

    /// These row ids.
    #[must_use]
    pub fn ids(ids: impl Into<Vec<i64>>) -> Self {
        Self {
            ids: Some(ids.into()),
            ..Self::default()
        }
    }

    /// One aggregate.
    #[must_use]
    pub fn aggregate(aggregate_id: impl Into<String>) -> Self {
        Self {
            aggregate_id: Some(aggregate_id.into()),
            ..Self::default()
        }
    }

    /// Received in `[from, before)`.
    #[must_use]
    pub fn received_between(from: SystemTime, before: SystemTime) -> Self {
        Self {
            received_from: Some(from),
            received_before: Some(before),
            ..Self::default()
        }
    }
}

/// As the audit record keeps it: each part given, by name (`ids=[3, 4] aggregate="acct-1"`),
/// or `all`.
impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(ids) = &self.ids {
            parts.push(format!("ids={ids:?}"));
        }
        if let Some(a) = &self.aggregate_id {
            parts.push(format!("aggregate={a:?}"));
        }
        if let Some(t) = self.received_from {
            parts.push(format!(
                "received_from_ms={}",
                crate::inbox::store::millis(t)
            ));
        }
        if let Some(t) = self.received_before {
            parts.push(format!(
                "received_before_ms={}",
                crate::inbox::store::millis(t)
            ));
        }
        if parts.is_empty() {
            f.write_str("all")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

/// Parameters of [`InboxStore::replay`](super::store::InboxStore::replay).
#[derive(Debug, Clone, Copy)]
pub struct ReplayParams<'a> {
    /// Whose rows.
    pub consumer: &'a ConsumerName,
    /// Which rows.
    pub selector: &'a Selector,
    /// Also reset done rows: a re-drive, which applies their effect again.
    pub include_done: bool,
    /// Who asks, for the audit record.
    pub actor: &'a str,
    /// Why, for the audit record.
    pub reason: &'a str,
    /// `false`: only find the rows (a preview); nothing changes and nothing is audited.
    pub apply: bool,
}

/// What a replay reset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replayed {
    /// Row ids reset to pending, in order.
    pub ids: Vec<i64>,
    /// How many of them had been done.
    pub done_rows: u64,
}
