//! What a write to the outbox can fail with, typed so that a handler's `?` does the right
//! thing: a message the outbox refuses can never be written, so the inbound message that
//! caused it is dead-lettered at once with the field named; a failed insert is the database's
//! and is tried again like any failed statement.

use crate::error::{Error, HandlerError, StoreError};
use crate::outbox::OutgoingError;

/// Why [`Outbox::write`](crate::Outbox::write) or `write_many` wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// A field cannot be stored or carried by a broker (the source names which). Trying again
    /// cannot help: as a handler's error it is permanent.
    #[error("the outbox refused the outgoing message")]
    Refused(#[from] OutgoingError),
    /// The connection is not inside a transaction: the row would commit on its own, before
    /// the business change it belongs to, and be sent even if that change rolled back. Begin
    /// the transaction with sqlx (`pool.begin()`, `conn.begin()`); a handler's connection
    /// always is. Permanent: the code, not the message, is wrong.
    #[error("an outbox write outside a transaction: it would commit on its own")]
    NotInTransaction,
    /// The insert failed. Transient or not as the database error is; either way the caller's
    /// transaction should be rolled back, as after any failed statement.
    #[error("the outbox write failed")]
    Store(#[from] StoreError),
}

impl WriteError {
    /// Whether trying again may succeed: only a database error that is itself transient.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Store(e) if e.is_transient())
    }
}

impl From<WriteError> for HandlerError {
    fn from(err: WriteError) -> Self {
        if err.is_transient() {
            Self::Transient(Box::new(err))
        } else {
            Self::Permanent(Box::new(err))
        }
    }
}

impl From<WriteError> for Error {
    fn from(err: WriteError) -> Self {
        match err {
            WriteError::Refused(e) => Self::InvalidOutgoing(e),
            WriteError::Store(e) => Self::Store(e),
            WriteError::NotInTransaction => Self::OutboxOutsideTransaction,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handler's `?` on a write: only a transient database error is tried again; a refusal
    /// or a write outside a transaction dead-letters the inbound message at once.
    #[test]
    fn only_a_transient_database_error_is_tried_again() {
        let refused: HandlerError = WriteError::Refused(OutgoingError::EmptyDestination).into();
        assert!(matches!(refused, HandlerError::Permanent(_)), "{refused:?}");
        let outside: HandlerError = WriteError::NotInTransaction.into();
        assert!(matches!(outside, HandlerError::Permanent(_)), "{outside:?}");
        let lost = StoreError::from_sqlx(sqlx::Error::PoolTimedOut);
        assert!(lost.is_transient());
        let lost: HandlerError = WriteError::Store(lost).into();
        assert!(matches!(lost, HandlerError::Transient(_)), "{lost:?}");
        let broken = StoreError::from_sqlx(sqlx::Error::RowNotFound);
        assert!(!broken.is_transient());
        let broken: HandlerError = WriteError::Store(broken).into();
        assert!(matches!(broken, HandlerError::Permanent(_)), "{broken:?}");
    }
}
