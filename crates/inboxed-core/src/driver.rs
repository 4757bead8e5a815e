//! The client library a store talks to its database through, as the library's generic code
//! sees it: the connection a handler writes through, and how a transaction the library began
//! ends.
//!
//! The processor, the workers and the outbox never name sqlx: they hold a
//! [`Driver::Transaction`], hand its connection to the handler, and end it with
//! [`Transaction::commit`] or [`Transaction::rollback`]. sqlx's three databases are drivers
//! (`sqlx::Postgres`, `sqlx::Sqlite`, `sqlx::MySql`, by the one implementation below), so a
//! handler written for `Handler<sqlx::Postgres>` receives a `PgConnection` as it always did;
//! the seam is here so that a store on another client library can hand its handlers that
//! library's own connection, with the same processor around it.

use std::future::Future;
use std::ops::DerefMut;

use crate::error::StoreError;

/// A database as a client library reaches it: the types of its connection and transactions.
///
/// Implemented for every sqlx database; like [`Store`](crate::Store), not meant to be
/// implemented outside this workspace.
pub trait Driver: Send + Sized + 'static {
    /// The engine's name in logs and reports: `PostgreSQL`, `SQLite`, `MySQL`.
    const NAME: &'static str;

    /// What a handler writes through: the connection of the inbox transaction.
    type Connection: Send;

    /// A transaction the store began, holding its connection until it ends. Dropped without
    /// an end, it rolls back.
    type Transaction: Transaction<Target = Self::Connection> + 'static;

    /// A savepoint inside a transaction: the lock-held worker runs its batch's handlers
    /// behind one, so that one handler's failure undoes only its own statements.
    type Savepoint<'c>: Transaction<Target = Self::Connection> + 'c;

    /// Sets a savepoint in the transaction `conn` is in.
    fn savepoint(
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Result<Self::Savepoint<'_>, StoreError>> + Send;

    /// Whether `conn` is inside a transaction this driver began: an outbox write refuses a
    /// connection that is not, since its insert would commit whatever became of the business
    /// change.
    fn in_transaction(conn: &Self::Connection) -> bool;

    /// Ends a connection of the store's own (a worker's liveness session) with the protocol's
    /// goodbye, so that the server releases its session locks at once.
    fn close(conn: Self::Connection) -> impl Future<Output = ()> + Send;
}

/// A transaction or a savepoint, and how it ends.
pub trait Transaction: DerefMut + Send {
    /// Commits the transaction, or releases the savepoint.
    ///
    /// # Errors
    /// The database refused or the connection was lost (a commit's outcome is then unknown).
    /// [`StoreError::TransactionEnded`] when a savepoint is gone because the server rolled the
    /// whole transaction back under it (InnoDB's deadlock victim).
    fn commit(self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Rolls the transaction back, or back to the savepoint.
    ///
    /// # Errors
    /// As [`Transaction::commit`].
    fn rollback(self) -> impl Future<Output = Result<(), StoreError>> + Send;
}

impl<DB: sqlx::Database> Driver for DB {
    const NAME: &'static str = <DB as sqlx::Database>::NAME;
    type Connection = DB::Connection;
    type Transaction = sqlx::Transaction<'static, DB>;
    type Savepoint<'c> = sqlx::Transaction<'c, DB>;

    async fn savepoint(conn: &mut Self::Connection) -> Result<Self::Savepoint<'_>, StoreError> {
        sqlx::Connection::begin(conn)
            .await
            .map_err(StoreError::from_sqlx)
    }

    fn in_transaction(conn: &Self::Connection) -> bool {
        sqlx::Connection::is_in_transaction(conn)
    }

    async fn close(conn: Self::Connection) {
        let _ = sqlx::Connection::close(conn).await;
    }
}

impl<DB: sqlx::Database> Transaction for sqlx::Transaction<'_, DB> {
    async fn commit(self) -> Result<(), StoreError> {
        sqlx::Transaction::commit(self).await.map_err(ended)
    }

    async fn rollback(self) -> Result<(), StoreError> {
        sqlx::Transaction::rollback(self).await.map_err(ended)
    }
}

/// A failed end of a savepoint is [`StoreError::TransactionEnded`] when the savepoint went
/// with the whole transaction, so that the caller retries the batch as contention rather than
/// report a broken database.
fn ended(e: sqlx::Error) -> StoreError {
    if crate::error::savepoint_gone(&e) {
        StoreError::TransactionEnded(e)
    } else {
        StoreError::from_sqlx(e)
    }
}
