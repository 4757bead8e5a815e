//! The [`Store`](crate::Store) operations on a key's attempt counter and dead letter, for
//! every engine.

use std::time::Duration;

use super::{Args, Columns, Conn, Engine};
use crate::driver::Transaction as _;
use crate::envelope::{ConsumerName, MessageId};
use crate::error::StoreError;
use crate::hash::PayloadHash;
use crate::store::{
    Counted, DeadLetter, DeadLetterParams, DeadLetterReason, DeadLettered, KeyParams,
};

/// Counts one more attempt, committed on its own, waiting at most `wait` for a lock where the
/// engine waits for one ([`Engine::fetch_alone_within`]); the new count, then the forgiven
/// one.
///
/// # Errors
/// The statement failed or returned no row.
pub async fn record_attempt<E: Engine>(
    e: &E,
    p: &KeyParams<'_>,
    wait: Duration,
) -> Result<Counted, StoreError> {
    let q = e
        .query(&e.queries().record_attempt)
        .text(p.consumer.as_str())
        .text(p.message_id.as_str());
    let rows = e.fetch_alone_within(q, wait).await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::from_sqlx(sqlx::Error::RowNotFound))?;
    Ok(Counted {
        attempts: row.count(0)?,
        forgiven: row.count(1)?,
    })
}

/// Forgives `by` of a key's attempts (negative: takes forgiveness back; never below 0),
/// committed on its own.
///
/// # Errors
/// The statement failed.
pub async fn forgive<E: Engine>(e: &E, p: &KeyParams<'_>, by: i32) -> Result<(), StoreError> {
    let q = e
        .query(&e.queries().forgive)
        .text(p.consumer.as_str())
        .text(p.message_id.as_str())
        .int(i64::from(by));
    e.execute_alone(q).await.map(drop)
}

/// Runs `record_attempts` or `load_attempts` (`count` says which) for `ids`: each key with
/// its count.
///
/// # Errors
/// The statement failed.
pub async fn attempts<E: Engine>(
    e: &E,
    count: bool,
    consumer: &ConsumerName,
    ids: &[&MessageId],
) -> Result<Vec<(String, u32)>, StoreError> {
    let qs = e.queries();
    let sql = if count {
        &qs.record_attempts
    } else {
        &qs.load_attempts
    };
    let q = e
        .query(sql)
        .text(consumer.as_str())
        .texts(&ids.iter().map(|id| id.as_str()).collect::<Vec<_>>());
    e.fetch_alone(q)
        .await?
        .iter()
        .map(|row| Ok((row.text(0)?, row.count(1)?)))
        .collect()
}

/// Forgets a key's attempt counter in the caller's transaction.
///
/// # Errors
/// The statement failed; [`StoreError::TransactionEnded`] when the transaction the statement
/// checks for is gone (MySQL, [`ended`]).
pub async fn clear_attempts<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    p: &KeyParams<'_>,
) -> Result<(), StoreError> {
    E::execute(clear_attempts_query(e, p), conn)
        .await
        .map(drop)
        .map_err(ended)
}

/// `clear_attempts.sql` for one key: the processor's settling statement.
pub fn clear_attempts_query<E: Engine>(e: &E, p: &KeyParams<'_>) -> E::Query {
    e.query(&e.queries().clear_attempts)
        .text(p.consumer.as_str())
        .text(p.message_id.as_str())
}

/// Forgets the attempt counters of `ids` in the caller's transaction, in one statement.
///
/// # Errors
/// As [`clear_attempts`].
pub async fn clear_many_attempts<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    consumer: &ConsumerName,
    ids: &[&MessageId],
) -> Result<(), StoreError> {
    let q = e
        .query(&e.queries().clear_many_attempts)
        .text(consumer.as_str())
        .texts(&ids.iter().map(|id| id.as_str()).collect::<Vec<_>>());
    E::execute(q, conn).await.map(drop).map_err(ended)
}

/// A key's dead letter, conflict records excluded.
///
/// # Errors
/// The statement failed, or a column has another type than the dead letter's.
pub async fn load_dead_letter<E: Engine>(
    e: &E,
    p: &KeyParams<'_>,
) -> Result<Option<DeadLetter>, StoreError> {
    let q = e
        .query(&e.queries().load_dead_letter)
        .text(p.consumer.as_str())
        .text(p.message_id.as_str());
    let Some(row) = e.fetch_alone(q).await?.into_iter().next() else {
        return Ok(None);
    };
    let letter = DeadLetter {
        message_type: row.opt_text(0)?,
        correlation_id: row.opt_text(1)?,
        payload: row.opt_bytes(2)?.unwrap_or_default(),
        reason: row.text(3)?,
        error: row.text(4)?,
        attempts: row.count(5)?,
        payload_hash: row
            .opt_bytes(6)?
            .as_deref()
            .and_then(PayloadHash::from_slice),
    };
    Ok(Some(letter))
}

/// Deletes a key's dead letter (conflict records excluded) in the caller's transaction;
/// whether there was one.
///
/// # Errors
/// The statement failed.
pub async fn delete_dead_letter<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    p: &KeyParams<'_>,
) -> Result<bool, StoreError> {
    let q = e
        .query(&e.queries().delete_dead_letter)
        .text(p.consumer.as_str())
        .text(p.message_id.as_str());
    Ok(E::execute(q, conn).await? > 0)
}

/// Writes a dead letter in a transaction of its own, unless the key was processed or has one
/// already (a conflict is kept per colliding payload), and forgets the key's attempt counter.
///
/// # Errors
/// A statement or the commit failed.
pub async fn dead_letter<E: Engine>(
    e: &E,
    p: &DeadLetterParams<'_>,
) -> Result<DeadLettered, StoreError> {
    let mut tx = e.begin_write().await?;
    let lock = &e.queries().dead_letter_lock;
    if let Some(id) = p.message_id
        && p.reason != DeadLetterReason::Conflict
        && !lock.is_empty()
    {
        // Wait for the key's claims in flight (`Engine::dead_letter_lock`).
        let q = E::dead_letter_lock(e.query(lock), p.consumer, id.as_str());
        E::execute(q, &mut tx).await?;
    }
    let q = e
        .query(&e.queries().dead_letter)
        .text(p.consumer.as_str())
        .opt_text(p.message_id.map(MessageId::as_str))
        .opt_text(p.message_type)
        .opt_text(p.correlation_id)
        .bytes(p.payload)
        .opt_bytes(p.payload_hash.as_ref().map(|h| h.as_bytes().as_slice()))
        .text(p.reason.as_str())
        .text(p.error)
        .count(p.attempts)
        .bytes(conflict_hash(p));
    let q = E::key(q, p.message_id.map(MessageId::as_str));
    let written = E::execute(q, &mut tx).await?;
    let outcome = match (written, p.message_id) {
        (1, _) | (_, None) => DeadLettered::Written,
        _ if p.reason == DeadLetterReason::Conflict => DeadLettered::AlreadyDeadLettered,
        (_, Some(id)) => already(e, &mut tx, p.consumer, id).await?,
    };
    if let Some(message_id) = p.message_id {
        let key = KeyParams {
            consumer: p.consumer,
            message_id,
        };
        clear_attempts(e, &mut tx, &key).await?;
    }
    tx.commit().await?;
    Ok(outcome)
}

/// After a dead letter wrote nothing: was the key processed, or dead-lettered already?
async fn already<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    consumer: &ConsumerName,
    id: &MessageId,
) -> Result<DeadLettered, StoreError> {
    let state = super::claims::lookup_key(e, conn, consumer, id.as_str())
        .await?
        .map(|r| r.text(0))
        .transpose()?;
    Ok(match state.as_deref() {
        Some("processed") => DeadLettered::AlreadyProcessed,
        _ => DeadLettered::AlreadyDeadLettered,
    })
}

/// Empty unless the dead letter is a conflict, where it keys the colliding payload's row.
fn conflict_hash<'p>(p: &'p DeadLetterParams<'_>) -> &'p [u8] {
    match (p.reason, &p.payload_hash) {
        (DeadLetterReason::Conflict, Some(h)) => h.as_bytes().as_slice(),
        _ => &[],
    }
}

/// A settling statement's error read for what it means there. On MySQL, 1305 (no such
/// savepoint) from `clear_attempts.sql` or `complete.sql` is the savepoint of the store's
/// begin gone with the transaction: the server rolled it back (a deadlock victim) under a
/// handler that went on, and whatever ran since ran outside it. Elsewhere it is as it was.
#[must_use]
pub fn ended(e: StoreError) -> StoreError {
    match e {
        StoreError::Database(err) if crate::error::savepoint_gone(&err) => {
            StoreError::TransactionEnded(err)
        }
        e => e,
    }
}
