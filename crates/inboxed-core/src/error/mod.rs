//! Typed errors. Each keeps its source; transient ones are classified by SQLSTATE or result
//! code in the backend, never by message text.

#[cfg(feature = "diesel")]
mod diesel;
mod handler;
#[cfg(feature = "sea-orm")]
mod sea_orm;
#[cfg(feature = "tokio-postgres")]
mod tokio_postgres;

pub use handler::{HandlerError, ResultExt};

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
    /// A lock, statement or idle-in-transaction timeout (SQLSTATE 55P03, 57014, 25P03).
    /// Retrying can succeed.
    #[error("timed out waiting for the database")]
    Timeout(#[source] sqlx::Error),
    /// SQLite's busy timeout ran out waiting for the write lock (the `SQLITE_BUSY` and
    /// `SQLITE_LOCKED` families). Retrying can succeed.
    #[error("database busy")]
    Busy(#[source] sqlx::Error),
    /// The connection was lost, refused, or the pool had none to give in time; the server is
    /// shutting down, out of resources, or failed over (class 08, 53, 57P0x, 58030, 40003;
    /// SQLite I/O, full and cannot-open errors).
    #[error("database unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// SQLSTATE 23505 on a constraint other than the dedup key, which the claim handles itself.
    #[error("unique constraint violated (SQLSTATE 23505)")]
    UniqueViolation(#[source] sqlx::Error),
    /// The transaction the store began had ended before the statement that settles it: a
    /// statement inside it failed and aborted it (PostgreSQL's SQLSTATE 25P02), or the server
    /// rolled it back (a MySQL or MariaDB deadlock victim loses its whole transaction, and
    /// with it the savepoint the store sets when it begins one: error 1305). The handler
    /// swallowed the failure, or the transaction's own savepoint went with it; committing now
    /// would report an effect that is not there. Transient: the whole transaction runs again.
    #[error("the transaction had ended before it was settled")]
    TransactionEnded(#[source] sqlx::Error),
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
    /// The backend cannot do this (for example a lock-held claim on SQLite).
    #[error("{operation} is not supported here: {reason}")]
    Unsupported {
        /// What was asked.
        operation: &'static str,
        /// Why it cannot be done, and what to use instead.
        reason: &'static str,
    },
    /// A server whose settings or version the inbox cannot keep its guarantee under (a
    /// MySQL `sql_mode` that truncates ids instead of refusing them, a storage engine without
    /// transactions, a version without `SKIP LOCKED`).
    #[error("{setting} = {value}: {hint}")]
    ServerUnfit {
        /// The setting or property (`sql_mode`, `default_storage_engine`, `version`).
        setting: &'static str,
        /// Its current value.
        value: String,
        /// Why it matters and how to fix it.
        hint: &'static str,
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
    /// `true` when the same operation can succeed if retried: contention, timeouts, lost
    /// connections, and a transaction the server ended under the handler.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        self.is_contention()
            || matches!(
                self,
                Self::Timeout(_) | Self::Busy(_) | Self::Unavailable(_) | Self::TransactionEnded(_)
            )
    }

    /// `true` for conflicts with concurrent transactions (serialization failure, deadlock):
    /// worth retrying at once, in process, and no fault of the message.
    #[must_use]
    pub fn is_contention(&self) -> bool {
        matches!(self, Self::Serialization(_) | Self::Deadlock(_))
    }

    /// Whether `err`, or an error in its source chain, is a lock conflict: a deadlock, a
    /// serialization failure, a lock wait given up (or a statement timeout), or SQLite's busy
    /// write lock. Read from the [`StoreError`] a handler's `?` made of a sqlx error, or from a
    /// sqlx error kept as it was, classified here as everywhere else.
    #[must_use]
    pub fn is_lock_conflict_in(err: &(dyn std::error::Error + 'static)) -> bool {
        let conflict =
            |e: &Self| e.is_contention() || matches!(e, Self::Timeout(_) | Self::Busy(_));
        let mut source = Some(err);
        while let Some(e) = source {
            if let Some(store) = e.downcast_ref::<Self>() {
                return conflict(store);
            }
            if let Some(sqlx) = e.downcast_ref::<sqlx::Error>() {
                return matches!(
                    Kind::of(sqlx),
                    Kind::Serialization | Kind::Deadlock | Kind::Timeout | Kind::Busy
                );
            }
            source = e.source();
        }
        false
    }

    /// The database's error code (SQLSTATE, SQLite extended result code, or MySQL error
    /// number), if any.
    #[must_use]
    pub fn code(&self) -> Option<String> {
        let (Self::Serialization(err)
        | Self::Deadlock(err)
        | Self::Timeout(err)
        | Self::Busy(err)
        | Self::Unavailable(err)
        | Self::UniqueViolation(err)
        | Self::TransactionEnded(err)
        | Self::Database(err)) = self
        else {
            return None;
        };
        match err {
            #[cfg(feature = "mysql")]
            sqlx::Error::Database(db) if mysql_number(db.as_ref()).is_some() => {
                mysql_number(db.as_ref()).map(|n| n.to_string())
            }
            sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
            _ => None,
        }
    }

    /// Classifies a `sqlx::Error` from any engine by its code (SQLSTATE, SQLite result code,
    /// MySQL error number), never its message text.
    #[must_use]
    pub fn from_sqlx(err: sqlx::Error) -> Self {
        match Kind::of(&err) {
            Kind::Serialization => Self::Serialization(err),
            Kind::Deadlock => Self::Deadlock(err),
            Kind::Timeout => Self::Timeout(err),
            Kind::Busy => Self::Busy(err),
            Kind::Unavailable => Self::Unavailable(err),
            Kind::UniqueViolation => Self::UniqueViolation(err),
            Kind::TransactionEnded => Self::TransactionEnded(err),
            Kind::Database => Self::Database(err),
        }
    }
}

/// What a database error is: the one classification behind [`StoreError`]'s variants, by
/// code (SQLSTATE, SQLite result code, MySQL error number), never by message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Serialization,
    Deadlock,
    Timeout,
    Busy,
    Unavailable,
    UniqueViolation,
    TransactionEnded,
    Database,
}

impl Kind {
    /// PostgreSQL SQLSTATEs are always five characters and SQLite result codes at most four
    /// digits, so one table serves both; a MySQL error is read by its number.
    fn of(err: &sqlx::Error) -> Self {
        let db = match err {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_) => return Self::Unavailable,
            sqlx::Error::Database(db) => db,
            _ => return Self::Database,
        };
        #[cfg(feature = "mysql")]
        if let Some(number) = mysql_number(db.as_ref()) {
            return Self::of_mysql(number);
        }
        let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
        if code.len() == 5 {
            return match code.as_str() {
                "40001" => Self::Serialization,
                "40P01" => Self::Deadlock,
                // lock_not_available, query_canceled (statement_timeout), idle-in-transaction timeout
                "55P03" | "57014" | "25P03" => Self::Timeout,
                "23505" => Self::UniqueViolation,
                "25P02" => Self::TransactionEnded,
                // statement_completion_unknown, admin/crash shutdown, cannot connect now,
                // system error, class 08 connection exception, class 53 insufficient resources,
                // and read_only_sql_transaction: a write that reached a standby (a host name
                // still pointing at a demoted primary), which the primary will take, as
                // MySQL's read-only server (1290, 1792, 1836) is.
                "40003" | "57P01" | "57P02" | "57P03" | "58030" | "25006" => Self::Unavailable,
                c if c.starts_with("08") || c.starts_with("53") => Self::Unavailable,
                _ => Self::Database,
            };
        }
        match code.parse::<u32>() {
            // SQLITE_BUSY, SQLITE_LOCKED and their extended codes
            Ok(c) if matches!(c & 0xff, 5 | 6) => Self::Busy,
            // SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY
            Ok(2067 | 1555) => Self::UniqueViolation,
            // SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN families
            Ok(c) if matches!(c & 0xff, 10 | 13 | 14) => Self::Unavailable,
            _ => Self::Database,
        }
    }

    /// A MySQL or MariaDB error, by its number. A lock wait timeout (1205) is a timeout like
    /// PostgreSQL's, but InnoDB rolls back only the statement that waited: the caller must roll
    /// back the whole transaction, which every user of a `Timeout` here does by dropping it.
    #[cfg(feature = "mysql")]
    fn of_mysql(number: u16) -> Self {
        match number {
            // ER_LOCK_DEADLOCK: InnoDB rolled the whole transaction back.
            1213 => Self::Deadlock,
            // ER_CHECKREAD (MariaDB's snapshot isolation: the row changed since the read).
            1020 => Self::Serialization,
            // ER_LOCK_WAIT_TIMEOUT, ER_LOCK_NOWAIT, ER_STATEMENT_TIMEOUT (MariaDB's
            // max_statement_time), ER_QUERY_TIMEOUT (MySQL's max_execution_time),
            // ER_QUERY_INTERRUPTED.
            1205 | 3572 | 1969 | 3024 | 1317 => Self::Timeout,
            // ER_DUP_ENTRY, ER_DUP_ENTRY_WITH_KEY_NAME.
            1062 | 1586 => Self::UniqueViolation,
            // Too many connections, shutdown in progress, connection killed (MariaDB), a
            // read-only server (a replica, or a primary being demoted), an error during the
            // commit or rollback itself.
            1040 | 1053 | 1927 | 1290 | 1792 | 1836 | 1180 | 1181 => Self::Unavailable,
            _ => Self::Database,
        }
    }
}

/// Whether `err`, the failure of a savepoint statement (`RELEASE SAVEPOINT`, `ROLLBACK TO
/// SAVEPOINT`), says the savepoint is gone with the whole transaction: MySQL's 1305, after
/// InnoDB rolled a deadlock victim's transaction back. Whatever ran since then ran outside
/// any transaction (each statement committed on its own), and nothing more may run as if
/// inside it. PostgreSQL never loses a savepoint this way: a failed statement aborts the
/// transaction only up to the savepoint, which rolling back to it recovers.
#[must_use]
pub fn savepoint_gone(err: &sqlx::Error) -> bool {
    #[cfg(feature = "mysql")]
    if let sqlx::Error::Database(db) = err {
        return mysql_number(db.as_ref()) == Some(1305);
    }
    let _ = err;
    false
}

/// A MySQL or MariaDB error's number: what classifies it. Its SQLSTATE does not: a lock wait
/// timeout is the catch-all `HY000` and a duplicate key the `23000` that every integrity
/// error shares.
#[cfg(feature = "mysql")]
fn mysql_number(db: &dyn sqlx::error::DatabaseError) -> Option<u16> {
    db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .map(sqlx::mysql::MySqlDatabaseError::number)
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
    /// The outbox refused an outgoing message; nothing was written.
    #[error("invalid outgoing message")]
    InvalidOutgoing(#[from] crate::outbox::OutgoingError),
    /// An outbox write on a connection outside a transaction; nothing was written
    /// ([`WriteError::NotInTransaction`](crate::outbox::WriteError::NotInTransaction)).
    #[error("an outbox write outside a transaction: it would commit on its own")]
    OutboxOutsideTransaction,
    /// The broker adapter failed to receive.
    #[error("broker error")]
    Broker(#[source] BoxError),
    /// Acking (or nacking: requeuing) a delivery failed. Nothing is lost: the broker redelivers an unacked
    /// message, and the inbox settles a committed one as a duplicate.
    #[error("could not {action} {deliveries} with the broker")]
    Ack {
        /// `ack` or `requeue`.
        action: &'static str,
        /// The deliveries: `message m-1`, `a delivery without a usable message id`, or the
        /// messages of a batch.
        deliveries: String,
        /// The adapter's error.
        #[source]
        source: BoxError,
    },
    /// A dead letter written with `redact_dead_letter_payloads` has no payload to retry; the
    /// producer must send the message again.
    #[error(
        "the dead letter of `{message_id}` was stored without its payload (redacted); it cannot be retried from the table"
    )]
    PayloadRedacted {
        /// The message whose payload is gone.
        message_id: crate::envelope::MessageId,
    },
}

impl Error {
    /// `true` when redelivering the same message can succeed.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Store(e) => e.is_transient(),
            Self::Handler { .. } | Self::Broker(_) | Self::Ack { .. } => true,
            Self::InvalidMessage(_)
            | Self::InvalidOutgoing(_)
            | Self::OutboxOutsideTransaction
            | Self::PayloadRedacted { .. } => false,
        }
    }
}

impl Error {
    /// A failure to `action` (`ack`, `requeue`) what `deliveries` names, for `map_err`.
    pub(crate) fn ack_failed(
        action: &'static str,
        deliveries: String,
    ) -> impl FnOnce(BoxError) -> Self {
        move |source| Self::Ack {
            action,
            deliveries,
            source,
        }
    }
}

/// How a settle failure names a delivery: by its message id when it has one.
pub(crate) fn delivery_name(
    envelope: &Result<crate::envelope::Envelope, crate::envelope::EnvelopeError>,
) -> String {
    match envelope {
        Ok(envelope) => format!("message {}", envelope.id()),
        Err(_) => "a delivery without a usable message id".to_owned(),
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
