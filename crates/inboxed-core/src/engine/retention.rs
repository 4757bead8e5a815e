//! The [`RetentionStore`](crate::retention::store::RetentionStore) operations that every engine
//! runs alike: bounded batches of deletes, and the count of expired keys.

use std::time::{Duration, SystemTime};

use super::{Args, Columns, Engine};
use crate::driver::Transaction as _;
use crate::envelope::ConsumerName;
use crate::error::StoreError;
use crate::inbox::store::millis;
use crate::retention::store::{BatchParams, ProcessedStats, PurgeParams};
use crate::store::BeginParams;

/// Runs one bounded batch statement in a short transaction of its own, under the given
/// statement and lock bounds; the rows it changed.
async fn bounded<E>(
    e: &E,
    q: E::Query,
    statement_timeout: Duration,
    lock_timeout: Duration,
) -> Result<u64, StoreError>
where
    E: Engine,
{
    let mut tx = e
        .begin(&BeginParams::bounded(statement_timeout, lock_timeout))
        .await?;
    let done = E::execute(q, &mut tx).await?;
    tx.commit().await?;
    Ok(done)
}

/// One batch of the processed keys' purge.
///
/// # Errors
/// The statement failed or ran past its bounds.
pub async fn purge_processed<E>(e: &E, p: &PurgeParams<'_>) -> Result<u64, StoreError>
where
    E: Engine,
{
    purge_rows(e, &e.queries().purge_processed, p).await
}

/// [`purge_processed`] with another statement of the same parameters (`$1` the consumer, `$2`
/// the cut-off in ms, `$3` the limit): MySQL's purge of the keys outside its time partitions.
///
/// # Errors
/// The statement failed or timed out.
pub async fn purge_rows<E>(
    e: &E,
    sql: &std::sync::Arc<str>,
    p: &PurgeParams<'_>,
) -> Result<u64, StoreError>
where
    E: Engine,
{
    let q = e
        .query(sql)
        .text(p.consumer.as_str())
        .int(millis(p.older_than))
        .int(i64::from(p.limit));
    bounded(e, q, p.statement_timeout, p.lock_timeout).await
}

/// One batch of another table's retention statement `sql` (`$1` the cut-off, `$2` the
/// limit): dead letters, the redrive audit, done payloads to redact.
///
/// # Errors
/// The statement failed or ran past its bounds.
pub async fn batch<E>(e: &E, sql: &std::sync::Arc<str>, p: &BatchParams) -> Result<u64, StoreError>
where
    E: Engine,
{
    let q = e
        .query(sql)
        .int(millis(p.older_than))
        .int(i64::from(p.limit));
    bounded(e, q, p.statement_timeout, p.lock_timeout).await
}

/// How many keys of `consumer` expired before `older_than`, counted up to `cap`.
///
/// # Errors
/// The statement failed.
pub async fn count_expired<E: Engine>(
    e: &E,
    consumer: &ConsumerName,
    older_than: SystemTime,
    cap: u64,
) -> Result<u64, StoreError> {
    let q = e
        .query(&e.queries().count_expired)
        .text(consumer.as_str())
        .int(millis(older_than))
        .int(i64::try_from(cap).unwrap_or(i64::MAX));
    let n = e
        .fetch_alone(q)
        .await?
        .first()
        .map_or(Ok(0), |r| r.int(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The size and age of a consumer's processed keys (`processed_stats.sql`: an estimate of the
/// rows, the table's and its indexes' bytes, the keys of the last minute, the oldest key's
/// time in milliseconds); all zero when the statement returns no row.
///
/// # Errors
/// The statement failed.
pub async fn processed_stats<E: Engine>(
    e: &E,
    consumer: &ConsumerName,
) -> Result<ProcessedStats, StoreError> {
    let q = e
        .query(&e.queries().processed_stats)
        .text(consumer.as_str());
    let Some(row) = e.fetch_alone(q).await?.into_iter().next() else {
        return Ok(ProcessedStats::default());
    };
    Ok(ProcessedStats::from_columns(
        row.opt_int(0)?,
        row.int(1)?,
        row.int(2)?,
        row.int(3)?,
        row.opt_real(4)?,
    ))
}
