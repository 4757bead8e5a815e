//! The outbox's store operations, implemented by each engine on the shared store layer
//! ([`crate::engine::outbox`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, SystemTime};

use super::OutgoingMessage;
use super::operate::{DeadParams, OutboxBrowse, OutboxEntry, OutboxFilter};
use crate::driver::Driver;
use crate::engine::Engine;
use crate::envelope::{ConsumerName, MessageId};
use crate::error::StoreError;
/// The claim token and a failed row's parameters and outcome are the inbox's: the outbox's
/// rows are claimed and marked by the same protocol.
pub use crate::inbox::store::{ClaimToken, FailParams, Failed};
use crate::trace::TraceContext;

/// What [`OutboxStore::write_outbox`] writes.
#[derive(Debug, Clone, Copy)]
pub struct WriteParams<'a> {
    /// The id the message is published under.
    pub message_id: &'a MessageId,
    /// The message, validated.
    pub message: &'a OutgoingMessage,
    /// The consumer whose inbound message caused it, when known.
    pub caused_by_consumer: Option<&'a ConsumerName>,
    /// The inbound message that caused it, when there is one.
    pub caused_by_message_id: Option<&'a str>,
    /// Wake idle relays at the commit (PostgreSQL's NOTIFY); see [`Outbox::quiet`](super::Outbox::quiet).
    pub notify: bool,
    /// The trace context the message is sent under, captured at the write.
    pub trace: Option<&'a TraceContext>,
}

impl WriteParams<'_> {
    /// The `headers` column's JSON object: the message's headers and its trace context's.
    #[must_use]
    pub fn headers_json(&self) -> String {
        self.message.headers_json(self.trace)
    }
}

/// A claimed outbox row, as a relay publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    /// The row id: insert order.
    pub id: i64,
    /// The id the message is published under.
    pub message_id: String,
    /// The logical route.
    pub destination: String,
    /// Rows of one key are claimed one at a time, in insert order.
    pub ordering_key: Option<String>,
    /// The message's type.
    pub message_type: Option<String>,
    /// The correlation id.
    pub correlation_id: Option<String>,
    /// The headers, by name.
    pub headers: BTreeMap<String, String>,
    /// The body, exactly as written.
    pub payload: Vec<u8>,
    /// Claims so far, this one included.
    pub attempts: u32,
    /// The consumer whose inbound message caused it.
    pub caused_by_consumer: Option<String>,
    /// The inbound message that caused it.
    pub caused_by_message_id: Option<String>,
    /// The most rows this row may be published with: it was in a batch whose relay died, and
    /// may not be the cause (`outbox_release_stale.sql`); `None`: no limit.
    pub group_limit: Option<u32>,
}

/// Parameters of [`OutboxStore::claim_outbox`].
#[derive(Debug, Clone, Copy)]
pub struct ClaimOutboxParams<'a> {
    /// The relay claiming (stored as `claimed_by`).
    pub relay: &'a str,
    /// The claim's token, which marking the rows sent or failed needs.
    pub token: &'a ClaimToken,
    /// The most rows.
    pub limit: u32,
    /// How long the claim holds before another relay may take the rows again.
    pub lease: Duration,
    /// The clock (tests); `None`: the database's.
    pub now: Option<SystemTime>,
}

/// Parameters of [`OutboxStore::lock_outbox`].
#[derive(Debug, Clone, Copy)]
pub struct LockOutboxParams {
    /// The most rows.
    pub limit: u32,
    /// The batch's transaction-level lock: held while the batch is live, it tells the reaper
    /// that the batch's record is not a crash's.
    pub lock_key: i64,
    /// The clock (tests); `None`: the database's.
    pub now: Option<SystemTime>,
}

/// What became of a row of a lock-held batch, marked by [`OutboxStore::mark_outbox`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxFate {
    /// The row.
    pub id: i64,
    /// `sent`, `pending` (retried after `backoff`) or `dead`.
    pub status: &'static str,
    /// The broker's reason, for a failed row.
    pub error: Option<String>,
    /// Before a retried row is tried again.
    pub backoff: Duration,
    /// Claims so far, this one included.
    pub attempts: u32,
}

/// Parameters of [`OutboxStore::mark_outbox`].
#[derive(Debug, Clone, Copy)]
pub struct MarkParams<'a> {
    /// The batch's record ([`OutboxStore::hold_outbox`]), deleted with the mark.
    pub token: &'a ClaimToken,
    /// The rows published or failed; rows not named (not sent) are left as they were.
    pub fates: &'a [OutboxFate],
    /// Delete sent rows instead of marking them (a relay that keeps none).
    pub delete_sent: bool,
    /// The relay, written to the rows' `claimed_by`.
    pub relay: &'a str,
}

/// The outbox's operations on an engine.
pub trait OutboxStore: Engine {
    /// Inserts one outgoing message through `conn`, in the caller's transaction.
    fn write_outbox(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &WriteParams<'_>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        crate::engine::outbox::write(self, conn, params)
    }

    /// Inserts many outgoing messages through `conn`, in the caller's transaction, in order
    /// (their row ids follow it). By default one statement a message: an engine in process has
    /// no round trip to save.
    fn write_outbox_many(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &[WriteParams<'_>],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        crate::engine::outbox::write_each(self, conn, params)
    }

    /// Claims unsent rows under a lease, committed on its own: in insert order, one row at a
    /// time per ordering key, rows other relays are claiming skipped.
    fn claim_outbox(
        &self,
        params: &ClaimOutboxParams<'_>,
    ) -> impl Future<Output = Result<Vec<OutboxRow>, StoreError>> + Send {
        crate::engine::outbox::claim(self, params)
    }

    /// Whether the engine can hold a relay's batch by its row locks for the length of its
    /// publish ([`lock_outbox`](Self::lock_outbox) and the rest of the lock-held claim).
    fn locks_outbox(&self) -> bool {
        false
    }

    /// The most connections the store's pool opens, when it has a bound: a relay warns when
    /// its lock-held loops cannot each hold two.
    fn max_connections(&self) -> Option<u32> {
        None
    }

    /// The lock-held claim: locks unsent rows in `conn`'s transaction (the relay's batch),
    /// as [`claim_outbox`](Self::claim_outbox) chooses them, without writing to them. Their
    /// `attempts` count this claim.
    fn lock_outbox(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &LockOutboxParams,
    ) -> impl Future<Output = Result<Vec<OutboxRow>, StoreError>> + Send {
        crate::engine::outbox::lock(self, conn, params)
    }

    /// Records a lock-held batch before its publish, committed on its own, so that a batch
    /// whose relay dies leaves a trace: [`reap_unmarked_outbox`](Self::reap_unmarked_outbox)
    /// counts its rows' attempt.
    fn hold_outbox(
        &self,
        token: &ClaimToken,
        lock_key: i64,
        relay: &str,
        ids: &[i64],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        crate::engine::outbox::hold(self, token, lock_key, relay, ids)
    }

    /// Marks a lock-held batch in its transaction (`conn`), and deletes its record.
    fn mark_outbox(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &MarkParams<'_>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (conn, params);
        async { Err(crate::engine::outbox::LEASE_ONLY) }
    }

    /// Counts the attempt of the rows of every lock-held batch whose transaction ended
    /// without marking it (its relay died), and halves those batches; how many rows.
    fn reap_unmarked_outbox(
        &self,
        max_attempts: u32,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::outbox::reap_unmarked(self, max_attempts)
    }

    /// Marks claimed rows sent, after the broker's confirmation; fenced by the token. The
    /// ids marked.
    fn mark_sent(
        &self,
        ids: &[i64],
        token: &ClaimToken,
        now: Option<SystemTime>,
    ) -> impl Future<Output = Result<Vec<i64>, StoreError>> + Send {
        crate::engine::outbox::sent(self, ids, token, now)
    }

    /// Deletes claimed rows after the broker's confirmation, in place of marking them sent,
    /// for a relay that keeps no sent rows; fenced by the token. The ids deleted.
    fn delete_sent(
        &self,
        ids: &[i64],
        token: &ClaimToken,
    ) -> impl Future<Output = Result<Vec<i64>, StoreError>> + Send {
        crate::engine::outbox::delete_sent(self, ids, token)
    }

    /// Records a failed publish (`error`: the broker's reason; `permanent`: refused for good,
    /// unroutable or too large): pending after its backoff, or dead; fenced by the token.
    fn fail_outbox(
        &self,
        params: &FailParams<'_>,
    ) -> impl Future<Output = Result<Failed, StoreError>> + Send {
        crate::engine::inbox::fail_claimed(self, &self.queries().outbox_fail, params)
    }

    /// Hands back rows of a claim that were not published (`ids`; `None`: every row of the
    /// token), their attempt given back: the broker was unavailable, or the relay is
    /// stopping. How many.
    fn release_outbox(
        &self,
        token: &ClaimToken,
        ids: Option<&[i64]>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::inbox::release_claimed(
            self,
            &self.queries().outbox_release,
            token,
            ids,
            None,
        )
    }

    /// Deletes up to `limit` rows sent before `older_than`, oldest first (dead rows stay);
    /// how many. Call again while it returns `limit`.
    fn purge_sent(
        &self,
        older_than: SystemTime,
        limit: u32,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::inbox::purge_before(
            self,
            &self.queries().outbox_purge_sent,
            older_than,
            limit,
        )
    }

    /// Starts waking `wake` (`notify_one`) when a transaction that wrote to the outbox
    /// commits, if the engine can tell other processes; `None`: relays poll. Dropping the
    /// subscription stops it.
    fn listen_outbox(
        &self,
        wake: std::sync::Arc<tokio::sync::Notify>,
    ) -> impl Future<Output = Result<Option<crate::inbox::store::Subscription>, StoreError>> + Send
    {
        let _ = wake;
        async { Ok(None) }
    }

    /// Rows `filter` selects, oldest first, at most `limit`, without their payloads (their
    /// size only): what `inboxed outbox list` shows.
    fn list_outbox(
        &self,
        filter: &OutboxFilter,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<OutboxEntry>, StoreError>> + Send {
        crate::engine::outbox::list(self, filter, limit)
    }

    /// Rows `browse` selects, newest first, without their payloads (their size only),
    /// searched within the newest ids ([`OutboxBrowse::window`]): what the console lists.
    fn browse_outbox(
        &self,
        browse: &OutboxBrowse<'_>,
    ) -> impl Future<Output = Result<Vec<OutboxEntry>, StoreError>> + Send {
        crate::engine::outbox::browse(self, browse)
    }

    /// One row in full, payload included, by its row id or the id it is published under;
    /// `None` when there is none.
    fn load_outbox(
        &self,
        id: Option<i64>,
        message_id: Option<&str>,
    ) -> impl Future<Output = Result<Option<OutboxEntry>, StoreError>> + Send {
        crate::engine::outbox::load(self, id, message_id)
    }

    /// Retries or discards the dead rows a filter selects, with an audit record, in one
    /// transaction ([`DeadParams::apply`] `false`: only finds them). The ids, in insert order.
    fn act_on_dead(
        &self,
        params: &DeadParams<'_>,
    ) -> impl Future<Output = Result<Vec<i64>, StoreError>> + Send {
        crate::engine::outbox::act_on_dead(self, params)
    }

    /// Returns up to `limit` rows whose lease ran out to pending (dead past `max_attempts`);
    /// how many.
    fn release_stale_outbox(
        &self,
        max_attempts: u32,
        limit: u32,
        now: Option<SystemTime>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::outbox::release_stale(self, max_attempts, limit, now)
    }
}
