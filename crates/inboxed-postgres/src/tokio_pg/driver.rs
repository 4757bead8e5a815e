//! tokio-postgres as a [`Driver`]: the connection a handler receives, and the transactions the
//! store begins on it, ended by statements of the library's own.

use std::ops::{Deref, DerefMut};

use futures_util::future::join;

use inboxed_core::StoreError;
use inboxed_core::driver::{Driver, Transaction as EndTransaction};

use super::engine::TokioPgQuery;

/// The driver: tokio-postgres connections from a deadpool-postgres pool. A handler is written
/// for `Handler<TokioPostgres>` and receives a [`Connection`].
#[derive(Debug, Clone, Copy)]
pub struct TokioPostgres;

/// A pooled tokio-postgres connection inside the inbox transaction. It dereferences to the
/// pool's client, so a handler runs `conn.execute(…)` or `conn.prepare_cached(…)` as on any
/// deadpool-postgres client; it does not hand out the client mutably, so that nothing can
/// begin a transaction of its own on it (tokio-postgres's `transaction()` would send a second
/// `BEGIN`, and its `COMMIT` would commit the inbox's claim half-way): take a savepoint with
/// [`Connection::savepoint`] instead.
#[derive(Debug)]
pub struct Connection {
    client: Held,
    /// Whether a transaction of the library's is open on it.
    in_transaction: bool,
    /// Savepoints set so far, for their names.
    savepoints: u32,
    /// Savepoints open now (as the library sees them), for the level of the next one.
    depth: u32,
    /// The level of a savepoint dropped without being released or rolled back: what ran after
    /// it is not known to be undone, so the transaction can only roll back, until a savepoint
    /// at that level or an outer one is rolled back (which undoes it).
    broken: Option<u32>,
}

/// A connection of the pool, or one taken out of it for good (a worker's liveness session).
#[derive(Debug)]
enum Held {
    Pooled(deadpool_postgres::Object),
    Own(deadpool_postgres::ClientWrapper),
}

impl Connection {
    /// A connection of the pool, returned to it when dropped.
    pub(crate) fn pooled(client: deadpool_postgres::Object) -> Self {
        Self::held(Held::Pooled(client))
    }

    /// A connection taken out of the pool: closed when dropped, and no longer counted by the
    /// pool.
    pub(crate) fn own(client: deadpool_postgres::Object) -> Self {
        Self::held(Held::Own(deadpool_postgres::Object::take(client)))
    }

    /// Closes the connection instead of returning it to the pool: its state is unknown.
    fn discard(self) {
        if let Held::Pooled(client) = self.client {
            drop(deadpool_postgres::Object::take(client));
        }
    }

    fn held(client: Held) -> Self {
        Self {
            client,
            in_transaction: false,
            savepoints: 0,
            depth: 0,
            broken: None,
        }
    }

    /// Sets a savepoint in the inbox transaction: a part of the handler's work that can fail
    /// and be undone alone ([`Savepoint::rollback`]) while the rest commits.
    ///
    /// # Errors
    /// The server refused or the connection was lost.
    pub async fn savepoint(&mut self) -> Result<Savepoint<'_>, StoreError> {
        self.savepoints += 1;
        let name = format!("inboxed_{}", self.savepoints);
        let level = self.depth + 1;
        self.client()
            .batch_execute(&format!("SAVEPOINT {name}"))
            .await
            .map_err(StoreError::from_tokio_postgres)?;
        self.depth = level;
        Ok(Savepoint {
            conn: self,
            name,
            level,
            open: true,
        })
    }

    pub(crate) fn client(&self) -> &deadpool_postgres::ClientWrapper {
        self
    }
}

impl Deref for Connection {
    type Target = deadpool_postgres::ClientWrapper;

    fn deref(&self) -> &Self::Target {
        match &self.client {
            Held::Pooled(client) => client,
            Held::Own(client) => client,
        }
    }
}

/// A transaction the store began: its connection goes back to the pool when it commits or
/// rolls back. Dropped while open, the connection is closed instead of returned (the server
/// then rolls the transaction back), so that no pooled connection is ever handed on inside
/// a transaction: tokio-postgres runs nothing at drop, and deadpool-postgres's recycling
/// does not roll back.
#[derive(Debug)]
pub struct Transaction {
    conn: Option<Connection>,
}

impl Transaction {
    pub(crate) fn begun(mut conn: Connection) -> Self {
        conn.in_transaction = true;
        Self { conn: Some(conn) }
    }

    /// Ends the transaction with `statement`; a transaction whose savepoint was abandoned
    /// only rolls back, and a commit asked of it fails. The connection stays the
    /// transaction's until the answer came: a caller who gives up half-way closes it.
    async fn end(self, statement: &'static str) -> Result<(), StoreError> {
        let refused = self.broken.is_some() && statement == "COMMIT";
        let statement = if self.broken.is_some() {
            "ROLLBACK"
        } else {
            statement
        };
        let ended = self.client().batch_execute(statement).await;
        self.release(ended.map_err(StoreError::from_tokio_postgres))?;
        if refused {
            return Err(StoreError::TransactionEnded(sqlx::Error::Protocol(
                "a savepoint was dropped without being released or rolled back, so the \
                 transaction was rolled back instead of committed"
                    .to_owned(),
            )));
        }
        Ok(())
    }

    /// `q` (the settling statement) and `COMMIT` sent together, in one round trip. When `q`
    /// fails, the server answers the `COMMIT` with a rollback, and `q`'s error is returned.
    /// `q` is prepared first where it is not yet (once a connection): sent behind the
    /// `COMMIT` it would run after it, on its own.
    pub(crate) async fn commit_after(self, q: TokioPgQuery) -> Result<(), StoreError> {
        if self.broken.is_some() {
            return self.end("COMMIT").await;
        }
        let settle = match q.prepare(self.client()).await {
            Ok(settle) => settle,
            Err(e) => {
                self.end("ROLLBACK").await?;
                return Err(e);
            }
        };
        let (settled, committed) = join(
            settle.changed(self.client()),
            self.client().batch_execute("COMMIT"),
        )
        .await;
        let committed = committed.map_err(StoreError::from_tokio_postgres);
        match settled {
            // The COMMIT behind a failed statement only rolled back: the connection is
            // fine when it answered.
            Err(e) => {
                self.release(committed)?;
                Err(e)
            }
            Ok(_) => self.release(committed),
        }
    }

    /// Hands the connection back to the pool after its transaction ended with `ended`, or
    /// closes it when the end failed (its state is unknown).
    fn release(mut self, ended: Result<(), StoreError>) -> Result<(), StoreError> {
        let conn = self.conn.take();
        if ended.is_err()
            && let Some(conn) = conn
        {
            conn.discard();
        }
        ended
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
        if let Some(conn) = self.conn.take() {
            conn.discard();
        }
    }
}

impl Transaction {
    /// Commits the transaction. As PostgreSQL answers it, a `COMMIT` after a statement that
    /// failed rolls back and is not an error (as with sqlx): stop at the first failure.
    ///
    /// # Errors
    /// The server refused (the commit rolled back), or the connection was lost (the outcome
    /// is unknown); [`StoreError::TransactionEnded`] when a savepoint in it was dropped
    /// without an end, so that it rolled back instead.
    pub async fn commit(self) -> Result<(), StoreError> {
        self.end("COMMIT").await
    }

    /// Rolls the transaction back.
    ///
    /// # Errors
    /// The connection was lost (the server rolls back on its own then).
    pub async fn rollback(self) -> Result<(), StoreError> {
        self.end("ROLLBACK").await
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
    name: String,
    /// 1 for a savepoint in the transaction itself, 2 for one inside that, and so on.
    level: u32,
    open: bool,
}

impl Savepoint<'_> {
    /// Ends the savepoint with `statement`; given up half-way, it leaves the transaction to
    /// roll back (see [`Connection`]'s `broken`).
    async fn end(mut self, statement: String, undoes: bool) -> Result<(), StoreError> {
        self.conn
            .client()
            .batch_execute(&statement)
            .await
            .map_err(StoreError::from_tokio_postgres)?;
        self.open = false;
        self.conn.depth = self.level - 1;
        // Rolled back, it undid whatever a savepoint abandoned inside it had left.
        if undoes && self.conn.broken.is_some_and(|at| at >= self.level) {
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
            let at = self.conn.broken.map_or(self.level, |at| at.min(self.level));
            self.conn.broken = Some(at);
            self.conn.depth = self.level - 1;
        }
    }
}

impl Savepoint<'_> {
    /// Releases the savepoint: what ran since it stays, to commit with the transaction.
    ///
    /// # Errors
    /// The server refused or the connection was lost.
    pub async fn commit(self) -> Result<(), StoreError> {
        let statement = format!("RELEASE SAVEPOINT {}", self.name);
        self.end(statement, false).await
    }

    /// Undoes what ran since the savepoint; the transaction goes on.
    ///
    /// # Errors
    /// The server refused or the connection was lost.
    pub async fn rollback(self) -> Result<(), StoreError> {
        let statement = format!(
            "ROLLBACK TO SAVEPOINT {0}; RELEASE SAVEPOINT {0}",
            self.name
        );
        self.end(statement, true).await
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

impl Driver for TokioPostgres {
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
