//! The outbox's operations, for every engine.

use std::time::SystemTime;

use super::{Args, Columns, Conn, Engine};
use crate::driver::Transaction as _;
use crate::envelope::ConsumerName;
use crate::error::StoreError;
use crate::inbox::store::{millis, millis_of};
use crate::observe::from_millis;
use crate::outbox::store::{
    ClaimOutboxParams, ClaimToken, LockOutboxParams, OutboxRow, WriteParams,
};
use crate::outbox::{
    DeadAction, DeadParams, OutboxBrowse, OutboxEntry, OutboxFilter, OutboxStatus,
};

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
        .text(&p.headers_json())
        .bytes(m.payload())
        .opt_text(p.caused_by_consumer.map(ConsumerName::as_str))
        .opt_text(p.caused_by_message_id)
        .flag(p.notify);
    E::execute(q, conn).await.map(drop)
}

/// Inserts each message with [`write()`], in order.
///
/// # Errors
/// A statement failed (the caller's transaction should be rolled back).
pub async fn write_each<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    params: &[WriteParams<'_>],
) -> Result<(), StoreError> {
    for p in params {
        write(e, conn, p).await?;
    }
    Ok(())
}

/// Claims unsent rows under a lease, committed on its own (`outbox_claim.sql`).
///
/// # Errors
/// The statement failed, or a row's headers are not a JSON object of strings.
pub async fn claim<E: Engine>(
    e: &E,
    p: &ClaimOutboxParams<'_>,
) -> Result<Vec<OutboxRow>, StoreError> {
    let stamp = &e.queries().outbox_claim_stamp;
    if stamp.is_empty() {
        return claimed(e.fetch_alone(claim_query(e, p)).await?);
    }
    // Selected and locked first, then stamped (`claims::select_then_stamp` says why).
    let mut rows = super::claims::select_then_stamp(
        e,
        claim_query(e, p),
        outbox_row,
        |r| r.id,
        |ids| {
            e.query(stamp)
                .ids(ids)
                .text(p.relay)
                .bytes(p.token.as_bytes())
                .int(millis_of(p.lease))
                .opt_int(p.now.map(millis))
        },
    )
    .await?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// [`claim()`] through `conn`, in its transaction (an engine that sets up the claim's
/// transaction itself).
///
/// # Errors
/// As [`claim()`].
pub async fn claim_on<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    p: &ClaimOutboxParams<'_>,
) -> Result<Vec<OutboxRow>, StoreError> {
    claimed(E::fetch_all(claim_query(e, p), conn).await?)
}

fn claim_query<E: Engine>(e: &E, p: &ClaimOutboxParams<'_>) -> E::Query {
    e.fresh(&e.queries().outbox_claim)
        .text(p.relay)
        .bytes(p.token.as_bytes())
        .int(i64::from(p.limit))
        .int(millis_of(p.lease))
        .opt_int(p.now.map(millis))
}

/// The claimed rows, in insert order (RETURNING's order is not guaranteed).
fn claimed<R: Columns>(rows: Vec<R>) -> Result<Vec<OutboxRow>, StoreError> {
    let mut rows: Vec<OutboxRow> = rows.iter().map(outbox_row).collect::<Result<_, _>>()?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// Locks unsent rows in the relay's transaction (`outbox_lock.sql`), in insert order.
///
/// # Errors
/// The statement failed (or the engine has no lock-held claim), or a row's headers do not read.
pub async fn lock<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    p: &LockOutboxParams,
) -> Result<Vec<OutboxRow>, StoreError> {
    unsupported_if_absent(&e.queries().outbox_lock)?;
    let q = e
        .fresh(&e.queries().outbox_lock)
        .int(i64::from(p.limit))
        .opt_int(p.now.map(millis))
        .int(p.lock_key);
    claimed(E::fetch_all(q, conn).await?)
}

/// Records a lock-held batch, committed on its own (`outbox_hold.sql`).
///
/// # Errors
/// The statement failed, or the engine has no lock-held claim.
pub async fn hold<E: Engine>(
    e: &E,
    token: &ClaimToken,
    lock_key: i64,
    relay: &str,
    ids: &[i64],
) -> Result<(), StoreError> {
    unsupported_if_absent(&e.queries().outbox_hold)?;
    let q = e
        .query(&e.queries().outbox_hold)
        .bytes(token.as_bytes())
        .int(lock_key)
        .text(relay)
        .ids(ids);
    e.execute_alone(q).await.map(drop)
}

/// Judges the lock-held batches that were never marked (`outbox_reap_unmarked.sql`); how many
/// rows. Nothing to do on an engine without lock-held claims.
///
/// # Errors
/// The statement failed.
pub async fn reap_unmarked<E: Engine>(e: &E, max_attempts: u32) -> Result<u64, StoreError> {
    if e.queries().outbox_reap_unmarked.is_empty() {
        return Ok(0);
    }
    let q = e
        .fresh(&e.queries().outbox_reap_unmarked)
        .count(max_attempts);
    e.execute_alone(q).await
}

/// What an engine without the outbox's lock-held claim answers when asked for it.
pub const LEASE_ONLY: StoreError = StoreError::Unsupported {
    operation: "ClaimMode::LockHeld",
    reason: "this engine holds outbox rows under a lease only; use ClaimMode::Lease",
};

fn unsupported_if_absent(sql: &str) -> Result<(), StoreError> {
    if sql.is_empty() {
        return Err(LEASE_ONLY);
    }
    Ok(())
}

/// A column's text decoded as `T` (the headers' JSON, a status), or a decode error.
fn decoded<R: Columns, T, E>(
    r: &R,
    i: usize,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<T, StoreError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    parse(&r.text(i)?).map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))
}

fn outbox_row<R: Columns>(r: &R) -> Result<OutboxRow, StoreError> {
    let headers = decoded(r, 6, |t| serde_json::from_str(t))?;
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
        group_limit: r
            .opt_int(11)?
            .map(|n| u32::try_from(n.max(1)).unwrap_or(u32::MAX)),
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

/// Deletes claimed rows in place of marking them sent, fenced by the token
/// (`outbox_delete_sent.sql`); the ids deleted.
///
/// # Errors
/// The statement failed.
pub async fn delete_sent<E: Engine>(
    e: &E,
    ids: &[i64],
    token: &ClaimToken,
) -> Result<Vec<i64>, StoreError> {
    let q = e
        .query(&e.queries().outbox_delete_sent)
        .ids(ids)
        .bytes(token.as_bytes());
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

/// The rows `filter` selects, oldest first, without payloads (`outbox_list.sql`).
///
/// # Errors
/// The statement failed, or a row does not read.
pub async fn list<E: Engine>(
    e: &E,
    filter: &OutboxFilter,
    limit: u32,
) -> Result<Vec<OutboxEntry>, StoreError> {
    let q = e
        .query(&e.queries().outbox_list)
        .opt_ids(filter.id_list())
        .opt_text(filter.message_id.as_deref())
        .opt_text(filter.status.map(OutboxStatus::as_str))
        .opt_text(filter.destination.as_deref())
        .opt_text(filter.ordering_key.as_deref())
        .int(i64::from(limit.max(1)));
    e.fetch_alone(q).await?.iter().map(entry).collect()
}

/// Rows an operator's search selects, newest first, without payloads (`outbox_browse.sql`, or
/// `outbox_load.sql` for a message id: a unique key, found wherever it is).
///
/// # Errors
/// The statement failed, or a row does not read.
pub async fn browse<E: Engine>(
    e: &E,
    b: &OutboxBrowse<'_>,
) -> Result<Vec<OutboxEntry>, StoreError> {
    if let Some(message_id) = b.message_id {
        return Ok(load(e, None, Some(message_id))
            .await?
            .map(|mut row| {
                row.payload = Vec::new();
                row
            })
            .into_iter()
            .collect());
    }
    let path = b
        .payload_json
        .map(|(keys, _)| super::operate::json_keys(keys));
    let q = e
        .query(&e.queries().outbox_browse)
        .opt_text(b.status.map(OutboxStatus::as_str))
        .opt_text(b.destination)
        .opt_text(b.ordering_key)
        .opt_int(b.created_from.map(millis))
        .opt_bytes(b.payload_contains)
        .int(i64::from(b.limit.max(1)))
        .int(i64::try_from(b.window.max(1)).unwrap_or(i64::MAX))
        .opt_text(path.as_deref())
        .opt_text(b.payload_json.map(|(_, value)| value));
    e.fetch_alone(q).await?.iter().map(entry).collect()
}

/// One row in full, by row id or message id (`outbox_load.sql`).
///
/// # Errors
/// The statement failed, or the row does not read.
pub async fn load<E: Engine>(
    e: &E,
    id: Option<i64>,
    message_id: Option<&str>,
) -> Result<Option<OutboxEntry>, StoreError> {
    let q = e
        .query(&e.queries().outbox_load)
        .opt_int(id)
        .opt_text(message_id);
    e.fetch_alone(q).await?.first().map(entry).transpose()
}

/// Retries or discards the dead rows a filter selects, with the audit record, in one
/// transaction; or, for a dry run, only finds them (`outbox_select_dead.sql`,
/// `outbox_retry.sql` or `outbox_discard.sql`, `outbox_audit.sql`). The ids, in insert order.
///
/// # Errors
/// A statement or the commit failed.
pub async fn act_on_dead<E: Engine>(e: &E, p: &DeadParams<'_>) -> Result<Vec<i64>, StoreError> {
    let qs = e.queries();
    let f = p.filter;
    let mut tx = e.begin_write().await?;
    let q = e
        .query(&qs.outbox_select_dead)
        .opt_ids(f.id_list())
        .opt_text(f.message_id.as_deref())
        .opt_text(f.destination.as_deref())
        .opt_text(f.ordering_key.as_deref());
    let ids = E::fetch_all(q, &mut tx)
        .await?
        .iter()
        .map(|r| r.int(0))
        .collect::<Result<Vec<_>, _>>()?;
    if ids.is_empty() || !p.apply {
        // Dropped: rolled back, nothing changed.
        return Ok(ids);
    }
    let change = match p.action {
        DeadAction::Retry => &qs.outbox_retry,
        DeadAction::Discard => &qs.outbox_discard,
    };
    E::execute(e.query(change).ids(&ids), &mut tx).await?;
    let q = e
        .query(&qs.outbox_audit)
        .text(p.actor)
        .text(p.reason)
        .text(p.action.audit_name())
        .text(&f.to_string())
        .int(i64::try_from(ids.len()).unwrap_or(i64::MAX))
        .ids(&ids);
    E::execute(q, &mut tx).await?;
    tx.commit().await?;
    Ok(ids)
}

fn entry<R: Columns>(r: &R) -> Result<OutboxEntry, StoreError> {
    let headers = decoded(r, 6, |t| serde_json::from_str(t))?;
    let status = decoded(r, 8, str::parse::<OutboxStatus>)?;
    Ok(OutboxEntry {
        id: r.int(0)?,
        message_id: r.text(1)?,
        destination: r.text(2)?,
        ordering_key: r.opt_text(3)?,
        message_type: r.opt_text(4)?,
        correlation_id: r.opt_text(5)?,
        headers,
        payload_bytes: u64::try_from(r.int(7)?).unwrap_or(0),
        status,
        attempts: r.count(9)?,
        created_at: from_millis(r.opt_int(10)?),
        available_at: from_millis(r.opt_int(11)?),
        sent_at: from_millis(r.opt_int(12)?),
        last_error: r.opt_text(13)?,
        claimed_by: r.opt_text(14)?,
        caused_by_consumer: r.opt_text(15)?,
        caused_by_message_id: r.opt_text(16)?,
        payload: r.bytes(17)?,
    })
}
