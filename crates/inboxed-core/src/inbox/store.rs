//! The store operations of the store-then-process inbox: the seam its backends implement,
//! internal in the same way as [`Store`](crate::Store).

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::driver::Driver;
use crate::engine::Engine;
use crate::envelope::{ConsumerName, Envelope};
use crate::error::StoreError;
use crate::hash::PayloadHash;

pub use super::guards::{Gate, GateRequest, Liveness, Subscription};
pub use super::outcomes::receipt_outcomes;
pub use super::replay::{ReplayParams, Replayed, Selector};

/// Milliseconds since the Unix epoch, the unit every inbox time parameter travels in.
#[must_use]
pub fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A duration in whole milliseconds, saturating.
#[must_use]
pub fn millis_of(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The random token of one claim. Completing or failing a row needs it, so a worker whose
/// lease was reaped (and the row claimed again by someone else) can do neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimToken([u8; 16]);

impl ClaimToken {
    /// A fresh random token.
    #[must_use]
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().into_bytes())
    }

    /// The bytes stored in `claim_token`.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

/// Parameters of [`InboxStore::enqueue`].
#[derive(Debug, Clone, Copy)]
pub struct EnqueueParams<'a> {
    /// The consumer that will process the row.
    pub consumer: &'a ConsumerName,
    /// The message, with its aggregate when ordering matters.
    pub envelope: &'a Envelope,
}

/// Parameters of [`InboxStore::enqueue_many`].
#[derive(Debug, Clone, Copy)]
pub struct EnqueueManyParams<'a> {
    /// The consumer that will process the rows.
    pub consumer: &'a ConsumerName,
    /// The messages in arrival order; a key may appear more than once.
    pub envelopes: &'a [Envelope],
}

/// What a receipt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Enqueued {
    /// Stored as a new pending row with this id.
    Stored {
        /// The row id (arrival order).
        id: i64,
    },
    /// The key was stored before with the same payload.
    Duplicate,
    /// The key was stored before with a different payload.
    Conflict {
        /// Hash of the stored payload.
        stored: PayloadHash,
        /// Hash of the payload received now.
        received: PayloadHash,
    },
}

/// Parameters of [`InboxStore::claim_batch`].
#[derive(Debug, Clone, Copy)]
pub struct ClaimBatchParams<'a> {
    /// Whose rows.
    pub consumer: &'a ConsumerName,
    /// Recorded in `claimed_by`, for operators.
    pub worker: &'a str,
    /// The token the claimed rows carry.
    pub token: &'a ClaimToken,
    /// At most this many rows.
    pub limit: u32,
    /// Lease length.
    pub lease: Duration,
    /// Injected clock; `None` uses the database's.
    pub now: Option<SystemTime>,
    /// Per-aggregate ordering.
    pub ordered: bool,
    /// In ordered mode, whether a dead row holds back the later rows of its aggregate.
    pub park: bool,
}

/// A claimed row.
#[derive(Debug, Clone)]
pub struct InboxRow {
    /// Row id, which is arrival order.
    pub id: i64,
    /// The stored message.
    pub envelope: Envelope,
    /// Claims of this row so far, this one included.
    pub attempts: u32,
    /// The most rows this row may run with, set when a claim holding it died (the row may be
    /// what killed its worker): half what that claim's process still held, or 1 if it held
    /// this row alone or the claim was lock-held. `None`: no claim of it died, no limit.
    pub group_limit: Option<u32>,
}

impl InboxRow {
    /// Rebuilds a claimed row from its columns. The message id was validated at receipt; one
    /// that fails now was written by something else, and is reported as a decode error.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the stored message id is not a valid key, or the headers
    /// column does not read.
    #[allow(
        clippy::too_many_arguments,
        reason = "one argument per column, in column order"
    )]
    pub fn from_columns(
        id: i64,
        message_id: String,
        aggregate_id: Option<String>,
        message_type: Option<String>,
        correlation_id: Option<String>,
        payload: Vec<u8>,
        attempts: i64,
        group_limit: Option<i64>,
        headers: Option<String>,
    ) -> Result<Self, StoreError> {
        let key = crate::envelope::MessageId::new(message_id)
            .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))?;
        let headers = crate::headers::Headers::from_stored(headers.as_deref())
            .map_err(|e| StoreError::Database(sqlx::Error::Decode(e.into())))?;
        let mut envelope = Envelope::new(key, payload).with_headers(headers);
        if let Some(a) = aggregate_id {
            envelope = envelope.with_aggregate(a);
        }
        if let Some(t) = message_type {
            envelope = envelope.with_type(t);
        }
        if let Some(c) = correlation_id {
            envelope = envelope.with_correlation_id(c);
        }
        Ok(Self {
            id,
            envelope,
            attempts: u32::try_from(attempts).unwrap_or(0),
            group_limit: group_limit.map(|n| u32::try_from(n).unwrap_or(1).max(1)),
        })
    }
}

/// Parameters of [`InboxStore::complete`].
#[derive(Debug, Clone, Copy)]
pub struct CompleteParams<'a> {
    /// The row.
    pub id: i64,
    /// The claim's token.
    pub token: &'a ClaimToken,
}

/// What completing a row found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Completed {
    /// Marked done in the caller's transaction.
    Done,
    /// The claim is no longer ours (reaped, perhaps claimed again): roll back.
    LostClaim,
}

/// Parameters of [`InboxStore::fail`].
#[derive(Debug, Clone, Copy)]
pub struct FailParams<'a> {
    /// The row.
    pub id: i64,
    /// The claim's token.
    pub token: &'a ClaimToken,
    /// The error chain, kept in `last_error`.
    pub error: &'a str,
    /// Delay before the row is available again.
    pub backoff: Duration,
    /// At this many attempts the row goes dead instead.
    pub max_attempts: u32,
    /// Dead at once, whatever the attempts.
    pub permanent: bool,
    /// Injected clock; `None` uses the database's.
    pub now: Option<SystemTime>,
}

/// Parameters of [`InboxStore::lock_batch`].
#[derive(Debug, Clone, Copy)]
pub struct LockBatchParams<'a> {
    /// Whose rows.
    pub consumer: &'a ConsumerName,
    /// At most this many rows.
    pub limit: u32,
    /// Injected clock; `None` uses the database's.
    pub now: Option<SystemTime>,
    /// Per-aggregate ordering.
    pub ordered: bool,
    /// In ordered mode, whether a dead row holds back the later rows of its aggregate.
    pub park: bool,
}

/// Where a row of a lock-held batch ends up.
#[derive(Debug, Clone)]
pub struct RowFate {
    /// The row.
    pub id: i64,
    /// Its message id, whose attempt counter is forgotten.
    pub message_id: String,
    /// `done`, `pending` (retry after `backoff`) or `dead`.
    pub status: &'static str,
    /// The error, for `pending` and `dead`.
    pub error: Option<String>,
    /// Delay before a `pending` row is available again.
    pub backoff: Duration,
    /// Attempts so far, this one included.
    pub attempts: u32,
}

/// What a failure did to the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failed {
    /// Back to pending after the backoff.
    Retrying,
    /// Dead, with its error.
    Dead,
    /// The claim is no longer ours; nothing recorded.
    LostClaim,
}

/// Parameters of [`InboxStore::release_stale`].
#[derive(Debug, Clone, Copy)]
pub struct ReleaseStaleParams<'a> {
    /// Rows at this many attempts go dead instead of pending.
    pub max_attempts: u32,
    /// At most this many rows per call.
    pub limit: u32,
    /// Injected clock; `None` uses the database's.
    pub now: Option<SystemTime>,
    /// Workers known dead ([`InboxStore::dead_workers`]): their rows are returned whatever
    /// their lease says.
    pub dead_workers: &'a [String],
}

/// Store-then-process operations. Implemented by the same backends as
/// [`Store`](crate::Store); internal in the same way (not meant to be implemented elsewhere,
/// may change in minor releases). The default bodies are the shared store layer's ([`crate::engine`]); an engine overrides only
/// where it truly differs (a set-based receipt, no row locks, a worker registry).
pub trait InboxStore: Engine {
    /// At most this many batches can usefully run at once on this store (SQLite: 1, its single
    /// writer). Workers cap their claim loops to it. `None`: no limit.
    fn max_concurrent_batches(&self) -> Option<usize> {
        None
    }

    /// Stores a received message as pending unless its key is there already (autocommit).
    fn enqueue(
        &self,
        params: &EnqueueParams<'_>,
    ) -> impl Future<Output = Result<Enqueued, StoreError>> + Send {
        crate::engine::claims::enqueue(self, params)
    }

    /// Stores many received messages in one transaction: each as pending unless its key is
    /// there already or earlier in the batch. One outcome per message, in order; the batch
    /// commits (or fails) as a whole. By default one statement a message.
    fn enqueue_many(
        &self,
        params: &EnqueueManyParams<'_>,
    ) -> impl Future<Output = Result<Vec<Enqueued>, StoreError>> + Send {
        crate::engine::claims::enqueue_each(self, params)
    }

    /// Claims pending rows in their own short transaction, counting an attempt on each.
    fn claim_batch(
        &self,
        params: &ClaimBatchParams<'_>,
    ) -> impl Future<Output = Result<Vec<InboxRow>, StoreError>> + Send {
        crate::engine::claims::claim_batch(self, params)
    }

    /// Marks a claimed row done inside the handler's transaction; fenced by the token.
    fn complete(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &CompleteParams<'_>,
    ) -> impl Future<Output = Result<Completed, StoreError>> + Send {
        crate::engine::inbox::complete(self, conn, params)
    }

    /// Marks every row of `ids` done inside the batch's transaction; fenced by the token.
    /// Returns the ids completed.
    fn complete_batch(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        ids: &[i64],
        token: &ClaimToken,
    ) -> impl Future<Output = Result<Vec<i64>, StoreError>> + Send {
        crate::engine::inbox::complete_batch(self, conn, ids, token)
    }

    /// Locks pending rows in the caller's transaction, held until it ends (lock-held mode).
    fn lock_batch(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &LockBatchParams<'_>,
    ) -> impl Future<Output = Result<Vec<InboxRow>, StoreError>> + Send {
        crate::engine::claims::lock_batch(self, conn, params)
    }

    /// Counts one more claim of each message in a transaction of its own (lock-held mode).
    /// Returns `(message_id, claims not yet settled)`.
    fn count_attempts(
        &self,
        consumer: &ConsumerName,
        message_ids: &[String],
    ) -> impl Future<Output = Result<Vec<(String, u32)>, StoreError>> + Send;

    /// Settles the rows of a lock-held batch in its transaction.
    fn finish_locked(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        consumer: &ConsumerName,
        fates: &[RowFate],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Records a failed attempt in its own transaction; fenced by the token.
    fn fail(
        &self,
        params: &FailParams<'_>,
    ) -> impl Future<Output = Result<Failed, StoreError>> + Send {
        crate::engine::inbox::fail(self, params)
    }

    /// Extends the lease of every row of `ids` still processing under `token`. Returns how
    /// many. The rows are found by id: PostgreSQL keeps no index of tokens (migration 19).
    fn extend_leases(
        &self,
        token: &ClaimToken,
        ids: &[i64],
        lease: Duration,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::inbox::extend_leases(self, token, ids, lease)
    }

    /// Hands back the rows of `ids` still processing under `token`, giving back their
    /// attempt: their handlers did not run (graceful shutdown, batch-mates of a suspect row, a
    /// row over its bucket's rate limit). Claimable again `after` from now, or as they were.
    fn release(
        &self,
        token: &ClaimToken,
        ids: &[i64],
        after: Duration,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::inbox::release_claimed(
            self,
            &self.queries().release,
            token,
            Some(ids),
            Some(after),
        )
    }

    /// The reaper: returns expired leases, and the rows of dead workers, to pending (or dead).
    /// Returns how many.
    fn release_stale(
        &self,
        params: &ReleaseStaleParams<'_>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Registers `worker` as alive for as long as the guard lives, so that the reaper can
    /// return its rows as soon as it dies instead of after their lease (PostgreSQL: a session
    /// advisory lock on a connection of its own). `None` where the store cannot tell a dead
    /// worker from a live one.
    fn hold_liveness(
        &self,
        worker: &str,
    ) -> impl Future<Output = Result<Option<Liveness>, StoreError>> + Send {
        let _ = worker;
        async { Ok(None) }
    }

    /// A place for one claim loop at the database's batch gate of `slots` slots, shared by
    /// every worker on the database, which lets at most `slots` batches run at once when more
    /// workers are registered than that (MySQL: named locks). `None` where the server serves
    /// many workers' batches at once well enough on its own (PostgreSQL: 16 default workers
    /// drained at 0.96 of one worker's rate; MariaDB 10.11 at 0.50 to 0.77).
    fn batch_gate(&self, slots: u32) -> Option<Gate> {
        let _ = slots;
        None
    }

    /// Registered workers that are no longer alive.
    fn dead_workers(&self) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Removes the registrations of `workers` that are not alive, once their rows are back.
    /// Returns how many.
    fn forget_workers(
        &self,
        workers: &[String],
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let _ = workers;
        async { Ok(0) }
    }

    /// Resets dead (and, when asked, done) rows to pending and writes the audit record, in one
    /// transaction.
    fn replay(
        &self,
        params: &ReplayParams<'_>,
    ) -> impl Future<Output = Result<Replayed, StoreError>> + Send {
        crate::engine::inbox::replay(self, params)
    }

    /// Wakes `consumer`'s idle workers in other processes (PostgreSQL `NOTIFY`, in a
    /// transaction of its own); nothing where the store has no notifications.
    fn notify(
        &self,
        consumer: &ConsumerName,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Listens for wake-ups of `consumer`'s workers sent by other processes (PostgreSQL
    /// `LISTEN`) and passes each to `wake`; `None` where the store has no notifications.
    fn subscribe(
        &self,
        consumer: &ConsumerName,
        wake: std::sync::Arc<tokio::sync::Notify>,
    ) -> impl Future<Output = Result<Option<Subscription>, StoreError>> + Send;

    /// The in-process wake-ups shared by the clones of this store, if it keeps them.
    fn local_wakers(&self) -> Option<&super::wake::LocalWakers> {
        None
    }

    /// Deletes at most `limit` done rows finished before `older_than`. Returns how many.
    fn purge_done(
        &self,
        older_than: SystemTime,
        limit: u32,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::inbox::purge_before(self, &self.queries().purge_done, older_than, limit)
    }
}
