//! What an operator's view reads: each consumer's store-then-process backlog and its dead
//! letters, for `inboxed serve`'s gauges and health check and for `inboxed stats`, and the
//! dead letters themselves, for `inboxed dead-letters`.

use std::future::Future;
use std::time::{Duration, SystemTime};

use crate::engine::Engine;
use crate::error::StoreError;

mod act;
mod browse;
mod letters;
pub mod rows;

pub use act::{Kept, LetterActParams, LetterAction, LettersActed, MOST_LETTERS_ACTED};
pub use browse::{AuditRecord, InboxEntry, RowFilter, SEARCH_WINDOW};
pub use letters::{DeadLetterFilter, DeadLetterRecord, DeadLetterSummary};

/// One consumer's store-then-process rows that are not done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Backlog {
    /// The consumer.
    pub consumer: String,
    /// Rows waiting for a worker (retries in their backoff included).
    pub pending: u64,
    /// Rows claimed by a worker now.
    pub processing: u64,
    /// Rows that went dead: parked, waiting for an operator's replay.
    pub dead: u64,
    /// When the oldest pending row ready to be claimed was received (rows waiting out a retry
    /// backoff left out): its age is how far behind the workers are.
    pub oldest_pending: Option<SystemTime>,
    /// Claimed rows whose lease has already expired: their worker died, and no reaper has
    /// returned them yet (one stuck above zero means no reaper runs).
    pub expired_leases: u64,
    /// The soonest lease expiry of the claimed rows: a worker that stops heartbeating loses
    /// its claims then. In the past while `expired_leases` is above zero.
    pub next_lease_expiry: Option<SystemTime>,
    /// Aggregates with a dead row. Ordered workers park such an aggregate's later rows behind
    /// it until an operator replays or discards it (unless they skip dead events).
    pub parked_aggregates: u64,
}

impl Backlog {
    /// A backlog from the observation query's columns (times in milliseconds since the epoch).
    #[must_use]
    pub fn from_columns(
        consumer: String,
        [pending, processing, dead, expired_leases, parked_aggregates]: [i64; 5],
        [oldest_pending_ms, next_lease_expiry_ms]: [Option<i64>; 2],
    ) -> Self {
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Self {
            consumer,
            pending: n(pending),
            processing: n(processing),
            dead: n(dead),
            oldest_pending: from_millis(oldest_pending_ms),
            expired_leases: n(expired_leases),
            next_lease_expiry: from_millis(next_lease_expiry_ms),
            parked_aggregates: n(parked_aggregates),
        }
    }

    /// Age of the oldest pending row at `now` (zero without one).
    #[must_use]
    pub fn oldest_pending_age(&self, now: SystemTime) -> Duration {
        self.oldest_pending
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    }
}

/// Dead letters of one consumer for one reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetterCount {
    /// The consumer.
    pub consumer: String,
    /// `permanent`, `attempts_exhausted`, `conflict` or `invalid_message`.
    pub reason: String,
    /// How many are kept.
    pub count: u64,
    /// When the most recent one last failed.
    pub newest: Option<SystemTime>,
}

impl DeadLetterCount {
    /// A count from the observation query's columns (time in milliseconds since the epoch).
    #[must_use]
    pub fn from_columns(
        consumer: String,
        reason: String,
        count: i64,
        newest_ms: Option<i64>,
    ) -> Self {
        Self {
            consumer,
            reason,
            count: u64::try_from(count).unwrap_or(0),
            newest: from_millis(newest_ms),
        }
    }
}

/// The outbox's rows to one destination that are not sent yet, and the pace of those sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxBacklog {
    /// The destination.
    pub destination: String,
    /// Rows waiting for a relay (retries in their backoff included).
    pub pending: u64,
    /// Rows a relay has claimed and not settled yet.
    pub sending: u64,
    /// Rows refused for good or out of attempts, waiting for an operator; each parks its
    /// ordering key's later rows.
    pub dead: u64,
    /// When the oldest row not yet confirmed (pending or sending) was written: its age is how
    /// far behind the relays are.
    pub oldest_unsent: Option<SystemTime>,
    /// Claimed rows whose lease has expired: their relay died, and no relay's pass has
    /// returned them yet.
    pub expired_leases: u64,
    /// Rows the broker confirmed in the last minute.
    pub sent_last_minute: u64,
}

impl OutboxBacklog {
    /// A backlog from the observation query's columns (time in milliseconds since the epoch).
    #[must_use]
    pub fn from_columns(
        destination: String,
        [pending, sending, dead, expired_leases, sent_last_minute]: [i64; 5],
        oldest_unsent_ms: Option<i64>,
    ) -> Self {
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Self {
            destination,
            pending: n(pending),
            sending: n(sending),
            dead: n(dead),
            oldest_unsent: from_millis(oldest_unsent_ms),
            expired_leases: n(expired_leases),
            sent_last_minute: n(sent_last_minute),
        }
    }

    /// Age of the oldest unsent row at `now` (zero without one).
    #[must_use]
    pub fn oldest_unsent_age(&self, now: SystemTime) -> Duration {
        self.oldest_unsent
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    }
}

/// One consumer's kill switches that are open ([`KillSwitch`](crate::KillSwitch)), as their
/// consumers and workers report them while they run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenSwitches {
    /// The consumer.
    pub consumer: String,
    /// How many switches are open: one per process (or per switch value) that reported one.
    pub open: u64,
    /// When the first of them opened.
    pub opened_at: Option<SystemTime>,
    /// When the next probe of any of them goes.
    pub next_probe: Option<SystemTime>,
    /// When a process last said one is still open (every 30 s while it is); switches not
    /// heard of for 3 minutes are left out.
    pub seen_at: Option<SystemTime>,
}

impl OpenSwitches {
    /// The switches from the observation query's columns (times in milliseconds since the
    /// epoch).
    #[must_use]
    pub fn from_columns(
        consumer: String,
        open: i64,
        [opened_at, next_probe, seen_at]: [Option<i64>; 3],
    ) -> Self {
        Self {
            consumer,
            open: u64::try_from(open).unwrap_or(0),
            opened_at: from_millis(opened_at),
            next_probe: from_millis(next_probe),
            seen_at: from_millis(seen_at),
        }
    }
}

/// Everything [`ObserveStore::observe`] reads, in one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Observation {
    /// Per consumer with rows not done.
    pub backlog: Vec<Backlog>,
    /// Per consumer and reason with dead letters.
    pub dead_letters: Vec<DeadLetterCount>,
    /// Per outbox destination with rows unsent, dead, or sent in the last minute.
    pub outbox: Vec<OutboxBacklog>,
    /// Per consumer with a kill switch open.
    pub switches: Vec<OpenSwitches>,
}

impl Observation {
    /// An observation of these rows.
    #[must_use]
    pub fn new(backlog: Vec<Backlog>, dead_letters: Vec<DeadLetterCount>) -> Self {
        Self {
            backlog,
            dead_letters,
            outbox: Vec::new(),
            switches: Vec::new(),
        }
    }

    /// The same, with the consumers whose kill switches are open.
    #[must_use]
    pub fn with_switches(mut self, switches: Vec<OpenSwitches>) -> Self {
        self.switches = switches;
        self
    }

    /// The same, with the outbox's backlog.
    #[must_use]
    pub fn with_outbox(mut self, outbox: Vec<OutboxBacklog>) -> Self {
        self.outbox = outbox;
        self
    }
}

/// The store operation behind the operator's view. Each backend reads only rows that are not
/// done, through the partial indexes that serve them, so its cost follows the backlog rather
/// than the table.
pub trait ObserveStore: Engine {
    /// The backlog of every consumer, the dead letters kept, and the outbox's backlog.
    fn observe(&self) -> impl Future<Output = Result<Observation, StoreError>> + Send {
        crate::engine::observe::observe(self)
    }

    /// Migration versions this build has that the database has not applied yet (all of them
    /// before the first `migrate`). Applies nothing.
    ///
    /// # Errors
    /// A store failure, or [`StoreError::MigrationChanged`] / [`StoreError::MigrationUnknown`]
    /// when the database's migrations differ from this build's.
    fn pending_migrations(&self) -> impl Future<Output = Result<Vec<i64>, StoreError>> + Send {
        crate::engine::migrate::pending(self, self.namespace(), self.migrations())
    }

    /// Dead letters matching `filter`, newest failure first, without their payloads.
    fn list_dead_letters(
        &self,
        filter: &DeadLetterFilter<'_>,
    ) -> impl Future<Output = Result<Vec<DeadLetterSummary>, StoreError>> + Send {
        crate::engine::observe::list_dead_letters(self, filter)
    }

    /// One dead letter in full, payload included; `None` when there is no such id.
    fn dead_letter_by_id(
        &self,
        id: i64,
    ) -> impl Future<Output = Result<Option<DeadLetterRecord>, StoreError>> + Send {
        crate::engine::observe::dead_letter_by_id(self, id)
    }

    /// Deletes one dead letter; whether it was there.
    fn delete_dead_letter_by_id(
        &self,
        id: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        crate::engine::observe::delete_dead_letter_by_id(self, id)
    }

    /// Retries (into the consumer's store-then-process inbox) or discards the dead letters
    /// selected, with the audit record, in one transaction; or, with `apply` false, says what
    /// would happen to each.
    fn act_on_dead_letters(
        &self,
        params: &LetterActParams<'_>,
    ) -> impl Future<Output = Result<LettersActed, StoreError>> + Send {
        crate::engine::operate::act_on_dead_letters(self, params)
    }

    /// Store-then-process rows matching `filter`, newest first, without their payloads.
    fn list_rows(
        &self,
        filter: &RowFilter<'_>,
    ) -> impl Future<Output = Result<Vec<InboxEntry>, StoreError>> + Send {
        crate::engine::operate::list_rows(self, filter)
    }

    /// One store-then-process row in full; `None` when there is no such id.
    fn row_by_id(
        &self,
        id: i64,
    ) -> impl Future<Output = Result<Option<InboxEntry>, StoreError>> + Send {
        crate::engine::operate::load_row(self, id)
    }

    /// The newest records of the audit trail (replays, re-drives, operators' actions on dead
    /// letters and outbox rows), of one consumer or all.
    fn audit_trail(
        &self,
        consumer: Option<&str>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<AuditRecord>, StoreError>> + Send {
        crate::engine::operate::list_audit(self, consumer, limit)
    }
}

/// A time from milliseconds since the Unix epoch, as the observation queries return them.
#[must_use]
pub fn from_millis(ms: Option<i64>) -> Option<SystemTime> {
    let ms = u64::try_from(ms?).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}
