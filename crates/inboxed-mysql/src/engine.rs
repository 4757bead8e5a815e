//! What MySQL gives the shared store layer ([`inboxed_core::engine`]): operations that may be
//! several statements ([`MySqlQuery`]), lists as JSON arrays in text (read with `JSON_TABLE`),
//! message ids as the processed-keys table's keys (`VARBINARY`, beside the full payload hash),
//! and a transaction of its own around an operation of several statements that runs alone.

use std::sync::Arc;

use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, Connection, MySql, MySqlConnection};

use inboxed_core::engine::{Args, Columns, Engine};
use inboxed_core::migration::Migration;
use inboxed_core::sql::Queries;
use inboxed_core::{Envelope, Namespace, PayloadHash, StoreError, StoredHash};

use crate::MySqlStore;
use crate::query::MySqlQuery;

/// How the store begins a transaction of its own: whatever a cancelled task left open on the
/// pooled connection is rolled back first, where a plain BEGIN would commit it, and the
/// savepoint clear_attempts.sql checks is set (see `MySqlStore::begin`).
const CLEAN_BEGIN: &str = "ROLLBACK; BEGIN; SAVEPOINT inboxed_settle";

impl Engine for MySqlStore {
    type Query = MySqlQuery;
    type Row = MySqlRow;

    fn queries(&self) -> &Queries {
        &self.queries
    }

    fn namespace(&self) -> &Namespace {
        &self.ns
    }

    fn migrations(&self) -> &'static [Migration] {
        crate::queries::MIGRATIONS
    }

    fn query(&self, sql: &Arc<str>) -> MySqlQuery {
        self.script(sql)
    }

    fn key(q: MySqlQuery, _message_id: Option<&str>) -> MySqlQuery {
        q
    }

    fn claimed(q: MySqlQuery, env: &Envelope) -> MySqlQuery {
        q.opt_text(env.message_type())
            .opt_text(env.correlation_id())
            .bytes(env.hash().as_bytes())
    }

    fn stored_hash(row: &MySqlRow, i: usize) -> Result<Option<StoredHash>, StoreError> {
        Ok(row
            .opt_bytes(i)?
            .as_deref()
            .and_then(PayloadHash::from_slice)
            .map(StoredHash::Full))
    }

    async fn execute(q: MySqlQuery, conn: &mut MySqlConnection) -> Result<u64, StoreError> {
        q.execute(conn).await
    }

    async fn execute_script(sql: &str, conn: &mut MySqlConnection) -> Result<(), StoreError> {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(conn)
            .await
            .map(drop)
            .map_err(StoreError::from_sqlx)
    }

    async fn fetch_all(
        q: MySqlQuery,
        conn: &mut MySqlConnection,
    ) -> Result<Vec<MySqlRow>, StoreError> {
        q.fetch_all(conn).await
    }

    async fn fetch_alone(&self, q: MySqlQuery) -> Result<Vec<MySqlRow>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(StoreError::from_sqlx)?;
        if !q.is_script() {
            return q.fetch_all(&mut conn).await;
        }
        let mut tx = conn
            .begin_with(CLEAN_BEGIN)
            .await
            .map_err(StoreError::from_sqlx)?;
        let rows = q.fetch_all(&mut tx).await?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(rows)
    }

    async fn execute_alone(&self, q: MySqlQuery) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(StoreError::from_sqlx)?;
        if !q.is_script() {
            return q.execute(&mut conn).await;
        }
        let mut tx = conn
            .begin_with(CLEAN_BEGIN)
            .await
            .map_err(StoreError::from_sqlx)?;
        let changed = q.execute(&mut tx).await?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(changed)
    }

    async fn session(&self) -> Result<sqlx::MySqlConnection, StoreError> {
        use sqlx::Connection;
        sqlx::MySqlConnection::connect_with(&self.pool.connect_options())
            .await
            .map_err(StoreError::from_sqlx)
    }

    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, MySql>, StoreError> {
        self.pool
            .begin_with(CLEAN_BEGIN)
            .await
            .map_err(StoreError::from_sqlx)
    }
}
