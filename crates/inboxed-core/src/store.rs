//! The seam between the engine and a database dialect.

use std::future::Future;
use std::time::Duration;

use crate::driver::{Driver, Transaction as _};
use crate::engine::{Engine, keys};
use crate::envelope::{ConsumerName, Envelope, MessageId};
use crate::error::StoreError;
use crate::hash::{PayloadHash, StoredHash};

/// Transaction isolation for the inbox transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Isolation {
    /// The claim's unique index alone makes a concurrent duplicate wait and then see the
    /// conflict; enough for the inbox itself. The default.
    #[default]
    ReadCommitted,
    /// Repeatable read (PostgreSQL snapshot isolation). A concurrent duplicate gets 40001 and is
    /// retried.
    RepeatableRead,
    /// Serializable, for handlers whose own invariants need it. Losers get 40001 and are retried.
    Serializable,
}

/// Bounds on the inbox transaction, applied with `SET LOCAL` so they never leak into the
/// application's other transactions on a shared pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeginParams {
    /// Isolation level.
    pub isolation: Isolation,
    /// Longest wait for a row lock, including a concurrent duplicate's uncommitted claim.
    pub lock_timeout: Duration,
    /// Longest single statement.
    pub statement_timeout: Duration,
    /// Longest idle gap inside the transaction before the server ends the session, so a hung
    /// process cannot hold a claim (and block its duplicate) forever.
    pub idle_in_transaction_timeout: Duration,
    /// Whether the commit waits for its WAL to reach disk. Only maintenance batches turn it
    /// off (PostgreSQL `synchronous_commit = off`; SQLite ignores it): a purge commit lost in a
    /// crash leaves expired rows that the next pass deletes again, and skipping its flushes
    /// leaves the disk to the hot path's commits.
    pub durable_commit: bool,
}

impl Default for BeginParams {
    /// READ COMMITTED; 5 s lock, 30 s statement, 60 s idle-in-transaction timeouts; durable.
    fn default() -> Self {
        Self {
            isolation: Isolation::ReadCommitted,
            lock_timeout: std::time::Duration::from_secs(5),
            statement_timeout: std::time::Duration::from_secs(30),
            idle_in_transaction_timeout: std::time::Duration::from_secs(60),
            durable_commit: true,
        }
    }
}

impl BeginParams {
    /// Bounds for a maintenance batch (a purge or redaction statement in a transaction of its
    /// own): READ COMMITTED, the given statement and lock timeouts, an idle timeout of twice
    /// the statement's, so a stalled batch cannot hold its locks for long either, and no wait
    /// for the commit's flush (every maintenance batch is redone by the next pass if lost).
    #[must_use]
    pub fn bounded(statement_timeout: Duration, lock_timeout: Duration) -> Self {
        Self {
            isolation: Isolation::ReadCommitted,
            lock_timeout,
            statement_timeout,
            idle_in_transaction_timeout: statement_timeout.saturating_mul(2),
            durable_commit: false,
        }
    }
}

/// Parameters of [`Store::claim`].
#[derive(Debug, Clone, Copy)]
pub struct ClaimParams<'a> {
    /// Which consumer claims.
    pub consumer: &'a ConsumerName,
    /// The message being claimed, with its metadata and payload hash.
    pub envelope: &'a Envelope,
}

/// What [`Store::claim`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// The row was inserted in this transaction: run the handler.
    New,
    /// A committed row exists; `stored` is what it kept of its payload hash, if anything.
    Duplicate {
        /// Hash (or fingerprint) stored with the first processing.
        stored: Option<StoredHash>,
    },
    /// The key sits on the dead-letter path; it is not reprocessed until an operator retries
    /// or discards it.
    DeadLettered,
}

/// The message key within one consumer.
#[derive(Debug, Clone, Copy)]
pub struct KeyParams<'a> {
    /// The consumer.
    pub consumer: &'a ConsumerName,
    /// The message.
    pub message_id: &'a MessageId,
}

/// What [`Store::record_attempt`] counted of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Counted {
    /// Attempts, net of forgiven ones (0 when all are).
    pub attempts: u32,
    /// Attempts forgiven so far ([`Store::forgive`]): each grows a suspect's
    /// [`CrashAttribution`](crate::CrashAttribution) group smaller.
    pub forgiven: u32,
}

/// Why a message was put on the dead-letter path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// The handler returned [`HandlerError::Permanent`](crate::HandlerError::Permanent).
    Permanent,
    /// `max_attempts` deliveries failed, crashed or hung.
    AttemptsExhausted,
    /// The key was already processed with a different payload.
    Conflict,
    /// The delivery had no usable key.
    InvalidMessage,
}

impl DeadLetterReason {
    /// The value stored in the `reason` column.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Permanent => "permanent",
            Self::AttemptsExhausted => "attempts_exhausted",
            Self::Conflict => "conflict",
            Self::InvalidMessage => "invalid_message",
        }
    }
}

/// Parameters of [`Store::dead_letter`].
#[derive(Debug, Clone, Copy)]
pub struct DeadLetterParams<'a> {
    /// The consumer.
    pub consumer: &'a ConsumerName,
    /// The key, absent when the delivery had none (then the row is never deduplicated).
    pub message_id: Option<&'a MessageId>,
    /// Type metadata.
    pub message_type: Option<&'a str>,
    /// Correlation metadata.
    pub correlation_id: Option<&'a str>,
    /// Raw payload, kept so that an operator can retry it.
    pub payload: &'a [u8],
    /// Payload hash.
    pub payload_hash: Option<PayloadHash>,
    /// Why.
    pub reason: DeadLetterReason,
    /// The error and its source chain.
    pub error: &'a str,
    /// Attempts made so far.
    pub attempts: u32,
}

/// What [`Store::dead_letter`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadLettered {
    /// The dead-letter row is written (or its counters updated) and committed.
    Written,
    /// A processed row exists for the key, so it was not dead-lettered: it is a duplicate.
    AlreadyProcessed,
    /// The key already has a dead letter (for a conflict: this very payload already has one).
    /// The first record is kept as it was, with its reason and error.
    AlreadyDeadLettered,
}

/// A key's dead letter, as an operator's retry reads it back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DeadLetter {
    /// Type metadata.
    pub message_type: Option<String>,
    /// Correlation metadata.
    pub correlation_id: Option<String>,
    /// The raw payload (empty when it was redacted).
    pub payload: Vec<u8>,
    /// Hash of the payload as received, kept when the payload itself was redacted.
    pub payload_hash: Option<PayloadHash>,
    /// The `reason` column: `permanent`, `attempts_exhausted` or `invalid_message`.
    pub reason: String,
    /// The error chain recorded when it was dead-lettered.
    pub error: String,
    /// Attempts recorded.
    pub attempts: u32,
}

/// How the store's durability settings were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurabilityReport {
    /// `(setting, value)` pairs as read from the database.
    pub settings: Vec<(&'static str, String)>,
    /// What can still lose an acknowledged commit, though the server itself keeps it: a
    /// failover to a standby that had not received it (asynchronous replication). Logged at
    /// start, not refused: asynchronous standbys are a common and deliberate trade.
    pub warnings: Vec<String>,
}

/// Database operations the processor needs.
///
/// Implemented by each engine's store (`PgStore`, `SqliteStore`, `MySqlStore`) and by the
/// test kit's wrapper. This trait is the seam between the processor and an engine. It is
/// **not** meant to be implemented outside this workspace, and its methods may change in minor
/// releases; depend on [`Processor`](crate::Processor) instead.
///
/// Two kinds of method. The first seven are the engine's own (how it migrates, checks
/// durability, begins and claims differ in more than SQL): an engine implements them and a
/// wrapper forwards them. The rest run the same statements on every engine, written once over
/// [`Store::engine`]; no engine overrides them, so a wrapper gets them without forwarding and
/// overrides only what it changes.
pub trait Store: Clone + Send + Sync + 'static {
    /// The database this store talks to, as its client library reaches it: what a handler's
    /// connection is (sqlx's `Postgres`, `Sqlite`, `MySql`).
    type Db: Driver;

    /// The engine whose statements the shared operations run.
    type Engine: Engine<Db = Self::Db>;

    /// The store itself for an engine's store; the wrapped store for a wrapper.
    fn engine(&self) -> &Self::Engine;

    /// Applies the embedded migrations that are missing. Idempotent.
    fn migrate(&self) -> impl Future<Output = Result<Vec<i64>, StoreError>> + Send;

    /// Reads the settings that decide whether a commit survives a crash, and fails with
    /// [`StoreError::NonDurable`] when one can lose acknowledged commits.
    fn check_durability(&self)
    -> impl Future<Output = Result<DurabilityReport, StoreError>> + Send;

    /// Makes `consumer` known to the store before its first claim, in a statement of its own
    /// (PostgreSQL gives each consumer a compact id that its keys store instead of the name).
    /// Idempotent; a processor calls it once. By default there is nothing to register.
    fn register_consumer(
        &self,
        consumer: &ConsumerName,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = consumer;
        async { Ok(()) }
    }

    /// Records that `consumer`'s kill switch `switch` is open (`Some`: opened, a probe failed,
    /// or a refresh while it stays open), or that it closed (`None`), in a statement of its
    /// own, for `inboxed stats` and the console.
    fn report_switch(
        &self,
        consumer: &ConsumerName,
        switch: &str,
        opened: Option<crate::kill_switch::Opened>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        crate::engine::observe::report_switch(self.engine(), consumer, switch, opened)
    }

    /// Begins the transaction that the claim and the handler share.
    fn begin(
        &self,
        params: &BeginParams,
    ) -> impl Future<Output = Result<<Self::Db as Driver>::Transaction, StoreError>> + Send;

    /// Begins a transaction that will claim `ids` (keys of `consumer`), in the same round trip
    /// taking whatever the engine needs for a dead letter of one of them to wait for the claim
    /// (PostgreSQL: shared advisory locks, `inboxed_postgres::key_lock`).
    /// Engines whose dead letter already waits for an uncommitted claim just begin.
    fn begin_claims(
        &self,
        params: &BeginParams,
        consumer: &ConsumerName,
        ids: &[&str],
    ) -> impl Future<Output = Result<<Self::Db as Driver>::Transaction, StoreError>> + Send {
        let _ = (consumer, ids);
        self.begin(params)
    }

    /// Begins the inbox transaction and claims one key in it: [`Store::begin_claims`], then
    /// [`Store::claim`]. An engine whose driver pipelines sends the claim behind the `BEGIN`,
    /// so that the two cost one round trip.
    fn begin_and_claim(
        &self,
        begin: &BeginParams,
        params: &ClaimParams<'_>,
    ) -> impl Future<Output = Result<(<Self::Db as Driver>::Transaction, Claim), StoreError>> + Send
    {
        async move {
            let ids = [params.envelope.id().as_str()];
            let mut tx = self.begin_claims(begin, params.consumer, &ids).await?;
            let claim = self.claim(&mut tx, params).await?;
            Ok((tx, claim))
        }
    }

    /// Ends a processed key's transaction: the settling statement ([`Store::clear_attempts`]),
    /// then the commit. An engine whose driver pipelines sends the two at once; a `COMMIT`
    /// behind a failed statement only rolls back, and the statement's error is the one
    /// returned.
    fn settle_and_commit(
        &self,
        tx: <Self::Db as Driver>::Transaction,
        params: &KeyParams<'_>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            let mut tx = tx;
            if let Err(e) = self.clear_attempts(&mut tx, params).await {
                let _ = tx.rollback().await;
                return Err(e);
            }
            tx.commit().await
        }
    }

    /// Records the key unless it exists. A concurrent, uncommitted claim of the same key makes
    /// this wait until that transaction ends: that wait is the whole concurrency argument.
    fn claim(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &ClaimParams<'_>,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// [`Store::claim`] for each of `envelopes` (distinct keys of `consumer`), inside the
    /// caller's transaction, with one claim per envelope in the order given. Where the dialect
    /// allows, one statement claims them all, taking the keys in byte order so that concurrent
    /// batches sharing keys wait on each other rather than deadlock.
    fn claim_many(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> impl Future<Output = Result<Vec<Claim>, StoreError>> + Send;

    /// Counts one more attempt in its own committed transaction and returns the new count, net
    /// of forgiven ones ([`Store::forgive`]; 0 when all are), with the forgiven ones. `wait`
    /// bounds a wait for a lock, as `lock_timeout` bounds the claim's: SQLite's count waits
    /// for the one write lock, which a hung delivery's transaction may hold (then
    /// [`StoreError::Busy`]); a server's count waits for no other delivery's transaction.
    fn record_attempt(
        &self,
        params: &KeyParams<'_>,
        wait: Duration,
    ) -> impl Future<Output = Result<Counted, StoreError>> + Send {
        keys::record_attempt(self.engine(), params, wait)
    }

    /// Forgives `by` of a key's attempts (a negative `by` takes forgiveness back; the total
    /// never goes below 0), committed on its own before it returns. [`Store::record_attempt`]
    /// counts attempts net of what is forgiven. Forgiven: a delivery that never ran (its
    /// begin or claim gave up waiting for another delivery's uncommitted claim: a consumer cut
    /// off mid-transaction holds its claim until the server ends its session), and a suspect
    /// while it waits for its turn alone ([`CrashAttribution`](crate::CrashAttribution)),
    /// taken back when the turn comes.
    fn forgive(
        &self,
        params: &KeyParams<'_>,
        by: i32,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        keys::forgive(self.engine(), params, by)
    }

    /// Counts one more attempt of each of `ids` (distinct keys of `consumer`), committed before
    /// any handler runs as for [`Store::record_attempt`], in one statement: a batch pays one
    /// commit for its counts. Returns each key with its new count, in no particular order.
    fn record_attempts(
        &self,
        consumer: &ConsumerName,
        ids: &[&MessageId],
    ) -> impl Future<Output = Result<Vec<(String, u32)>, StoreError>> + Send {
        keys::attempts(self.engine(), true, consumer, ids)
    }

    /// The attempt counters of `ids` (keys of `consumer`), read without counting; keys without
    /// a counter are left out.
    fn load_attempts(
        &self,
        consumer: &ConsumerName,
        ids: &[&MessageId],
    ) -> impl Future<Output = Result<Vec<(String, u32)>, StoreError>> + Send {
        keys::attempts(self.engine(), false, consumer, ids)
    }

    /// Forgets the attempt counter of a key, inside the caller's transaction: the last
    /// statement before its commit. On MySQL it also checks that the transaction is still the
    /// one [`Store::begin`] began ([`StoreError::TransactionEnded`] when the server rolled it
    /// back under a handler that swallowed the error): call it once, in such a transaction.
    fn clear_attempts(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &KeyParams<'_>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        keys::clear_attempts(self.engine(), conn, params)
    }

    /// [`Store::clear_attempts`] for each of `ids` (keys of `consumer`), in one statement.
    fn clear_many_attempts(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        consumer: &ConsumerName,
        ids: &[&MessageId],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        keys::clear_many_attempts(self.engine(), conn, consumer, ids)
    }

    /// Reads a key's dead letter (conflict records excluded).
    fn load_dead_letter(
        &self,
        params: &KeyParams<'_>,
    ) -> impl Future<Output = Result<Option<DeadLetter>, StoreError>> + Send {
        keys::load_dead_letter(self.engine(), params)
    }

    /// Deletes a key's dead letter (conflict records excluded) inside the caller's transaction.
    /// Returns whether there was one.
    fn delete_dead_letter(
        &self,
        conn: &mut <Self::Db as Driver>::Connection,
        params: &KeyParams<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        keys::delete_dead_letter(self.engine(), conn, params)
    }

    /// Writes a dead letter in its own committed transaction, unless the key was processed or
    /// already has one. Conflict dead letters are kept per distinct payload, so that each
    /// colliding message is recorded.
    fn dead_letter(
        &self,
        params: &DeadLetterParams<'_>,
    ) -> impl Future<Output = Result<DeadLettered, StoreError>> + Send {
        keys::dead_letter(self.engine(), params)
    }
}
