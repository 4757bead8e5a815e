//! [`RetentionStore`] for PostgreSQL: the bounded purge of processed keys and their figures.

use std::time::{Duration, SystemTime};

use inboxed_core::engine;
use inboxed_core::retention::PartitionReport;
use inboxed_core::retention::store::{BatchParams, ProcessedStats, PurgeParams, RetentionStore};
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
        engine::retention::purge_processed(self, params).await
    }

    async fn purge_dead_letters(&self, params: &BatchParams) -> Result<u64, StoreError> {
        engine::retention::batch(self, &self.queries.purge_dead_letters, params).await
    }

    async fn purge_redrive_audit(&self, params: &BatchParams) -> Result<u64, StoreError> {
        engine::retention::batch(self, &self.queries.purge_redrive_audit, params).await
    }

    async fn redact_done_payloads(&self, params: &BatchParams) -> Result<u64, StoreError> {
        engine::retention::batch(self, &self.queries.redact_done_payloads, params).await
    }

    async fn count_expired(
        &self,
        consumer: &ConsumerName,
        older_than: SystemTime,
        cap: u64,
    ) -> Result<u64, StoreError> {
        engine::retention::count_expired(self, consumer, older_than, cap).await
    }

    async fn processed_stats(&self, consumer: &ConsumerName) -> Result<ProcessedStats, StoreError> {
        engine::retention::processed_stats(self, consumer).await
    }
}
