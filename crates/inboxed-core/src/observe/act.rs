//! An operator's changes to dead letters: retried into their consumer's store-then-process
//! inbox, or discarded, all that a filter selects (or the ids given) in one transaction with
//! the audit record, so that the console's "all that match" and the CLI's ids go through one
//! path and leave one kind of trace.

use super::DeadLetterFilter;

/// The most dead letters one action touches: an action on more is run again for the rest,
/// and says so. Bounds the transaction (its locks, and on SQLite the one write lock) however
/// many letters a filter matches.
pub const MOST_LETTERS_ACTED: u32 = 10_000;

/// What to do with dead letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LetterAction {
    /// Store each into the store-then-process inbox of its consumer, as pending, and delete the
    /// letter (one whose key the inbox holds already is kept, saying so):
    /// its consumer's workers process it again. For consumers that run workers; a letter of a
    /// consumer that reads a broker directly is sent back to the broker with `inboxed
    /// dead-letters retry --to-broker`.
    Retry,
    /// Delete for good: never processed.
    Discard,
}

impl LetterAction {
    /// How the audit record names it (`redrive_audit.action`).
    #[must_use]
    pub const fn audit_name(self) -> &'static str {
        match self {
            Self::Retry => "letter retry",
            Self::Discard => "letter discard",
        }
    }
}

/// Parameters of [`ObserveStore::act_on_dead_letters`](super::ObserveStore::act_on_dead_letters).
#[derive(Debug, Clone, Copy)]
pub struct LetterActParams<'a> {
    /// Which letters: its `limit` is the most touched, oldest first (capped at
    /// [`MOST_LETTERS_ACTED`]).
    pub filter: &'a DeadLetterFilter<'a>,
    /// Only these ids, besides the filter; `None`: any.
    pub ids: Option<&'a [i64]>,
    /// What to do.
    pub action: LetterAction,
    /// Who, for the audit record.
    pub actor: &'a str,
    /// Why, for the audit record.
    pub reason: &'a str,
    /// `false`: only find the letters and say what would happen to each (a dry run); nothing
    /// changes and nothing is audited.
    pub apply: bool,
}

/// Why a selected letter was left as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kept {
    /// It has no message id: it cannot be processed with dedup. Fix and republish it, or
    /// discard it.
    NoMessageId,
    /// Its message id or consumer name is not one the library accepts (often why it was
    /// dead-lettered); the text names which.
    Unusable(String),
    /// A conflict: its key was processed with another payload; retrying would conflict again.
    Conflict,
    /// Its payload was redacted: nothing to process.
    Redacted,
    /// The inbox holds its key with another payload (found only when applied).
    InboxHoldsAnother,
    /// The inbox holds its key with this payload already (done, or dead, or on its way; found
    /// only when applied): replay that row instead.
    AlreadyInInbox,
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoMessageId => f.write_str(
                "no message id, so it cannot be processed with dedup; fix and republish it, or discard it",
            ),
            Self::Unusable(e) => write!(f, "{e}"),
            Self::Conflict => f.write_str(
                "a conflict (the key was processed with another payload); retrying would only conflict again",
            ),
            Self::Redacted => f.write_str("its payload was redacted; nothing to retry"),
            Self::InboxHoldsAnother => {
                f.write_str("the inbox holds this key with another payload")
            }
            Self::AlreadyInInbox => f.write_str(
                "the inbox holds this message already; replay its row instead",
            ),
        }
    }
}

/// What an action did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LettersActed {
    /// Every letter the filter selected, oldest first, at most the limit.
    pub selected: Vec<i64>,
    /// The letters retried or discarded (in a dry run: those that would be, as far as can be
    /// told without writing).
    pub acted: Vec<i64>,
    /// For a retry, the inbox row each retried letter went to (`None` in a dry run).
    pub rows: Vec<(i64, Option<i64>)>,
    /// The letters left as they are, and why.
    pub kept: Vec<(i64, Kept)>,
}
