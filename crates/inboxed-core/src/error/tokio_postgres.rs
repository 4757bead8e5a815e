//! tokio-postgres's errors, classified as every other driver's are: by SQLSTATE, never by
//! message text. The classification is [`StoreError`]'s one table; a tokio-postgres error
//! reaches it as a database error that keeps the original as its source, so a handler's `?`
//! and the library's own statements on that driver read the same.

use std::borrow::Cow;
use std::error::Error as StdError;

use super::{HandlerError, StoreError};

/// A tokio-postgres error as sqlx's error carrier holds a database's: its SQLSTATE and
/// message, with the error itself kept as the source.
#[derive(Debug)]
struct ServerError(tokio_postgres::Error);

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for ServerError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl sqlx::error::DatabaseError for ServerError {
    fn message(&self) -> &str {
        self.0.as_db_error().map_or("", |db| db.message())
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        self.0.code().map(|c| Cow::Borrowed(c.code()))
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
        use tokio_postgres::error::SqlState;
        match self.0.code() {
            Some(c) if *c == SqlState::UNIQUE_VIOLATION => sqlx::error::ErrorKind::UniqueViolation,
            Some(c) if *c == SqlState::FOREIGN_KEY_VIOLATION => {
                sqlx::error::ErrorKind::ForeignKeyViolation
            }
            Some(c) if *c == SqlState::NOT_NULL_VIOLATION => {
                sqlx::error::ErrorKind::NotNullViolation
            }
            Some(c) if *c == SqlState::CHECK_VIOLATION => sqlx::error::ErrorKind::CheckViolation,
            _ => sqlx::error::ErrorKind::Other,
        }
    }
}

impl StoreError {
    /// Classifies a tokio-postgres error by its SQLSTATE. Without one, a closed connection or
    /// a socket's failure is [`StoreError::Unavailable`], and anything else (a value that does
    /// not convert to or from its column's type) is [`StoreError::Database`]: no retry mends
    /// it.
    #[must_use]
    pub fn from_tokio_postgres(err: tokio_postgres::Error) -> Self {
        let lost = err.is_closed()
            || err
                .source()
                .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some());
        let carried = if err.code().is_some() {
            sqlx::Error::Database(Box::new(ServerError(err)))
        } else if lost {
            sqlx::Error::Io(std::io::Error::other(err))
        } else {
            sqlx::Error::Decode(Box::new(err))
        };
        Self::from_sqlx(carried)
    }
}

/// A handler on tokio-postgres writes `?` on its statements, as one on sqlx does: transient
/// when the server says so (deadlock, serialization failure, timeout, lost connection),
/// permanent otherwise.
impl From<tokio_postgres::Error> for HandlerError {
    fn from(err: tokio_postgres::Error) -> Self {
        StoreError::from_tokio_postgres(err).into()
    }
}
