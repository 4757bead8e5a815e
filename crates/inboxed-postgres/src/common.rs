//! What PostgreSQL does its own way, written once for its drivers (sqlx's
//! [`PgStore`](crate::PgStore), tokio-postgres's `TokioPgStore`, diesel-async's
//! `DieselPgStore`): the set-based statements that bind a column of values as an array, the
//! transactions begun with a setting in the `BEGIN`'s round trip, the NOTIFY wake-ups, and
//! (for the two that are not sqlx's) migrating, registering and the start-up check. A driver
//! gives the array binders ([`PgArgs`]) and the three things only it can do ([`PgEngine`]); the
//! rest is here.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use tokio::sync::Notify;

use inboxed_core::driver::{Driver, Transaction};
use inboxed_core::engine::{Args, Columns, Conn, Engine, claims};
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    EnqueueManyParams, Enqueued, ReleaseStaleParams, RowFate, Subscription, millis, millis_of,
    receipt_outcomes,
};
use inboxed_core::outbox::OutboxRow;
use inboxed_core::outbox::store::{ClaimOutboxParams, LockOutboxParams, MarkParams, WriteParams};
use inboxed_core::store::Claim;
use inboxed_core::{ConsumerName, Envelope, PayloadHash, StoreError};

use crate::key::message_key;

/// The arrays PostgreSQL's set-based statements bind, beyond [`Args`]'s `text[]` and `int8[]`.
pub(crate) trait PgArgs: Args {
    /// A `text[]` whose elements may be NULL.
    #[must_use]
    fn opt_texts(self, v: &[Option<&str>]) -> Self;
    /// A `bytea[]`.
    #[must_use]
    fn byteas(self, v: &[&[u8]]) -> Self;
    /// An `int4[]`.
    #[must_use]
    fn int4s(self, v: &[i32]) -> Self;
}

/// What each PostgreSQL driver does its own way.
pub(crate) trait PgEngine: Engine<Query: PgArgs> {
    /// A transaction begun with `statement` (`BEGIN` and settings), in one round trip.
    fn begin_with(
        &self,
        statement: String,
    ) -> impl Future<Output = Result<<Self::Db as Driver>::Transaction, StoreError>> + Send;

    /// The idle workers of this process, woken by receipts through any clone of the store.
    fn wakers(&self) -> &LocalWakers;

    /// The most connections its pool opens: the outbox's relays size their lanes by it.
    fn max_connections(&self) -> u32;

    /// Listens on `channel` from a connection of its own and wakes one of `wake`'s waiters
    /// for each notification whose payload `wanted` accepts, until the subscription drops.
    /// `None` where the driver cannot receive notifications.
    fn listen(
        &self,
        channel: String,
        wake: Arc<Notify>,
        wanted: impl Fn(&str) -> bool + Send + Sync + 'static,
        what: &'static str,
    ) -> impl Future<Output = Result<Option<Subscription>, StoreError>> + Send;
}

#[cfg(any(
    feature = "tokio-postgres",
    feature = "diesel-async",
    feature = "sea-orm"
))]
/// Creates or updates the inbox's tables, refusing a server older than they need.
pub(crate) async fn migrate<S: PgEngine>(s: &S) -> Result<Vec<i64>, StoreError> {
    let rows = s.fetch_alone(s.query(&s.queries().server_version)).await?;
    let version = rows.first().map_or(Ok(0), |row| row.int(0))?;
    crate::store::check_server_version(version)?;
    inboxed_core::engine::migrate::run(s, s.namespace(), crate::queries::MIGRATIONS).await
}

#[cfg(any(
    feature = "tokio-postgres",
    feature = "diesel-async",
    feature = "sea-orm"
))]
/// Registers `consumer`, committed on its own.
pub(crate) async fn register_consumer<S: PgEngine>(
    s: &S,
    consumer: &ConsumerName,
) -> Result<(), StoreError> {
    let q = s
        .query(&s.queries().register_consumer)
        .text(consumer.as_str());
    s.execute_alone(q).await.map(drop)
}

#[cfg(any(
    feature = "tokio-postgres",
    feature = "diesel-async",
    feature = "sea-orm"
))]
/// What the server needs to be (`capabilities.rs`) and how durable its commits are
/// (`check_durability.sql`, read by `standbys::report`).
pub(crate) async fn check_durability<S: PgEngine>(
    s: &S,
) -> Result<inboxed_core::store::DurabilityReport, StoreError> {
    crate::capabilities::check(s).await?;
    let sql: Arc<str> = Arc::from(crate::queries::CHECK_DURABILITY);
    let rows = s.fetch_alone(s.query(&sql)).await?;
    let Some(row) = rows.first() else {
        return Err(StoreError::Database(sqlx::Error::RowNotFound));
    };
    crate::standbys::report(
        row.text(0)?,
        row.text(1)?,
        crate::standbys::Standbys {
            in_recovery: row.flag(2)?,
            names: row.text(3)?,
            streaming: row.int(4)?,
            synchronous: row.int(5)?,
            unreadable: row.int(6)?,
        },
    )
}

/// The NOTIFY channel of this namespace's inbox; the payload names the consumer.
fn inbox_channel(s: &impl Engine) -> String {
    format!("{}inbox", s.namespace().prefix())
}

/// Many receipts in one transaction: one `INSERT … SELECT FROM unnest(…)` for the lot, first
/// taking every key to be new (`enqueue_many_new.sql`, which says why); when one is not (the
/// unique key refuses it), the batch again in a new transaction, skipping the keys stored
/// (`enqueue_many.sql`), and one lookup of those keys' stored hashes.
pub(crate) async fn enqueue_many<S: PgEngine>(
    s: &S,
    p: &EnqueueManyParams<'_>,
) -> Result<Vec<Enqueued>, StoreError> {
    let envs = p.envelopes;
    let ids: Vec<&str> = envs.iter().map(|e| e.id().as_str()).collect();
    let column = |f: fn(&Envelope) -> Option<&str>| envs.iter().map(f).collect::<Vec<_>>();
    let payloads: Vec<&[u8]> = envs.iter().map(Envelope::payload).collect();
    let hashes: Vec<PayloadHash> = envs.iter().map(Envelope::hash).collect();
    let hashes: Vec<&[u8]> = hashes.iter().map(|h| &h.as_bytes()[..]).collect();
    let headers: Vec<Option<String>> = envs.iter().map(|e| e.headers().to_stored()).collect();
    let headers: Vec<Option<&str>> = headers.iter().map(Option::as_deref).collect();
    let (aggregates, types, correlations) = (
        column(Envelope::aggregate_id),
        column(Envelope::message_type),
        column(Envelope::correlation_id),
    );
    let qs = s.queries();
    let statement = |sql| {
        s.query(sql)
            .text(p.consumer.as_str())
            .texts(&ids)
            .opt_texts(&aggregates)
            .opt_texts(&types)
            .opt_texts(&correlations)
            .byteas(&payloads)
            .byteas(&hashes)
            .opt_texts(&headers)
    };
    let mut tx = s.begin_write().await?;
    let rows = match S::fetch_all(statement(&qs.enqueue_many_new), &mut *tx).await {
        Err(StoreError::UniqueViolation(_)) => {
            tx.rollback().await?;
            tx = s.begin_write().await?;
            S::fetch_all(statement(&qs.enqueue_many), &mut *tx).await?
        }
        stored => stored?,
    };
    let mut inserted = HashMap::new();
    for row in rows {
        inserted.insert(row.text(1)?, row.int(0)?);
    }
    let mut stored = HashMap::new();
    if inserted.len() < envs.len() {
        let others: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| !inserted.contains_key(*id))
            .collect();
        let q = s
            .query(&qs.enqueue_lookup_many)
            .text(p.consumer.as_str())
            .texts(&others);
        for row in S::fetch_all(q, &mut *tx).await? {
            if let Some(hash) = PayloadHash::from_slice(&row.bytes(1)?) {
                stored.insert(row.text(0)?, hash);
            }
        }
    }
    tx.commit().await?;
    Ok(receipt_outcomes(envs, &inserted, &stored))
}

/// The lock-held mode's attempt counter, in a transaction of its own that does not wait for
/// the disk flush (`count_attempts.sql` says why).
pub(crate) async fn count_attempts<S: PgEngine>(
    s: &S,
    consumer: &ConsumerName,
    message_ids: &[String],
) -> Result<Vec<(String, u32)>, StoreError> {
    let ids: Vec<&str> = message_ids.iter().map(String::as_str).collect();
    let mut tx = s
        .begin_with("BEGIN; SET LOCAL synchronous_commit = off".to_owned())
        .await?;
    let q = s
        .query(&s.queries().count_attempts)
        .text(consumer.as_str())
        .texts(&ids);
    let rows = S::fetch_all(q, &mut *tx).await?;
    tx.commit().await?;
    rows.iter().map(|r| Ok((r.text(0)?, r.count(1)?))).collect()
}

/// A lock-held batch's fates as parallel arrays (`finish_locked.sql`): one statement.
pub(crate) async fn finish_locked<S: PgEngine>(
    s: &S,
    conn: &mut Conn<S>,
    consumer: &ConsumerName,
    fates: &[RowFate],
) -> Result<(), StoreError> {
    let ids: Vec<i64> = fates.iter().map(|f| f.id).collect();
    let statuses: Vec<&str> = fates.iter().map(|f| f.status).collect();
    let errors: Vec<Option<&str>> = fates.iter().map(|f| f.error.as_deref()).collect();
    let backoffs: Vec<i64> = fates.iter().map(|f| millis_of(f.backoff)).collect();
    let attempts: Vec<i32> = fates.iter().map(|f| int4(f.attempts)).collect();
    let message_ids: Vec<&str> = fates.iter().map(|f| f.message_id.as_str()).collect();
    let q = s
        .query(&s.queries().finish_locked)
        .ids(&ids)
        .texts(&statuses)
        .opt_texts(&errors)
        .ids(&backoffs)
        .int4s(&attempts)
        .text(consumer.as_str())
        .texts(&message_ids);
    S::execute(q, conn).await.map(drop)
}

/// A count as PostgreSQL's `int4`, saturated.
fn int4(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The reaper's release, planned anew each time (`Engine::fresh` says why).
pub(crate) async fn release_stale<S: PgEngine>(
    s: &S,
    p: &ReleaseStaleParams<'_>,
) -> Result<u64, StoreError> {
    let dead: Vec<&str> = p.dead_workers.iter().map(String::as_str).collect();
    let q = s
        .fresh(&s.queries().release_stale)
        .count(p.max_attempts)
        .int(i64::from(p.limit))
        .opt_int(p.now.map(millis))
        .texts(&dead);
    s.execute_alone(q).await
}

/// Wakes `consumer`'s idle workers in other processes: `NOTIFY`, committed on its own.
pub(crate) async fn notify<S: PgEngine>(s: &S, consumer: &ConsumerName) -> Result<(), StoreError> {
    let q = s
        .query(&s.queries().notify)
        .text(&inbox_channel(s))
        .text(&s.wakers().payload(consumer));
    s.fetch_alone(q).await.map(drop)
}

/// Wakes `wake` for each receipt of `consumer` made by another process (this store's own
/// receipts woke their workers in process already).
pub(crate) async fn subscribe<S: PgEngine>(
    s: &S,
    consumer: &ConsumerName,
    wake: Arc<Notify>,
) -> Result<Option<Subscription>, StoreError> {
    let (consumer, wakers) = (consumer.clone(), s.wakers().clone());
    let foreign = move |payload: &str| wakers.is_foreign_wake(payload, &consumer);
    s.listen(inbox_channel(s), wake, foreign, "inbox").await
}

/// Claims distinct keys with one statement (`claim_many.sql`); a key not inserted is looked
/// up (a duplicate, or one claimed in flight).
pub(crate) async fn claim_many<S: PgEngine>(
    s: &S,
    conn: &mut Conn<S>,
    consumer: &ConsumerName,
    envelopes: &[&Envelope],
) -> Result<Vec<Claim>, StoreError> {
    let ids: Vec<&str> = envelopes.iter().map(|e| e.id().as_str()).collect();
    let keys: Vec<Vec<u8>> = ids.iter().map(|id| message_key(id).into_owned()).collect();
    let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let fingerprints: Vec<i32> = envelopes
        .iter()
        .map(|e| e.hash().fingerprint().cast_signed())
        .collect();
    let q = s
        .query(&s.queries().claim_many)
        .text(consumer.as_str())
        .texts(&ids)
        .byteas(&key_refs)
        .int4s(&fingerprints);
    let inserted: HashSet<Vec<u8>> = S::fetch_all(q, &mut *conn)
        .await?
        .iter()
        .map(|row| row.bytes(0))
        .collect::<Result<_, _>>()?;
    let mut claimed = Vec::with_capacity(envelopes.len());
    for (id, key) in ids.iter().zip(&keys) {
        claimed.push(if inserted.contains(key) {
            Claim::New
        } else {
            claims::not_claimed(s, conn, consumer, id).await?
        });
    }
    Ok(claimed)
}

/// A batch's outgoing messages in one `INSERT … SELECT FROM unnest(…)`
/// (`outbox_write_many.sql`): a round trip a batch instead of one a message.
pub(crate) async fn write_outbox_many<S: PgEngine>(
    s: &S,
    conn: &mut Conn<S>,
    params: &[WriteParams<'_>],
) -> Result<(), StoreError> {
    let column = |f: for<'a> fn(&'a WriteParams<'a>) -> Option<&'a str>| {
        params.iter().map(f).collect::<Vec<_>>()
    };
    let ids: Vec<&str> = params.iter().map(|p| p.message_id.as_str()).collect();
    let destinations: Vec<&str> = params.iter().map(|p| p.message.destination()).collect();
    let headers: Vec<String> = params.iter().map(|p| p.headers_json()).collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let payloads: Vec<&[u8]> = params.iter().map(|p| p.message.payload()).collect();
    let q = s
        .query(&s.queries().outbox_write_many)
        .texts(&ids)
        .texts(&destinations)
        .opt_texts(&column(|p| p.message.ordering_key()))
        .opt_texts(&column(|p| p.message.message_type()))
        .opt_texts(&column(|p| p.message.correlation_id()))
        .texts(&headers)
        .byteas(&payloads)
        .opt_texts(&column(|p| p.caused_by_consumer.map(ConsumerName::as_str)))
        .opt_texts(&column(|p| p.caused_by_message_id))
        .flag(params.iter().any(|p| p.notify));
    S::execute(q, conn).await.map(drop)
}

/// The shared lease claim of outbox rows in a transaction of its own, planned with sorting
/// off (`outbox_lock_plan.sql` says why); the setting rides with the `BEGIN`.
pub(crate) async fn claim_outbox<S: PgEngine>(
    s: &S,
    params: &ClaimOutboxParams<'_>,
) -> Result<Vec<OutboxRow>, StoreError> {
    let begin = format!("BEGIN;\n{}", s.queries().outbox_lock_plan);
    let mut tx = s.begin_with(begin).await?;
    let rows = inboxed_core::engine::outbox::claim_on(s, &mut *tx, params).await?;
    tx.commit().await?;
    Ok(rows)
}

/// The shared lock of outbox rows in the caller's transaction, planned with sorting off.
pub(crate) async fn lock_outbox<S: PgEngine>(
    s: &S,
    conn: &mut Conn<S>,
    params: &LockOutboxParams,
) -> Result<Vec<OutboxRow>, StoreError> {
    S::execute_script(&s.queries().outbox_lock_plan, &mut *conn).await?;
    inboxed_core::engine::outbox::lock(s, conn, params).await
}

/// The fates of a relay's batch as parallel arrays (`outbox_mark.sql`): one statement.
pub(crate) async fn mark_outbox<S: PgEngine>(
    s: &S,
    conn: &mut Conn<S>,
    p: &MarkParams<'_>,
) -> Result<(), StoreError> {
    let ids: Vec<i64> = p.fates.iter().map(|f| f.id).collect();
    let statuses: Vec<&str> = p.fates.iter().map(|f| f.status).collect();
    let errors: Vec<Option<&str>> = p.fates.iter().map(|f| f.error.as_deref()).collect();
    let backoffs: Vec<i64> = p.fates.iter().map(|f| millis_of(f.backoff)).collect();
    let attempts: Vec<i32> = p.fates.iter().map(|f| int4(f.attempts)).collect();
    let q = s
        .query(&s.queries().outbox_mark)
        .bytes(p.token.as_bytes())
        .ids(&ids)
        .texts(&statuses)
        .opt_texts(&errors)
        .ids(&backoffs)
        .int4s(&attempts)
        .flag(p.delete_sent)
        .text(p.relay);
    S::execute(q, conn).await.map(drop)
}

/// Wakes `wake` when a transaction that wrote to the outbox commits: `outbox_write.sql`
/// notifies this channel, once per writing transaction.
pub(crate) async fn listen_outbox<S: PgEngine>(
    s: &S,
    wake: Arc<Notify>,
) -> Result<Option<Subscription>, StoreError> {
    let channel = format!("{}outbox", s.namespace().prefix());
    s.listen(channel, wake, |_| true, "outbox").await
}
