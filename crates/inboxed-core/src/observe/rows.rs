//! The observation statements' rows read into their types, once for every backend: the
//! statements return the same columns (times as milliseconds since the epoch) everywhere, read
//! by name so that a statement may order them as its engine finds natural.

use super::{Backlog, DeadLetterCount, DeadLetterRecord, DeadLetterSummary, from_millis};
use crate::engine::Columns;
use crate::error::StoreError;

/// A backlog row of `observe_inbox.sql`.
///
/// # Errors
/// A column missing or of another type.
pub fn backlog(row: &impl Columns) -> Result<Backlog, StoreError> {
    let int = |name| row.int(row.position(name)?);
    let opt_int = |name| row.opt_int(row.position(name)?);
    Ok(Backlog::from_columns(
        row.text(row.position("consumer_name")?)?,
        [
            int("pending")?,
            int("processing")?,
            int("dead")?,
            int("expired_leases")?,
            int("parked_aggregates")?,
        ],
        [
            opt_int("oldest_pending_ms")?,
            opt_int("next_lease_expiry_ms")?,
        ],
    ))
}

/// A row of `observe_dead_letters.sql`.
///
/// # Errors
/// A column missing or of another type.
pub fn letter_count(row: &impl Columns) -> Result<DeadLetterCount, StoreError> {
    Ok(DeadLetterCount::from_columns(
        row.text(row.position("consumer_name")?)?,
        row.text(row.position("reason")?)?,
        row.int(row.position("count")?)?,
        row.opt_int(row.position("newest_ms")?)?,
    ))
}

/// A row of `list_dead_letters.sql`.
///
/// # Errors
/// A column missing or of another type.
pub fn summary(row: &impl Columns) -> Result<DeadLetterSummary, StoreError> {
    let at = |name| row.position(name);
    Ok(DeadLetterSummary {
        id: row.int(at("id")?)?,
        consumer: row.text(at("consumer_name")?)?,
        message_id: row.opt_text(at("message_id")?)?,
        message_type: row.opt_text(at("message_type")?)?,
        reason: row.text(at("reason")?)?,
        attempts: row.int(at("attempts")?)?,
        last_failed: from_millis(row.opt_int(at("last_failed_ms")?)?),
        payload_bytes: u64::try_from(row.int(at("payload_bytes")?)?).unwrap_or(0),
        error: row.text(at("error")?)?,
    })
}

/// A row of `load_dead_letter_by_id.sql`.
///
/// # Errors
/// A column missing or of another type.
pub fn record(row: &impl Columns) -> Result<DeadLetterRecord, StoreError> {
    let at = |name| row.position(name);
    Ok(DeadLetterRecord {
        id: row.int(at("id")?)?,
        consumer: row.text(at("consumer_name")?)?,
        message_id: row.opt_text(at("message_id")?)?,
        message_type: row.opt_text(at("message_type")?)?,
        correlation_id: row.opt_text(at("correlation_id")?)?,
        payload: row.bytes(at("payload")?)?,
        reason: row.text(at("reason")?)?,
        error: row.text(at("error")?)?,
        attempts: row.int(at("attempts")?)?,
        first_failed: from_millis(row.opt_int(at("first_failed_ms")?)?),
        last_failed: from_millis(row.opt_int(at("last_failed_ms")?)?),
    })
}
