//! diesel's errors, classified as every other driver's are: by SQLSTATE, never by message text.
//! A diesel error that carries a SQLSTATE reaches [`StoreError`]'s one table as a database
//! error that keeps the original as its source, as a tokio-postgres error does.

use std::borrow::Cow;
use std::error::Error as StdError;

use diesel::result::{DatabaseErrorKind, Error as DieselError};

use super::{HandlerError, StoreError};

/// A diesel error with the server's SQLSTATE, as sqlx's error carrier holds a database's.
#[derive(Debug)]
struct ServerError {
    code: String,
    err: DieselError,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.err, f)
    }
}

impl StdError for ServerError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.err)
    }
}

impl sqlx::error::DatabaseError for ServerError {
    fn message(&self) -> &str {
        match &self.err {
            DieselError::DatabaseError(_, info) => info.message(),
            _ => "",
        }
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.code))
    }

    fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        match &self.err {
            DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => {
                sqlx::error::ErrorKind::UniqueViolation
            }
            DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => {
                sqlx::error::ErrorKind::ForeignKeyViolation
            }
            DieselError::DatabaseError(DatabaseErrorKind::NotNullViolation, _) => {
                sqlx::error::ErrorKind::NotNullViolation
            }
            DieselError::DatabaseError(DatabaseErrorKind::CheckViolation, _) => {
                sqlx::error::ErrorKind::CheckViolation
            }
            _ => sqlx::error::ErrorKind::Other,
        }
    }
}

impl StoreError {
    /// Classifies a diesel error by its SQLSTATE. Without one, a connection that could not be
    /// used (closed, unable to send, a transaction manager left broken by a lost connection, a
    /// failed `COMMIT` whose rollback failed too) is [`StoreError::Unavailable`], and anything
    /// else (a value that does not convert) is [`StoreError::Database`]: no retry mends it.
    /// diesel-async reports every client-side failure of tokio-postgres without a SQLSTATE as
    /// unable to send, so those count as the connection's.
    #[must_use]
    pub fn from_diesel(err: DieselError) -> Self {
        let code = match &err {
            DieselError::DatabaseError(_, info) => info.sqlstate().map(|s| s.as_str().to_owned()),
            _ => None,
        };
        let lost = matches!(
            err,
            DieselError::DatabaseError(
                DatabaseErrorKind::UnableToSendCommand | DatabaseErrorKind::ClosedConnection,
                _
            ) | DieselError::BrokenTransactionManager
                | DieselError::RollbackErrorOnCommit { .. }
        );
        let carried = match code {
            Some(code) => sqlx::Error::Database(Box::new(ServerError { code, err })),
            None if lost => sqlx::Error::Io(std::io::Error::other(err)),
            None => sqlx::Error::Decode(Box::new(err)),
        };
        Self::from_sqlx(carried)
    }
}

/// A handler on diesel-async writes `?` on its queries, as one on sqlx does: transient when
/// the server says so (deadlock, serialization failure, timeout, lost connection), permanent
/// otherwise.
impl From<DieselError> for HandlerError {
    fn from(err: DieselError) -> Self {
        StoreError::from_diesel(err).into()
    }
}
