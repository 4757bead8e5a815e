//! [`RetentionStore`] for PostgreSQL: the bounded purge of processed keys and their figures.

use std::time::{Duration, SystemTime};

use sqlx::Row;

use inboxed_core::inbox::store::millis;
use inboxed_core::retention::PartitionReport;
use inboxed_core::retention::store::{ProcessedStats, PurgeParams, RetentionStore};
use inboxed_core::store::{BeginParams, Isolation, Store};
use inboxed_core::{ConsumerName, StoreError};

use crate::PgStore;

impl RetentionStore for PgStore {
    fn partitioned(&self) -> bool {
        self.partitions.is_some()
    }

    async fn maintain_partitions(
        &self,
        now: SystemTime,
        windows: &[(ConsumerName, Duration)],
    ) -> Result<PartitionReport, StoreError> {
        match self.partitions {
            Some(config) => crate::partitions::maintain(self, config, now, windows).await,
            None => Err(StoreError::Unsupported {
                operation: "time partitions",
                reason: "this store keeps keys in one table (build it with PgStore::partitioned)",
            }),
        }
    }

    async fn purge_processed(&self, params: &PurgeParams<'_>) -> Result<u64, StoreError> {
        if self.partitions.is_some() {
            // Physical addresses repeat across partitions, and expiry is by partition anyway.
            return Err(StoreError::Unsupported {
                operation: "row purge of a partitioned table",
                reason: "expired partitions are dropped whole; use maintain_partitions",
            });
        }
        let begin = BeginParams {
            isolation: Isolation::ReadCommitted,
            lock_timeout: params.lock_timeout,
            statement_timeout: params.statement_timeout,
            idle_in_transaction_timeout: params.statement_timeout.saturating_mul(2),
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
        let query = self
            .query(&self.queries.count_expired)
            .bind(consumer.as_str())
            .bind(millis(older_than))
            .bind(i64::try_from(cap).unwrap_or(i64::MAX));
        let rows = self.autocommit(query).await?;
        let n: i64 = rows
            .first()
            .map_or(Ok(0), |r| r.try_get(0))
            .map_err(StoreError::from_sqlx)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn processed_stats(&self, consumer: &ConsumerName) -> Result<ProcessedStats, StoreError> {
        let query = self
            .query(&self.queries.processed_stats)
            .bind(consumer.as_str());
        let rows = self.autocommit(query).await?;
        let Some(row) = rows.first() else {
            return Ok(ProcessedStats::default());
        };
        let get = StoreError::from_sqlx;
        let estimated: Option<i64> = row.try_get("estimated_rows").map_err(get)?;
        let table: i64 = row.try_get("table_bytes").map_err(get)?;
        let index: i64 = row.try_get("index_bytes").map_err(get)?;
        let last_minute: i64 = row.try_get("last_minute").map_err(get)?;
        let oldest: Option<f64> = row.try_get("oldest_ms").map_err(get)?;
        Ok(ProcessedStats::from_columns(
            estimated,
            table,
            index,
            last_minute,
            oldest,
        ))
    }
}
