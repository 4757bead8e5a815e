//! The [`InboxStore`](crate::inbox::InboxStore) operations on claimed rows (completion,
//! failure, leases, release, replay, purge), for every engine.

use std::time::{Duration, SystemTime};

use super::{Args, Columns, Conn, Engine};
use crate::driver::Transaction as _;
use crate::error::StoreError;
use crate::inbox::store::{
    ClaimToken, CompleteParams, Completed, FailParams, Failed, ReplayParams, Replayed, millis,
    millis_of,
};

/// Marks a claimed row done in the caller's transaction, fenced by its claim token.
///
/// # Errors
/// The statement failed.
pub async fn complete<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    p: &CompleteParams<'_>,
) -> Result<Completed, StoreError> {
    let q = e
        .query(&e.queries().complete)
        .int(p.id)
        .bytes(p.token.as_bytes());
    Ok(if E::execute(q, conn).await? == 1 {
        Completed::Done
    } else {
        Completed::LostClaim
    })
}

/// Marks the rows `ids` of a batch done in the caller's transaction; the ids it marked (the
/// others' claims were lost).
///
/// # Errors
/// The statement failed.
pub async fn complete_batch<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    ids: &[i64],
    token: &ClaimToken,
) -> Result<Vec<i64>, StoreError> {
    let q = e
        .query(&e.queries().complete_batch)
        .ids(ids)
        .bytes(token.as_bytes());
    E::fetch_all(q, conn)
        .await?
        .iter()
        .map(|row| row.int(0))
        .collect()
}

/// Records a claimed row's failure on its own: back to pending after its backoff, or dead.
///
/// # Errors
/// The statement failed.
pub async fn fail<E: Engine>(e: &E, p: &FailParams<'_>) -> Result<Failed, StoreError> {
    fail_claimed(e, &e.queries().fail, p).await
}

/// A claimed row's failure with `sql` (`fail.sql`, `outbox_fail.sql`: the inbox's rows and
/// the outbox's share the protocol), fenced by its token; the statement returns the new
/// status, or no row when the claim was lost.
///
/// # Errors
/// The statement failed.
pub async fn fail_claimed<E: Engine>(
    e: &E,
    sql: &std::sync::Arc<str>,
    p: &FailParams<'_>,
) -> Result<Failed, StoreError> {
    let q = e
        .query(sql)
        .int(p.id)
        .bytes(p.token.as_bytes())
        .text(p.error)
        .int(millis_of(p.backoff))
        .count(p.max_attempts)
        .flag(p.permanent)
        .opt_int(p.now.map(millis));
    let status = e
        .fetch_alone(q)
        .await?
        .first()
        .map(|r| r.text(0))
        .transpose()?;
    Ok(match status.as_deref() {
        None => Failed::LostClaim,
        Some("dead") => Failed::Dead,
        Some(_) => Failed::Retrying,
    })
}

/// Extends the lease of every row of `ids` still held under `token`; how many.
///
/// # Errors
/// The statement failed.
pub async fn extend_leases<E: Engine>(
    e: &E,
    token: &ClaimToken,
    ids: &[i64],
    lease: Duration,
) -> Result<u64, StoreError> {
    let q = e
        .query(&e.queries().extend_leases)
        .bytes(token.as_bytes())
        .int(millis_of(lease))
        .opt_int(None)
        .ids(ids);
    e.execute_alone(q).await
}

/// Hands back the rows held under `token` (only `ids`, when given) without counting an
/// attempt, by `sql` (the inbox's `release.sql`, the outbox's `outbox_release.sql`: one
/// protocol; the inbox's also takes `after`, the delay before the rows are claimable again);
/// how many.
///
/// # Errors
/// The statement failed.
pub async fn release_claimed<E: Engine>(
    e: &E,
    sql: &std::sync::Arc<str>,
    token: &ClaimToken,
    ids: Option<&[i64]>,
    after: Option<Duration>,
) -> Result<u64, StoreError> {
    let mut q = e.query(sql).bytes(token.as_bytes()).opt_ids(ids);
    if let Some(after) = after {
        q = q.int(millis_of(after));
    }
    e.execute_alone(q).await
}

/// Deletes up to `limit` settled rows older than `older_than`, oldest first, by `sql` (the
/// inbox's `purge_done.sql`, the outbox's `outbox_purge_sent.sql`); how many.
///
/// # Errors
/// The statement failed.
pub async fn purge_before<E: Engine>(
    e: &E,
    sql: &std::sync::Arc<str>,
    older_than: SystemTime,
    limit: u32,
) -> Result<u64, StoreError> {
    let q = e.query(sql).int(millis(older_than)).int(i64::from(limit));
    e.execute_alone(q).await
}

/// Sets the selected rows pending again, with an audit row, in one transaction.
///
/// # Errors
/// A statement or the commit failed.
pub async fn replay<E: Engine>(e: &E, p: &ReplayParams<'_>) -> Result<Replayed, StoreError> {
    let sel = p.selector;
    let qs = e.queries();
    let mut tx = e.begin_write().await?;
    let q = e
        .query(&qs.replay_select)
        .text(p.consumer.as_str())
        .opt_ids(sel.ids.as_deref())
        .opt_text(sel.aggregate_id.as_deref())
        .opt_int(sel.received_from.map(millis))
        .opt_int(sel.received_before.map(millis))
        .flag(p.include_done);
    let mut out = Replayed::default();
    for row in E::fetch_all(q, &mut tx).await? {
        out.ids.push(row.int(0)?);
        out.done_rows += u64::from(row.flag(1)?);
    }
    if out.ids.is_empty() || !p.apply {
        // Dropped: rolled back, nothing changed.
        return Ok(out);
    }
    E::execute(e.query(&qs.replay_reset).ids(&out.ids), &mut tx).await?;
    let q = e
        .query(&qs.replay_audit)
        .text(p.actor)
        .text(p.reason)
        .text(p.consumer.as_str())
        .text(&sel.to_string())
        .int(i64::try_from(out.ids.len()).unwrap_or(i64::MAX))
        .int(i64::try_from(out.done_rows).unwrap_or(i64::MAX))
        .ids(&out.ids);
    E::execute(q, &mut tx).await?;
    tx.commit().await?;
    Ok(out)
}
