//! What a handler returns: its failure classified as transient, permanent or to retry after a
//! delay, and the conversions that let it write `?` on a statement or a store operation.

use super::{BoxError, StoreError};

/// What a handler tells the engine about a failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// Might succeed later (a lock timeout, a briefly unavailable dependency): the delivery is
    /// requeued, and the attempt counts toward `max_attempts`, unless the consumer's kill switch
    /// judges the failure an outage's ([`KillSwitch`](crate::KillSwitch)).
    #[error("transient failure")]
    Transient(#[source] BoxError),
    /// Will never succeed (a payload that does not decode, a broken invariant): the message
    /// goes to the dead-letter path at once. Not the same as "processed".
    #[error("permanent failure")]
    Permanent(#[source] BoxError),
    /// Might succeed, but not before `after` (a downstream service's 429 with `Retry-After`, a
    /// lock the handler saw held): the delivery is redelivered no sooner where the broker can
    /// delay it, and the attempt does not count toward `max_attempts`, since the message is not
    /// at fault. A handler that says so of a message for ever keeps it for ever.
    #[error("retry after {after:?}")]
    RetryAfter {
        /// The earliest the message should run again.
        after: std::time::Duration,
        /// What the handler saw.
        #[source]
        source: BoxError,
    },
}

impl HandlerError {
    /// A transient failure from any error.
    pub fn transient(err: impl Into<BoxError>) -> Self {
        Self::Transient(err.into())
    }

    /// A permanent failure from any error.
    pub fn permanent(err: impl Into<BoxError>) -> Self {
        Self::Permanent(err.into())
    }

    /// A failure to retry no sooner than `after`, from any error.
    pub fn retry_after(after: std::time::Duration, err: impl Into<BoxError>) -> Self {
        Self::RetryAfter {
            after,
            source: err.into(),
        }
    }
}

/// `sqlx::Error` from the handler's own statements is transient when the database says so
/// (deadlock, serialization failure, timeout, lost connection; see [`StoreError::from_sqlx`])
/// and permanent otherwise. Handlers can therefore write `query.execute(&mut *conn).await?`.
impl From<sqlx::Error> for HandlerError {
    fn from(err: sqlx::Error) -> Self {
        StoreError::from_sqlx(err).into()
    }
}

/// A store's error is transient or permanent as its class says, so that a handler can write
/// `?` on a store operation, or on the end of a transaction of its own
/// ([`Transaction`](crate::driver::Transaction)), as on a statement.
impl From<StoreError> for HandlerError {
    fn from(err: StoreError) -> Self {
        if err.is_transient() {
            Self::Transient(Box::new(err))
        } else {
            Self::Permanent(Box::new(err))
        }
    }
}

/// `.transient()?` and `.permanent()?` on any result, keeping the source error.
pub trait ResultExt<T> {
    /// Marks the error as transient.
    ///
    /// # Errors
    /// [`HandlerError::Transient`] wrapping the original error.
    fn transient(self) -> Result<T, HandlerError>;
    /// Marks the error as permanent.
    ///
    /// # Errors
    /// [`HandlerError::Permanent`] wrapping the original error.
    fn permanent(self) -> Result<T, HandlerError>;
}

impl<T, E: Into<BoxError>> ResultExt<T> for Result<T, E> {
    fn transient(self) -> Result<T, HandlerError> {
        self.map_err(HandlerError::transient)
    }
    fn permanent(self) -> Result<T, HandlerError> {
        self.map_err(HandlerError::permanent)
    }
}
