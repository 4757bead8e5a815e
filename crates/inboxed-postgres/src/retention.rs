//! [`RetentionStore`] for PostgreSQL: the bounded purge of processed keys and their figures.

use std::time::{Duration, SystemTime};

use sqlx::Row;

use inboxed_core::inbox::store::millis;
use inboxed_core::retention::PartitionReport;
use inboxed_core::retention::store::{BatchParams, ProcessedStats, PurgeParams, RetentionStore};
use inboxed_core::store::{BeginParams, Store};
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

type Query = sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>;

impl PgStore {
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
