//! What SQLite gives the shared store layer ([`inboxed_core::engine`]): lists as JSON arrays
//! in text (SQLite binds no arrays; the statements read them with `json_each`), 64-bit
//! integers throughout, message ids as the processed-keys table's keys (beside the full payload
//! hash), and a write lock taken at the start of a write transaction.

use std::sync::Arc;

use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{AssertSqlSafe, Sqlite, SqliteConnection};

use inboxed_core::engine::{Args, Columns, Engine};
use inboxed_core::migration::Migration;
use inboxed_core::sql::Queries;
use inboxed_core::{Envelope, Namespace, PayloadHash, StoreError, StoredHash};

use crate::SqliteStore;

/// A SQLite statement with its arguments.
pub struct SqliteQuery(pub(crate) sqlx::query::Query<'static, Sqlite, SqliteArguments>);

impl std::fmt::Debug for SqliteQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteQuery").finish_non_exhaustive()
    }
}

impl Args for SqliteQuery {
    fn text(self, v: &str) -> Self {
        Self(self.0.bind(v.to_owned()))
    }
    fn opt_text(self, v: Option<&str>) -> Self {
        Self(self.0.bind(v.map(str::to_owned)))
    }
    fn bytes(self, v: &[u8]) -> Self {
        Self(self.0.bind(v.to_vec()))
    }
    fn opt_bytes(self, v: Option<&[u8]>) -> Self {
        Self(self.0.bind(v.map(<[u8]>::to_vec)))
    }
    fn int(self, v: i64) -> Self {
        Self(self.0.bind(v))
    }
    fn count(self, v: u32) -> Self {
        Self(self.0.bind(i64::from(v)))
    }
    fn opt_int(self, v: Option<i64>) -> Self {
        Self(self.0.bind(v))
    }
    fn flag(self, v: bool) -> Self {
        Self(self.0.bind(v))
    }
    fn opt_ids(self, v: Option<&[i64]>) -> Self {
        Self(
            self.0
                .bind(v.map(|ids| serde_json::Value::from(ids.to_vec()).to_string())),
        )
    }
    fn texts(self, v: &[&str]) -> Self {
        Self(self.0.bind(serde_json::Value::from(v.to_vec()).to_string()))
    }
}

impl Engine for SqliteStore {
    type Query = SqliteQuery;
    type Row = SqliteRow;

    fn queries(&self) -> &Queries {
        &self.queries
    }

    fn namespace(&self) -> &Namespace {
        &self.ns
    }

    fn migrations(&self) -> &'static [Migration] {
        crate::queries::MIGRATIONS
    }

    fn query(&self, sql: &Arc<str>) -> SqliteQuery {
        SqliteQuery(Self::query(self, sql))
    }

    fn key(q: SqliteQuery, _message_id: Option<&str>) -> SqliteQuery {
        q
    }

    fn claimed(q: SqliteQuery, env: &Envelope) -> SqliteQuery {
        q.opt_text(env.message_type())
            .opt_text(env.correlation_id())
            .bytes(env.hash().as_bytes())
    }

    fn stored_hash(row: &SqliteRow, i: usize) -> Result<Option<StoredHash>, StoreError> {
        Ok(row
            .opt_bytes(i)?
            .as_deref()
            .and_then(PayloadHash::from_slice)
            .map(StoredHash::Full))
    }

    async fn execute(q: Self::Query, conn: &mut SqliteConnection) -> Result<u64, StoreError> {
        q.0.execute(conn)
            .await
            .map(|done| done.rows_affected())
            .map_err(StoreError::from_sqlx)
    }

    async fn execute_script(sql: &str, conn: &mut SqliteConnection) -> Result<(), StoreError> {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(conn)
            .await
            .map(drop)
            .map_err(StoreError::from_sqlx)
    }

    async fn fetch_all(
        q: Self::Query,
        conn: &mut SqliteConnection,
    ) -> Result<Vec<SqliteRow>, StoreError> {
        q.0.fetch_all(conn).await.map_err(StoreError::from_sqlx)
    }

    async fn fetch_alone(&self, q: Self::Query) -> Result<Vec<SqliteRow>, StoreError> {
        q.0.fetch_all(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)
    }

    /// On a connection whose busy timeout is `wait`: an attempt's count waits for the one
    /// write lock, which a delivery whose handler hangs holds, and must give up as its claim
    /// would.
    async fn fetch_alone_within(
        &self,
        q: Self::Query,
        wait: std::time::Duration,
    ) -> Result<Vec<SqliteRow>, StoreError> {
        let mut conn = autocommit_on(&self.pool).await?;
        let busy = format!("PRAGMA busy_timeout = {}", wait.as_millis());
        Self::execute_script(&busy, &mut conn).await?;
        Self::fetch_all(q, &mut conn).await
    }

    async fn execute_alone(&self, q: Self::Query) -> Result<u64, StoreError> {
        q.0.execute(&self.pool)
            .await
            .map(|done| done.rows_affected())
            .map_err(StoreError::from_sqlx)
    }

    async fn session(&self) -> Result<sqlx::SqliteConnection, StoreError> {
        use sqlx::Connection;
        sqlx::SqliteConnection::connect_with(&self.pool.connect_options())
            .await
            .map_err(StoreError::from_sqlx)
    }

    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, Sqlite>, StoreError> {
        begin_on(&self.pool, "BEGIN IMMEDIATE".to_owned()).await
    }
}

/// A transaction begun with `statement` on a connection of `pool`, passing over (and closing)
/// any connection on which sqlx still counts a transaction. A handler that ends the inbox
/// transaction itself (a `COMMIT` through its connection) makes the rollback after it fail,
/// and sqlx's SQLite driver then keeps counting the transaction: every `BEGIN` on that
/// connection would fail, for whichever message it was handed to next. PostgreSQL and MySQL
/// answer a `ROLLBACK` outside a transaction without an error, so their connections recover.
/// A connection of `pool` outside any transaction (one whose handler began a transaction of
/// its own and left it open is closed instead), for a statement that commits on its own.
pub(crate) async fn autocommit_on(
    pool: &sqlx::SqlitePool,
) -> Result<sqlx::pool::PoolConnection<Sqlite>, StoreError> {
    use sqlx::Connection;
    loop {
        let conn = pool.acquire().await.map_err(StoreError::from_sqlx)?;
        if conn.is_in_transaction() {
            let _ = conn.close().await;
            continue;
        }
        return Ok(conn);
    }
}

pub(crate) async fn begin_on(
    pool: &sqlx::SqlitePool,
    statement: String,
) -> Result<sqlx::Transaction<'static, Sqlite>, StoreError> {
    use sqlx::SqlSafeStr;
    let conn = autocommit_on(pool).await?;
    let statement = sqlx::AssertSqlSafe(statement).into_sql_str();
    sqlx::Transaction::begin(conn, Some(statement))
        .await
        .map_err(StoreError::from_sqlx)
}

/// The backlog and dead letters behind `inboxed serve`, as the shared layer reads them.
impl inboxed_core::observe::ObserveStore for SqliteStore {}

/// The outbox's write, as the shared layer has it.
impl inboxed_core::outbox::store::OutboxStore for SqliteStore {}

/// The bounded purge of processed keys and its figures, as the shared layer has them: SQLite
/// has no statement timeout, so the batch size bounds each delete, and the busy timeout (from
/// `lock_timeout`) bounds the wait for the write lock.
impl inboxed_core::retention::store::RetentionStore for SqliteStore {}
