//! diesel-async as a [`Driver`]: the connection a handler receives (diesel's own
//! `AsyncPgConnection`, inside the inbox transaction) and the transactions the store begins on
//! it, through diesel-async's transaction manager so that diesel knows it is in one.

use std::ops::{Deref, DerefMut};

use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, TransactionManager};

use inboxed_core::StoreError;
use inboxed_core::driver::{Driver, Transaction as EndTransaction};

/// The driver: diesel-async connections from its deadpool pool. A handler is written for
/// `Handler<DieselPostgres>` and receives a [`Connection`].
#[derive(Debug, Clone, Copy)]
pub struct DieselPostgres;

/// A pooled diesel-async connection inside the inbox transaction. It dereferences to
/// `AsyncPgConnection`, so a handler runs diesel's queries on it as on any; diesel knows the
/// transaction is open, so the handler's own `conn.transaction(…)` is a savepoint inside it.
pub struct Connection {
    held: Held,
    /// Whether a transaction of the library's is open on it.
    in_transaction: bool,
    /// diesel's depth of a savepoint dropped without being released or rolled back: what ran
    /// after it is not known to be undone, so the transaction can only roll back, until a
    /// savepoint at that depth or an outer one is rolled back (which undoes it).
    broken: Option<u32>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("in_transaction", &self.in_transaction)
            .finish_non_exhaustive()
    }
}

/// A connection of the pool, or one taken out of it for good (a worker's liveness session, a
/// listener).
enum Held {
    Pooled(Object<AsyncPgConnection>),
    Own(AsyncPgConnection),
}

impl Connection {
    pub(crate) fn pooled(conn: Object<AsyncPgConnection>) -> Self {
        Self::held(Held::Pooled(conn))
    }

    pub(crate) fn own(conn: Object<AsyncPgConnection>) -> Self {
        Self::held(Held::Own(Object::take(conn)))
    }

    fn held(held: Held) -> Self {
        Self {
            held,
            in_transaction: false,
            broken: None,
        }
    }

    /// Closes the connection instead of returning it to the pool: its state is unknown (the
    /// pool would only find out at its next use, with the transaction's locks held till then).
    fn discard(self) {
        if let Held::Pooled(conn) = self.held {
            drop(Object::take(conn));
        }
    }

    /// Sets a savepoint in the inbox transaction (diesel's own, `diesel_savepoint_N`): a part
    /// of the handler's work that can fail and be undone alone. diesel's
    /// `conn.transaction(|conn| …)` does the same and ends it on its own.
    ///
    /// # Errors
    /// The server refused or the connection was lost.
    pub async fn savepoint(&mut self) -> Result<Savepoint<'_>, StoreError> {
        AnsiTransactionManager::begin_transaction(&mut **self)
            .await
            .map_err(StoreError::from_diesel)?;
        let depth = self.depth().unwrap_or(u32::MAX);
        Ok(Savepoint {
            conn: self,
            depth,
            open: true,
        })
    }

    /// diesel's count of the transaction and the savepoints open in it (`None`: none, or its
    /// transaction manager broke).
    fn depth(&mut self) -> Option<u32> {
        <AnsiTransactionManager as TransactionManager<AsyncPgConnection>>::transaction_manager_status_mut(
            self,
        )
        .transaction_depth()
        .ok()
        .flatten()
        .map(std::num::NonZeroU32::get)
    }
}

impl Deref for Connection {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        match &self.held {
            Held::Pooled(conn) => conn,
            Held::Own(conn) => conn,
        }
    }
}

impl DerefMut for Connection {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        match &mut self.held {
            Held::Pooled(conn) => conn,
            Held::Own(conn) => conn,
        }
    }
}

/// A transaction the store began: its connection goes back to the pool when it commits or
/// rolls back, and is closed when it is dropped open or its end failed.
#[derive(Debug)]
pub struct Transaction {
    conn: Option<Connection>,
}

impl Transaction {
    /// Begins a transaction on `conn` with `statement` (`BEGIN` and its settings), which
    /// diesel's transaction manager then counts as its own. The connection is the
    /// transaction's before the statement is sent, so that a caller who gives up half-way, or
    /// a `BEGIN` whose later statements failed (the server then in an aborted transaction that
    /// diesel does not count), leaves no pooled connection inside a transaction.
    pub(crate) async fn begin(mut conn: Connection, statement: &str) -> Result<Self, StoreError> {
        conn.in_transaction = true;
        let mut tx = Self { conn: Some(conn) };
        AnsiTransactionManager::begin_transaction_sql(&mut **tx, statement)
            .await
            .map_err(StoreError::from_diesel)?;
        Ok(tx)
    }

    /// Commits the transaction. As PostgreSQL answers it, a `COMMIT` after a statement that
    /// failed rolls back and is not an error (as with sqlx): stop at the first failure.
    ///
    /// # Errors
    /// The server refused or the connection was lost (the outcome is then unknown);
    /// [`StoreError::TransactionEnded`] when a savepoint or a nested diesel transaction in it
    /// was left neither released nor rolled back, so that it rolled back instead.
    pub async fn commit(self) -> Result<(), StoreError> {
        self.end(true).await
    }

    /// Rolls the transaction back.
    ///
    /// # Errors
    /// The connection was lost (the server rolls back on its own then).
    pub async fn rollback(self) -> Result<(), StoreError> {
        self.end(false).await
    }

    /// Ends the transaction. The connection stays the transaction's until the answer came: a
    /// caller who gives up half-way closes it.
    async fn end(mut self, commit: bool) -> Result<(), StoreError> {
        let conn: &mut Connection = &mut self;
        // diesel's commit and rollback act on its innermost level: with a savepoint or a nested
        // transaction of diesel's left open (a handler's future dropped inside
        // `conn.transaction(…)`), a COMMIT would only release that savepoint and report
        // success. The whole transaction is rolled back by hand instead, and the connection,
        // whose count is now wrong, closed.
        if conn.broken.is_some() || conn.depth() != Some(1) {
            use diesel_async::SimpleAsyncConnection;
            let _ = conn.batch_execute("ROLLBACK").await;
            self.discard();
            if !commit {
                return Ok(());
            }
            return Err(StoreError::TransactionEnded(sqlx::Error::Protocol(
                "a savepoint or a nested diesel transaction was left neither released nor \
                 rolled back, so the transaction was rolled back instead of committed"
                    .to_owned(),
            )));
        }
        let ended = if commit {
            AnsiTransactionManager::commit_transaction(&mut **conn).await
        } else {
            AnsiTransactionManager::rollback_transaction(&mut **conn).await
        };
        match ended {
            Ok(()) => {
                if let Some(mut conn) = self.conn.take() {
                    conn.in_transaction = false;
                }
                Ok(())
            }
            Err(e) => {
                self.discard();
                Err(StoreError::from_diesel(e))
            }
        }
    }

    /// Closes the connection instead of returning it to the pool.
    fn discard(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.discard();
        }
    }
}

impl Deref for Transaction {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
            .as_ref()
            .unwrap_or_else(|| unreachable!("a transaction is open until it ends"))
    }
}

impl DerefMut for Transaction {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn
            .as_mut()
            .unwrap_or_else(|| unreachable!("a transaction is open until it ends"))
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.discard();
    }
}

impl EndTransaction for Transaction {
    async fn commit(self) -> Result<(), StoreError> {
        Self::commit(self).await
    }

    async fn rollback(self) -> Result<(), StoreError> {
        Self::rollback(self).await
    }
}

/// A savepoint inside the inbox transaction ([`Connection::savepoint`]).
#[derive(Debug)]
pub struct Savepoint<'c> {
    conn: &'c mut Connection,
    /// diesel's depth with this savepoint open: 2 for one in the transaction itself.
    depth: u32,
    open: bool,
}

impl Savepoint<'_> {
    /// Releases the savepoint: what ran since it stays, to commit with the transaction.
    ///
    /// # Errors
    /// The server refused or the connection was lost; [`StoreError::TransactionEnded`] when a
    /// savepoint or a nested diesel transaction inside it was left open (the transaction can
    /// then only roll back).
    pub async fn commit(mut self) -> Result<(), StoreError> {
        if self.conn.depth() != Some(self.depth) {
            return Err(StoreError::TransactionEnded(sqlx::Error::Protocol(
                "a savepoint or a nested diesel transaction inside this savepoint was left \
                 open: the transaction can only roll back"
                    .to_owned(),
            )));
        }
        let ended = AnsiTransactionManager::commit_transaction(&mut **self.conn).await;
        self.open = false;
        ended.map_err(StoreError::from_diesel)
    }

    /// Undoes what ran since the savepoint, savepoints left open inside it included; the
    /// transaction goes on.
    ///
    /// # Errors
    /// The server refused or the connection was lost.
    pub async fn rollback(mut self) -> Result<(), StoreError> {
        while self.conn.depth().is_some_and(|d| d >= self.depth) {
            AnsiTransactionManager::rollback_transaction(&mut **self.conn)
                .await
                .map_err(StoreError::from_diesel)?;
        }
        self.open = false;
        if self.conn.broken.is_some_and(|at| at >= self.depth) {
            self.conn.broken = None;
        }
        Ok(())
    }
}

impl Deref for Savepoint<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl DerefMut for Savepoint<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn
    }
}

impl Drop for Savepoint<'_> {
    fn drop(&mut self) {
        if self.open {
            let at = self.conn.broken.map_or(self.depth, |at| at.min(self.depth));
            self.conn.broken = Some(at);
        }
    }
}

impl EndTransaction for Savepoint<'_> {
    async fn commit(self) -> Result<(), StoreError> {
        Self::commit(self).await
    }

    async fn rollback(self) -> Result<(), StoreError> {
        Self::rollback(self).await
    }
}

impl Driver for DieselPostgres {
    const NAME: &'static str = "PostgreSQL";
    type Connection = Connection;
    type Transaction = Transaction;
    type Savepoint<'c> = Savepoint<'c>;

    async fn savepoint(conn: &mut Connection) -> Result<Savepoint<'_>, StoreError> {
        conn.savepoint().await
    }

    fn in_transaction(conn: &Connection) -> bool {
        conn.in_transaction
    }

    async fn close(conn: Connection) {
        conn.discard();
    }
}
