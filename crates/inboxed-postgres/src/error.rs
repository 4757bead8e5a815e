//! SQLSTATE classification. Codes only, never message text.

use inboxed_core::StoreError;

/// Classifies a PostgreSQL error by SQLSTATE.
pub(crate) fn classify(err: sqlx::Error) -> StoreError {
    let err = match StoreError::classify_common(err) {
        Ok(classified) => return classified,
        Err(err) => err,
    };
    let code = match &err {
        sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
        _ => None,
    };
    match code.as_deref() {
        Some("40001") => StoreError::Serialization(err),
        Some("40P01") => StoreError::Deadlock(err),
        // lock_not_available, query_canceled (statement_timeout), idle_in_transaction timeout
        Some("55P03" | "57014" | "25P03") => StoreError::Timeout(err),
        Some("23505") => StoreError::UniqueViolation(err),
        // admin_shutdown, crash_shutdown, cannot_connect_now, and class 08 (connection exception)
        Some(c) if matches!(c, "57P01" | "57P02" | "57P03") || c.starts_with("08") => {
            StoreError::Unavailable(err)
        }
        _ => StoreError::Database(err),
    }
}
