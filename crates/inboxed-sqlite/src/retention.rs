//! [`RetentionStore`] for SQLite: the bounded purge of processed keys and their figures.
//! SQLite has no statement timeout; the batch size bounds each delete, and the busy timeout
//! (from `lock_timeout`) bounds the wait for the write lock.

use std::time::SystemTime;

use sqlx::Row;

use inboxed_core::inbox::store::millis;
use inboxed_core::retention::store::{BatchParams, ProcessedStats, PurgeParams, RetentionStore};
use inboxed_core::store::{BeginParams, Store};
use inboxed_core::{ConsumerName, StoreError};

use crate::SqliteStore;

impl RetentionStore for SqliteStore {
    async fn purge_processed(&self, params: &PurgeParams<'_>) -> Result<u64, StoreError> {
        let query = self
            .query(&self.queries.purge_processed)
            .bind(params.consumer.as_str())
            .bind(millis(params.older_than))
            .bind(i64::from(params.limit));
        self.bounded(query, params.statement_timeout, params.lock_timeout)
            .await
    }

    async fn purge_dead_letters(&self, params: &BatchParams) -> Result<u64, StoreError> {
        self.aux_batch(&self.queries.purge_dead_letters, params)
            .await
    }

    async fn purge_redrive_audit(&self, params: &BatchParams) -> Result<u64, StoreError> {
        self.aux_batch(&self.queries.purge_redrive_audit, params)
            .await
    }

    async fn redact_done_payloads(&self, params: &BatchParams) -> Result<u64, StoreError> {
        self.aux_batch(&self.queries.redact_done_payloads, params)
            .await
    }

    async fn count_expired(
        &self,
        consumer: &ConsumerName,
        older_than: SystemTime,
        cap: u64,
    ) -> Result<u64, StoreError> {
        let n: i64 = self
            .query(&self.queries.count_expired)
            .bind(consumer.as_str())
            .bind(millis(older_than))
            .bind(i64::try_from(cap).unwrap_or(i64::MAX))
            .fetch_one(&self.pool)
            .await
            .and_then(|r| r.try_get(0))
            .map_err(StoreError::from_sqlx)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn processed_stats(&self, consumer: &ConsumerName) -> Result<ProcessedStats, StoreError> {
        let row = self
            .query(&self.queries.processed_stats)
            .bind(consumer.as_str())
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        let get = StoreError::from_sqlx;
        let oldest: Option<i64> = row.try_get("oldest_ms").map_err(get)?;
        Ok(ProcessedStats::from_columns(
            row.try_get("estimated_rows").map_err(get)?,
            row.try_get("table_bytes").map_err(get)?,
            row.try_get("index_bytes").map_err(get)?,
            row.try_get("last_minute").map_err(get)?,
            oldest.map(|ms| ms as f64),
        ))
    }
}

type Query = sqlx::query::Query<'static, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>;

impl SqliteStore {
    /// Runs one bounded batch statement in a short transaction of its own, under the given
    /// statement and lock bounds. Returns the rows it affected.
    async fn bounded(
        &self,
        query: Query,
        statement_timeout: std::time::Duration,
        lock_timeout: std::time::Duration,
    ) -> Result<u64, StoreError> {
        let mut tx = self
            .begin(&BeginParams::bounded(statement_timeout, lock_timeout))
            .await?;
        let done = query
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(done.rows_affected())
    }

    /// A batch of one of the other tables' retention statements: `$1` cut-off, `$2` limit.
    async fn aux_batch(
        &self,
        sql: &std::sync::Arc<str>,
        params: &BatchParams,
    ) -> Result<u64, StoreError> {
        let query = self
            .query(sql)
            .bind(millis(params.older_than))
            .bind(i64::from(params.limit));
        self.bounded(query, params.statement_timeout, params.lock_timeout)
            .await
    }
}
