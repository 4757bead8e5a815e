//! The outbox's operations, for every engine.

use std::time::SystemTime;

use super::{Args, Columns, Conn, Engine};
use crate::envelope::ConsumerName;
use crate::error::StoreError;
use crate::inbox::store::{millis, millis_of};
use crate::outbox::store::{ClaimOutboxParams, ClaimToken, OutboxRow, WriteParams};

/// Inserts one outgoing message in the caller's transaction (`outbox_write.sql`).
///
/// # Errors
/// The statement failed.
pub async fn write<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    p: &WriteParams<'_>,
) -> Result<(), StoreError> {
    let m = p.message;
    let q = e
        .query(&e.queries().outbox_write)
        .text(p.message_id.as_str())
        .text(m.destination())
        .opt_text(m.ordering_key())
        .opt_text(m.message_type())
        .opt_text(m.correlation_id())
        .text(&m.headers_json())
        .bytes(m.payload())
        .opt_text(p.caused_by_consumer.map(ConsumerName::as_str))
        .opt_text(p.caused_by_message_id);
    E::execute(q, conn).await.map(drop)
}

/// Claims unsent rows under a lease, committed on its own (`outbox_claim.sql`).
///
/// # Errors
/// The statement failed, or a row's headers are not a JSON object of strings.
pub async fn claim<E: Engine>(
    e: &E,
    p: &ClaimOutboxParams<'_>,
) -> Result<Vec<OutboxRow>, StoreError> {
    let q = e
        .fresh(&e.queries().outbox_claim)
        .text(p.relay)
        .bytes(p.token.as_bytes())
        .int(i64::from(p.limit))
        .int(millis_of(p.lease))
        .opt_int(p.now.map(millis));
    let mut rows: Vec<OutboxRow> = e
        .fetch_alone(q)
        .await?
        .iter()
        .map(outbox_row)
        .collect::<Result<_, _>>()?;
    // RETURNING's order is not guaranteed; insert order is the id.
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

fn outbox_row<R: Columns>(r: &R) -> Result<OutboxRow, StoreError> {
    let headers = serde_json::from_str(&r.text(6)?)
        .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))?;
    Ok(OutboxRow {
        id: r.int(0)?,
        message_id: r.text(1)?,
        destination: r.text(2)?,
        ordering_key: r.opt_text(3)?,
        message_type: r.opt_text(4)?,
        correlation_id: r.opt_text(5)?,
        headers,
        payload: r.bytes(7)?,
        attempts: r.count(8)?,
        caused_by_consumer: r.opt_text(9)?,
        caused_by_message_id: r.opt_text(10)?,
    })
}

/// Marks claimed rows sent, fenced by the token (`outbox_sent.sql`); the ids marked.
///
/// # Errors
/// The statement failed.
pub async fn sent<E: Engine>(
    e: &E,
    ids: &[i64],
    token: &ClaimToken,
    now: Option<SystemTime>,
) -> Result<Vec<i64>, StoreError> {
    let q = e
        .query(&e.queries().outbox_sent)
        .ids(ids)
        .bytes(token.as_bytes())
        .opt_int(now.map(millis));
    e.fetch_alone(q).await?.iter().map(|r| r.int(0)).collect()
}

/// Returns rows whose lease ran out (`outbox_release_stale.sql`); how many.
///
/// # Errors
/// The statement failed.
pub async fn release_stale<E: Engine>(
    e: &E,
    max_attempts: u32,
    limit: u32,
    now: Option<SystemTime>,
) -> Result<u64, StoreError> {
    let q = e
        .fresh(&e.queries().outbox_release_stale)
        .count(max_attempts)
        .int(i64::from(limit))
        .opt_int(now.map(millis));
    e.execute_alone(q).await
}
