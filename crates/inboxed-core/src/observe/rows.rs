//! The observation statements' rows read into their types, once for every backend: the
//! statements return the same columns (times as milliseconds since the epoch) everywhere.

use sqlx::{ColumnIndex, Decode, Row, Type};

use super::{Backlog, DeadLetterCount, DeadLetterRecord, DeadLetterSummary, from_millis};
use crate::error::StoreError;

/// The column types the observation rows hold: what a backend's row must decode.
pub trait ObservedRow: Row
where
    for<'r> &'r str: ColumnIndex<Self>,
{
    /// Column `name` as `T`.
    ///
    /// # Errors
    /// A missing column or a type the value does not decode into.
    fn field<'r, T>(&'r self, name: &str) -> Result<T, StoreError>
    where
        T: Decode<'r, Self::Database> + Type<Self::Database>,
    {
        self.try_get(name).map_err(StoreError::from_sqlx)
    }
}

impl<R: Row> ObservedRow for R where for<'r> &'r str: ColumnIndex<R> {}

/// A backlog row of `observe_inbox.sql`.
///
/// # Errors
/// A column missing or of another type.
pub fn backlog<R>(row: &R) -> Result<Backlog, StoreError>
where
    R: ObservedRow,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(Backlog::from_columns(
        row.field("consumer_name")?,
        [
            row.field("pending")?,
            row.field("processing")?,
            row.field("dead")?,
            row.field("expired_leases")?,
            row.field("parked_aggregates")?,
        ],
        [
            row.field("oldest_pending_ms")?,
            row.field("next_lease_expiry_ms")?,
        ],
    ))
}

/// A row of `observe_dead_letters.sql`.
///
/// # Errors
/// A column missing or of another type.
pub fn letter_count<R>(row: &R) -> Result<DeadLetterCount, StoreError>
where
    R: ObservedRow,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(DeadLetterCount::from_columns(
        row.field("consumer_name")?,
        row.field("reason")?,
        row.field("count")?,
        row.field("newest_ms")?,
    ))
}

/// A row of `list_dead_letters.sql`.
///
/// # Errors
/// A column missing or of another type.
pub fn summary<R>(row: &R) -> Result<DeadLetterSummary, StoreError>
where
    R: ObservedRow,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
{
    let bytes: i64 = row.field("payload_bytes")?;
    Ok(DeadLetterSummary {
        id: row.field("id")?,
        consumer: row.field("consumer_name")?,
        message_id: row.field("message_id")?,
        message_type: row.field("message_type")?,
        reason: row.field("reason")?,
        attempts: row.field("attempts")?,
        last_failed: from_millis(row.field("last_failed_ms")?),
        payload_bytes: u64::try_from(bytes).unwrap_or(0),
        error: row.field("error")?,
    })
}

/// A row of `load_dead_letter_by_id.sql`.
///
/// # Errors
/// A column missing or of another type.
pub fn record<R>(row: &R) -> Result<DeadLetterRecord, StoreError>
where
    R: ObservedRow,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(DeadLetterRecord {
        id: row.field("id")?,
        consumer: row.field("consumer_name")?,
        message_id: row.field("message_id")?,
        message_type: row.field("message_type")?,
        correlation_id: row.field("correlation_id")?,
        payload: row.field("payload")?,
        reason: row.field("reason")?,
        error: row.field("error")?,
        attempts: row.field("attempts")?,
        first_failed: from_millis(row.field("first_failed_ms")?),
        last_failed: from_millis(row.field("last_failed_ms")?),
    })
}
