//! SeaORM's errors, classified as every other driver's are: by the SQLSTATE of the sqlx error
//! SeaORM carries (it runs on sqlx), never by message text. SeaORM keeps that error behind an
//! `Arc`; when nobody else holds it, it is taken out whole, otherwise a carrier with its code
//! keeps the original as its source.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::sync::Arc;

use sea_orm::{DbErr, RuntimeErr};

use super::{HandlerError, StoreError};

/// A sqlx database error that SeaORM still shares, with its SQLSTATE, as sqlx's error carrier
/// holds one.
#[derive(Debug)]
struct SharedError(Arc<sqlx::Error>);

impl SharedError {
    fn db(&self) -> Option<&dyn sqlx::error::DatabaseError> {
        match self.0.as_ref() {
            sqlx::Error::Database(db) => Some(db.as_ref()),
            _ => None,
        }
    }
}

impl std::fmt::Display for SharedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for SharedError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.0.as_ref())
    }
}

impl sqlx::error::DatabaseError for SharedError {
    fn message(&self) -> &str {
        self.db().map_or("", |db| db.message())
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        self.db().and_then(|db| db.code())
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
        self.db()
            .map_or(sqlx::error::ErrorKind::Other, |db| db.kind())
    }
}

/// sqlx's error inside SeaORM's: whole when SeaORM no longer shares it, else carried in the
/// variant that classifies it the same way.
fn unshared(e: Arc<sqlx::Error>) -> sqlx::Error {
    let shared = match Arc::try_unwrap(e) {
        Ok(e) => return e,
        Err(shared) => shared,
    };
    match shared.as_ref() {
        sqlx::Error::Database(_) => sqlx::Error::Database(Box::new(SharedError(shared))),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => sqlx::Error::Io(std::io::Error::other(SharedError(shared))),
        _ => sqlx::Error::Decode(Box::new(SharedError(shared))),
    }
}

impl StoreError {
    /// Classifies a SeaORM error by the sqlx error it carries. A connection SeaORM could not
    /// get from its pool is [`StoreError::Unavailable`]; an error of SeaORM's own (a value that
    /// does not convert, a record not found) is [`StoreError::Database`]: no retry mends it.
    #[must_use]
    pub fn from_sea_orm(err: DbErr) -> Self {
        let carried = match err {
            DbErr::Conn(RuntimeErr::SqlxError(e))
            | DbErr::Exec(RuntimeErr::SqlxError(e))
            | DbErr::Query(RuntimeErr::SqlxError(e)) => unshared(e),
            DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => {
                sqlx::Error::Io(std::io::Error::other(err))
            }
            other => sqlx::Error::Decode(Box::new(other)),
        };
        Self::from_sqlx(carried)
    }
}

/// A handler on SeaORM writes `?` on its queries, as one on sqlx does: transient when the
/// server says so (deadlock, serialization failure, timeout, lost connection), permanent
/// otherwise.
impl From<DbErr> for HandlerError {
    fn from(err: DbErr) -> Self {
        StoreError::from_sea_orm(err).into()
    }
}
