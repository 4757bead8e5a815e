//! Typed errors. Each keeps its source; transient ones are classified by SQLSTATE or result
//! code in the backend, never by message text.

use crate::envelope::{ConsumerName, EnvelopeError};

/// A boxed error from user code or a broker client.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the store failed with. Backends build it from `sqlx::Error` through their classifier.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLSTATE 40001: the transaction lost a serialization check. Retrying can succeed.
    #[error("serialization failure (SQLSTATE 40001)")]
    Serialization(#[source] sqlx::Error),
    /// SQLSTATE 40P01: the transaction was chosen as a deadlock victim. Retrying can succeed.
    #[error("deadlock detected (SQLSTATE 40P01)")]
    Deadlock(#[source] sqlx::Error),
    /// A lock, statement or idle-in-transaction timeout (SQLSTATE 55P03, 57014, 25P03), or
    /// SQLite's busy timeout. Retrying can succeed.
    #[error("timed out waiting for the database")]
    Timeout(#[source] sqlx::Error),
    /// The connection was lost, refused, or the pool had none to give in time.
    #[error("database unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// SQLSTATE 23505 on a constraint other than the dedup key, which the claim handles itself.
    #[error("unique constraint violated (SQLSTATE 23505)")]
    UniqueViolation(#[source] sqlx::Error),
    /// Any other database error; not worth retrying.
    #[error("database error")]
    Database(#[source] sqlx::Error),
    /// A schema or table-prefix name that is not a plain identifier.
    #[error("invalid identifier {name:?}: {reason}")]
    InvalidIdentifier {
        /// The refused name.
        name: String,
        /// The rule it broke.
        reason: &'static str,
    },
    /// A migration applied earlier no longer matches the one embedded in this build.
    #[error("migration {version} was changed after it was applied (checksum mismatch)")]
    MigrationChanged {
        /// The migration's version number.
        version: i64,
    },
    /// The database has a newer migration than this build knows about.
    #[error("the database has migration {version}, newer than this build of inboxed knows")]
    MigrationUnknown {
        /// The unknown version.
        version: i64,
    },
    /// A setting that lets the database lose commits it has acknowledged.
    #[error(
        "{setting} = {value} can lose commits the database has already acknowledged; the inbox \
         would then ack messages whose effect is gone. {hint}"
    )]
    NonDurable {
        /// The setting (`synchronous_commit`, `fsync`, `PRAGMA synchronous`).
        setting: &'static str,
        /// Its current value.
        value: String,
        /// How to fix it, or how to override the check knowingly.
        hint: &'static str,
    },
}

impl StoreError {
    /// `true` when the same operation can succeed if retried: serialization failures,
    /// deadlocks, timeouts and lost connections.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Serialization(_) | Self::Deadlock(_) | Self::Timeout(_) | Self::Unavailable(_)
        )
    }

    /// Classifies errors that every backend reports alike: pool and I/O failures.
    ///
    /// # Errors
    /// Gives the error back for database errors, which the backend classifies by its codes.
    pub fn classify_common(err: sqlx::Error) -> Result<Self, sqlx::Error> {
        match err {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_) => Ok(Self::Unavailable(err)),
            other => Err(other),
        }
    }
}

/// What a handler tells the engine about a failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// Might succeed later (a lock timeout, a briefly unavailable dependency): the delivery is
    /// requeued, and the attempt counts toward `max_attempts`.
    #[error("transient failure")]
    Transient(#[source] BoxError),
    /// Will never succeed (a payload that does not decode, a broken invariant): the message
    /// goes to the dead-letter path at once. Not the same as "processed".
    #[error("permanent failure")]
    Permanent(#[source] BoxError),
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
}

/// `sqlx::Error` from the handler's own statements is transient when the database says so
/// (deadlock, serialization failure, lost connection) and permanent otherwise. Handlers can
/// therefore write `query.execute(&mut *conn).await?`.
impl From<sqlx::Error> for HandlerError {
    fn from(err: sqlx::Error) -> Self {
        let transient = match &err {
            sqlx::Error::Database(db) => db.code().is_some_and(|c| is_retryable_code(&c)),
            other => matches!(
                other,
                sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::WorkerCrashed
                    | sqlx::Error::Protocol(_)
            ),
        };
        if transient {
            Self::Transient(Box::new(err))
        } else {
            Self::Permanent(Box::new(err))
        }
    }
}

/// `true` for database codes that mean contention or a timeout, so retrying can succeed:
/// PostgreSQL SQLSTATE 40001, 40P01, 55P03, 57014, and SQLite's `SQLITE_BUSY` and
/// `SQLITE_LOCKED` families (extended result codes whose low byte is 5 or 6). SQLSTATEs are
/// always five characters and SQLite codes at most four digits, so the two never mix.
#[must_use]
pub fn is_retryable_code(code: &str) -> bool {
    if code.len() == 5 {
        return matches!(code, "40001" | "40P01" | "55P03" | "57014");
    }
    code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
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

/// Everything the processor and the consumer loop can fail with. A failed call never acks: the
/// caller requeues the delivery.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store failed; see [`StoreError::is_transient`].
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The handler failed transiently (or panicked, or ran past its deadline) and its
    /// transaction was rolled back; the delivery should be requeued.
    #[error("handler `{consumer}` failed on attempt {attempt}")]
    Handler {
        /// The consumer whose handler failed.
        consumer: ConsumerName,
        /// Which attempt this was (1-based).
        attempt: u32,
        /// The failure.
        #[source]
        source: HandlerError,
    },
    /// The message cannot be deduplicated (missing, empty, oversized or NUL-containing id).
    #[error("invalid message")]
    InvalidMessage(#[from] EnvelopeError),
    /// The broker adapter failed to receive, ack or requeue.
    #[error("broker error")]
    Broker(#[source] BoxError),
}

impl Error {
    /// `true` when redelivering the same message can succeed.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Store(e) => e.is_transient(),
            Self::Handler { .. } | Self::Broker(_) => true,
            Self::InvalidMessage(_) => false,
        }
    }
}

/// Renders an error and its whole source chain on one line, as written to the dead-letter row.
#[must_use]
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
