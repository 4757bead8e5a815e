//! [`RetentionStore`] for SQLite: the bounded purge of processed keys and their figures.
//! SQLite has no statement timeout; the batch size bounds each delete, and the busy timeout
//! (from `lock_timeout`) bounds the wait for the write lock.

use std::time::SystemTime;

use sqlx::Row;

use inboxed_core::inbox::store::millis;
use inboxed_core::retention::store::{ProcessedStats, PurgeParams, RetentionStore};
use inboxed_core::store::{BeginParams, Store};
use inboxed_core::{ConsumerName, StoreError};

use crate::SqliteStore;

impl RetentionStore for SqliteStore {
    async fn purge_processed(&self, params: &PurgeParams<'_>) -> Result<u64, StoreError> {
        let begin = BeginParams {
            lock_timeout: params.lock_timeout,
            statement_timeout: params.statement_timeout,
            ..BeginParams::default()
        };
        let mut tx = self.begin(&begin).await?;
        let done = self
            .query(&self.queries.purge_processed)
            .bind(params.consumer.as_str())
            .bind(millis(params.older_than))
            .bind(i64::from(params.limit))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(done.rows_affected())
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
