//! SeaORM as a [`Driver`]: the connection a handler receives (SeaORM's transaction, behind
//! SeaORM's own connection traits) and the transactions the store begins through SeaORM.

use std::marker::PhantomData;
use std::sync::Arc;

use sea_orm::{
    AccessMode, ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, ExecResult, IsolationLevel,
    QueryResult, RuntimeErr, Statement, TransactionError, TransactionOptions, TransactionTrait,
};
use sqlx::{AssertSqlSafe, Executor, PgConnection};
use tokio::sync::Mutex;

use inboxed_core::StoreError;
use inboxed_core::driver::{Driver, Transaction as EndTransaction};

use super::engine::{SeaQuery, SeaRow};

/// The driver: SeaORM over sqlx's PostgreSQL pool. A handler is written for
/// `Handler<SeaOrmPostgres>` and receives a [`Connection`].
#[derive(Debug, Clone, Copy)]
pub struct SeaOrmPostgres;

/// A connection inside the inbox transaction. It is a SeaORM connection
/// ([`ConnectionTrait`], [`TransactionTrait`]), so a handler runs SeaORM's queries on it as on
/// any: `Entity::find().all(&*conn)`, `model.insert(&*conn)`, `conn.execute_raw(statement)`.
/// Its `begin` and `transaction` set a savepoint inside the inbox transaction, as they would
/// inside any SeaORM transaction.
pub struct Connection {
    inner: Inner,
    /// Whether the transaction plans its statements for their values each time
    /// (`plan_cache_mode`), set before its first statement that must not keep a generic plan.
    custom_plans: bool,
}

enum Inner {
    /// A transaction the store began through SeaORM, or a savepoint in it.
    Transaction(DatabaseTransaction),
    /// A connection of the store's own outside any transaction (a worker's liveness session),
    /// on the sqlx beneath SeaORM, which hands out no connection of its own.
    Session(Mutex<PgConnection>),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.inner {
            Inner::Transaction(_) => "transaction",
            Inner::Session(_) => "session",
        };
        f.debug_struct("Connection")
            .field("in", &what)
            .finish_non_exhaustive()
    }
}

/// sqlx's error as SeaORM reports a statement's.
fn exec_err(e: sqlx::Error) -> DbErr {
    DbErr::Exec(RuntimeErr::SqlxError(Arc::new(e)))
}

fn query_err(e: sqlx::Error) -> DbErr {
    DbErr::Query(RuntimeErr::SqlxError(Arc::new(e)))
}

fn no_transaction() -> DbErr {
    DbErr::Custom("a session of the store's own is outside any transaction".to_owned())
}

impl Connection {
    pub(crate) fn transaction(tx: DatabaseTransaction) -> Self {
        Self {
            inner: Inner::Transaction(tx),
            custom_plans: false,
        }
    }

    pub(crate) fn session(conn: PgConnection) -> Self {
        Self {
            inner: Inner::Session(Mutex::new(conn)),
            custom_plans: false,
        }
    }

    /// SeaORM's transaction this connection is inside: always, for the connection a handler
    /// receives (`None` only for the store's own sessions).
    #[must_use]
    pub fn as_transaction(&self) -> Option<&DatabaseTransaction> {
        match &self.inner {
            Inner::Transaction(tx) => Some(tx),
            Inner::Session(_) => None,
        }
    }

    /// Sets a savepoint in the inbox transaction (SeaORM's nested transaction): a part of the
    /// handler's work that can fail and be undone alone. SeaORM's `conn.transaction(…)` does
    /// the same and ends it on its own.
    ///
    /// # Errors
    /// The server refused or the connection was lost.
    pub async fn savepoint(&mut self) -> Result<Savepoint<'_>, StoreError> {
        let nested = self.begin().await.map_err(StoreError::from_sea_orm)?;
        Ok(Savepoint {
            conn: Self::transaction(nested),
            _outer: PhantomData,
        })
    }

    /// Makes the transaction plan each statement for its values before `q` runs, when `q` is
    /// one that must not keep a generic plan (the claims): SeaORM keeps every statement
    /// prepared, and PostgreSQL's generic plan, made when the table was small, reads the whole
    /// table once it is not. One round trip, once a transaction; the setting lasts until it
    /// ends, so a lock-held batch's handlers are planned that way too.
    async fn plan_for(&mut self, q: &SeaQuery) -> Result<(), StoreError> {
        if q.cached() || self.custom_plans {
            return Ok(());
        }
        if let Inner::Transaction(tx) = &self.inner {
            tx.execute_unprepared("SET LOCAL plan_cache_mode = force_custom_plan")
                .await
                .map_err(StoreError::from_sea_orm)?;
            self.custom_plans = true;
        }
        Ok(())
    }

    /// Runs `q`; the rows it changed.
    pub(crate) async fn run(&mut self, q: SeaQuery) -> Result<u64, StoreError> {
        self.plan_for(&q).await?;
        match &mut self.inner {
            Inner::Transaction(tx) => tx
                .execute_raw(q.statement())
                .await
                .map(|done| done.rows_affected())
                .map_err(StoreError::from_sea_orm),
            Inner::Session(conn) => q
                .sqlx()
                .execute(conn.get_mut())
                .await
                .map(|done| done.rows_affected())
                .map_err(StoreError::from_sqlx),
        }
    }

    /// Runs `q`; the rows it returned.
    pub(crate) async fn rows(&mut self, q: SeaQuery) -> Result<Vec<SeaRow>, StoreError> {
        self.plan_for(&q).await?;
        match &mut self.inner {
            Inner::Transaction(tx) => tx
                .query_all_raw(q.statement())
                .await
                .map(|rows| rows.into_iter().map(SeaRow::from).collect())
                .map_err(StoreError::from_sea_orm),
            Inner::Session(conn) => q
                .sqlx()
                .fetch_all(conn.get_mut())
                .await
                .map(|rows| rows.into_iter().map(SeaRow::from).collect())
                .map_err(StoreError::from_sqlx),
        }
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for Connection {
    fn get_database_backend(&self) -> DbBackend {
        DbBackend::Postgres
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        match &self.inner {
            Inner::Transaction(tx) => tx.execute_raw(stmt).await,
            Inner::Session(conn) => {
                let mut conn = conn.lock().await;
                let done = SeaQuery::from_statement(stmt)
                    .sqlx()
                    .execute(&mut *conn)
                    .await;
                done.map(Into::into).map_err(exec_err)
            }
        }
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        match &self.inner {
            Inner::Transaction(tx) => tx.execute_unprepared(sql).await,
            Inner::Session(conn) => {
                let mut conn = conn.lock().await;
                let done = conn.execute(AssertSqlSafe(sql.to_owned())).await;
                done.map(Into::into).map_err(exec_err)
            }
        }
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        match &self.inner {
            Inner::Transaction(tx) => tx.query_one_raw(stmt).await,
            Inner::Session(conn) => {
                let mut conn = conn.lock().await;
                let row = SeaQuery::from_statement(stmt)
                    .sqlx()
                    .fetch_optional(&mut *conn)
                    .await;
                row.map(|r| r.map(Into::into)).map_err(query_err)
            }
        }
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        match &self.inner {
            Inner::Transaction(tx) => tx.query_all_raw(stmt).await,
            Inner::Session(conn) => {
                let mut conn = conn.lock().await;
                let rows = SeaQuery::from_statement(stmt)
                    .sqlx()
                    .fetch_all(&mut *conn)
                    .await;
                rows.map(|rows| rows.into_iter().map(Into::into).collect())
                    .map_err(query_err)
            }
        }
    }
}

#[async_trait::async_trait]
impl TransactionTrait for Connection {
    type Transaction = DatabaseTransaction;

    async fn begin(&self) -> Result<DatabaseTransaction, DbErr> {
        match &self.inner {
            Inner::Transaction(tx) => tx.begin().await,
            Inner::Session(_) => Err(no_transaction()),
        }
    }

    async fn begin_with_config(
        &self,
        isolation_level: Option<IsolationLevel>,
        access_mode: Option<AccessMode>,
    ) -> Result<DatabaseTransaction, DbErr> {
        match &self.inner {
            Inner::Transaction(tx) => tx.begin_with_config(isolation_level, access_mode).await,
            Inner::Session(_) => Err(no_transaction()),
        }
    }

    async fn begin_with_options(
        &self,
        options: TransactionOptions,
    ) -> Result<DatabaseTransaction, DbErr> {
        match &self.inner {
            Inner::Transaction(tx) => tx.begin_with_options(options).await,
            Inner::Session(_) => Err(no_transaction()),
        }
    }

    async fn transaction<F, T, E>(&self, callback: F) -> Result<T, TransactionError<E>>
    where
        F: for<'c> FnOnce(
                &'c DatabaseTransaction,
            ) -> std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<T, E>> + Send + 'c>,
            > + Send,
        T: Send,
        E: std::fmt::Display + std::fmt::Debug + Send,
    {
        match &self.inner {
            Inner::Transaction(tx) => tx.transaction(callback).await,
            Inner::Session(_) => Err(TransactionError::Connection(no_transaction())),
        }
    }

    async fn transaction_with_config<F, T, E>(
        &self,
        callback: F,
        isolation_level: Option<IsolationLevel>,
        access_mode: Option<AccessMode>,
    ) -> Result<T, TransactionError<E>>
    where
        F: for<'c> FnOnce(
                &'c DatabaseTransaction,
            ) -> std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<T, E>> + Send + 'c>,
            > + Send,
        T: Send,
        E: std::fmt::Display + std::fmt::Debug + Send,
    {
        match &self.inner {
            Inner::Transaction(tx) => {
                tx.transaction_with_config(callback, isolation_level, access_mode)
                    .await
            }
            Inner::Session(_) => Err(TransactionError::Connection(no_transaction())),
        }
    }
}

/// A transaction the store began through SeaORM. Dropped without an end, it rolls back as
/// SeaORM's transactions do (the rollback goes with the connection's next use, before the
/// pool hands it out again).
#[derive(Debug)]
pub struct Transaction {
    conn: Connection,
}

impl Transaction {
    pub(crate) fn new(tx: DatabaseTransaction) -> Self {
        Self {
            conn: Connection::transaction(tx),
        }
    }

    /// Commits the transaction. As PostgreSQL answers it, a `COMMIT` after a statement that
    /// failed rolls back and is not an error (as with sqlx): stop at the first failure.
    ///
    /// # Errors
    /// The server refused or the connection was lost (the outcome is then unknown).
    pub async fn commit(self) -> Result<(), StoreError> {
        self.conn.end(true).await
    }

    /// Rolls the transaction back.
    ///
    /// # Errors
    /// The connection was lost (the server rolls back on its own then).
    pub async fn rollback(self) -> Result<(), StoreError> {
        self.conn.end(false).await
    }
}

impl Connection {
    /// Ends the transaction or savepoint this connection is inside.
    async fn end(self, commit: bool) -> Result<(), StoreError> {
        let Inner::Transaction(tx) = self.inner else {
            return Err(StoreError::from_sea_orm(no_transaction()));
        };
        let ended = if commit {
            tx.commit().await
        } else {
            tx.rollback().await
        };
        ended.map_err(StoreError::from_sea_orm)
    }
}

impl std::ops::Deref for Transaction {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl std::ops::DerefMut for Transaction {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.conn
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

/// A savepoint inside the inbox transaction ([`Connection::savepoint`]). Dropped without an
/// end, it rolls back to the savepoint, as SeaORM's nested transactions do.
#[derive(Debug)]
pub struct Savepoint<'c> {
    conn: Connection,
    /// The connection the savepoint is in, which it borrows for as long as it is open.
    _outer: PhantomData<&'c mut Connection>,
}

impl Savepoint<'_> {
    /// Releases the savepoint: what ran since it stays, to commit with the transaction.
    ///
    /// # Errors
    /// The server refused or the connection was lost.
    pub async fn commit(self) -> Result<(), StoreError> {
        self.conn.end(true).await
    }

    /// Undoes what ran since the savepoint; the transaction goes on.
    ///
    /// # Errors
    /// The server refused or the connection was lost.
    pub async fn rollback(self) -> Result<(), StoreError> {
        self.conn.end(false).await
    }
}

impl std::ops::Deref for Savepoint<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl std::ops::DerefMut for Savepoint<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.conn
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

impl Driver for SeaOrmPostgres {
    const NAME: &'static str = "PostgreSQL";
    type Connection = Connection;
    type Transaction = Transaction;
    type Savepoint<'c> = Savepoint<'c>;

    async fn savepoint(conn: &mut Connection) -> Result<Savepoint<'_>, StoreError> {
        conn.savepoint().await
    }

    fn in_transaction(conn: &Connection) -> bool {
        matches!(conn.inner, Inner::Transaction(_))
    }

    async fn close(conn: Connection) {
        if let Inner::Session(conn) = conn.inner {
            let _ = sqlx::Connection::close(conn.into_inner()).await;
        }
    }
}
