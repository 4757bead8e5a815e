//! SQLite result-code classification. Extended result codes only, never message text.

use inboxed_core::StoreError;

/// Classifies a SQLite error by its extended result code.
pub(crate) fn classify(err: sqlx::Error) -> StoreError {
    let err = match StoreError::classify_common(err) {
        Ok(classified) => return classified,
        Err(err) => err,
    };
    let code = match &err {
        sqlx::Error::Database(db) => db.code().and_then(|c| c.parse::<u32>().ok()),
        _ => None,
    };
    match code {
        // SQLITE_BUSY and SQLITE_LOCKED families: the busy timeout ran out.
        Some(c) if matches!(c & 0xff, 5 | 6) => StoreError::Timeout(err),
        // SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY
        Some(2067 | 1555) => StoreError::UniqueViolation(err),
        // SQLITE_CANTOPEN, SQLITE_IOERR family, SQLITE_FULL: the file is not usable now.
        Some(c) if matches!(c & 0xff, 14 | 10 | 13) => StoreError::Unavailable(err),
        _ => StoreError::Database(err),
    }
}
